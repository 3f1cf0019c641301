"""Import files that contradict themselves (a fact superseded by itself or in a loop, times
out of order) and files with no line break: refused naming the line, nothing written; rows
stored before the checks are named by doctor and set right by reindex."""

from __future__ import annotations

import io
import json
import os
import sys
from typing import Any

import pytest
from click.testing import CliRunner

from _sql import engine_of, stored_rows
from ctxslots import FactStore, Limits
from ctxslots.cli import cli
from ctxslots.errors import InvalidImportError
from ctxslots.stores.backend import HistoryEntry

NOW = 1_800_000_000.0
HEADER = json.dumps({"format": "ctxslots-facts", "version": 1})


def jsonl(*records: dict[str, Any]) -> str:
    """An export file: the header, then one line per record."""
    return "\n".join([HEADER, *(json.dumps(r) for r in records)]) + "\n"


def fact(fid: int, value: str, **fields: Any) -> dict[str, Any]:
    return {"id": fid, "slot": "agent", "value": value, **fields}


def test_a_fact_superseded_by_itself_is_refused(store):
    """The line is named with its field; nothing is written."""
    text = jsonl(fact(1, "A plain fact."), fact(2, "Hides itself.", superseded_by=2))
    with pytest.raises(InvalidImportError) as caught:
        store.import_jsonl(io.StringIO(text))
    assert (3, "superseded_by") == (caught.value.line, caught.value.field)
    assert "names the fact itself" in str(caught.value)
    assert [] == stored_rows(store)


@pytest.mark.parametrize("size", [2, 3])
def test_a_loop_of_superseded_by_is_refused_naming_its_lines(store, size):
    """Facts that supersede each other in a ring would all be hidden: refused, nothing written."""
    records = [fact(10 + i, f"Ring fact {i} about the deploy.",
                    superseded_by=10 + (i + 1) % size) for i in range(size)]
    text = jsonl(fact(1, "Outside the ring."), *records)
    with pytest.raises(InvalidImportError) as caught:
        store.import_jsonl(io.StringIO(text))
    assert "superseded_by forms a loop" in str(caught.value)
    lines = " -> ".join(str(3 + i) for i in [*range(size), 0])
    assert f"(lines {lines})" in str(caught.value)
    assert [] == stored_rows(store)


def test_skip_invalid_imports_a_loop_without_it_and_reports_it(store):
    """With skip_invalid the facts of a loop are imported without superseded_by, listed in
    the report, and every search and the chain outside the loop works."""
    text = jsonl(fact(1, "Old deploy window on Fridays.", superseded_by=2),
                 fact(2, "Deploy window moved to Tuesdays."),
                 fact(10, "Ring fact one about the billing queue.", superseded_by=11),
                 fact(11, "Ring fact two about the billing queue.", superseded_by=10))
    report = store.import_jsonl(io.StringIO(text), skip_invalid=True)
    assert 4 == report.added and [4, 5] == [issue.line for issue in report.repaired]
    assert "2 facts imported without their superseded_by" in report.summary()
    found = {h.fact.value for h in store.search("billing queue ring")}
    assert {"Ring fact one about the billing queue.",
            "Ring fact two about the billing queue."} == found
    assert ["Deploy window moved to Tuesdays."] == [
        h.fact.value for h in store.search("deploy window")]
    assert store.doctor().ok



@pytest.mark.parametrize("size", [2, 3])
def test_skip_invalid_counts_every_fact_of_a_loop_it_repairs(store, size):
    """Each fact of a loop is imported without its superseded_by, and the report lists and
    counts each one (on its own line), not the loop once."""
    records = [fact(10 + i, f"Ring fact {i} about the billing queue.",
                    superseded_by=10 + (i + 1) % size) for i in range(size)]
    report = store.import_jsonl(io.StringIO(jsonl(*records)), skip_invalid=True)
    assert [None] * size == [f.superseded_by for f in store.facts()]
    assert list(range(2, 2 + size)) == [issue.line for issue in report.repaired]
    assert f"{size} facts imported without their superseded_by" in report.summary()
    assert size == len(report.to_dict()["repaired"])

