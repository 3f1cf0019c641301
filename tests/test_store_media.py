"""A store on a disk that fills up or a file system mounted read-only: the store's own
one-line errors, and nothing lost. Root ignores permissions, so these run as root in a
private mount namespace (``unshare -m``) and skip where that cannot be made."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ctxslots import FactStore

CLI = [sys.executable, "-m", "ctxslots"]


def _in_namespace(setup: str, folder: Path, script: str) -> subprocess.CompletedProcess[str]:
    """``script`` run by sh in a private mount namespace after ``setup`` mounted ``$1``
    (``folder``; the command line follows it); skipped where no such mount can be made."""
    unshare = shutil.which("unshare")
    if os.geteuid() != 0 or unshare is None:
        pytest.skip("needs root and unshare(1) to mount a private file system")
    done = subprocess.run([unshare, "-m", "sh", "-c", f"{setup} || exit 97\n{script}", "sh",
                           str(folder), *CLI], capture_output=True, text=True, timeout=600,
                          check=False)
    if done.returncode == 97 or "unshare:" in done.stderr:
        pytest.skip(f"no private mount here: {done.stderr.strip()[:200]}")
    return done


def test_reindex_of_a_store_on_a_read_only_mount_is_one_line(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    with FactStore(folder / "s.db", embedder=False) as store:
        store.add("agent", "A lesson that stays.")
    done = _in_namespace('mount --bind "$1" "$1" && mount -o remount,bind,ro "$1"', folder,
                         'db="$1/s.db"; shift; "$@" --db "$db" reindex')
    assert done.returncode == 1, done.stderr
    assert done.stderr.splitlines() == [
        f"Error: {folder / 's.db'} is read-only; nothing was written"]
    with FactStore(folder / "s.db", embedder=False) as store:
        assert [f.value for f in store.facts(slots=["agent"])] == ["A lesson that stays."]


def test_an_import_that_fills_the_disk_says_so_and_writes_nothing(tmp_path):
    big = tmp_path / "big.jsonl"
    with big.open("w", encoding="utf-8") as out:
        out.write(json.dumps({"format": "ctxslots-facts", "version": 1}) + "\n")
        for i in range(3000):
            out.write(json.dumps({"slot": "agent", "value": f"lesson {i} " + "lorem ipsum " * 40})
                      + "\n")
    folder = tmp_path / "tiny"
    folder.mkdir()
    script = (f'db="$1/s.db"; shift\n'
              '"$@" --db "$db" remember user "The user likes tea." --key drink >/dev/null || exit 98\n'
              f'"$@" --db "$db" import "{big}"; echo "rc=$?"\n'
              '"$@" --db "$db" list')
    done = _in_namespace('mount -t tmpfs -o size=600k tmpfs "$1"', folder, script)
    lines = done.stderr.splitlines()
    assert lines == [f"Error: the disk holding {folder / 's.db'} is full; nothing was written"], \
        done.stderr
    out = done.stdout.splitlines()
    assert out[0] == "rc=1"
    assert out[1:] == ["[id:1] user drink: The user likes tea. (today)", "page 1 of 1 (1 fact)"]


_FILL = """
import sys
from ctxslots import FactStore, StoreError
with FactStore(sys.argv[1], embedder=False) as store:
    try:
        for i in range(100_000):
            store.add("agent", f"lesson {i} about deploys " + "pad " * 800)
    except StoreError as exc:
        print(f"full {type(exc).__name__}: {exc}")
"""

_READ = """
import sys, warnings
from ctxslots import AssemblyRequest, FactStore, MemoryTools, PromptAssembler
with FactStore(sys.argv[1], embedder=False) as store, warnings.catch_warnings(record=True) as said:
    warnings.simplefilter("always")
    print("hits", len(store.search("deploys", limit=5)))
    print("prompt", "lesson" in PromptAssembler(store).assemble(AssemblyRequest("deploys")).text)
    print("tool", MemoryTools(store).dispatch("memory_query", {"query": "deploys"}).splitlines()[0])
    print("warned", sorted({str(w.message).split(";")[0] for w in said}))
"""


def test_searches_answer_on_a_full_disk(tmp_path):
    """The disk fills up: a search, an assembly and the query tool still answer (their
    access counts wait, with one warning), and the CLI's search exits 0."""
    folder = tmp_path / "tiny"
    folder.mkdir()
    script = (f'db="$1/s.db"; shift\n'
              f'"{sys.executable}" -c \'{_FILL}\' "$db" || exit 98\n'
              '"$@" --db "$db" search deploys --limit 2; echo "rc=$?"\n'
              f'"{sys.executable}" -c \'{_READ}\' "$db"')
    done = _in_namespace('mount -t tmpfs -o size=2m tmpfs "$1"', folder, script)
    out = done.stdout.splitlines()
    db = folder / "s.db"
    assert out[0] == f"full StoreFullError: the disk holding {db} is full; nothing was written", done.stderr
    assert "rc=0" in out and "hits 5" in out and "prompt True" in out, done.stdout + done.stderr
    assert "tool 10 memories, best first:" in out, done.stdout
    assert f"warned ['the disk holding {db} is full']" in out, done.stdout


_FILL_TWO_USERS = """
import sys
from ctxslots import FactStore, StoreError
with FactStore(sys.argv[1], embedder=False) as store:
    try:
        for i in range(100_000):
            user = "alice" if i % 2 else "bob"
            store.add("user", f"{user}-marker {i} " + "pad " * 700, user=user)
    except StoreError as exc:
        print(f"full {type(exc).__name__}")
"""

_LEFT = """
import pathlib, sys
from ctxslots import FactStore
folder = pathlib.Path(sys.argv[1])
with FactStore(folder / "s.db", embedder=False) as store:
    print("alice facts", len(store.facts(user="alice")), "bob facts", len(store.facts(user="bob")) > 0)
"""


def test_an_erasure_whose_log_cannot_be_copied_back_on_a_full_disk_says_so(tmp_path):
    """The disk fills before the log is ever copied back; with a little room freed an
    erasure commits, but the file cannot grow to take the log back: one CLI line says the
    erasure is done and the log still holds the erased pages, and once there is room the
    next command empties it."""
    folder = tmp_path / "tiny"
    folder.mkdir()
    marker = 'grep -c alice-marker "$d/s.db" "$d/s.db-wal" 2>/dev/null | awk -F: "{n+=\\$2} END {print n}"'
    script = (f'd="$1"; db="$1/s.db"; shift\n'
              'head -c 300000 /dev/zero > "$d/room"; head -c 2000000 /dev/zero > "$d/more"\n'
              f'"{sys.executable}" -c \'{_FILL_TWO_USERS}\' "$db" || exit 98\n'
              'rm "$d/room"\n'
              '"$@" --db "$db" erase --user alice --yes; echo "rc=$?"\n'
              f'"{sys.executable}" -c \'{_LEFT}\' "$d"\n'
              'rm "$d/more"\n'
              '"$@" --db "$db" stats >/dev/null || exit 99\n'
              f'echo "left $({marker})"')
    done = _in_namespace('mount -t tmpfs -o size=4m tmpfs "$1"', folder, script)
    db = folder / "s.db"
    assert done.stderr.splitlines() == [
        (f"Error: the disk holding {db} is full: the erasure is done, but the write-ahead log "
         "still holds the erased rows' earlier pages; free some space, and the next erasure, "
         "or the last connection to the store as it closes, empties it")], done.stderr
    assert done.stdout.splitlines() == ["full StoreFullError", "rc=1",
                                        "alice facts 0 bob facts True", "left 0"], done.stdout
