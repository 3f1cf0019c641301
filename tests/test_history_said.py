"""An earlier value keeps when it was said, apart from when it was written: in
``history()``, through a JSONL export and import, and in a store written before the
history kept it (where it reads as written), on each engine."""

from __future__ import annotations

import datetime as dt
import io
import json
import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from _inspector import serving
from ctxslots import FactStore
from ctxslots.errors import InvalidImportError
from ctxslots.stores.backend import HistoryEntry

NOW = 1_800_000_000.0
HEADER = json.dumps({"format": "ctxslots-facts", "version": 1})
#: When the first two values of the time zone were said.
MARCH = dt.datetime(2026, 3, 1, 9, 30, tzinfo=dt.UTC)
APRIL = dt.datetime(2026, 4, 2, 18, 0, tzinfo=dt.UTC)


def _backfilled(store: FactStore, clock: Any) -> int:
    """A time zone said last March, replaced by one said last April, replaced again now."""
    fact = store.upsert("user", "tz", "The user lives in Paris.", observed_at=MARCH)
    clock.advance(seconds=10)
    store.upsert("user", "tz", "The user lives in Berlin.", observed_at=APRIL)
    clock.advance(seconds=10)
    store.upsert("user", "tz", "The user lives in Rome.")
    return fact.id


def _said(store: FactStore, fact_id: int) -> list[tuple[str, dt.datetime | None,
                                                          dt.datetime | None]]:
    return [(h.value, h.observed_at, h.updated_at) for h in store.history(fact_id)]


