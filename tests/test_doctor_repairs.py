"""doctor and reindex on stores harmed from outside: a dropped vector table or index, a file
opened read-only; and `stats` on each engine."""

from __future__ import annotations

import random
import shutil
import sys

import apsw
import pytest
from click.testing import CliRunner

from _damage import damage_the_facts_table
from _powers import ordinary_child, run_on_read_only_file
from _sql import raw
from ctxslots import FactStore, RankingPolicy, StoreDamagedError
from ctxslots.cli import cli
from ctxslots.stores.embedders import HashingEmbedder

FUSED = RankingPolicy(vector_weight=1.0)


def test_stats_answers_on_each_engine(location):
    """`ctxslots stats` names the engine and its versions, on SQLite and PostgreSQL alike."""
    with FactStore(location) as store:
        store.add("agent", "One fact to count.")
    result = CliRunner().invoke(cli, ["--db", location, "stats"])
    assert 0 == result.exit_code, result.output
    assert "1 fact (" in result.output
    engine = "PostgreSQL" if location.startswith("postgresql") else "SQLite"
    assert f"{engine} " in result.output and "None" not in result.output.splitlines()[1]


def _drop(store: FactStore, statement: str) -> None:
    conn = raw(store)
    conn.execute(statement)
    conn.close()


@pytest.mark.parametrize("drop", ["DROP TABLE vectors", "DROP TABLE vector_log"])
def test_a_dropped_vector_table_is_rebuilt_by_reindex(db_path, drop):
    """Without its vector table or log doctor names what is missing (not "damaged", which
    sent doctor and reindex round in a loop) and reindex recreates it and embeds the facts
    again; searches read vectors again."""
    emb = HashingEmbedder(dimension=64)
    with FactStore(db_path, embedder=emb, ranking=FUSED, vector_writes="inline") as store:
        fact = store.add("agent", "The nightly backup runs on the replica.")
    _drop(store, drop)
    with FactStore(db_path, embedder=emb, ranking=FUSED, vector_writes="inline") as store:
        report = store.doctor()
        line = report.problems[0]
        assert f"missing {drop.split()[-1]}" in line and "run `ctxslots reindex`" in line
        # Only the facts whose vectors went with the table are embedded again.
        assert (1 if drop.endswith("vectors") else 0) == store.reindex()
        assert store.doctor().ok, store.doctor().problems
        hit = store.search("nightly backup replica")[0]
        assert fact.id == hit.fact.id and hit.trace.cosine is not None


@pytest.mark.parametrize("drop", ["DROP TABLE vectors", "DROP TABLE vector_log"])
def test_the_cli_doctor_and_reindex_answer_without_a_vector_table(db_path, drop):
    """`ctxslots doctor` then `ctxslots reindex` on such a file answer, and doctor is ok after."""
    with FactStore(db_path, ranking=FUSED, vector_writes="inline") as store:
        store.add("agent", "The nightly backup runs on the replica.")
    _drop(store, drop)
    for command in ("doctor", "reindex", "reindex --full", "doctor"):
        result = CliRunner().invoke(cli, ["--db", str(db_path), *command.split()])
        assert "reindex" not in command or result.output.startswith("reindexed:"), result.output
        assert "damaged" not in result.output and "Traceback" not in result.output
    assert 0 == result.exit_code and result.output.strip().endswith("ok")


DOCTOR = """
import sys
from ctxslots import FactStore
with FactStore(sys.argv[1], create=False) as store:
    report = store.doctor()
    print(report.fts_in_sync)
    print(report.problems)
"""


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX file permissions")
def test_doctor_on_a_read_only_file_finds_the_full_text_index_in_sync(tmp_path):
    """A file its user may not write is checked by what can be read: a sound index is in sync,
    with no problem reported (the check that writes is not run)."""
    ordinary_child()  # skips, with the reason, where permissions cannot hold
    path = tmp_path / "read-only" / "memory.db"
    path.parent.mkdir()
    with FactStore(path) as store:
        store.add("agent", "The VPN needs a fresh token.")
        store.forget(store.add("agent", "An archived note.").id)
    done = run_on_read_only_file(path, ["-c", DOCTOR, str(path)])
    assert 0 == done.returncode, done.stderr
    assert ["True", "()"] == done.stdout.splitlines()


