"""Shared fixtures: real SQLite files under tmp_path, a controllable clock."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

# Entry-point plugins are loaded only by the tests that install one on purpose.
os.environ.setdefault("CTXSLOTS_LOAD_PLUGINS", "")


@pytest.fixture(scope="session", autouse=True)
def _token_table_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The token counter's rank tables go to a folder of the test run, not the user's cache."""
    if "CTXSLOTS_CACHE_DIR" in os.environ:
        yield
        return
    os.environ["CTXSLOTS_CACHE_DIR"] = str(tmp_path_factory.mktemp("cache"))
    try:
        yield
    finally:
        del os.environ["CTXSLOTS_CACHE_DIR"]


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """Test processes for ``-n auto`` (the default): two per core, at most eight; one
    process (no workers) when the command names only test files or tests;
    ``$PYTEST_XDIST_AUTO_NUM_WORKERS`` when set.

    Many tests wait (on PostgreSQL, on child processes, on a server's reply), so
    more processes than cores keep the cores busy: on a shared 2-core machine the
    suite took 190 s with 2 workers and 110 to 155 s with 3 or 4. Each worker starts
    its own PostgreSQL and collects every test (about 8 s of CPU), so a run of a few
    files is quicker in one process.
    """
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return int(os.environ["PYTEST_XDIST_AUTO_NUM_WORKERS"])
    named = [arg.split("::")[0] for arg in config.args]
    if named and all(os.path.isfile(arg) for arg in named):
        return 0
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return min(8, 2 * (cores or 1))


def pytest_report_header(config: pytest.Config) -> list[str]:
    """Print the SQLite version and whether FTS5 and sqlite-vec loaded."""
    from ctxslots.stores.sqlite import open_connection

    conn = open_connection(":memory:", migrate=False)
    try:
        fts5 = conn.scalar("SELECT sqlite_compileoption_used('ENABLE_FTS5')")
        return [
            (f"ctxslots: SQLite {conn.scalar('SELECT sqlite_version()')}, "
             f"FTS5 {'yes' if fts5 else 'no'}, sqlite-vec {conn.vec_version or 'not loaded'}")
        ]
    finally:
        conn.close()


class Clock:
    """A clock the test moves by hand (Unix seconds)."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, *, days: float = 0.0, seconds: float = 0.0) -> None:
        """Move the clock forward."""
        self.now += days * 86400.0 + seconds


@pytest.fixture(name="clock")
def fixture_clock() -> Clock:
    """A hand-moved clock starting at a fixed moment."""
    return Clock()


@pytest.fixture(name="db_path")
def fixture_db_path(tmp_path: Path) -> Path:
    """A path for a fresh database file."""
    return tmp_path / "memory.db"


@pytest.fixture(name="location", params=["sqlite", "postgresql"])
def fixture_location(request: pytest.FixtureRequest, db_path: Path) -> str:
    """Where a contract test's store lives: a SQLite file, then a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return str(db_path)
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture(name="store")
def fixture_store(location: str, clock: Clock) -> Iterator[FactStore]:
    """A fact store with the hand-moved clock, on each engine in turn (the contract tests)."""
    from ctxslots import FactStore

    store = FactStore(location, clock=clock)
    try:
        yield store
    finally:
        store.close()


from ctxslots import FactStore


@pytest.fixture(scope="session", name="postgres")
def fixture_postgres() -> Iterator[PostgresServer]:
    """One real PostgreSQL with pgvector for the session (pgserver, or $CTXSLOTS_TEST_POSTGRES_URL)."""
    pytest.importorskip("psycopg")
    pytest.importorskip("psycopg_pool")
    from _postgres import ENV, start_server

    if not os.environ.get(ENV):
        pytest.importorskip("pgserver")
    server, handle = start_server()
    try:
        yield server
    finally:
        if not server.private:
            server.drop_all()
        if handle is not None:
            handle.cleanup()  # type: ignore[attr-defined]


@pytest.fixture(name="pg_url")
def fixture_pg_url(postgres: PostgresServer) -> Iterator[str]:
    """The URL of a database of its own holding an empty, migrated store (given back
    afterwards: emptied for another test, or dropped so the server's folder stays small)."""
    url = postgres.database()
    yield url
    postgres.release(url)


from ctxslots.stores.backend import Backend
from ctxslots.stores.engines import open_backend

if TYPE_CHECKING:
    from _postgres import PostgresServer
    from ctxslots import FactStore


@pytest.fixture(name="engine")
def fixture_engine() -> Iterator[Callable[[FactStore], Backend]]:
    """``engine(store)``: a second engine on the store's file or database, to read what
    was committed (or write rows no store would); closed when the test ends."""
    opened: dict[str, Backend] = {}

    def engine(store: FactStore) -> Backend:
        location = str(store.path)
        if location not in opened:
            opened[location] = open_backend(location, create=False, vector_cache=False)
        return opened[location]

    yield engine
    for backend in opened.values():
        backend.close()
