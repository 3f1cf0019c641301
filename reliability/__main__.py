"""``python -m reliability {concurrency,crash,fuzz,postgres,postgres-outage,imports,all}``:
full-size checks, with figures.

``all`` runs the SQLite checks; ``imports`` imports a catalogue of hostile files
(into a PostgreSQL database too with ``--postgres``); ``postgres`` (several processes, each
with its own pool, on one new database) needs a server: ``--url`` names
one, otherwise a private one is started from pgserver. ``postgres-outage``
(writers while the server is stopped and started again) always starts a
private pgserver, since it stops it. Each subcommand
prints a markdown table of what it measured and exits with status 1 when a
check failed (listing the failures), 0 otherwise.
"""

from __future__ import annotations

import argparse
import contextlib
import platform
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

__all__ = ["main"]


def _machine() -> str:
    import os

    import apsw

    return (f"Python {platform.python_version()}, SQLite {apsw.sqlite_lib_version()}, "
            f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs")


def _report(title: str, result: Any) -> bool:
    print(f"## {title}\n")
    print(result.table())
    failures = result.failures
    if failures:
        print(f"\nFAILED ({len(failures)}):")
        for line in failures[:50]:
            print(f"- {line}")
    print()
    return bool(result.ok)


def _concurrency(args: argparse.Namespace, folder: Path) -> bool:
    from .concurrency import run_concurrency

    result = run_concurrency(folder / "concurrency.db", processes=args.processes, ops=args.ops,
                             seed=args.seed)
    return _report("concurrency", result)


def _crash(args: argparse.Namespace, folder: Path) -> bool:
    from .crash import run_crash

    result = run_crash(folder / "crash", trials=args.trials, seed=args.seed,
                       max_delay=args.max_delay)
    if args.verbose:
        for t in result.trials:
            print(f"trial {t.number:>3} {t.mode:<8} kill after {t.delay_s:.3f} s: "
                  f"{t.acked}/{t.units} units acked, in flight {t.in_flight}, doctor {t.doctor}")
        print()
    return _report("crash", result)


def _fuzz(args: argparse.Namespace, folder: Path) -> bool:
    from .fuzz import run_fuzz

    return _report("fuzz", run_fuzz(examples=args.examples))


def _postgres(args: argparse.Namespace, folder: Path) -> bool:
    from .postgres_concurrency import run_postgres_concurrency

    with _postgres_database(args.url) as url:
        result = run_postgres_concurrency(url, processes=args.processes, ops=args.ops,
                                          seed=args.seed)
    return _report("postgres (several hosts, one database)", result)


def _imports(args: argparse.Namespace, folder: Path) -> bool:
    from .hostile_imports import run_hostile_imports

    if args.url is None and not args.postgres:
        return _report("hostile imports", run_hostile_imports(folder / "imports"))
    with _postgres_database(args.url) as url:
        result = run_hostile_imports(folder / "imports", url=url)
    return _report("hostile imports", result)


@contextlib.contextmanager
def _postgres_database(url: str | None) -> Iterator[str]:
    """A new empty database on the server at ``url``, or on a private pgserver."""
    import uuid
    from urllib.parse import urlsplit, urlunsplit

    import psycopg

    with contextlib.ExitStack() as stack:
        if url is None:
            import pgserver  # type: ignore[import-untyped]

            folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="ctxslots-pg-"))
            url = str(pgserver.get_server(folder, cleanup_mode="stop").get_uri())
        name = f"ctxslots_reliability_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        yield urlunsplit(urlsplit(url)._replace(path="/" + name))


def _postgres_outage(args: argparse.Namespace, folder: Path) -> bool:
    import subprocess

    import pgserver
    from psycopg.conninfo import conninfo_to_dict

    from .postgres_outage import run_postgres_outage

    data = Path(tempfile.mkdtemp(prefix="ctxslots-pg-outage-"))
    handle = pgserver.get_server(str(data), cleanup_mode="delete")
    url = str(handle.get_uri())
    socket_dir = conninfo_to_dict(url)["host"]

    def ctl(*more: str) -> None:
        pgserver.pg_ctl(list(more), pgdata=handle.pgdata, user=handle.system_user, timeout=120)

    try:
        with _postgres_database(url) as database:
            result = run_postgres_outage(
                database, folder=folder, workers=args.processes, outages=args.outages,
                down_s=args.down, stop_server=lambda: ctl("-w", "-m", "fast", "stop"),
                start_server=lambda: ctl("-w", "-o", '-h ""', "-o", f"-k {socket_dir}",
                                         "-l", str(handle.log), "start"))
    except subprocess.CalledProcessError as exc:
        print(f"pg_ctl failed: {exc}", file=sys.stderr)
        return False
    finally:
        # pgserver's cleanup stops only the process it started, not a restarted one.
        with contextlib.suppress(subprocess.CalledProcessError):
            ctl("-w", "-m", "fast", "stop")
        handle.cleanup()
    return _report("postgres outages (writers while the server stops and starts)", result)


_COMMANDS = {"concurrency": _concurrency, "crash": _crash, "fuzz": _fuzz,
             "postgres": _postgres, "postgres-outage": _postgres_outage, "imports": _imports}


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv``, run the chosen checks, return the exit status."""
    parser = argparse.ArgumentParser(prog="python -m reliability", description=__doc__)
    parser.add_argument("command", choices=[*_COMMANDS, "all"])
    parser.add_argument("--processes", type=int, default=8, help="concurrency: worker processes")
    parser.add_argument("--ops", type=int, default=1000, help="concurrency: operations per worker")
    parser.add_argument("--trials", type=int, default=50, help="crash: trials")
    parser.add_argument("--max-delay", type=float, default=1.0,
                        help="crash: longest wait before the kill, seconds")
    parser.add_argument("--examples", type=int, default=10_000,
                        help="fuzz: examples per property test")
    parser.add_argument("--seed", type=int, default=0, help="seed of the operation mix and kills")
    parser.add_argument("--url", help="postgres: a server URL to create the database on "
                        "(default: a private pgserver); imports: import into a database "
                        "there too")
    parser.add_argument("--outages", type=int, default=3,
                        help="postgres-outage: how many times the server is stopped")
    parser.add_argument("--down", type=float, default=15.0,
                        help="postgres-outage: seconds the server stays down each time")
    parser.add_argument("--postgres", action="store_true",
                        help="imports: import into a PostgreSQL database too (on --url, or a "
                        "private pgserver)")
    parser.add_argument("--keep", type=Path, help="write the databases here and keep them")
    parser.add_argument("-v", "--verbose", action="store_true", help="crash: one line per trial")
    args = parser.parse_args(argv)
    chosen = ([name for name in _COMMANDS if not name.startswith("postgres")]
              if args.command == "all"
              else [args.command])
    print(f"Machine: {_machine()}\n")
    with tempfile.TemporaryDirectory(prefix="ctxslots-reliability-") as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        results = [_COMMANDS[name](args, folder) for name in chosen]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
