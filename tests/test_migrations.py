"""Schema migrations: each step opens and upgrades a file written at the step before."""

from __future__ import annotations

import pytest

from ctxslots import FactStore, StoreError
from ctxslots.stores.sqlite import open_connection
from ctxslots.stores.sqlite._migrations import MIGRATIONS, SCHEMA_VERSION, migrate, schema_version
from ctxslots.stores.stemming import stem_text


def test_fresh_file_is_current(db_path):
    """A new store is at the latest schema version."""
    with FactStore(db_path):
        pass
    conn = open_connection(db_path, migrate=False)
    try:
        assert SCHEMA_VERSION == schema_version(conn)
        assert "wal" == conn.scalar("PRAGMA journal_mode")
    finally:
        conn.close()


@pytest.mark.parametrize("step", range(1, SCHEMA_VERSION))
def test_file_at_step_n_upgrades(db_path, step):
    """A database written by migration step N opens, upgrades, and keeps its facts."""
    conn = open_connection(db_path, migrate=False)
    assert MIGRATIONS[:step] and [m.__name__ for m in MIGRATIONS[:step]] == migrate(conn, target=step)
    conn.execute(
        "INSERT INTO facts (slot, scope, key, value, tags, created_at, updated_at) "
        "VALUES ('user', '', 'name', 'The user is Ada.', '', 1.0, 1.0)"
    )
    if "stems" in {row[1] for row in conn.execute("PRAGMA table_info(facts)")}:
        # Code of that schema wrote the stems with the fact (m013 onwards).
        conn.execute("UPDATE facts SET stems = ?", (stem_text("name", "The user is Ada.", ""),))
    conn.close()

    with FactStore(db_path) as store:
        assert ["The user is Ada."] == [h.fact.value for h in store.search("user ada")]
        assert SCHEMA_VERSION == store.stats()["schema_version"]


def test_migrations_run_once(db_path):
    """Opening a current file applies nothing."""
    FactStore(db_path).close()
    conn = open_connection(db_path, migrate=False)
    try:
        assert [] == migrate(conn)
    finally:
        conn.close()


def test_newer_schema_is_refused(db_path):
    """A file from a newer ctxslots gives a clear StoreError instead of being damaged."""
    FactStore(db_path).close()
    conn = open_connection(db_path, migrate=False)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 5}")
    conn.close()
    with pytest.raises(StoreError, match="newer than"):
        FactStore(db_path)


def test_not_a_database_is_refused(tmp_path):
    """A file that is not SQLite gives a StoreError naming it, and is left untouched."""
    bogus = tmp_path / "notes.txt"
    bogus.write_bytes(b"this is not a database, just text " * 100)
    with pytest.raises(StoreError, match="notes.txt"):
        FactStore(bogus)
    assert bogus.read_bytes().startswith(b"this is not a database")


def _open_each_after(paths, barrier, results):
    from ctxslots.stores.sqlite import open_connection

    for path in paths:
        barrier.wait()  # every worker opens the same fresh file at once
        try:
            open_connection(path).close()
            results.put(None)
        except Exception as exc:  # reported to the test, which shows it
            results.put(f"{path}: {type(exc).__name__}: {exc}")


def _open_fresh_files_together(tmp_path, files: int, processes: int = 6) -> list[str]:
    """``processes`` processes open each of ``files`` fresh stores together; the errors seen.

    The processes start once (each start imports ctxslots) and meet at a barrier
    before each file, so a trial costs an open, not six interpreter starts.
    """
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    paths = [str(tmp_path / f"fresh{n}.db") for n in range(files)]
    barrier, results = ctx.Barrier(processes), ctx.Queue()
    workers = [ctx.Process(target=_open_each_after, args=(paths, barrier, results))
               for _ in range(processes)]
    for w in workers:
        w.start()
    errors = [r for r in (results.get(timeout=120) for _ in range(files * processes)) if r]
    for w in workers:
        w.join(60)
    return errors


def test_processes_opening_a_new_file_at_once_all_succeed(tmp_path):
    """Six processes opening fresh stores together, 8 files: no 'database is locked' at open.

    Switching a new file to WAL can answer BUSY without SQLite's busy handler; before
    opening retried it, about one trial in four failed here.
    """
    assert [] == _open_fresh_files_together(tmp_path, files=8)


@pytest.mark.slow
def test_processes_opening_new_files_at_once_full_size(tmp_path, request):
    """Six processes opening 40 fresh stores together, one after another (opt-in: ``pytest -m slow``)."""
    expr = request.config.getoption("markexpr", default="") or ""
    if "slow" not in expr or "not slow" in expr:
        pytest.skip("opt-in: run with `pytest -m slow`")
    assert [] == _open_fresh_files_together(tmp_path, files=40)
