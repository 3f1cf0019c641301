"""Pruning with a hand-moved clock on real store files."""

from __future__ import annotations

import json
import time

import pytest
from click.testing import CliRunner

from ctxslots import FactStore, InvalidArgumentError, InvalidFactError
from ctxslots.cli import cli
from ctxslots.stores.upkeep.prune import PrunePolicy, retention

DAY = 86400.0


def _fill(store, clock, n, *, slot="agent", scope=None, prefix="Lesson"):
    ids = []
    for i in range(n):
        ids.append(store.add(slot, f"{prefix} number {i} about topic{i}.", scope=scope).id)
        clock.advance(seconds=1)
    return ids


def test_under_the_cap_nothing_moves(store, clock):
    _fill(store, clock, 5)
    report = store.prune(PrunePolicy(slot_caps={"agent": 5}))
    assert not report.needed and report.moved == () and len(store.facts()) == 5


def test_over_the_cap_the_least_useful_move_and_protected_stay(store, clock):
    ids = _fill(store, clock, 12)
    store.reinforce(ids[0])                                   # reinforced: score 3, protected
    for _ in range(5):
        store.touch([ids[1]])                                 # used often: protected
    clock.advance(days=40)
    store.touch([ids[2]])                                     # shown a month ago: kept longer
    clock.advance(days=28)
    store.touch([ids[3]])                                     # shown 3 days ago: protected
    clock.advance(days=3)
    store.demote(ids[4])                                      # demoted: first to go
    policy = PrunePolicy(slot_caps={"agent": 10}, headroom=0.2)  # down to 8
    plan = store.prune(policy, dry_run=True)
    assert plan.dry_run and len(store.facts()) == 12
    moved = [m.fact.id for m in plan.moved]
    assert len(moved) == 4 and moved[0] == ids[4]
    assert not {ids[0], ids[1], ids[2], ids[3]} & set(moved)
    assert moved[1:] == ids[5:8]                              # then the oldest idle ones
    report = store.prune(policy)
    assert [m.fact.id for m in report.moved] == moved and not report.dry_run
    assert {f.id for f in store.facts()} == set(ids) - set(moved)
    status = report.over_cap[0]
    assert (status.slot, status.count, status.cap, status.protected, status.remaining) == (
        "agent", 12, 10, 3, 8)
    assert all(m.reason == "pruned: over the agent cap of 10" for m in report.moved)


def test_pruned_facts_are_archived_and_still_searchable(store, clock):
    ids = _fill(store, clock, 4, prefix="Kubernetes")
    clock.advance(days=60)
    report = store.prune(PrunePolicy(slot_caps={"agent": 2}, headroom=0.0))
    moved = [m.fact.id for m in report.moved]
    assert moved == ids[:2]                                   # same retention: oldest first
    assert [h.fact.id for h in store.search("Kubernetes topic0")] != [ids[0]]
    hits = store.search("topic0", include_archive=True)
    assert hits and hits[0].fact.id == ids[0] and hits[0].fact.archived
    archived = store.get(ids[0], include_archive=True)
    assert archived is not None and archived.value == "Kubernetes number 0 about topic0."
    total = len(store.facts()) + len([i for i in ids if store.get(i, include_archive=True)
                                      and store.get(i, include_archive=True).archived])
    assert total == 4                                          # nothing lost


def test_caps_count_each_scope_separately(store, clock):
    a = _fill(store, clock, 6, scope="a")
    _fill(store, clock, 3, scope="b")
    clock.advance(days=60)
    report = store.prune(PrunePolicy(slot_caps={"agent": 4}, headroom=0.0))
    assert {m.fact.scope for m in report.moved} == {"a"}
    assert [m.fact.id for m in report.moved] == a[:2]
    assert len(store.facts(scope="b")) == 3


def test_when_everything_is_protected_the_cap_stays_exceeded(store, clock):
    _fill(store, clock, 6)
    report = store.prune(PrunePolicy(slot_caps={"agent": 3}))
    assert report.moved == () and report.over_cap[0].remaining == 6
    assert report.over_cap[0].protected == 6


def test_size_cap_moves_the_bottom_share(store, clock):
    ids = _fill(store, clock, 40)
    clock.advance(days=60)
    store.reinforce(ids[0])
    report = store.prune(PrunePolicy(slot_caps={}, max_bytes=1, size_share=0.25))
    assert report.over_size and len(report.moved) == 10            # a quarter of the 39 unprotected
    assert ids[0] not in {m.fact.id for m in report.moved}
    assert all("size cap" in m.reason for m in report.moved)
    assert len(store.facts()) == 30


def test_retention_orders_by_idleness_use_score_and_confidence(clock):
    policy = PrunePolicy()
    base = {"updated_at": clock.now, "last_accessed": None, "access_count": 0, "score": 0.0,
            "confidence": 1.0}
    now = clock.now + 30 * DAY
    r = retention(base, now, policy)
    assert r == pytest.approx(pytest.importorskip("math").exp(-1.0))
    assert retention({**base, "access_count": 3}, now, policy) > r
    assert retention({**base, "score": -1.0}, now, policy) < r
    assert retention({**base, "confidence": 0.5}, now, policy) == pytest.approx(r / 2)
    assert retention({**base, "last_accessed": now}, now, policy) > r


@pytest.mark.parametrize("kwargs", [
    {"slot_caps": {"agent": -1}}, {"slot_caps": {"agent": 2.5}}, {"max_bytes": 0},
    {"size_share": 0.0}, {"size_share": 1.5}, {"protect_days": -1}, {"headroom": "x"},
    {"headroom": -0.1}, {"headroom": 1.0},
])
def test_bad_policies_are_refused(kwargs):
    with pytest.raises(InvalidFactError):  # InvalidArgumentError is one
        PrunePolicy(**kwargs)


