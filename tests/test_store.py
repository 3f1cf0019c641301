"""FactStore behaviour on real SQLite files with FTS5 and sqlite-vec loaded."""

from __future__ import annotations

import datetime as dt
import io
import math

import pytest

from _sql import raw
from ctxslots import (
    FactNotFoundError,
    FactStore,
    InvalidFactError,
    Limits,
    RankingPolicy,
)
from ctxslots.stores import BUILTIN_SLOTS


def test_upsert_replaces_by_key_and_keeps_history(store, clock):
    """A second write with the same slot, scope and key replaces the value; the old one is in history."""
    first = store.upsert("user", "editor", "The user edits code in Helix.", tags=["tools"])
    clock.advance(days=2)
    second = store.upsert("user", "editor", "The user edits code in Neovim.")

    assert first.id == second.id
    assert "The user edits code in Neovim." == store.get(first.id).value
    history = store.history(first.id)
    assert ["The user edits code in Helix."] == [f.value for f in history]
    assert ("tools",) == history[0].tags
    assert second.updated_at - first.updated_at == dt.timedelta(days=2)
    assert 1 == store.stats()["facts"]


def test_a_key_read_in_a_batch_sees_what_the_batch_changed(store, clock):
    """Inside one batch, reading a key right after its fact changed (by id, by the same
    key, in a nested batch that failed, forgotten, or expired by the clock) gives what a
    read after the batch would: a read never answers from before a change."""
    def city() -> str | None:
        found = store.get_by_key("user", "city", user="ada")
        return None if found is None else found.value

    kept = store.upsert("user", "city", "Ada lives in Lyon.", user="ada",
                        expires_at=clock() + 3600)
    with store.batch():
        assert city() == "Ada lives in Lyon."
        store.update(kept.id, value="Ada lives in Nice.")
        assert city() == "Ada lives in Nice."
        store.upsert("user", "city", "Ada lives in Rome.", user="ada",
                     expires_at=clock() + 3600)
        assert city() == "Ada lives in Rome."
        with pytest.raises(RuntimeError), store.batch():
            assert city() == "Ada lives in Rome."
            store.upsert("user", "city", "Ada lives in Oslo.", user="ada",
                         expires_at=clock() + 3600)
            assert city() == "Ada lives in Oslo."
            raise RuntimeError("the flush failed")
        assert city() == "Ada lives in Rome."
        clock.advance(seconds=7200)
        assert city() is None
        assert store.upsert("user", "city", "Ada lives in Bern.", user="ada").id == kept.id
        assert city() == "Ada lives in Bern."
        store.forget(kept.id)
        assert city() is None
    assert city() is None


def test_a_write_returns_the_fact_as_a_read_finds_it(store, clock):
    """What add, upsert and update return (built from what they wrote, not read back) is
    the fact a read returns: new, replaced, the same value again, new tags, an edit."""

    def as_read(fact):
        assert store.get(fact.id) == fact
        return fact

    first = as_read(store.upsert("user", "editor", "The user edits code in Helix.",
                                 tags=["tools"], context="Which editor do you use?",
                                 user="ada"))
    as_read(store.upsert("agent", "style", "Answer in short bullet points.", agent="helper",
                         scope="atlas"))
    note = as_read(store.add("project", "Deploys go out on Tuesdays.", scope="atlas",
                             source="notes", confidence=0.7, observed_at=clock() - 86_400))
    clock.advance(seconds=3_600)
    replaced = as_read(store.upsert("user", "editor", "The user edits code in Neovim.",
                                    user="ada"))
    as_read(store.upsert("user", "editor", "The user edits code in Neovim.",
                         tags=["tools", "vim"], confidence=0.5, user="ada"))
    as_read(store.upsert("user", "editor", "The user edits code in Neovim.",
                         expires_at=clock() + 30 * 86_400, user="ada"))
    clock.advance(seconds=3_600)
    edited = as_read(store.update(note.id, value="Deploys go out on Wednesdays.",
                                  tags=["release"]))

    assert first.id == replaced.id and edited.value == "Deploys go out on Wednesdays."
    # The stems were made from the new texts: the new values are found, the old are not.
    assert [first.id] == [h.fact.id for h in store.search("neovim", user="ada")]
    assert [] == store.search("helix", user="ada")
    assert [note.id] == [h.fact.id for h in store.search("wednesdays", scope="atlas")]
    assert [] == store.search("tuesdays", scope="atlas")


