"""On PostgreSQL, other writers wait while an import runs: a second import of the same file,
started meanwhile, finds its facts stored instead of writing them again or failing."""

from __future__ import annotations

import io
import json
import threading
from typing import Any

import pytest

from ctxslots import FactStore, ImportReport

HEADER = json.dumps({"format": "ctxslots-facts", "version": 1})


def _file(records: list[dict[str, Any]]) -> str:
    return "".join([HEADER + "\n", *(json.dumps(r) + "\n" for r in records)])


def _waits_for_a_lock(watch: Any) -> bool:
    """Whether a session of this database waits for a lock (another's transaction)."""
    row = watch.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = "
                        "current_database() AND wait_event_type = 'Lock'").fetchone()
    return bool(row[0])


def _aside(pg_url: str, work: Any, into: list[Any], done: threading.Event) -> None:
    """Start a thread running ``work(store)`` on another store of ``pg_url``: its result
    (or the exception it raised, for the test's assertion to show) goes into ``into``,
    then ``done`` is set."""
    def run() -> None:
        try:
            with FactStore(pg_url, embedder=False) as other:
                into.append(work(other))
        except Exception as exc:
            into.append(exc)
        finally:
            done.set()

    threading.Thread(target=run, daemon=True).start()


@pytest.mark.parametrize(("ids", "keys"), [(True, True), (True, False), (False, False)],
                         ids=["ids-and-keys", "ids", "free-memories"])
def test_an_import_started_during_another_of_the_same_file_skips_every_fact(pg_url, ids,
                                                                            keys):
    """Without the wait, the second failed on the first id or key the first had written (a
    unique constraint), or, given neither, wrote again the memories the first had
    written before it started (its checks saw none of them)."""
    psycopg = pytest.importorskip("psycopg")
    size = 2200
    text = _file([{**({"id": i} if ids else {}), "slot": "project", "value": f"Step {i}.",
                   **({"key": f"k{i}"} if keys and i % 2 else {})} for i in range(1, size + 1)])
    second: list[ImportReport | BaseException] = []
    done = threading.Event()

    with FactStore(pg_url, embedder=False) as store, \
            psycopg.connect(pg_url, autocommit=True) as watch:

        def start_the_second(handled: int) -> None:
            if handled != 2000:
                return
            # The first import's transaction is open, its first thousands of records
            # written (records with no id are written a batch late): the second starts.
            _aside(pg_url, lambda other: other.import_jsonl(io.StringIO(text)), second, done)
            while not done.is_set() and not _waits_for_a_lock(watch):
                done.wait(0.005)

        first = store.import_jsonl(io.StringIO(text), progress=start_the_second)
        assert done.wait(300)
        assert len(second) == 1 and isinstance(second[0], ImportReport), second
        # One of them wrote every fact (the first, unless it had written none when the
        # second started), the other found them all stored.
        reports = sorted([first, second[0]], key=lambda r: r.added)
        assert [(r.added, r.skipped_duplicates) for r in reports] == [(0, size), (size, 0)]
        stored = watch.execute("SELECT count(*) FROM facts").fetchone()[0]
    assert stored == size


def test_a_search_answers_while_an_import_holds_the_writers_off(pg_url):
    """A search counts what it shows; counting waited for the import's lock on the facts
    table, so every search of every process hung until the import committed. It now
    answers, its counts owed to a later one."""
    psycopg = pytest.importorskip("psycopg")
    with FactStore(pg_url, embedder=False) as store:
        stored = store.add("project", "The deploy script lives in ops/deploy.sh.")
    text = _file([{"slot": "project", "value": f"Step {i}."} for i in range(1, 1501)])
    found: list[Any] = []
    answered = threading.Event()

    with FactStore(pg_url, embedder=False) as store, \
            psycopg.connect(pg_url, autocommit=True) as watch:

        def search_meanwhile(handled: int) -> None:
            if handled != 1000:
                return
            assert _waits_for_a_lock(watch) is False
            _aside(pg_url, lambda other: [h.fact.id for h in other.search("deploy script")],
                   found, answered)
            # Inside the import's transaction: the search answers before it commits.
            found.append(answered.wait(120))

        with pytest.warns(RuntimeWarning, match="access counts are written with a later"):
            store.import_jsonl(io.StringIO(text), progress=search_meanwhile)
        assert found == [[stored.id], True]