@pytest.mark.parametrize(("record", "field"), [
    (fact(1, "Updated before made.", created_at=NOW, updated_at=NOW - 60), "updated_at"),
    (fact(1, "History runs backwards.", created_at=NOW - 100, history=[
        {"value": "Earlier.", "valid_from": NOW - 50, "valid_to": NOW - 90}]), "valid_to"),
])
def test_times_out_of_order_are_refused(store, record, field):
    """updated_at before created_at, and a history entry ending before it began, are refused."""
    with pytest.raises(InvalidImportError) as caught:
        store.import_jsonl(io.StringIO(jsonl(record)))
    assert (2, field) == (caught.value.line, caught.value.field)
    assert "before" in str(caught.value)
    assert [] == stored_rows(store)


def _plant(store: FactStore, value: str, **fields: Any) -> int:
    row: dict[str, Any] = {
        "slot": "agent", "scope": "", "key": None, "value": value, "tags": "", "source": None,
        "confidence": 1.0, "score": 0.0, "created_at": NOW, "updated_at": NOW,
        "observed_at": NOW, "last_accessed": None, "access_count": 0, "expires_at": None,
        "superseded_by": None, "user_id": "", "agent_id": ""}
    row.update(fields)
    with engine_of(store) as backend, backend.transaction():
        return int(backend.insert(row))


def test_doctor_names_a_stored_loop_and_reindex_shows_its_facts_again(store, clock):
    """A loop written before the checks hides its facts: doctor names it, reindex clears it."""
    clock.advance(seconds=NOW + 10 - clock())
    a = _plant(store, "Looped fact about the VPN token.")
    b = _plant(store, "Looped twin about the VPN token.")
    c = _plant(store, "Hides behind itself: the VPN token rotates.")
    with engine_of(store) as backend, backend.transaction():
        backend.set_superseded([(a, b), (b, a), (c, c)], archived=False)
    assert [] == store.search("vpn token")
    report = store.doctor()
    (line,) = report.problems
    assert line.startswith("3 facts hidden by a loop of superseded_by")
    assert f"{a} -> {b} -> {a}" in line and f"{c} -> {c}" in line
    store.reindex()
    assert {a, b, c} == {h.fact.id for h in store.search("vpn token")}
    assert store.doctor().ok


def test_doctor_names_stored_times_out_of_order_and_reindex_sets_them(store, clock):
    """A fact updated before it was created, and history ending before it began, are named;
    reindex sets each later time to the earlier one."""
    fid = _plant(store, "Updated before made.", created_at=NOW, updated_at=NOW - 60)
    with engine_of(store) as backend, backend.transaction():
        backend.add_history([HistoryEntry(
            fact_id=fid, slot="agent", scope="", key=None, value="Earlier.", tags="",
            source=None, confidence=1.0, valid_from=NOW - 10, valid_to=NOW - 20)])
    report = store.doctor()
    (line,) = report.problems
    assert f"fact {fid} updated_at {NOW - 60!r} is before created_at {NOW!r}" in line
    assert f"history of fact {fid} valid_to" in line
    store.reindex()
    assert store.doctor().ok
    got = store.get(fid)
    assert got.updated_at == got.created_at


# -- files with no line break ------------------------------------------------------------


def test_a_jsonl_line_longer_than_the_limit_fails_before_it_is_read_whole(location, tmp_path):
    """A file with no line break fails at Limits.max_import_line_chars, naming the line."""
    path = tmp_path / "one-line.jsonl"
    path.write_text(HEADER + "\n" + "x" * 50_000)
    with FactStore(location, limits=Limits(max_import_line_chars=10_000)) as store:
        with path.open(encoding="utf-8") as fp, pytest.raises(InvalidImportError) as caught:
            store.import_jsonl(fp)
        assert 2 == caught.value.line and "longer than 10,000 characters" in str(caught.value)
        assert [] == stored_rows(store)
        # A long line within the limit is read (and here refused for what it holds).
        path.write_text(jsonl(fact(1, "A fine fact.")))
        with path.open(encoding="utf-8") as fp:
            assert 1 == store.import_jsonl(fp).added