def test_same_value_again_adds_no_history(store):
    """Writing an unchanged value refreshes it without a history entry."""
    fact = store.upsert("user", "name", "The user is Ada.")
    store.upsert("user", "name", "The user is Ada.", confidence=0.5)

    assert [] == store.history(fact.id)
    assert 0.5 == store.get(fact.id).confidence


def test_same_key_in_other_scope_is_another_fact(store):
    """Keys are unique per slot and scope, not globally."""
    a = store.upsert("project", "deploy.day", "Deploys run on Friday.", scope="alpha")
    b = store.upsert("project", "deploy.day", "Deploys run on Monday.", scope="beta")

    assert a.id != b.id
    assert "Deploys run on Friday." == store.get_by_key("project", "deploy.day", scope="alpha").value


def test_add_stores_free_memories(store):
    """Free memories are never merged by key; an identical live one in the same slot and scope is returned."""
    a = store.add("agent", "The CI cache is cold on Mondays.")
    b = store.add("agent", "The CI cache is cold on Mondays.")
    c = store.add("agent", "The CI cache is cold on Mondays.", scope="shop")
    d = store.add("agent", "The CI cache is cold on Tuesdays.")

    assert a == b
    assert a.key is None
    assert len({a.id, c.id, d.id}) == 3
    assert 2 == len(store.facts(slots=["agent"]))
    store.forget(a.id)
    assert store.add("agent", "The CI cache is cold on Mondays.").id not in (a.id, c.id, d.id)


def test_forget_archives_and_archive_search_finds_it(store):
    """Forget moves a fact to the archive: normal search misses it, archive search finds it."""
    fact = store.add("agent", "The staging database password rotates weekly.")
    archived = store.forget(fact.id, reason="stale")

    assert archived.archived
    assert store.get(fact.id) is None
    assert [] == store.search("staging database password")
    hits = store.search("staging database password", include_archive=True)
    assert [fact.id] == [h.fact.id for h in hits]
    assert hits[0].fact.archived
    assert store.get(fact.id, include_archive=True).archived


def test_an_archived_hit_says_why_it_moved(store):
    """A search of the archive marks each forgotten or pruned fact archived, with the reason
    it moved there (the forget's, or the cap that pruned it); a live hit has none."""
    from ctxslots import PrunePolicy

    forgotten = store.add("agent", "The staging deploy uses blue-green switching.")
    store.forget(forgotten.id, reason="replaced by canary deploys")
    pruned = store.add("agent", "The staging deploy runs on Tuesday.")
    store.add("agent", "The staging deploy needs a sign-off.")
    report = store.prune(PrunePolicy(slot_caps={"agent": 1}, headroom=0.0, protect_days=0.0,
                                     protect_accesses=1000, protect_score=1000.0))
    assert [pruned.id] == [m.fact.id for m in report.moved]

    reasons = {h.fact.id: (h.fact.archived, h.fact.archive_reason)
               for h in store.search("staging deploy", include_archive=True)}
    assert {forgotten.id: (True, "replaced by canary deploys"),
            pruned.id: (True, report.moved[0].reason)} == {
        k: v for k, v in reasons.items() if v[0]}
    assert [None] == [reason for archived, reason in reasons.values() if not archived]
    assert report.moved[0].reason.startswith("pruned: over the agent cap of 1")
    assert "replaced by canary deploys" == store.get(forgotten.id,
                                                     include_archive=True).archive_reason


def test_forgotten_ids_are_never_reused(store):
    """A new fact never takes the id of an archived one."""
    fact = store.add("agent", "A note that will be forgotten.")
    store.forget(fact.id)
    newer = store.add("agent", "A newer note.")

    assert newer.id != fact.id
    assert "A note that will be forgotten." == store.get(fact.id, include_archive=True).value


def test_search_tracks_access(store, clock):
    """Every returned fact gets access_count + 1 and last_accessed = now in the same call."""
    fact = store.add("project", "The build uses Bazel remote caching.")
    other = store.add("project", "Lunch is at noon.")
    clock.advance(seconds=30)

    hits = store.search("bazel caching")

    assert [fact.id] == [h.fact.id for h in hits]
    assert 1 == hits[0].fact.access_count
    assert 1 == store.get(fact.id).access_count
    assert clock.now == store.get(fact.id).last_accessed.timestamp()
    assert 0 == store.get(other.id).access_count
    store.search("bazel caching", track_access=False)
    assert 1 == store.get(fact.id).access_count


