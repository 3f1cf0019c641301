"""Where the operating system says no: a file size limit (``ulimit -f``) a write reaches.
It gives the store's own error, loses nothing committed, and leaves the store usable."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import textwrap
from pathlib import Path

import ctxslots
from ctxslots import FactStore

SRC = str(Path(ctxslots.__file__).parents[1])
CLI = [sys.executable, "-m", "ctxslots"]
#: A file size limit below what a write of a few pages adds to the write-ahead log, and
#: above SQLite's shared-memory file (32 KiB), which opening the store makes.
FSIZE = 64 * 1024


def _python(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": SRC}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], env=env,
                          capture_output=True, text=True, timeout=120, check=False)


_OVER_THE_LIMIT = """
    import resource, signal, sys
    from ctxslots import FactStore, StoreFullError
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # as Python sets it; a write then fails
    store = FactStore(sys.argv[1], embedder=False)
    store.upsert("user", "drink", "The user likes tea.")
    _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[2]), hard))
    def adds():
        with store.batch():
            for i in range(40):
                store.add("agent", f"Lesson {i}. " + "A long lesson. " * 200)

    def upserts():
        with store.batch():
            for i in range(40):
                store.upsert("user", f"food {i}", "The user likes rice. " * 150)

    for write in (adds, upserts):
        try:
            write()
            print("written")
        except StoreFullError as exc:
            print(f"{type(exc).__name__}: {exc}")
    resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))
    store.add("agent", "Written once the limit is lifted.")
    store.close()
"""


def test_a_write_past_the_file_size_limit_is_a_store_full_error(tmp_path):
    """A write the file size limit stops raises StoreFullError naming the limit (not the
    driver's "disk I/O error"); the fact committed before stays, and once the limit is
    lifted the same store writes again and checks clean."""
    db = tmp_path / "s.db"
    done = _python(_OVER_THE_LIMIT, str(db), str(FSIZE))
    said = (f"StoreFullError: {db} cannot grow past this process's file size limit "
            "(ulimit -f); nothing was written")
    assert done.stdout.splitlines() == [said, said], done.stdout + done.stderr
    assert done.returncode == 0, done.stderr
    with FactStore(db, embedder=False) as store:
        assert store.doctor().integrity == "ok"
        assert sorted(f.value for f in store.facts()) == [
            "The user likes tea.", "Written once the limit is lifted."]


def _limit_file_size() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (FSIZE, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))


def test_an_import_past_the_file_size_limit_is_one_line_and_writes_nothing(tmp_path):
    """`ctxslots import` under `ulimit -f`: one error line, exit 1, nothing imported, and
    the store is as it was (a traceback of apsw.IOError before)."""
    db = tmp_path / "s.db"
    big = tmp_path / "big.jsonl"
    with big.open("w", encoding="utf-8") as out:
        out.write(json.dumps({"format": "ctxslots-facts", "version": 1}) + "\n")
        for i in range(500):
            out.write(json.dumps({"slot": "agent", "value": f"lesson {i} " + "lorem " * 80})
                      + "\n")
    env = {**os.environ, "PYTHONPATH": SRC}
    subprocess.run([*CLI, "--db", str(db), "remember", "user", "The user likes tea."],
                   env=env, check=True, capture_output=True)
    done = subprocess.run([*CLI, "--db", str(db), "import", str(big)], env=env,
                          capture_output=True, text=True, timeout=120, check=False,
                          preexec_fn=_limit_file_size)
    assert done.stderr.splitlines() == [
        (f"Error: {db} cannot grow past this process's file size limit (ulimit -f); "
         "nothing was written")], done.stderr
    assert done.returncode == 1
    with FactStore(db, embedder=False) as store:
        assert [f.value for f in store.facts()] == ["The user likes tea."]
        assert store.doctor().integrity == "ok"