def _at(seconds: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(seconds, dt.UTC)


def test_each_earlier_value_keeps_when_it_was_said(store, clock):
    """A backfilled fact replaced twice: each earlier value's observed_at is when it was
    said, its updated_at when it was written."""
    fact_id = _backfilled(store, clock)
    assert [("The user lives in Paris.", MARCH, _at(NOW)),
            ("The user lives in Berlin.", APRIL, _at(NOW + 10))] == _said(store, fact_id)


def test_an_earlier_value_starts_when_it_was_first_written_not_when_said_again(store, clock):
    """A value said again (and its source changed) keeps the start it had: its history
    entry runs from when it was first written to when its tags changed, the next from
    then to when the value was replaced."""
    fact = store.upsert("user", "home", "The user lives in Berlin.", tags=["city"])
    clock.advance(seconds=10)
    store.upsert("user", "home", "The user lives in Berlin.", tags=["city"])  # said again
    clock.advance(seconds=5)
    store.update(fact.id, source="profile")  # another field, no new entry
    clock.advance(seconds=5)
    store.update(fact.id, tags=["place"])
    clock.advance(seconds=10)
    store.upsert("user", "home", "The user moved to Paris.")
    assert [(h.value, h.tags, h.created_at, h.updated_at, h.expires_at, h.observed_at)
            for h in store.history(fact.id)] == [
        ("The user lives in Berlin.", ("city",), _at(NOW), _at(NOW), _at(NOW + 20),
         _at(NOW + 10)),
        ("The user lives in Berlin.", ("place",), _at(NOW + 20), _at(NOW + 20), _at(NOW + 30),
         _at(NOW + 10))]


def test_an_export_and_import_keep_when_earlier_values_were_said(store, clock):
    """JSONL writes each earlier value's observed_at; importing it back keeps it."""
    fact_id = _backfilled(store, clock)
    before = _said(store, fact_id)
    exported = io.StringIO()
    store.export_jsonl(exported)
    (record,) = [json.loads(line) for line in exported.getvalue().splitlines()[1:]]
    assert [MARCH.timestamp(), APRIL.timestamp()] == [h["observed_at"]
                                                      for h in record["history"]]
    store.reset()
    report = store.import_jsonl(io.StringIO(exported.getvalue()))
    assert (1, 2, 0) == (report.added, report.history_entries, report.renumbered)
    assert before == _said(store, fact_id)


def test_an_export_without_said_times_imports_them_as_written(store):
    """A history entry of an older export (no observed_at) imports, and reads as said
    when it was written."""
    line = json.dumps({"id": 7, "slot": "user", "key": "tz", "value": "The user lives in Rome.",
                       "created_at": NOW - 100, "updated_at": NOW, "history": [
                           {"value": "The user lives in Paris.", "valid_from": NOW - 100,
                            "valid_to": NOW}]})
    report = store.import_jsonl(io.StringIO(f"{HEADER}\n{line}\n"))
    assert 1 == report.history_entries
    assert [("The user lives in Paris.", _at(NOW - 100), _at(NOW - 100))] == _said(store, 7)


@pytest.mark.parametrize("said", ["last spring", -5, 1e300, True, [NOW]])
def test_an_import_refuses_a_malformed_said_time_naming_its_line(store, said):
    """A history entry's observed_at that is no time from 1970 to 9999 fails the import
    with its line and field; nothing is written."""
    good = json.dumps({"slot": "user", "value": "The user is called Ada."})
    bad = json.dumps({"slot": "user", "key": "tz", "value": "The user lives in Rome.",
                      "history": [{"value": "The user lives in Paris.", "valid_from": NOW - 100,
                                   "valid_to": NOW, "observed_at": said}]})
    with pytest.raises(InvalidImportError) as caught:
        store.import_jsonl(io.StringIO(f"{HEADER}\n{good}\n{bad}\n"))
    assert (3, "observed_at") == (caught.value.line, caught.value.field)
    assert str(caught.value).startswith("line 3: observed_at must be ")
    assert [] == store.facts()


def test_doctor_finds_a_said_time_no_read_can_use_and_reindex_forgets_it(engine, store):
    """An earlier value's stored observed_at out of range is reported, and reindex
    resets it to none, so it reads as said when it was written."""
    fact = store.upsert("user", "tz", "The user lives in Rome.")
    with engine(store).transaction():
        engine(store).add_history([HistoryEntry(
            fact_id=fact.id, slot="user", scope="", key="tz", value="The user lives in Paris.",
            tags="", source=None, confidence=1.0, valid_from=NOW - 100, valid_to=NOW,
            observed_at=1e300)])
    assert f"history of fact {fact.id} observed_at = 1e+300" in "\n".join(
        store.doctor().problems)
    store.reindex()
    assert store.doctor().ok
    assert [("The user lives in Paris.", _at(NOW - 100), _at(NOW - 100))] == \
        _said(store, fact.id)


def test_the_inspector_shows_when_each_earlier_value_was_said(location, clock):
    """The fact page's history gives each earlier value's said date beside when it held."""
    with FactStore(location, clock=clock, embedder=False) as store:
        fact_id = _backfilled(store, clock)
    with serving(location) as address, httpx.Client(timeout=60) as client:
        assert 200 == client.get(address).status_code
        page = client.get(f"{address.split('/?', 1)[0]}/fact/{fact_id}")
    rows = re.findall(r'<td data-label="said">([^<]*)</td><td data-label="from">([^<]*)<',
                      page.text)
    written = _at(NOW).strftime("%Y-%m-%d %H:%M UTC")
    assert [("2026-03-01 09:30 UTC", written), ("2026-04-02 18:00 UTC", written)] == rows


# -- a store written before the history kept when a value was said ---------------

#: ``(fact_id, slot, scope, key, value)`` of the fact and of its earlier value.
FACT = (1, "user", "", "editor", "The user edits code in Helix.")
EARLIER = (1, "user", "", "editor", "The user edits code in Vim.")
FACT_COLUMNS = ("id, slot, scope, key, value, tags, source, confidence, score, created_at, "
                "updated_at, observed_at, access_count, user_id, agent_id")
HISTORY_COLUMNS = ("fact_id, slot, scope, key, value, tags, source, confidence, valid_from, "
                   "valid_to, user_id")
FACT_ROW = (*FACT, "", "seed", 1.0, 0.0, NOW - 200, NOW - 100, NOW - 150, 0, "default", "")
HISTORY_ROW = (*EARLIER, "", "seed", 1.0, NOW - 200, NOW - 100, "default")


def _old_sqlite(db: str) -> None:
    from ctxslots.stores.sqlite import open_connection
    from ctxslots.stores.sqlite._migrations import migrate
    from ctxslots.stores.stemming import stems_of

    conn = open_connection(db, migrate=False)
    try:
        assert migrate(conn, target=15)[-1] == "m015_script_stems"
        conn.execute(f"INSERT INTO facts ({FACT_COLUMNS}, stems) VALUES ({', '.join('?' * 16)})",
                     (*FACT_ROW, stems_of("editor", FACT[4], "", None)[0]))
        history = HISTORY_COLUMNS.removesuffix(", user_id")
        conn.execute(f"INSERT INTO fact_history ({history}) VALUES ({', '.join('?' * 10)})",
                     HISTORY_ROW[:-1])
    finally:
        conn.close()


def _old_postgres(url: str) -> None:
    psycopg = pytest.importorskip("psycopg")
    from ctxslots.stores.postgres._schema import migrate
    from ctxslots.stores.stemming import stems_of

    with psycopg.connect(url, autocommit=True) as conn:
        assert migrate(conn, url, target=9)[-1] == "m009_text_changes"
        with conn.transaction():
            conn.execute(f"INSERT INTO facts ({FACT_COLUMNS}, stems) VALUES "
                         f"({', '.join(['%s'] * 16)})",
                         (*FACT_ROW, stems_of("editor", FACT[4], "", None)[0]))
            conn.execute("SELECT setval('fact_ids', 100)")
            conn.execute(f"INSERT INTO fact_history ({HISTORY_COLUMNS}) VALUES "
                         f"({', '.join(['%s'] * 11)})", HISTORY_ROW)


@pytest.fixture(name="old_location", params=["sqlite", "postgresql"])
def fixture_old_location(request, db_path) -> Iterator[str]:
    """A store as the release before wrote it: a fact with an earlier value."""
    if request.param == "sqlite":
        _old_sqlite(str(db_path))
        yield str(db_path)
        return
    postgres = request.getfixturevalue("postgres")
    url = postgres.empty_database()
    _old_postgres(url)
    yield url
    postgres.drop(url)


def test_an_old_store_opens_with_its_history_read_as_said_when_written(old_location, clock):
    """The earlier value of a store from the schema before reads as said when it was
    written; one replaced after the upgrade keeps its own said time."""
    clock.now = NOW
    with FactStore(old_location, clock=clock, embedder=False) as store:
        old = ("The user edits code in Vim.", _at(NOW - 200), _at(NOW - 200))
        assert [old] == _said(store, 1)
        store.upsert("user", "editor", "The user edits code in Zed.")
        assert [old, ("The user edits code in Helix.", _at(NOW - 150), _at(NOW - 100))] \
            == _said(store, 1)