def test_a_dropped_hnsw_index_is_reported_and_rebuilt(pg_url):
    """PostgreSQL: doctor names a dropped HNSW index of the vector leg; reindex recreates it."""
    import psycopg

    emb = HashingEmbedder(dimension=64)
    with FactStore(pg_url, embedder=emb, ranking=FUSED, vector_writes="inline") as store:
        store.add("agent", "The nightly backup runs on the replica.")
        assert store.doctor().ok
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("DROP INDEX fact_vectors_hnsw")
        report = store.doctor()
        (line,) = report.problems
        assert "vector index fact_vectors_hnsw is missing" in line and "reindex" in line
        store.reindex()
        assert store.doctor().ok
        with psycopg.connect(pg_url) as conn:
            assert conn.execute("SELECT to_regclass('fact_vectors_hnsw')").fetchone()[0]


def test_a_damaged_facts_page_is_a_store_damaged_error_and_the_doctor_reports_it(tmp_path):
    """A facts page overwritten on disk: reads raise StoreDamagedError naming the file and
    the repair, the doctor reports the damage instead of raising, and the CLI says one line."""
    path = str(tmp_path / "memory.db")
    with FactStore(path) as store:
        for n in range(5):
            store.add("project", f"Fact number {n}.")
    damage_the_facts_table(path)
    with FactStore(path) as store:
        for read in (lambda: store.get(1), lambda: store.facts(), lambda: store.stats()):
            with pytest.raises(StoreDamagedError) as info:
                read()
            assert str(info.value).startswith(f"{path} is damaged (")
            assert f"`sqlite3 {path} .recover`" in str(info.value)
        report = store.doctor()
    assert not report.ok and report.integrity != "ok"
    (problem,) = report.problems
    assert "the file is damaged" in problem and f"`sqlite3 {path} .recover`" in problem
    assert not report.facts_readable
    for command in (["doctor"], ["list"], ["get", "1"]):
        result = CliRunner().invoke(cli, ["--db", path, *command], catch_exceptions=False)
        assert 1 == result.exit_code, command
        assert "Traceback" not in result.output and "apsw" not in result.output, command
    lines = CliRunner().invoke(cli, ["--db", path, "list"]).output.splitlines()
    assert 1 == len(lines) and lines[0].startswith(f"Error: {path} is damaged")


def test_doctor_does_not_wait_for_a_write_lock_another_connection_holds(tmp_path,
                                                                         monkeypatch):
    """While another connection holds the write lock, the FTS5 check (a write) is not run
    and not waited for: the doctor compares the index's rows instead and says the full
    check could not run."""
    path = str(tmp_path / "memory.db")
    monkeypatch.setenv("CTXSLOTS_BUSY_TIMEOUT", "2")  # what a check that waited would wait
    with FactStore(path) as store:
        store.add("agent", "The VPN needs a fresh token.")
        holder = apsw.Connection(path)
        holder.execute("BEGIN IMMEDIATE")
        try:
            report = store.doctor()
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert report.fts_in_sync and not report.ok
        assert ["the full-text index's own check could not run"] == [
            p.split(":")[0] for p in report.problems]
        assert store.doctor().ok


def test_a_file_damaged_in_its_middle_is_said_damaged_and_never_sent_to_reindex(tmp_path):
    """8 KB of noise over the middle of a store: the doctor says the file is damaged, names
    what SQLite's integrity check found before it stopped, and proposes a backup or
    `sqlite3 FILE .recover`, never `ctxslots reindex` (which refuses a damaged file); it
    does not send the reader back to the doctor."""
    good = tmp_path / "good.db"
    with FactStore(good) as store, store.batch():
        for n in range(3000):
            store.add("agent", f"Lesson {n} about deploys and the release train "
                      f"{random.Random(n).random()}.", scope="w")
    path = tmp_path / "damaged.db"
    shutil.copy(good, path)
    with open(path, "r+b") as fp:
        fp.seek(good.stat().st_size // 2)
        fp.write(random.Random(7).randbytes(8192))
    with FactStore(path) as store:
        report = store.doctor()
    assert "page" in report.integrity and "could not run" not in report.integrity
    assert not any("run `ctxslots reindex`" in p or "ctxslots doctor" in p
                   for p in report.problems)
    (problem,) = report.problems
    assert problem.startswith("integrity check failed, the file is damaged (")
    assert f"`sqlite3 {path} .recover`" in problem
    assert not report.facts_readable
    result = CliRunner().invoke(cli, ["--db", str(path), "doctor"])
    assert 1 == result.exit_code
    assert "full-text index: not checked (the facts cannot be read)" in result.output
    assert "OUT OF SYNC" not in result.output and "ctxslots doctor" not in result.output
