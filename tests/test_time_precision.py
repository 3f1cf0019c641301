"""Times are kept in whole microseconds, as a datetime holds them: a fact's own time,
read back and given again, names the moment stored. A clock that gives no time a store
can keep is refused before anything is written."""

from __future__ import annotations

import math

import pytest

from ctxslots import ANY, FactStore, InvalidFactError

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