def test_expired_facts_never_come_back(store, clock):
    """A fact past its expiry is hidden from search, get and listing."""
    fact = store.add("agent", "The deploy freeze lasts until Friday.", expires_at=clock.now + 3600)
    assert [fact.id] == [h.fact.id for h in store.search("deploy freeze")]

    clock.advance(seconds=3601)

    assert [] == store.search("deploy freeze")
    assert store.get(fact.id) is None
    assert [] == store.facts()
    with pytest.raises(FactNotFoundError):
        store.reinforce(fact.id)


def test_scope_isolation(store):
    """A project fact of scope A never appears in a search of scope B; global facts appear in both."""
    a = store.add("project", "Deploys of the shop run on Friday.", scope="A")
    b = store.add("project", "Deploys of the blog run on push.", scope="B")
    g = store.add("user", "The user deploys from a laptop.")

    in_a = {h.fact.id for h in store.search("deploys run", scope="A")}
    in_b = {h.fact.id for h in store.search("deploys run", scope="B")}
    in_global = {h.fact.id for h in store.search("deploys run")}

    assert {a.id, g.id} == in_a
    assert {b.id, g.id} == in_b
    assert {g.id} == in_global


def test_slot_filter(store):
    """Searching some slots leaves the others out."""
    store.add("user", "The user likes Rust.")
    agent = store.add("agent", "Rust builds need the nightly toolchain.")

    assert [agent.id] == [h.fact.id for h in store.search("rust", slots=["agent"])]


def test_ranking_trace_multiplies_signals(store, clock):
    """The final score is -bm25 times decay, reinforcement and confidence, as the trace says."""
    old = store.add("agent", "Flaky test retries hide real failures.", confidence=0.5)
    clock.advance(days=30)
    store.reinforce(old.id)

    hit = store.search("flaky test retries")[0]
    t = hit.trace

    assert 1 == t.bm25_rank and t.bm25 < 0
    assert t.decay == pytest.approx(math.exp(-30 / 365))  # agent tau is 365 days
    assert t.reinforcement == pytest.approx(math.exp(0.2 * 3))
    assert 0.5 == t.confidence
    assert t.relevance == pytest.approx(-t.bm25)  # words only with the default embedder
    assert t.final == pytest.approx(t.relevance * t.decay * t.reinforcement * t.confidence)


def test_user_and_project_facts_do_not_decay(store, clock):
    """Default decay applies to agent notes only."""
    store.add("user", "The user writes in British English.")
    store.add("project", "The project writes in British English.", scope="p")
    clock.advance(days=400)

    assert {1.0} == {h.trace.decay for h in store.search("british english", scope="p")}


def test_reinforcement_and_decay_reorder(db_path, clock):
    """A reinforced fact outranks an equal one; a demoted one falls behind."""
    with FactStore(db_path, clock=clock, ranking=RankingPolicy(decay_days={})) as store:
        a = store.add("agent", "Use the staging cluster for load tests.")
        b = store.add("agent", "Use the staging cluster for smoke tests.")
        assert [a.id, b.id] == [h.fact.id for h in store.search("staging cluster tests")]
        store.reinforce(b.id)
        assert [b.id, a.id] == [h.fact.id for h in store.search("staging cluster tests")]
        store.demote(b.id, 6)
        assert [a.id, b.id] == [h.fact.id for h in store.search("staging cluster tests")]
        assert -3.0 == store.get(b.id).score


def test_batch_is_all_or_nothing(store):
    """A failing write inside batch() rolls back the writes before it."""
    with pytest.raises(InvalidFactError), store.batch():
        store.add("agent", "First note.")
        store.add("agent", "")
    assert [] == store.facts()

    with store.batch():
        store.add("agent", "First note.")
        store.upsert("user", "name", "The user is Ada.")
    assert 2 == len(store.facts())


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda s: s.add("", "value"), "slot"),
        (lambda s: s.add("User Memory", "value"), "slot"),
        (lambda s: s.add("user", "x" * 4097), "value"),
        (lambda s: s.add("user", "   "), "value"),
        (lambda s: s.add("user", 42), "value"),
        (lambda s: s.upsert("user", "", "value"), "key"),
        (lambda s: s.upsert("user", "a\nb", "value"), "key"),
        (lambda s: s.add("user", "value", confidence=1.5), "confidence"),
        (lambda s: s.add("user", "value", confidence=float("nan")), "confidence"),
        (lambda s: s.add("user", "value", tags=["ok", ""]), "tags"),
        (lambda s: s.add("user", "value", scope=""), "scope"),
        (lambda s: s.add("user", "value", expires_at="tomorrow"), "expires_at"),
        (lambda s: s.search("q", limit=0), "limit"),
        (lambda s: s.search("q", slots=[]), "slots"),
        (lambda s: s.get("1"), "id"),
    ],
)
def test_bad_input_is_a_clear_value_error_and_writes_nothing(store, call, field):
    """Malformed input raises InvalidFactError (a ValueError) naming the field; nothing is written."""
    with pytest.raises(ValueError) as info:
        call(store)
    assert isinstance(info.value, InvalidFactError)
    assert field == info.value.field
    assert 0 == store.stats()["facts"]


