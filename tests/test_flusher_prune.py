"""Pruning after a flush, through the real HTTP client and a scripted chat server."""

from __future__ import annotations

import json

from ctxslots import MemoryFlusher, OpenAIChatClient
from ctxslots.stores.upkeep.prune import PrunePolicy
from ctxslots.testing import ScriptedChatServer

DAY = 86400.0


def _reply(*pairs: tuple[str, str]) -> str:
    return json.dumps({"operations": [
        {"op": "upsert", "slot": "agent", "key": key, "value": value, "confidence": 0.9, "tags": []}
        for key, value in pairs]})


def test_a_flush_that_goes_over_the_cap_prunes_the_idle_facts(store, clock):
    old = [store.upsert("agent", f"old.{i}", f"Old lesson {i}.").id for i in range(4)]
    clock.advance(days=60)
    script = [_reply(("new.a", "Use uv for installs."), ("new.b", "Run the linter first."))]
    with ScriptedChatServer(script) as server:
        flusher = MemoryFlusher(store, OpenAIChatClient(server.base_url, "m"),
                                prune=PrunePolicy(slot_caps={"agent": 4}, headroom=0.0))
        report = flusher.flush([{"role": "user", "content": "Use uv; lint first."}], force=True)
    assert report.status == "applied" and len(report.added) == 2
    assert report.pruned == tuple(old[:2])
    live = {f.key for f in store.facts()}
    assert live == {"old.2", "old.3", "new.a", "new.b"}
    assert all(store.get(i, include_archive=True).archived for i in old[:2])
    assert report.to_dict()["pruned"] == old[:2]


def test_prune_none_never_prunes(store, clock):
    for i in range(4):
        store.upsert("agent", f"old.{i}", f"Old lesson {i}.")
    clock.advance(days=60)
    with ScriptedChatServer([_reply(("new.a", "Use uv for installs."))]) as server:
        flusher = MemoryFlusher(store, OpenAIChatClient(server.base_url, "m"), prune=None)
        report = flusher.flush([{"role": "user", "content": "Use uv."}], force=True)
    assert report.pruned == () and len(store.facts()) == 5
