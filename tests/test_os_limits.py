"""Where the operating system says no: a file size limit (``ulimit -f``) a write reaches,
a memory or open file limit, a store path that is no regular file, a store file deleted or
replaced while a process has it open, a server out of descriptors. Each gives one clear
error, loses nothing committed, and leaves the store (or the server) usable."""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import socket
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import pytest
from click.testing import CliRunner

import ctxslots
from ctxslots import FactStore, MemoryTools, ReadOnlyStoreError, StoreError
from ctxslots.cli import cli

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


def _import_file(path: Path, count: int, filler: str) -> Path:
    """A JSONL import of ``count`` agent lessons, each ``filler`` long."""
    with path.open("w", encoding="utf-8") as out:
        out.write(json.dumps({"format": "ctxslots-facts", "version": 1}) + "\n")
        for i in range(count):
            out.write(json.dumps({"slot": "agent", "value": f"lesson {i} " + filler}) + "\n")
    return path


def test_an_import_past_the_file_size_limit_is_one_line_and_writes_nothing(tmp_path):
    """`ctxslots import` under `ulimit -f`: one error line, exit 1, nothing imported, and
    the store is as it was (a traceback of apsw.IOError before)."""
    db = tmp_path / "s.db"
    big = _import_file(tmp_path / "big.jsonl", 500, "lorem " * 80)
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


def _replace(db: Path, other: Path) -> None:
    """Put the store ``other`` (its file and log) where ``db`` is, as a restore does."""
    for end in ("", "-wal", "-shm"):
        if Path(f"{other}{end}").exists():
            os.replace(f"{other}{end}", f"{db}{end}")
        else:
            Path(f"{db}{end}").unlink(missing_ok=True)


@pytest.mark.parametrize("how", ["deleted", "replaced"])
def test_a_store_whose_file_is_gone_refuses_writes_and_still_reads(tmp_path, how):
    """The store's folder is deleted, or its file replaced by another store, while a
    process has it open: a write raises ReadOnlyStoreError saying so (it went into the
    unnamed old file before, and was lost at close), the memory tools answer that nothing
    was written, a search still answers with a warning, and the file now at the path holds
    only its own facts."""
    folder = tmp_path / "memory"
    db = folder / "s.db"
    store = FactStore(db, embedder=False)
    store.add("agent", "Deploys happen on Fridays.")
    if how == "deleted":
        shutil.rmtree(folder)
    else:
        other = tmp_path / "restored.db"
        with FactStore(other, embedder=False) as restored:
            restored.add("agent", "Restored from a backup.")
        _replace(db, other)
    try:
        with pytest.raises(ReadOnlyStoreError) as refused:
            store.add("agent", "Written after the file went.")
        assert str(refused.value) == (
            f"{db} was deleted or replaced by another file while this store had it open; "
            "nothing was written: open the store again (restart the program holding it)")
        answer = MemoryTools(store).dispatch("memory_store",
                                             {"slot": "agent", "value": "A lesson."})
        assert answer == "Error: the memory store is read-only; nothing was written"
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            assert [h.fact.value for h in store.search("Fridays")] == [
                "Deploys happen on Fridays."]
        assert any("was deleted or replaced" in str(w.message) for w in said)
    finally:
        store.close()
    if how == "deleted":
        assert not folder.exists()
    else:
        with FactStore(db, embedder=False) as now:
            assert [f.value for f in now.facts()] == ["Restored from a backup."]
            assert now.doctor().integrity == "ok"


_IN_A_MEMORY_LIMIT = """
    import resource, sqlite3, sys
    from ctxslots.cli import main
    mapped = int(open("/proc/self/statm").read().split()[0]) * resource.getpagesize()
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (mapped + 8 * 2**20, hard))
    main(sys.argv[1:])
"""