def test_value_limit_is_in_utf8_bytes(db_path):
    """The 4 KiB default limit counts UTF-8 bytes, and is configurable."""
    with FactStore(db_path) as store:
        with pytest.raises(InvalidFactError):
            store.add("user", "é" * 2049)  # 4098 bytes
        assert store.add("user", "é" * 2048).value
    with FactStore(db_path, limits=Limits(max_value_bytes=10)) as small:
        with pytest.raises(InvalidFactError, match="over the limit of 10"):
            small.add("user", "eleven byte")


def test_unknown_slots_are_refused_unless_known_or_free(db_path):
    """By default a slot outside the known ones is refused naming them; slots given to
    Limits, or free slots, are accepted."""
    with FactStore(db_path) as strict:
        with pytest.raises(InvalidFactError, match=r"unknown slot 'notes' \(known: user, project, agent\)"):
            strict.add("notes", "A note.")
        with pytest.raises(InvalidFactError, match="unknown slot 'projects'"):
            strict.search("deploy", slots=["projects"])
        assert 0 == strict.stats()["facts"]
    with FactStore(db_path, limits=Limits(slots=(*BUILTIN_SLOTS, "notes"))) as known:
        assert "notes" == known.add("notes", "A note.").slot
    with FactStore(db_path, limits=Limits(strict_slots=False)) as free:
        assert "anything" == free.add("anything", "A note.").slot


def test_missing_ids_raise_not_found(store):
    """Acting on an id that does not exist raises FactNotFoundError."""
    for action in (store.forget, store.reinforce, store.demote):
        with pytest.raises(FactNotFoundError) as info:
            action(12345)
        assert 12345 == info.value.fact_id


def test_fts_index_follows_every_write(store):
    """Inserts, updates and forgets keep the FTS index equal to the facts table."""
    a = store.upsert("user", "pet", "The user has a cat named Miso.")
    store.upsert("user", "pet", "The user has a dog named Pico.")
    b = store.add("agent", "Pico barks at the vacuum.")
    store.forget(b.id)

    assert [] == store.search("miso cat")
    assert [a.id] == [h.fact.id for h in store.search("pico")]
    conn = raw(store)
    try:
        conn.execute("INSERT INTO facts_fts(facts_fts, rank) VALUES('integrity-check', 1)")
        assert "ok" == conn.scalar("PRAGMA integrity_check")
    finally:
        conn.close()


def test_access_tracking_does_not_rewrite_the_index(store):
    """Search updates counters without touching the FTS index (column-specific trigger)."""
    fact = store.add("project", "Releases are tagged vYYYY.MM.")
    conn = raw(store)
    try:
        before = conn.scalar("SELECT count(*) FROM facts_fts_data")
        for _ in range(20):
            store.search("releases tagged")
        assert before == conn.scalar("SELECT count(*) FROM facts_fts_data")
        assert 20 == store.get(fact.id).access_count
    finally:
        conn.close()


def test_default_path_from_environment(tmp_path, monkeypatch):
    """CTXSLOTS_DB chooses the file when no path is given."""
    target = tmp_path / "env" / "mem.db"
    monkeypatch.setenv("CTXSLOTS_DB", str(target))
    with FactStore() as store:
        store.add("user", "The user is Ada.")
    assert target.exists()


def test_two_stores_share_one_file(db_path):
    """Writes through one store are visible to another open on the same file."""
    with FactStore(db_path) as one, FactStore(db_path) as two:
        fact = one.add("agent", "Shared memory between processes works.")
        assert [fact.id] == [h.fact.id for h in two.search("shared memory processes")]


def test_hit_to_dict_is_json_ready(store):
    """A hit serializes to plain JSON data with the fact's fields and its trace."""
    import json

    store.add("agent", "Use ripgrep for code search.", tags=["tools"])
    data = store.search("ripgrep")[0].to_dict()

    assert "Use ripgrep for code search." == data["value"]
    assert ["tools"] == data["tags"]
    assert 1 == data["trace"]["bm25_rank"]
    assert json.loads(json.dumps(data)) == data


