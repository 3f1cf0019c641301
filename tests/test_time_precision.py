"""Times are kept in whole microseconds, as a datetime holds them: a fact's own time,
read back and given again, names the moment stored. A clock that gives no time a store
can keep is refused before anything is written."""

from __future__ import annotations

import datetime as dt
import math

import pytest

from ctxslots import ANY, AssemblyRequest, FactStore, InvalidFactError, InvalidRequestError
from ctxslots.tools import MemoryTools

#: Clock readings finer than a microsecond, on either side of a half.
READINGS = [1_800_000_000.1234565, 1_800_000_000.1234567, 1_800_000_000.9999996,
            1_800_000_000.0000004]


@pytest.mark.parametrize("reading", READINGS)
def test_a_facts_own_time_finds_it_again(store, clock, reading):
    clock.now = reading
    fact = store.add("agent", f"mike noted the reading {reading!r}")
    said = fact.observed_at
    assert store.get(fact.id).observed_at == said
    assert said.timestamp() == round(reading, 6)
    assert fact.id in [f.id for f in store.facts(said_after=said)]
    assert fact.id not in [f.id for f in store.facts(said_before=said)]
    assert fact.id in [h.fact.id for h in store.search("mike", now=said, track_access=False)]


def test_a_time_given_finer_than_a_microsecond_is_kept_to_the_microsecond(store):
    fact = store.add("agent", "mike noted it", observed_at=1_700_000_000.1234565)
    assert fact.observed_at.timestamp() == 1_700_000_000.123456
    assert store.get(fact.id).observed_at == fact.observed_at


@pytest.mark.parametrize("reading", [1_800_000_000_000.0, math.nan, -5.0, math.inf])
def test_a_clock_giving_no_keepable_time_is_refused_and_writes_nothing(location, reading):
    readings = [reading]
    with FactStore(location, clock=lambda: readings[0]) as store:
        with pytest.raises(InvalidFactError, match="clock must be a time between 1970"):
            store.add("agent", "written at a bad time")
        with pytest.raises(InvalidFactError, match="clock"):
            store.search("written", track_access=False)
        readings[0] = 1_800_000_000.0
        assert store.facts(slots=["agent"], scope=ANY) == []


def test_an_imported_time_finer_than_a_microsecond_is_kept_to_the_microsecond(store):
    import io
    import json

    lines = [{"format": "ctxslots-facts", "version": 1},
             {"slot": "agent", "value": "mike noted it", "observed_at": 1_800_000_000.1234567,
              "created_at": 1_800_000_000.1234567, "updated_at": 1_800_000_000.1234567}]
    store.import_jsonl(io.StringIO("\n".join(json.dumps(r) for r in lines)))
    (fact,) = store.facts(slots=["agent"])
    assert fact.observed_at.timestamp() == 1_800_000_000.123457
    assert fact.id in [f.id for f in store.facts(said_after=fact.observed_at)]


#: What a refused time's error names: the times a store keeps, to the second, in UTC.
RANGE = "from 1970-01-01T00:00:00Z to 9999-12-31T23:59:59Z"


def test_a_refused_time_written_in_1970_or_9999_is_named_with_the_range_it_misses(store):
    """A moment written in 1970 in a zone east of UTC, or in the last second of 9999 (the
    ``datetime.max`` a caller gives for "no bound"), is outside what a store keeps, so the
    error names the range to the second and, for another zone, the UTC moment: the error
    that said only "between 1970 and the year 9999, not 1970-01-01T00:30:00+01:00" named a
    range the value seemed to be in."""
    paris = dt.timezone(dt.timedelta(hours=1))
    with pytest.raises(InvalidFactError) as early:
        store.facts(said_after=dt.datetime(1970, 1, 1, 0, 30, tzinfo=paris))
    assert str(early.value) == (f"said_after must be a time between 1970 and the year 9999 "
                                f"({RANGE}), not 1970-01-01T00:30:00+01:00, which is "
                                "1969-12-31T23:30:00Z")
    with pytest.raises(InvalidFactError) as late:
        store.search("mike", said_before=dt.datetime.max)
    assert str(late.value) == (f"said_before must be a time between 1970 and the year 9999 "
                               f"({RANGE}), not 9999-12-31T23:59:59.999999")
    answer = MemoryTools(store).dispatch("memory_query", {
        "query": "mike", "said_after": "1970-01-01T00:30+01:00"})
    assert answer == (f"Error: said_after must be a time between 1970 and the year 9999 "
                      f"({RANGE}), not 1970-01-01T00:30:00+01:00, which is 1969-12-31T23:30:00Z")
    # The last second a store keeps, and the first, are taken.
    fact = store.add("agent", "mike noted it", observed_at=dt.datetime(1970, 1, 1, 1, 0,
                                                                       tzinfo=paris))
    assert fact.observed_at.timestamp() == 0.0
    assert [fact.id] == [f.id for f in store.facts(
        slots=["agent"], said_after=fact.observed_at,
        said_before=dt.datetime(9999, 12, 31, 23, 59, 59, tzinfo=dt.UTC))]


def test_a_requests_moment_and_an_imported_one_are_refused_in_the_same_words(store):
    """A request's ``now`` and an imported record's time outside the range are named as
    people write them, with the range and the UTC moment, as the store names them (the
    request's error showed Python code: ``datetime.datetime(1970, 1, 1, 0, 30,
    tzinfo=datetime.timezone(datetime.timedelta(seconds=3600)))``)."""
    import io
    import json

    early = "not 1970-01-01T00:30:00+01:00, which is 1969-12-31T23:30:00Z"
    paris = dt.timezone(dt.timedelta(hours=1))
    with pytest.raises(InvalidRequestError) as refused:
        AssemblyRequest("when did mike say it?",
                        now=dt.datetime(1970, 1, 1, 0, 30, tzinfo=paris))
    assert str(refused.value) == (f"now must be a time between 1970 and the year 9999 "
                                  f"({RANGE}), {early}")
    with pytest.raises(InvalidRequestError) as refused:
        AssemblyRequest("when did mike say it?", now=dt.datetime.max)
    assert str(refused.value) == (f"now must be a time between 1970 and the year 9999 ({RANGE}), "
                                  "not 9999-12-31T23:59:59.999999")
    lines = [{"format": "ctxslots-facts", "version": 1},
             {"slot": "agent", "value": "mike noted it",
              "observed_at": "1970-01-01T00:30:00+01:00"}]
    report = store.import_jsonl(io.StringIO("\n".join(json.dumps(r) for r in lines)),
                                skip_invalid=True)
    assert [(e.line, e.message) for e in report.errors] == [
        (2, f"observed_at must be a time between 1970 and the year 9999 ({RANGE}), {early}")]
    assert store.facts(slots=["agent"]) == []
