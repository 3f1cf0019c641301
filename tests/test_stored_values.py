"""Times and numbers every read can use: checked on every way in, found by doctor, reset by reindex."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from _sql import engine_of, stored_rows
from ctxslots import FactStore, InvalidArgumentError, InvalidFactError
from ctxslots.cli import cli
from ctxslots.errors import InvalidImportError
from ctxslots.stores.backend import MAX_COUNT, READABLE_RANGES, HistoryEntry
from ctxslots.tools import MemoryTools

NOW = 1_800_000_000.0
HEADER = json.dumps({"format": "ctxslots-facts", "version": 1})


def plant(store: FactStore, value: str, **fields: Any) -> int:
    """Write a row straight through the engine, which checks nothing (as an old version did)."""
    row: dict[str, Any] = {
        "slot": "agent", "scope": "", "key": None, "value": value, "tags": "", "source": None,
        "confidence": 1.0, "score": 0.0, "created_at": NOW, "updated_at": NOW,
        "observed_at": NOW, "last_accessed": None, "access_count": 0, "expires_at": None,
        "superseded_by": None, "user_id": "", "agent_id": ""}
    row.update(fields)
    with engine_of(store) as backend, backend.transaction():
        return int(backend.insert(row))


# -- doctor finds what no read can use, reindex resets it ------------------------

BAD_FIELDS = [
    ("created_at", 1e300), ("observed_at", -5.0), ("expires_at", 1e20), ("last_accessed", 1e19),
    ("score", float("inf")), ("confidence", 5.0), ("access_count", MAX_COUNT * 4),
]


@pytest.mark.parametrize(("column", "value"), BAD_FIELDS)
def test_doctor_names_a_stored_value_no_read_can_use(store, column, value):
    """A row holding a time or number out of range is reported with its id, column and value."""
    good = plant(store, "A fact with sound numbers.")
    bad = plant(store, "A hostile deploy note.", **{column: value})
    report = store.doctor()
    assert not report.ok
    (line,) = [p for p in report.problems if "no read can use" in p]
    assert f"fact {bad} {column} = " in line and f"fact {good} " not in line
    assert "run `ctxslots reindex`" in line


@pytest.mark.parametrize(("column", "value"), BAD_FIELDS)
def test_reindex_resets_the_value_and_reads_work_again(engine, store, clock, column, value):
    """After reindex the row reads as a fact, search finds it and doctor is clean."""
    bad = plant(store, "A hostile deploy note.", **{column: value})
    store.reindex()
    assert store.doctor().ok
    expected = {"created_at": clock.now, "observed_at": clock.now, "expires_at": None,
                "last_accessed": None, "score": 0.0, "confidence": 1.0, "access_count": 0}
    assert expected[column] == engine(store).get(bad)[column]
    assert store.get(bad) is not None
    assert [bad] == [h.fact.id for h in store.search("hostile deploy")]


def test_archived_and_historical_rows_are_checked_too(engine, store):
    """A bad time in the archive or the history is found and reset like a live one."""
    archived = plant(store, "Soon archived.")
    with engine(store).transaction():
        engine(store).archive(archived, archived_at=1e300, reason="test")
        engine(store).add_history([HistoryEntry(
            fact_id=archived, slot="agent", scope="", key=None, value="Old.", tags="",
            source=None, confidence=2.0, valid_from=NOW, valid_to=NOW)])
    problem = "\n".join(store.doctor().problems)
    assert f"archived fact {archived} archived_at" in problem
    assert f"history of fact {archived} confidence" in problem
    store.reindex()
    assert store.doctor().ok
    assert store.get(archived, include_archive=True) is not None
    assert 1.0 == engine(store).history(archived)[0].confidence


def test_every_readable_range_is_checked_by_the_engine(engine, store):
    """Each range of READABLE_RANGES catches a value just past its bounds on this engine."""
    plant(store, "Checked everywhere.")
    for rule in READABLE_RANGES:
        if rule.table != "facts":
            continue
        plant(store, f"Over the {rule.column} bound.",
              **{rule.column: rule.high * 2 + 1 if rule.high else -1.0})
    found = {(b.table, b.column) for b in engine(store).bad_values(limit=1000)}
    assert {(r.table, r.column) for r in READABLE_RANGES if r.table == "facts"} == found


# -- every way in refuses such values --------------------------------------------


@pytest.mark.parametrize("amount", [math.nan, math.inf, -1, 1e308, 10**400, "3", True])
def test_reinforce_and_demote_refuse_an_amount_out_of_range(store, amount):
    """reinforce and demote take a finite amount from 0 to 1,000; the score is unchanged."""
    fact = store.add("agent", "Scored with care.")
    for call in (store.reinforce, store.demote):
        with pytest.raises(InvalidFactError) as caught:
            call(fact.id, amount)
        assert "amount" == caught.value.field
    assert 0.0 == store.get(fact.id).score


@pytest.mark.parametrize("pool", [0, -1, 10**30, 1.5, True])
def test_a_candidate_pool_out_of_range_is_refused(db_path, pool):
    """FactStore(candidate_pool=...) outside 1 to 10,000 raises InvalidArgumentError."""
    with pytest.raises(InvalidArgumentError) as caught:
        FactStore(db_path, candidate_pool=pool)
    assert "candidate_pool" == caught.value.field


@pytest.mark.parametrize(("field", "value"), [
    ("expires_at", 1e300), ("expires_at", math.inf), ("observed_at", -1.0),
    ("observed_at", 10**30), ("confidence", 1e400), ("confidence", -0.5)])
def test_the_api_refuses_a_time_or_number_out_of_range(store, field, value):
    """upsert and add raise InvalidFactError naming the field, and write nothing."""
    for write in (lambda: store.upsert("agent", "k", "A keyed fact.", **{field: value}),
                  lambda: store.add("agent", "A free fact.", **{field: value})):
        with pytest.raises(InvalidFactError) as caught:
            write()
        assert field == caught.value.field
    assert [] == stored_rows(store)


@pytest.mark.parametrize(("record", "field"), [
    ({"created_at": 1e300}, "created_at"),
    ({"updated_at": "9999-12-31T23:59:59+00:00", "expires_at": "10000-01-01"}, "expires_at"),
    ({"last_accessed": -1}, "last_accessed"),
    ({"access_count": 2**63 - 1}, "access_count"),
    ({"score": 1e300}, "score"),
    ({"score": -(2**60)}, "score"),
    ({"confidence": 1e309}, "confidence"),
    ({"id": 1, "links": [{"to": 1, "strength": 1e308, "updated_at": NOW}]}, "strength"),
    ({"history": [{"value": "Old.", "valid_from": NOW, "valid_to": 1e300}]}, "valid_to"),
])
def test_an_import_refuses_a_time_or_number_out_of_range(store, record, field):
    """A JSONL line with a value out of range fails naming its line and field; nothing is written."""
    line = json.dumps({"slot": "agent", "value": "An imported fact.", **record})
    with pytest.raises(InvalidImportError) as caught:
        store.import_jsonl(io.StringIO(f"{HEADER}\n{line}\n"))
    assert 2 == caught.value.line
    assert field == caught.value.field
    assert [] == stored_rows(store)


def test_the_cli_refuses_numbers_out_of_range_in_one_line(tmp_path):
    """remember with an infinite confidence and import of a far-future time end in one Error line."""
    db = tmp_path / "cli.db"
    hostile = tmp_path / "hostile.jsonl"
    hostile.write_text(f"{HEADER}\n" + json.dumps(
        {"slot": "agent", "value": "Far away.", "created_at": 1e300}) + "\n")
    for args in (["remember", "--confidence", "1e400", "agent", "A fact."],
                 ["remember", "--confidence", "nan", "agent", "A fact."],
                 ["import", str(hostile)]):
        result = CliRunner().invoke(cli, ["--db", str(db), *args])
        assert 1 == result.exit_code, result.output
        lines = result.output.strip().splitlines()
        assert 1 == len(lines) and lines[0].startswith("Error: ") and "Traceback" not in lines[0]
    with FactStore(db) as store:
        assert [] == stored_rows(store)


def test_the_cli_doctor_reports_and_reindex_repairs(tmp_path: Path):
    """`ctxslots doctor` names the bad value and exits 1; after `reindex` it exits 0."""
    db = tmp_path / "cli.db"
    with FactStore(db) as store:
        bad = plant(store, "Planted deploy note.", created_at=1e300)
    result = CliRunner().invoke(cli, ["--db", str(db), "doctor"])
    assert 1 == result.exit_code and f"fact {bad} created_at = 1e+300" in result.output
    assert 0 == CliRunner().invoke(cli, ["--db", str(db), "reindex"]).exit_code
    assert 0 == CliRunner().invoke(cli, ["--db", str(db), "doctor"]).exit_code
    result = CliRunner().invoke(cli, ["--db", str(db), "search", "planted deploy"])
    assert 0 == result.exit_code and "Planted deploy note." in result.output


@pytest.mark.parametrize(("tool", "arguments"), [
    ("memory_query", {"query": "x", "limit": 10**30}),
    ("memory_query", {"query": "x", "limit": 1e300}),
    ("memory_reinforce", {"id": 2**70}),
    ("memory_timeline", {"id": 1, "before": -1}),
])
def test_the_tools_refuse_numbers_out_of_range(store, tool, arguments):
    """A tool call with a number outside its schema answers an Error text and writes nothing."""
    answer = MemoryTools(store).dispatch(tool, arguments)
    assert answer.startswith("Error: ")
    assert [] == stored_rows(store)


# -- text another program wrote that is not UTF-8 (SQLite) ------------------------


def _write_bytes(db: Path, fact_id: int, column: str, data: bytes, table: str = "facts") -> None:
    """Store ``data`` as the text of ``column``, as another program (or damage) can."""
    import apsw

    conn = apsw.Connection(str(db))
    try:
        where = "fact_id" if table == "fact_history" else "id"
        conn.execute(f"UPDATE {table} SET {column} = CAST(? AS TEXT) WHERE {where} = ?",
                     (data, fact_id))
    finally:
        conn.close()


def test_text_that_is_not_utf8_is_a_clear_error_and_reindex_makes_it_readable(tmp_path: Path):
    """Every read meeting the bytes raises StoreError naming doctor and reindex (no
    UnicodeDecodeError); doctor names the fact and column; reindex puts U+FFFD for the
    bytes, after which the fact reads, is found by its words and doctor is clean."""
    from ctxslots import StoreError

    db = tmp_path / "bytes.db"
    with FactStore(db) as store:
        tea = store.add("user", "The user likes green tea.")
        city = store.upsert("user", "city", "Lisbon")
        store.update(tea.id, value="The user likes green tea a lot.")
    _write_bytes(db, tea.id, "value", b"The user likes g\xffreen tea.")
    _write_bytes(db, city.id, "key", b"c\xffity")
    _write_bytes(db, tea.id, "value", b"\xfe old", table="fact_history")
    with FactStore(db) as store:
        for read in (lambda: store.get(tea.id), lambda: store.facts(),
                     lambda: store.search("green tea"), lambda: store.history(tea.id)):
            with pytest.raises(StoreError, match="not UTF-8.*`ctxslots doctor` says where"):
                read()
        problem = "\n".join(store.doctor().problems)
        assert f"fact {tea.id} value is not UTF-8: b'The user likes g\\xffreen tea.'" in problem
        assert f"fact {city.id} key is not UTF-8" in problem
        assert f"history of fact {tea.id} value is not UTF-8" in problem
        store.reindex()
        assert store.doctor().ok
        assert "The user likes g\ufffdreen tea." == store.get(tea.id).value
        assert "c\ufffdity" == store.get(city.id).key
        assert "\ufffd old" == store.history(tea.id)[0].value
        assert [tea.id] == [h.fact.id for h in store.search("green tea")]


def test_the_cli_says_one_line_for_text_that_is_not_utf8(tmp_path: Path):
    """`get`, `list`, `search` and `export` print one line naming the repair, exit 1."""
    db = tmp_path / "bytes.db"
    with FactStore(db) as store:
        fact = store.add("user", "The user likes green tea.")
    _write_bytes(db, fact.id, "value", b"The user likes g\xffreen tea.")
    for args in (["get", str(fact.id)], ["list"], ["search", "tea"], ["export"]):
        result = CliRunner().invoke(cli, ["--db", str(db), *args])
        lines = result.output.strip().splitlines()
        assert 1 == result.exit_code and 1 == len(lines), (args, result.output)
        assert "not UTF-8" in lines[0] and "`ctxslots reindex`" in lines[0]
    assert 1 == CliRunner().invoke(cli, ["--db", str(db), "doctor"]).exit_code
    assert 0 == CliRunner().invoke(cli, ["--db", str(db), "reindex"]).exit_code
    result = CliRunner().invoke(cli, ["--db", str(db), "get", str(fact.id)])
    assert 0 == result.exit_code and "g\ufffdreen" in result.output


def test_two_keys_that_read_alike_once_repaired_are_both_kept(tmp_path: Path):
    """Keys ``drink\\xff`` and ``drink\\xfe`` of one owner both read ``drink\\ufffd``:
    reindex keeps the first so and adds the second's id to it, and both facts read."""
    db = tmp_path / "keys.db"
    with FactStore(db) as store:
        first = store.upsert("user", "drink1", "coffee black")
        second = store.upsert("user", "drink2", "coffee white")
    _write_bytes(db, first.id, "key", b"drink\xff")
    _write_bytes(db, second.id, "key", b"drink\xfe")
    with FactStore(db) as store:
        store.reindex()
        assert store.doctor().ok
        assert ["drink\ufffd", f"drink\ufffd #{second.id}"] == [
            store.get(first.id).key, store.get(second.id).key]


