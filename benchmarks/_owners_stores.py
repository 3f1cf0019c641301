"""The stores of the owners benchmark: many users in one store, and one user alone.

    seconds = build_sqlite(path, people, layout)      # once; reused while the layout is the same
    seconds = build_postgres(url, people, layout)
    solo = solo_store(location, people, user, layout) # that user's facts and their workspace's

The facts go in through ``FactStore.import_jsonl`` (the bulk path: rows
inserted a thousand at a time, duplicates checked in batches), in transactions
of :data:`CHUNK` records. Progress is recorded after each (beside the file, or in
a table of the database), so an interrupted load resumes where it stopped and
a finished one is reused by the next run with the same layout; the time the
load took is kept with it. PostgreSQL's tables are analyzed after the load, as
autovacuum would do soon after.
"""

from __future__ import annotations

import dataclasses
import io
import itertools
import json
import os
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from _people import Layout, People, User
from ctxslots import FactStore, Limits

__all__ = ["CHUNK", "build_postgres", "build_sqlite", "postgres_bytes", "solo_store",
           "sqlite_bytes"]

#: Records per import transaction (one commit to resume from).
CHUNK = 20_000
_HEADER = json.dumps({"format": "ctxslots-facts", "version": 1})


def _jsonl(records: Iterable[dict[str, Any]]) -> io.StringIO:
    return io.StringIO(_HEADER + "\n" + "\n".join(json.dumps(r) for r in records) + "\n")


def _load(store: FactStore, records: Iterator[dict[str, Any]], done: int, total: int,
          record: Any) -> None:
    """Import ``records`` from number ``done`` on, a chunk per transaction, calling
    ``record(done)`` after each commit."""
    rest = itertools.islice(records, done, None)
    started = time.perf_counter()
    while done < total:
        chunk = list(itertools.islice(rest, CHUNK))
        if not chunk:
            break
        report = store.import_jsonl(_jsonl(chunk))
        if report.skipped_duplicates:
            print(f"  {report.skipped_duplicates} of a chunk skipped as duplicates", flush=True)
        done += len(chunk)
        record(done)
        rate = done / max(time.perf_counter() - started, 1e-9)
        print(f"  {done:,} of {total:,} facts ({rate:,.0f} facts/s)", flush=True)


def _state(layout: Layout) -> dict[str, Any]:
    return dataclasses.asdict(layout)


def build_sqlite(path: Path, people: People, layout: Layout) -> float:
    """The store at ``path`` holding every user of ``layout``; the seconds loading took."""
    stamp = path.with_suffix(".json")
    state = json.loads(stamp.read_text()) if stamp.exists() and path.exists() else {}
    if state.get("layout") != _state(layout):
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        state = {"layout": _state(layout), "done": 0, "seconds": 0.0}
    if state["done"] >= layout.total:
        return float(state["seconds"])
    print(f"loading {path.name}: {layout.total:,} facts", flush=True)
    began, before = time.perf_counter(), float(state["seconds"])

    def record(done: int) -> None:
        state.update(done=done, seconds=before + time.perf_counter() - began)
        stamp.write_text(json.dumps(state))

    with FactStore(path, limits=Limits(max_batch=CHUNK)) as store:
        _load(store, people.records(layout), state["done"], layout.total, record)
    return float(state["seconds"])


def build_postgres(url: str, people: People, layout: Layout) -> float:
    """The database at ``url`` holding every user of ``layout``; the seconds loading took."""
    import psycopg

    def read() -> dict[str, Any]:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE TABLE IF NOT EXISTS bench_owners (state text NOT NULL)")
            row = conn.execute("SELECT state FROM bench_owners").fetchone()
        return json.loads(row[0]) if row else {}

    state = read()
    if state.get("layout") != _state(layout):
        with psycopg.connect(url, autocommit=True) as conn:
            tables = [r[0] for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")]
            if "facts" in tables and state.get("done"):
                raise SystemExit(f"{url} holds another layout's store: drop the database")
        state = {"layout": _state(layout), "done": 0, "seconds": 0.0}
    if state["done"] >= layout.total:
        # Earlier runs' writes left dead rows and entries in the full-text index's pending
        # list, which every search then reads: start from the state autovacuum keeps.
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE")
        return float(state["seconds"])
    print(f"loading the PostgreSQL store: {layout.total:,} facts", flush=True)
    began, before = time.perf_counter(), float(state["seconds"])

    def record(done: int) -> None:
        state.update(done=done, seconds=before + time.perf_counter() - began)
        with psycopg.connect(url, autocommit=True) as conn, conn.transaction():
            conn.execute("DELETE FROM bench_owners")
            conn.execute("INSERT INTO bench_owners VALUES (%s)", (json.dumps(state),))

    with FactStore(url, limits=Limits(max_batch=CHUNK)) as store:
        _load(store, people.records(layout), state["done"], layout.total, record)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")
    return float(state["seconds"])


def solo_store(location: str, people: People, user: User, layout: Layout) -> None:
    """Write a fresh store at ``location`` (empty before) holding only ``user``."""
    with FactStore(location) as store:
        store.import_jsonl(_jsonl(people.solo_records(user, layout)))
    if "://" in location:
        import psycopg

        with psycopg.connect(location, autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE")


def sqlite_bytes(path: Path) -> tuple[int, int, dict[str, int]]:
    """The file's size after a checkpoint, its facts, and the bytes of its largest tables
    and indexes."""
    import apsw

    conn = apsw.Connection(str(path))
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    facts = int(conn.execute("SELECT count(*) FROM facts").fetchone()[0])
    parts: dict[str, int] = {}
    try:
        for name, size in conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name "
                                       "ORDER BY 2 DESC LIMIT 6"):
            parts[str(name)] = int(size)
    except apsw.SQLError:
        pass  # a SQLite built without dbstat: the file size alone
    conn.close()
    return os.path.getsize(path), facts, parts


def postgres_bytes(url: str) -> tuple[int, int, dict[str, int]]:
    """The database's size, its facts, and the bytes of its largest tables (their indexes
    and TOAST included)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        facts = int(conn.execute("SELECT count(*) FROM facts").fetchone()[0])
        total = int(conn.execute("SELECT pg_database_size(current_database())").fetchone()[0])
        parts = {str(name): int(size) for name, size in conn.execute(
            "SELECT relname, pg_total_relation_size(oid) FROM pg_class "
            "WHERE relkind = 'r' AND relnamespace = current_schema()::regnamespace "
            "ORDER BY 2 DESC LIMIT 4")}
    return total, facts, parts