def test_a_command_out_of_memory_is_one_line_and_keeps_what_was_there(tmp_path):
    """A memory limit (`ulimit -v`) a command reaches, in Python's allocations or
    SQLite's: one error line and exit 1 (a MemoryError or apsw.NoMemError traceback
    before); an export leaves the old file as it was, an import writes nothing."""
    if not Path("/proc/self/statm").exists():
        pytest.skip("needs /proc to set a memory limit just above what the process maps")
    big = _import_file(tmp_path / "big.jsonl", 6000, "dolor " * 600)
    full, small, exported = tmp_path / "full.db", tmp_path / "small.db", tmp_path / "out.jsonl"
    with FactStore(full, embedder=False) as store, big.open(encoding="utf-8") as fp:
        store.import_jsonl(fp)
    with FactStore(small, embedder=False) as store:
        store.add("user", "The user likes tea.")
    exported.write_text("the export before\n", encoding="utf-8")
    said = ("Error: out of memory (this process's limit, `ulimit -v`, or the machine's): "
            "the command stopped, and a write it had begun is rolled back")
    for db, command in ((full, ["export", "-o", str(exported)]), (small, ["import", str(big)])):
        done = _python(_IN_A_MEMORY_LIMIT, "--db", str(db), *command)
        assert done.stderr.splitlines() == [said], done.stderr[-2000:]
        assert done.returncode == 1
    assert exported.read_text(encoding="utf-8") == "the export before\n"
    with FactStore(small, embedder=False) as store:
        assert [f.value for f in store.facts()] == ["The user likes tea."]
        assert store.doctor().integrity == "ok"