def test_a_headroom_given_as_a_percentage_is_refused_before_anything_is_pruned(store, clock):
    """headroom=5 (5% meant) freed the whole cap: one fact over it emptied the slot. It is
    refused, saying the range, and the facts stay."""
    _fill(store, clock, 5)
    with pytest.raises(InvalidArgumentError, match="from 0 to under 1") as raised:
        store.prune(PrunePolicy(slot_caps={"agent": 4}, headroom=5, protect_days=0))
    assert "headroom" == raised.value.field
    assert 5 == len(store.facts(slots=["agent"]))


def test_cli_prune_dry_run_lists_and_then_moves(db_path, clock):
    clock.now = time.time() - 30 * DAY                        # the command runs on the real clock
    with FactStore(db_path, clock=clock) as store:
        _fill(store, clock, 5)
    runner = CliRunner()
    args = ["--db", str(db_path), "prune", "--cap", "agent=3", "--protect-days", "1"]
    dry = runner.invoke(cli, [*args, "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert dry.output.count("would move [id:") == 3 and "would move 3 facts" in dry.output
    with FactStore(db_path) as store:
        assert len(store.facts()) == 5
    done = runner.invoke(cli, [*args, "--json"])
    assert done.exit_code == 0, done.output
    data = json.loads(done.output)
    assert len(data["moved"]) == 3 and data["dry_run"] is False
    with FactStore(db_path) as store:
        assert len(store.facts()) == 2
        assert store.stats()["archived"] == 3
    again = runner.invoke(cli, args)
    assert "nothing to move" in again.output


def test_cli_prune_rejects_a_malformed_cap(db_path):
    result = CliRunner().invoke(cli, ["--db", str(db_path), "prune", "--cap", "agent"])
    assert result.exit_code == 2 and "SLOT=COUNT" in result.output


def test_cli_prune_refuses_a_cap_on_a_slot_the_store_does_not_know(db_path, clock):
    """``--cap agnet=1`` (a typo) capped no slot and moved nothing, saying the slots were
    within their caps; it is refused with the known slots, and nothing moves."""
    clock.now = time.time() - 30 * DAY                        # the command runs on the real clock
    with FactStore(db_path, clock=clock) as store:
        _fill(store, clock, 4)
    runner = CliRunner()
    args = ["--db", str(db_path), "prune", "--protect-days", "1"]
    typo = runner.invoke(cli, [*args, "--cap", "agnet=1"])
    assert typo.exit_code == 2, typo.output
    assert "unknown slot 'agnet' (known: user, project, agent)" in typo.output
    with FactStore(db_path) as store:
        assert len(store.facts()) == 4 and store.stats()["archived"] == 0
    meant = runner.invoke(cli, [*args, "--cap", "agent=2", "--dry-run"])  # to 95%: 1 left
    assert meant.exit_code == 0 and "would move 3 facts" in meant.output, meant.output
    free = runner.invoke(cli, ["--db", str(db_path), "--free-slots", "prune", "--cap",
                               "diary=1", "--dry-run"])
    assert free.exit_code == 0, free.output


def test_a_store_over_its_size_cap_keeps_working(store, clock):
    """Over the size cap, writes and searches go on; pruning frees the bottom share, never blocks."""
    ids = _fill(store, clock, 30, prefix="Capped")
    clock.advance(days=60)
    policy = PrunePolicy(slot_caps={}, max_bytes=1, size_share=0.5, protect_days=1)
    fresh = store.add("agent", "A note about the weather, written while over the cap.")
    assert [h.fact.id for h in store.search("weather")] == [fresh.id]
    report = store.prune(policy)
    assert report.over_size and len(report.moved) == 15 and fresh.id not in {
        m.fact.id for m in report.moved}
    again = store.add("agent", "Another weather note, written after pruning.")
    assert store.get(again.id) is not None and len(store.facts()) == 31 - 15 + 1
    assert all(store.get(i, include_archive=True) is not None for i in ids)


def test_a_fact_protected_between_two_transactions_of_a_large_prune_stays(db_path, clock):
    """A prune of more facts than a transaction moves (max_batch 1): a fact the plan
    chose is reinforced to the protected score by another store after the first
    transaction commits; the next transaction leaves it live."""
    from _sql import connection_hook
    from ctxslots import Limits

    begun: list[str] = []
    armed: list[int] = []

    def trace(_cursor, sql, _bindings):
        if armed and sql.startswith("BEGIN IMMEDIATE"):
            begun.append(sql)
            if len(begun) == 2:  # the prune's first transaction has committed
                other.reinforce(armed[0])
        return True

    def hook(conn):
        conn.exec_trace = trace

    with FactStore(db_path, clock=clock, access_writes="inline") as other:
        with connection_hook(hook):
            store = FactStore(db_path, clock=clock, limits=Limits(max_batch=1),
                              access_writes="inline")
        with store:
            _fill(store, clock, 6)
            clock.advance(days=40)
            policy = PrunePolicy(slot_caps={"agent": 3}, headroom=0.0)
            planned = [m.fact.id for m in store.prune(policy, dry_run=True).moved]
            assert 3 == len(planned)
            armed.append(planned[1])
            report = store.prune(policy)
            assert [planned[0], planned[2]] == [m.fact.id for m in report.moved]
            assert store.get(planned[1]) is not None
