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