def test_touch_counts_only_the_given_live_facts(store, clock):
    """touch() counts an access for each given live fact once; unknown and archived ids are ignored."""
    a = store.add("agent", "Shown to the model.")
    b = store.add("agent", "Found but left out of the prompt.")
    gone = store.add("agent", "Forgotten.")
    store.forget(gone.id)
    clock.advance(seconds=5)

    assert 1 == store.touch([a.id, a.id, gone.id, 99999])
    assert (1, clock.now) == (store.get(a.id).access_count, store.get(a.id).last_accessed.timestamp())
    assert 0 == store.get(b.id).access_count
    with pytest.raises(InvalidFactError):
        store.touch(["1"])


@pytest.mark.parametrize("reason", [b"spam", 42, "x" * 1001, "\ud800"],
                         ids=["bytes", "int", "too-long", "surrogate"])
def test_a_malformed_forget_reason_is_refused_and_the_fact_stays_live(store, reason, tmp_path):
    """A reason stored as anything but text broke every later export."""
    fact = store.add("agent", "A lesson to keep.")
    with pytest.raises(InvalidFactError, match="reason"):
        store.forget(fact.id, reason=reason)
    assert store.get(fact.id).archived is False
    store.forget(fact.id, reason="r" * 1000)
    out = io.StringIO()
    assert store.export_jsonl(out) == 1
    with FactStore(tmp_path / "back.db", embedder=False) as back:
        assert back.import_jsonl(io.StringIO(out.getvalue())).archived == 1


def test_words_common_among_other_owners_facts_still_find_a_users_own(location, clock):
    """Alice holds many facts with "turtle": the word is left out as common, and Bob's
    "turtle sanctuary" would look for "sanctuary" alone and find nothing. With nothing
    found, the search looks for the common words too, and says so in the trace."""
    from ctxslots import QueryPolicy

    policy = QueryPolicy(common_min_facts=20, max_doc_share=0.5)
    with FactStore(location, clock=clock, query_policy=policy, embedder=False) as store:
        with store.batch():
            for n in range(30):
                store.add("user", f"Alice fed turtle number {n} today.", user="alice")
        mine = store.add("user", "Bob keeps a turtle named Shelly.", user="bob")
        assert store.query_words("turtle sanctuary") == ["sanctuary"]
        hits = store.search("turtle sanctuary", user="bob")
        assert [h.fact.id for h in hits] == [mine.id]
        assert hits[0].trace.fill == "relaxed"
        # Words that find something keep the search as it was.
        found = store.search("Shelly turtle", user="bob")
        assert [h.fact.id for h in found] == [mine.id] and found[0].trace.fill is None
        assert store.search("sanctuary", user="bob") == []


@pytest.mark.parametrize("conversation", [["c"], 2**70, "\ud800", "", "a\nb", "x" * 201],
                         ids=["list", "huge-int", "surrogate", "empty", "newline", "long"])
def test_flush_progress_of_a_malformed_conversation_is_a_clear_error(store, conversation):
    from ctxslots import InvalidArgumentError

    with pytest.raises(InvalidArgumentError, match="conversation must be"):
        store.flush_progress(conversation)
    with pytest.raises(InvalidArgumentError, match="conversation must be"), store.batch():
        store.record_flush_progress(conversation, 1, "f")


@pytest.mark.parametrize(("read", "fingerprint", "says"), [
    (2**70, "f", "messages_read"), (-1, "f", "messages_read"), (True, "f", "messages_read"),
    (1, 5, "fingerprint"), (1, "é", "fingerprint"), (1, "abc\x00def", "fingerprint"),
    (1, "a\nb", "fingerprint")])
def test_recorded_flush_progress_is_checked_and_nothing_is_written(store, read, fingerprint,
                                                                   says):
    from ctxslots import InvalidArgumentError

    with pytest.raises(InvalidArgumentError, match=says), store.batch():
        store.record_flush_progress("chat", read, fingerprint)
    assert store.flush_progress("chat") is None


@pytest.mark.parametrize("directory", ["a\x00b", "\ud800", 5], ids=["nul", "surrogate", "int"])
def test_a_markdown_export_to_a_malformed_directory_is_a_clear_error(store, directory):
    from ctxslots import InvalidArgumentError

    store.add("agent", "A lesson to export.")
    with pytest.raises(InvalidArgumentError, match="directory"):
        store.export_markdown(directory)