def test_a_nul_kept_by_an_older_store_is_named_and_repaired(tmp_path: Path):
    """A source or reason holding a NUL (taken before they were checked) cannot move to
    PostgreSQL nor be imported: doctor names it, reindex puts U+FFFD in its place, and the
    store's export imports again."""
    import io

    db = tmp_path / "nul.db"
    with FactStore(db) as store:
        tea = store.add("user", "The user likes green tea.", source="chat")
        gone = store.add("agent", "The deploy ran on Friday.")
        store.forget(gone.id, reason="moved")
    _write_bytes(db, tea.id, "source", b"chat\x00log")
    _write_bytes(db, gone.id, "reason", b"moved\x00", table="archive")
    with FactStore(db) as store:
        problem = "\n".join(store.doctor().problems)
        assert f"fact {tea.id} source holds a NUL: b'chat\\x00log'" in problem
        assert f"archived fact {gone.id} reason holds a NUL" in problem
        store.reindex()
        assert store.doctor().ok
        assert "chat\ufffdlog" == store.get(tea.id).source
        exported = io.StringIO()
        store.export_jsonl(exported)
    with FactStore(tmp_path / "again.db") as again:
        again.import_jsonl(io.StringIO(exported.getvalue()))
        assert "chat\ufffdlog" == again.get(tea.id).source


def test_a_confidence_of_minus_zero_is_stored_and_shown_as_zero(store, db_path):
    """-0.0 passes the range check (it equals 0) and was stored and printed as "-0.0" (as
    `remember --confidence -0` gave it); it is kept as 0.0, on each engine and through the
    command line."""
    fact = store.add("user", "The user may like tea.", confidence=-0.0)
    for seen in (fact.confidence, store.get(fact.id).confidence):
        assert 0.0 == seen and 1.0 == math.copysign(1.0, seen)
    result = CliRunner().invoke(cli, ["--db", str(db_path), "remember", "user", "Tea, maybe.",
                                      "--confidence", "-0", "--json"], catch_exceptions=False)
    assert 0 == result.exit_code
    assert '"confidence": 0.0' in result.stdout and "-0.0" not in result.stdout