def test_a_markdown_line_longer_than_the_limit_fails(db_path, tmp_path):
    """The Markdown import reads at most the limit of one line too."""
    path = tmp_path / "memory.md"
    path.write_text("# Notes\n\n- " + "y" * 50_000)
    with FactStore(db_path, limits=Limits(max_import_line_chars=10_000)) as store:
        with pytest.raises(InvalidImportError) as caught:
            store.import_markdown(path, slot="agent")
        assert 3 == caught.value.line and "longer than 10,000 bytes" in str(caught.value)
        assert [] == store.facts()


@pytest.mark.parametrize("ending", ["\n", "\r\n"], ids=["lf", "crlf"])
def test_a_line_exactly_at_the_limit_is_read_whatever_its_line_break(db_path, tmp_path, ending):
    """A line of exactly Limits.max_import_line_chars (Markdown: bytes) is read, one more is
    refused, whether the file ends its lines with a line feed or a carriage return and one."""
    record = json.dumps(fact(1, "A fine fact."))
    path = tmp_path / "facts.jsonl"
    path.write_bytes(ending.join([HEADER, record, ""]).encode())
    bullet = "- " + "é" * 50  # 102 bytes
    md = tmp_path / "notes.md"
    md.write_bytes(f"# Notes{ending}{bullet}{ending}".encode())
    for extra, refused in ((0, False), (-1, True)):
        with FactStore(tmp_path / f"{extra}.db", limits=Limits(
                max_import_line_chars=len(record) + extra)) as store:
            with path.open(encoding="utf-8", newline="") as fp:
                if refused:
                    with pytest.raises(InvalidImportError, match="line 2: the line is longer"):
                        store.import_jsonl(fp)
                else:
                    assert store.import_jsonl(fp).added == 1
        with FactStore(tmp_path / f"md{extra}.db", limits=Limits(
                max_import_line_chars=len(bullet.encode()) + extra)) as store:
            if refused:
                with pytest.raises(InvalidImportError, match="line 2: the line is longer"):
                    store.import_markdown(md, slot="agent")
                assert [] == store.facts()
            else:
                assert store.import_markdown(md, slot="agent").added == 1
                assert ["é" * 50] == [f.value for f in store.facts()]


@pytest.mark.skipif(not os.path.exists("/dev/zero") or sys.platform == "win32",
                    reason="needs /dev/zero")
@pytest.mark.parametrize("suffix", ["jsonl", "md"])
def test_importing_dev_zero_ends_in_one_line_and_writes_nothing(db_path, tmp_path, suffix):
    """`ctxslots import` of a link to /dev/zero (a file with no end and no line break) stops at
    the line limit with one line, instead of reading until memory runs out."""
    link = tmp_path / f"zero.{suffix}"
    link.symlink_to("/dev/zero")
    with FactStore(db_path) as store:
        store.add("agent", "Here before.")
    slot = ["--slot", "agent"] if suffix == "md" else []
    result = CliRunner().invoke(cli, ["--db", str(db_path), "import", *slot, str(link)])
    assert 0 != result.exit_code and "Traceback" not in result.output
    (line,) = result.output.strip().splitlines()
    assert "longer than" in line or "not UTF-8" in line or "NUL" in line, line
    with FactStore(db_path) as store:
        assert ["Here before."] == [f.value for f in store.facts()]


def test_a_renumbered_record_does_not_take_the_id_a_later_record_keeps(store):
    """The store holds id 1; the file's 1 is renumbered, after the file's 2 kept its id
    (it once took 2, the next free id, and the file's 2 failed with a raw UNIQUE
    constraint error)."""
    here = store.add("agent", "Here before the import.")
    text = jsonl(fact(here.id, "Ring one about the deploy.", superseded_by=here.id + 1),
                 fact(here.id + 1, "Ring two about the deploy."))
    report = store.import_jsonl(io.StringIO(text))
    assert 2 == report.added and 1 == report.renumbered
    assert "Ring two about the deploy." == store.get(here.id + 1).value
    assert ["Ring two about the deploy."] == [h.fact.value for h in store.search("ring deploy")]
    assert store.doctor().ok
