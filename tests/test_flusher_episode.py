"""The facts one flush writes are said at one moment (one episode, which ranking lifts
together), with or without ``written_at``, and the model is told that moment's date."""

from __future__ import annotations

import asyncio
import datetime as dt
import json

import pytest

from ctxslots import FactStore, MemoryFlusher, OpenAIChatClient
from ctxslots.testing import ScriptedChatServer, ScriptedReply

FACTS = ["The team offsite is in Porto.", "The offsite hotel is near the river.",
         "Flights to the offsite are booked by Dana."]


class Ticking:
    """A clock a millisecond later at each reading, as a real one moves during a flush."""

    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        self.now += 0.001
        return self.now


def _reply() -> ScriptedReply:
    return ScriptedReply(json.dumps({"operations": [
        {"op": "upsert", "slot": "agent", "key": f"offsite.{n}", "value": value,
         "confidence": 0.9, "tags": []} for n, value in enumerate(FACTS)]}))


@pytest.mark.parametrize("mode", ["flush", "aflush"])
def test_a_flushs_facts_are_said_at_one_moment(location, mode):
    clock = Ticking()
    with FactStore(location, clock=clock) as store, ScriptedChatServer([_reply()]) as server:
        flusher = MemoryFlusher(store, OpenAIChatClient(server.base_url, "m", max_retries=0))
        messages = [{"role": "user", "content": "plan the offsite"}]
        if mode == "flush":
            report = flusher.flush(messages, conversation="c", force=True)
        else:
            report = asyncio.run(flusher.aflush(messages, conversation="c", force=True))
        said = {c.fact.observed_at for c in report.added}
        assert len(report.added) == 3 and len(said) == 1
        (moment,) = said
        # The date the model was told is that moment's.
        assert moment.strftime("%Y-%m-%d") in server.requests[0]["messages"][-1]["content"]
        hits = store.search("where is the offsite hotel", limit=3, track_access=False)
        assert all(h.fact.observed_at == moment for h in hits)


def test_written_at_still_names_the_moment(store, location):
    written = dt.datetime(2026, 1, 5, 12, 0, tzinfo=dt.UTC)
    with ScriptedChatServer([_reply()]) as server:
        flusher = MemoryFlusher(store, OpenAIChatClient(server.base_url, "m", max_retries=0))
        report = flusher.flush([{"role": "user", "content": "plan the offsite"}],
                               conversation="c", force=True, written_at=written)
    assert {c.fact.observed_at for c in report.added} == {written}


def _one(op: dict[str, object]) -> ScriptedReply:
    return ScriptedReply(json.dumps({"operations": [op]}))


def test_an_older_conversation_replayed_later_leaves_what_was_said_since(location):
    """Conversations flushed out of order (an import of old chats after newer ones): the
    older one's upsert and forget of a key said later are refused with the date it was
    said, and the newer value stands; a key said before is still replaced."""
    march = dt.datetime(2026, 3, 10, 9, 0, tzinfo=dt.UTC)
    january = dt.datetime(2026, 1, 5, 9, 0, tzinfo=dt.UTC)
    city = {"op": "upsert", "slot": "user", "key": "home.city", "confidence": 0.9,
            "tags": []}
    replies = [_one({**city, "value": "The user lives in Berlin."}),
               _one({**city, "value": "The user lives in Paris."}),
               _one({"op": "forget", "slot": "user", "key": "home.city",
                     "reason": "moved away"}),
               _one({"op": "upsert", "slot": "user", "key": "pet", "value": "A cat.",
                     "confidence": 0.9, "tags": []})]
    with FactStore(location) as store, ScriptedChatServer(replies) as server:
        pet = store.upsert("user", "pet", "A dog.", observed_at=dt.datetime(
            2025, 12, 1, tzinfo=dt.UTC))
        flusher = MemoryFlusher(store, OpenAIChatClient(server.base_url, "m", max_retries=0))

        def flush(conversation: str, when: dt.datetime) -> object:
            return flusher.flush([{"role": "user", "content": f"chat {conversation}"}],
                                 conversation=conversation, force=True, written_at=when)

        newer = flush("march", march)
        for conversation in ("jan-a", "jan-b"):
            older = flush(conversation, january)
            assert older.status == "applied" and not older.added and not older.updated
            assert not older.forgotten
            (refused,) = older.rejected
            assert "said 2026-03-10 09:00:00 UTC, after these messages; it stands" in \
                refused.reason
        fact = store.get_by_key("user", "home.city")
        assert fact is not None and fact.id == newer.added[0].fact.id
        assert fact.value == "The user lives in Berlin." and fact.observed_at == march
        assert [] == store.history(fact.id)
        replaced = flush("jan-c", january)
        assert [c.fact.value for c in replaced.updated] == ["A cat."]
        assert store.get(pet.id).value == "A cat."