def test_a_write_that_waited_for_the_lock_keeps_the_facts_times_in_order(location):
    """Threads upserting one key read the clock, then wait for the lock: the one written
    last may hold the earlier moment. Its write counts from the replaced value's time,
    so no history entry ends before it began and doctor stays clean."""
    moments = iter([1_800_000_100.0, 1_800_000_050.0, 1_800_000_200.0])
    with FactStore(location, embedder=False, clock=lambda: next(moments)) as store:
        store.upsert("user", "city", "The user lives in Porto.")
        fact = store.upsert("user", "city", "The user lives in Lisbon.")   # an earlier moment
        entry = store.history(fact.id)[0]   # written at updated_at, replaced at expires_at
        assert entry.updated_at <= entry.expires_at
        assert fact.updated_at.timestamp() == 1_800_000_100.0
        assert store.doctor().problems == ()


def test_history_named_for_owners_shows_only_what_they_see(store):
    fact = store.upsert("user", "pin", "Alice's PIN is 1111.", user="alice")
    store.upsert("user", "pin", "Alice's PIN is 2222.", user="alice")
    assert [f.value for f in store.history(fact.id, user="alice")] == ["Alice's PIN is 1111."]
    assert store.history(fact.id, user="bob") == []
    assert len(store.history(fact.id)) == 1            # no owners named: any fact, as get


def test_any_selects_owners_to_read_but_never_names_one_to_write_or_assemble_for(store):
    """ANY lists and exports every owner; a write, an import, a prompt or a tool set for
    ANY is refused in one line (stored, it was a user named "*"), and nothing is written."""
    from ctxslots import ANY, AssemblyRequest, MemoryTools, PromptAssembler

    store.upsert("user", "city", "Alice lives in Paris.", user="alice")
    store.upsert("user", "city", "Bob lives in Rome.", user="bob")
    store.add("project", "Deploys run on Fridays.", scope="shop")
    writes = {
        "upsert": lambda: store.upsert("user", "city", "Everyone lives here.", user=ANY),
        "add": lambda: store.add("project", "Deploys stop.", scope=ANY),
        "agent": lambda: store.add("agent", "Retry twice.", agent=ANY),
        "import": lambda: store.import_jsonl(io.StringIO(""), user=ANY),
        "assemble": lambda: PromptAssembler(store).assemble(AssemblyRequest("paris", user=ANY)),
        "tools": lambda: MemoryTools(store, scope=ANY),
    }
    for name, write in writes.items():
        with pytest.raises(ValueError, match=r"=ANY selects every \w+ in a listing") as raised:
            write()
        assert "\n" not in str(raised.value), name
    everyone = store.facts(user=ANY, agent=ANY, scope=ANY)
    assert 3 == len(everyone) and "*" not in {f.user for f in everyone}
    out = io.StringIO()
    assert 3 == store.export_jsonl(out, user=ANY, scope=ANY)
    assert 2 == len(store.search("lives", user=ANY))


def test_the_profile_leaves_out_a_fact_hidden_by_a_newer_near_duplicate(store):
    """A flush that rewords a keyed fact hides the old wording from searches; the sticky
    profile (``important``) and so the prompt's user section leave it out too."""
    from ctxslots import AssemblyRequest, PromptAssembler

    old = store.upsert("user", "editor", "The user edits code in Neovim")
    new = store.upsert("user", "editor.name", "The user edits code in Neovim.")
    report = store.consolidate(fact_ids=[new.id])
    assert [(old.id, new.id)] == [(s.fact_id, s.by) for s in report.superseded]
    assert [new.id] == [f.id for f in store.important("user")]
    prompt = PromptAssembler(store).assemble(AssemblyRequest("which editor?"))
    assert 1 == prompt.text.count("Neovim")


def test_a_moment_out_of_range_is_named_as_a_date_not_python_code(store):
    """A said_before in year 1 is refused naming the date as people write it."""
    with pytest.raises(InvalidFactError, match=r"said_before must be a time between 1970 and "
                       r"the year 9999 \(from 1970-01-01T00:00:00Z to 9999-12-31T23:59:59Z\), "
                       r"not 0001-01-01T00:00:00\+00:00") as refused:
        store.search("deploy", said_before=dt.datetime(1, 1, 1, tzinfo=dt.UTC))
    assert "datetime.datetime" not in str(refused.value)