@pytest.mark.parametrize("kind", ["folder", "fifo", "device"])
def test_a_store_path_that_is_not_a_regular_file_is_named_so(tmp_path, kind):
    """--db naming a folder, a named pipe or a device: one line saying it is not a regular
    file (SQLite's "unable to open database file" or "disk I/O error" before)."""
    path = Path("/dev/null") if kind == "device" else tmp_path / kind
    if kind == "folder":
        path.mkdir()
    elif kind == "fifo":
        if not hasattr(os, "mkfifo"):
            pytest.skip("named pipes are POSIX only")
        os.mkfifo(path)
    env = {**os.environ, "PYTHONPATH": SRC}
    done = subprocess.run([*CLI, "--db", str(path), "list"], env=env, capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.stderr.splitlines() == [
        (f"Error: cannot open {path}: it is not a regular file (a folder, a pipe or a "
         "device); name a store file")], done.stderr
    assert done.returncode == 1


@pytest.mark.parametrize("kind", ["loop", "dangling"])
def test_a_store_path_that_is_a_link_to_nothing_is_named_so(tmp_path, kind):
    """--db naming a symbolic link that leads to no file (a loop, a target gone): one line
    saying so, where it read "no store at ...: write a fact first", as if nothing were
    there."""
    path = tmp_path / "memory.db"
    path.symlink_to(path if kind == "loop" else tmp_path / "moved-away.db")
    with pytest.raises(StoreError, match="a symbolic link that leads to no file"):
        FactStore(path, create=False)
    result = CliRunner().invoke(cli, ["--db", str(path), "stats"])
    assert result.exit_code == 1
    assert result.output == (f"Error: cannot open {path}: a symbolic link that leads to no "
                             "file (a loop, or its target is gone)\n")


_MANY_STORES = """
    import os, resource, sys
    from ctxslots import FactStore, StoreError
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (32, hard))
    first = FactStore(os.path.join(sys.argv[1], "first.db"), embedder=False)
    stores = []
    try:
        for i in range(100):
            stores.append(FactStore(os.path.join(sys.argv[1], f"s{i}.db"), embedder=False))
    except StoreError as exc:
        print(exc)
    first.add("agent", "Written with every descriptor taken.")
    for store in stores:
        store.close()
    with FactStore(os.path.join(sys.argv[1], "last.db"), embedder=False) as last:
        last.add("agent", "Written once the descriptors are back.")
    first.close()
"""


def test_opening_past_the_open_file_limit_names_the_reason(tmp_path):
    """Stores opened until RLIMIT_NOFILE runs out: the open that fails says "Too many
    open files" (only SQLite's "unable to open database file" before); a store already
    open still writes, and once others are closed a new one opens."""
    done = _python(_MANY_STORES, str(tmp_path))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 1, done.stdout
    assert re.fullmatch(rf"cannot (open|prepare) {re.escape(str(tmp_path))}/s\d+\.db: "
                        r"unable to open database file \(Too many open files\)", lines[0]), lines
    for name, value in (("first.db", "Written with every descriptor taken."),
                        ("last.db", "Written once the descriptors are back.")):
        with FactStore(tmp_path / name, embedder=False) as store:
            assert [f.value for f in store.facts()] == [value]


#: The command line run with few file descriptors (RLIMIT_NOFILE=40).
_WITH_FEW_FILES = """
import resource, sys
resource.setrlimit(resource.RLIMIT_NOFILE, (40, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
from ctxslots.cli import main
main(sys.argv[1:])
"""


def _wait_for(path: Path, pattern: str, proc: subprocess.Popen[str]) -> re.Match[str]:
    """The first match of ``pattern`` in the file ``path`` the server writes, once there."""
    deadline = time.monotonic() + 300  # a start on a busy machine
    while time.monotonic() < deadline:
        found = re.search(pattern, path.read_text(encoding="utf-8", errors="replace"))
        if found:
            return found
        assert proc.poll() is None, path.read_text(encoding="utf-8", errors="replace")
        time.sleep(0.05)
    raise AssertionError(f"no {pattern!r} in {path.read_text(encoding='utf-8')[-2000:]}")


@pytest.mark.parametrize("server", ["mcp", "ui"])
def test_a_server_out_of_file_descriptors_says_so_in_one_line_and_serves_on(tmp_path, server):
    """`ctxslots mcp --transport http` and `ctxslots ui` under RLIMIT_NOFILE=40, held more
    connections than they have descriptors: stderr gets one warning line (asyncio's
    traceback for every connection refused before: tens of thousands of lines a second,
    which wedged a server whose stderr was a pipe nobody read), and once the connections
    close the server answers again."""
    pytest.importorskip("uvicorn")
    httpx = pytest.importorskip("httpx")
    db = tmp_path / "memory.db"
    with FactStore(db, embedder=False) as store:
        store.add("agent", "Deploys happen on Fridays.")
    token = "a-token-for-the-limit-tests"
    args = (["mcp", "--transport", "http", "--port", "0"] if server == "mcp"
            else ["ui", "--port", "0", "--token", token])
    log = tmp_path / "stderr"
    env = {**os.environ, "PYTHONPATH": SRC, "CTXSLOTS_MCP_TOKEN": token}
    with log.open("w", encoding="utf-8") as err:
        proc = subprocess.Popen([sys.executable, "-c", _WITH_FEW_FILES, "--db", str(db), *args],
                                stdout=err, stderr=err, env=env)
    held: list[socket.socket] = []
    try:
        url = _wait_for(log, r"http://127\.0\.0\.1:(\d+)\S*", proc)
        for _ in range(60):
            held.append(socket.create_connection(("127.0.0.1", int(url.group(1))), timeout=10))
        _wait_for(log, "cannot accept connections for now", proc)
        for sock in held:
            sock.close()
        if server == "ui":
            answer = httpx.get(url.group(0), timeout=30)
        else:
            answer = httpx.post(url.group(0), timeout=30, json={
                "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                    "protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "limits", "version": "1"}}},
                headers={"Authorization": f"Bearer {token}",
                         "Accept": "application/json, text/event-stream"})
        assert answer.status_code == 200, answer.text
    finally:
        for sock in held:
            sock.close()
        proc.terminate()
        proc.wait(timeout=120)
    said = log.read_text(encoding="utf-8").splitlines()
    assert "Traceback (most recent call last):" not in said, said[:20]
    warned = [line for line in said if "cannot accept connections" in line]
    assert warned[0] == ("warning: cannot accept connections for now: Too many open files; "
                         "they wait until the server can take them (for too many open "
                         "files, raise `ulimit -n`)")
    assert len(warned) <= 2, said


def test_the_stdio_server_on_a_full_output_says_so_in_one_line(tmp_path):
    """`ctxslots mcp` over stdio whose standard output is /dev/full: one error line and
    exit 1 (a nested ExceptionGroup traceback of ninety lines before)."""
    pytest.importorskip("mcp")
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full here to make standard output fail")
    hello = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "limits", "version": "1"}}}) + "\n"
    env = {**os.environ, "PYTHONPATH": SRC}
    with open("/dev/full", "w", encoding="utf-8") as full:
        done = subprocess.run([*CLI, "--db", str(tmp_path / "s.db"), "mcp"], input=hello,
                              stdout=full, stderr=subprocess.PIPE, text=True, env=env,
                              timeout=60, check=False)
    assert done.stderr.splitlines() == [
        "Error: cannot write (the output): No space left on device"], done.stderr[-2000:]
    assert done.returncode == 1
