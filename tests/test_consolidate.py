"""Near-duplicate consolidation on real store files with the default hashing embedder."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from ctxslots import FactStore, InvalidFactError, MemoryFlusher, OpenAIChatClient, StoreError
from ctxslots.cli import cli
from ctxslots.stores.upkeep.prune import PrunePolicy
from ctxslots.testing import ScriptedChatServer
from ctxslots.tools import MemoryTools

DARK = "The user prefers dark mode in every editor."


def test_newer_near_duplicate_hides_the_older_ones(store, clock):
    a = store.add("user", DARK)
    clock.advance(seconds=5)
    b = store.add("user", "the user prefers a dark mode in every editor")
    clock.advance(seconds=5)
    c = store.add("user", "The user prefers dark mode in every editor!")
    other = store.add("user", "The user prefers light mode in every editor.")
    report = store.consolidate()
    assert {(s.fact_id, s.by) for s in report.superseded} == {(a.id, c.id), (b.id, c.id)}
    assert all(s.cosine > 0.95 for s in report.superseded)
    hits = store.search("dark mode editor")
    assert hits[0].fact.id == c.id
    assert {h.fact.id for h in hits} == {c.id, other.id}
    assert next(h for h in hits if h.fact.id == c.id).trace.hides == 2
    assert store.get(a.id).superseded_by == c.id                      # still stored
    every = store.search("dark mode editor", include_superseded=True)
    assert {h.fact.id for h in every} == {a.id, b.id, c.id, other.id}
    assert store.consolidate().superseded == ()                        # idempotent


def test_slots_and_scopes_are_never_merged(store):
    store.add("user", DARK)
    store.add("agent", DARK)
    store.add("project", DARK, scope="a")
    store.add("project", DARK, scope="b")
    assert store.consolidate().superseded == ()


def test_dry_run_marks_nothing_and_threshold_is_checked(store, clock):
    a = store.add("agent", "Rerun test_refund_retry once when it fails.")
    clock.advance(seconds=1)
    store.add("agent", "Rerun test_refund_retry once when it fails!")
    plan = store.consolidate(dry_run=True)
    assert [s.fact_id for s in plan.superseded] == [a.id] and plan.dry_run
    assert store.get(a.id).superseded_by is None
    for bad in (0, 1, 1.5, -0.1, True, "0.9"):
        with pytest.raises(InvalidFactError):
            store.consolidate(threshold=bad)  # type: ignore[arg-type]


def test_a_survivor_superseded_later_hands_over_its_count(store, clock):
    a = store.add("user", DARK)
    clock.advance(seconds=1)
    b = store.add("user", DARK + " ")
    store.consolidate()
    clock.advance(seconds=1)
    c = store.add("user", DARK.upper())
    report = store.consolidate(fact_ids=[c.id])
    assert [s.fact_id for s in report.superseded] == [b.id]
    assert store.get(a.id).superseded_by == c.id and store.get(b.id).superseded_by == c.id
    assert store.search("dark mode")[0].trace.hides == 2


def test_a_survivor_keeps_the_reinforcement_of_what_it_hides(store, clock):
    """A lesson reinforced, then said again in nearly the same words: the restatement that
    hides it takes its score and ranks where it did, above an unreinforced lesson (a dry
    run writes no score); a survivor scored higher than what it hides keeps its own."""
    lesson = store.add("agent", "Rerun test_refund_retry once when it fails.")
    other = store.add("agent", "Rerun test_checkout once when it fails.")
    for _ in range(3):
        store.reinforce(lesson.id)
    earned = store.get(lesson.id).score
    assert earned > 0
    assert [lesson.id, other.id] == [h.fact.id for h in store.search("rerun when it fails")]
    clock.advance(days=1)
    again = store.add("agent", "Rerun test_refund_retry once when it fails!")
    store.consolidate(dry_run=True)
    assert 0.0 == store.get(again.id).score
    store.consolidate()
    assert again.id == store.get(lesson.id).superseded_by
    assert earned == store.get(again.id).score
    assert [again.id, other.id] == [h.fact.id for h in store.search("rerun when it fails")]
    clock.advance(days=1)
    third = store.add("agent", "Rerun test_refund_retry once, when it fails!")
    for _ in range(5):
        store.reinforce(third.id)
    own = store.get(third.id).score
    assert own > earned
    store.consolidate()
    assert third.id == store.get(again.id).superseded_by
    assert own == store.get(third.id).score


def test_a_new_value_is_no_longer_a_duplicate(store, clock):
    a = store.upsert("user", "theme", DARK)
    clock.advance(seconds=1)
    store.add("user", DARK + "!")
    store.consolidate()
    assert store.get(a.id).superseded_by is not None
    store.upsert("user", "theme", "The user switched to a light theme.")
    assert store.get(a.id).superseded_by is None
    assert store.search("light theme")[0].fact.id == a.id


def test_a_memory_said_again_after_its_survivor_was_forgotten_shows_again(store, clock):
    """Forgetting a survivor keeps what it hid hidden; the hidden memory said again is
    shown again, instead of being answered as stored while no search finds it."""
    old = store.add("user", DARK)
    clock.advance(seconds=1)
    survivor = store.add("user", DARK + "!")
    store.consolidate()
    again = store.write("user", DARK)                   # the survivor stands for it
    assert (again.change, again.fact.id, again.fact.superseded_by) == ("kept", old.id,
                                                                        survivor.id)
    store.forget(survivor.id, reason="the user changed their mind")
    assert store.search("dark mode editor") == []      # forgotten with its survivor
    clock.advance(days=300)
    tools = MemoryTools(store)
    answer = tools.memory_store("user", DARK)
    assert answer.startswith(f"Updated [id:{old.id}]"), answer
    assert store.get(old.id).superseded_by is None
    assert [h.fact.id for h in store.search("dark mode editor")] == [old.id]
    assert tools.memory_store("user", DARK).startswith(f"Already stored [id:{old.id}]")


def test_a_memory_said_again_after_its_survivor_expired_shows_again(store, clock):
    old = store.add("agent", "Cache the wheels on CI.")
    clock.advance(seconds=1)
    store.add("agent", "Cache the wheels on CI!", expires_at=clock() + 3600)
    store.consolidate()
    clock.advance(days=1)
    assert store.search("cache wheels") == []
    again = store.write("agent", "Cache the wheels on CI.")
    assert (again.change, again.fact.id, again.fact.superseded_by) == ("updated", old.id, None)
    assert [h.fact.id for h in store.search("cache wheels")] == [old.id]


def test_superseded_facts_are_pruned_first(store, clock):
    ids = [store.add("agent", f"Lesson {i} about topic{i}.").id for i in range(4)]
    clock.advance(days=30)
    for i in ids:
        store.touch([i])
    dup_old = store.add("agent", "Cache the wheels on CI.")
    clock.advance(seconds=1)
    store.add("agent", "Cache the wheels on CI!")
    store.consolidate()
    clock.advance(days=30)
    report = store.prune(PrunePolicy(slot_caps={"agent": 5}, headroom=0.0, protect_days=0))
    assert [m.fact.id for m in report.moved] == [dup_old.id] and report.moved[0].retention == 0.0


def test_no_vector_leg_is_a_clear_error(db_path):
    with FactStore(db_path, embedder=False) as store:
        store.add("user", DARK)
        with pytest.raises(StoreError, match="no embedder"):
            store.consolidate()


def test_flush_supersedes_what_it_restates(store, clock):
    old = store.add("user", "The user edits code in Neovim.")
    clock.advance(seconds=10)
    reply = json.dumps({"operations": [{"op": "upsert", "slot": "user", "key": "editor",
                                        "value": "The user edits code in Neovim!",
                                        "confidence": 0.9, "tags": []}]})
    with ScriptedChatServer([reply]) as server:
        flusher = MemoryFlusher(store, OpenAIChatClient(server.base_url, "m"))
        report = flusher.flush([{"role": "user", "content": "I use Neovim."}], force=True)
    assert report.superseded == (old.id,)
    assert "superseded as near-duplicates" in report.summary()
    hits = store.search("Neovim")
    assert [h.fact.key for h in hits] == ["editor"] and hits[0].trace.hides == 1


def test_cli_consolidate_and_search_superseded(db_path, clock):
    with FactStore(db_path, clock=clock) as store:
        a = store.add("user", DARK)
        clock.advance(seconds=1)
        store.add("user", DARK + "!")
    runner = CliRunner()
    dry = runner.invoke(cli, ["--db", str(db_path), "consolidate", "--dry-run"])
    assert dry.exit_code == 0 and f"would supersede [id:{a.id}]" in dry.output
    done = runner.invoke(cli, ["--db", str(db_path), "consolidate", "--json"])
    assert json.loads(done.output)["superseded"][0]["fact_id"] == a.id
    hidden = runner.invoke(cli, ["--db", str(db_path), "search", "dark mode"])
    assert "hides 1 near-duplicate" in hidden.output and f"[id:{a.id}]" not in hidden.output
    shown = runner.invoke(cli, ["--db", str(db_path), "search", "dark mode", "--superseded"])
    assert f"[id:{a.id}]" in shown.output and "superseded by" in shown.output
    bad = runner.invoke(cli, ["--db", str(db_path), "consolidate", "--threshold", "1.5"])
    assert bad.exit_code == 2


@pytest.mark.parametrize("fact_ids", ["12", [1.9], [" 1"], ["x"], 7],
                         ids=["string", "float", "text-id", "word", "int"])
def test_consolidate_refuses_malformed_fact_ids(store, fact_ids):
    store.add("user", DARK)
    with pytest.raises(InvalidFactError, match="fact"):
        store.consolidate(fact_ids=fact_ids)
