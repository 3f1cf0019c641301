"""When a memory was said, apart from when it was written: observed_at in, now= for ranking."""

from __future__ import annotations

import datetime as dt
import io
import json

import pytest

from ctxslots import FactStore, InvalidFactError, MemoryFlusher, OpenAIChatClient, RankingPolicy
from ctxslots.testing import ScriptedChatServer

DAY = 86400.0
SAID = dt.datetime(2023, 5, 8, 10, 20, tzinfo=dt.UTC)


def test_add_and_upsert_keep_the_observed_time(store, clock):
    """observed_at round-trips through add and upsert; without it, the time of writing is used."""
    said = store.add("agent", "Rosaline went to the rowing club.", observed_at=SAID)
    keyed = store.upsert("user", "city", "The user lives in Lisbon.",
                         observed_at=SAID.timestamp() + DAY)
    plain = store.add("agent", "A note written now.")
    assert SAID == said.observed_at == store.get(said.id).observed_at
    assert SAID + dt.timedelta(days=1) == keyed.observed_at
    assert plain.observed_at == plain.created_at
    assert said.created_at.timestamp() == clock.now  # written now, said then


def test_a_bad_observed_time_is_refused_and_nothing_written(store):
    """Times Python cannot represent, and non-times, are refused naming the field."""
    for bad in (1e300, -1.0, float("nan"), "yesterday", True):
        with pytest.raises(InvalidFactError) as info:
            store.add("agent", "Never written.", observed_at=bad)
        assert "observed_at" == info.value.field
    assert [] == store.facts()


def test_decay_and_the_trace_count_from_the_observed_time_and_now(location, clock):
    """A memory said long ago decays from then; search(now=...) ranks as it would have then."""
    policy = RankingPolicy(decay_days={"agent": 30.0})
    with FactStore(location, clock=clock, ranking=policy) as store:
        old = store.add("agent", "The deploy freeze starts on Friday.",
                        observed_at=clock.now - 60 * DAY)
        hit = store.search("deploy freeze")[0]
        assert old.id == hit.fact.id
        assert 60.0 == pytest.approx(hit.trace.age_days)
        assert clock.now == hit.trace.ranked_at
        then = clock.now - 59 * DAY
        replayed = store.search("deploy freeze", now=then)[0]
        assert 1.0 == pytest.approx(replayed.trace.age_days)
        assert replayed.trace.decay > hit.trace.decay
        assert then == replayed.trace.ranked_at


def test_timelines_follow_the_observed_time(store, clock):
    """A history backfilled out of order reads back in the order it was said."""
    later = store.add("agent", "Second session: the trip to Paris.", observed_at=SAID + dt.timedelta(days=7))
    first = store.add("agent", "First session: the rowing club.", observed_at=SAID)
    assert [first.id, later.id] == [f.id for f in store.timeline(first.id, after=3)]


def test_export_and_import_keep_the_observed_time(store, tmp_path):
    """observed_at survives a JSONL export and import into a fresh store."""
    fact = store.add("agent", "Imogen painted a lighthouse.", observed_at=SAID)
    buffer = io.StringIO()
    store.export_jsonl(buffer)
    record = json.loads(buffer.getvalue().splitlines()[1])
    assert SAID.timestamp() == record["observed_at"]
    with FactStore(tmp_path / "copy.db") as copy:
        copy.import_jsonl(io.StringIO(buffer.getvalue()))
        assert SAID == copy.get(fact.id).observed_at


def test_a_flush_writes_facts_observed_when_the_messages_were_written(store):
    """MemoryFlusher(written_at=...) gives the facts it writes that observed time."""
    reply = json.dumps({"operations": [{"op": "upsert", "slot": "user", "key": "hobby",
                                        "value": "The user paints sunrises.", "confidence": 0.9,
                                        "tags": []}]})
    with ScriptedChatServer([reply]) as server:
        flusher = MemoryFlusher(store, OpenAIChatClient(server.base_url, "scripted"))
        report = flusher.flush([{"role": "user", "content": "I paint sunrises."}], force=True,
                               written_at=SAID)
    assert 1 == len(report.added)
    assert SAID == store.get_by_key("user", "hobby").observed_at


def test_an_assembly_ranks_from_its_request_now(location, clock):
    """AssemblyRequest(now=...) reaches the memory searches: the trace counts ages to it."""
    from ctxslots import AssemblyRequest, InvalidRequestError, PromptAssembler

    with FactStore(location, clock=clock) as store:
        store.add("agent", "The deploy freeze starts on Friday.", observed_at=clock.now - 10 * DAY)
        assembler = PromptAssembler(store)
        then = clock.now - 9 * DAY
        for when, age in ((None, 10.0), (then, 1.0),
                          (dt.datetime.fromtimestamp(then, tz=dt.UTC), 1.0)):
            prompt = assembler.assemble(AssemblyRequest("deploy freeze", now=when))
            traces = [d.item.trace for s in prompt.sections for d in s.items
                      if d.item.trace is not None and "freeze" in d.item.text]
            assert traces and age == pytest.approx(traces[0].age_days)
    for bad in (1e300, "tomorrow", True):
        with pytest.raises(InvalidRequestError):
            AssemblyRequest("hello", now=bad)
