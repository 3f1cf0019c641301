"""The SQLite store file under harm: private permissions, read-only files, dropped tables, triggers and indexes."""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from click.testing import CliRunner

from _powers import ordinary_child, run_on_read_only_file
from _sql import raw
from ctxslots import FactStore, StoreError
from ctxslots.cli import cli


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_new_stores_are_private_to_their_owner(tmp_path):
    """A new store's directory is 0700 and its database, WAL and SHM files 0600, whatever the umask."""
    old = os.umask(0o022)
    try:
        path = tmp_path / "new" / "dir" / "memory.db"
        with FactStore(path) as store:
            store.add("agent", "A personal fact.")
            files = [path, Path(f"{path}-wal"), Path(f"{path}-shm")]
            assert all(p.exists() for p in files)
            assert [0o600] * 3 == [_mode(p) for p in files]
        assert 0o700 == _mode(path.parent)
    finally:
        os.umask(old)


def test_reading_commands_do_not_create_a_store(tmp_path):
    """create=False refuses a missing store naming the path, and creates nothing."""
    path = tmp_path / "nowhere" / "memory.db"
    with pytest.raises(StoreError, match=str(path)):
        FactStore(path, create=False)
    assert not path.parent.exists()


CHILD = """
import sys, warnings
from ctxslots import FactStore, ReadOnlyStoreError
warnings.simplefilter("always")
with FactStore(sys.argv[1], create=False, access_writes=sys.argv[2]) as store:
    print([h.fact.value for h in store.search("vpn token")])
    print([h.fact.value for h in store.search("vpn token")])
    try:
        store.add("agent", "Never written.")
    except ReadOnlyStoreError as exc:
        print("refused:", exc)
"""


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX file permissions")
@pytest.mark.parametrize("access_writes", ["inline", "background"])
def test_a_read_only_store_answers_searches_and_refuses_writes(tmp_path, access_writes):
    """A file its user may not write: searches answer (one warning, no access counted),
    writes are refused; with counts written inline or in the background.

    The child runs as this user with every capability dropped (root's too), so the file's
    mode bits hold for it and it runs the same Python as the tests, wherever that lives.
    """
    ordinary_child()  # skips, with the reason, where permissions cannot hold
    path = tmp_path / "read-only" / "memory.db"
    path.parent.mkdir()
    with FactStore(path) as store:
        fact = store.add("agent", "The VPN needs a fresh token.")
    done = run_on_read_only_file(path, ["-c", CHILD, str(path), access_writes])
    assert 0 == done.returncode, done.stderr
    lines = done.stdout.splitlines()
    assert ["['The VPN needs a fresh token.']"] * 2 == lines[:2]
    assert lines[2].startswith("refused:") and "read-only" in lines[2]
    assert 1 == done.stderr.count("accesses are not counted")
    with FactStore(path) as store:
        assert 0 == store.get(fact.id).access_count
        assert 1 == len(store.facts())


#: Two batches of counts refused one after the other, as when a search queues its counts
#: before the background writer has met the first refusal.
REFUSED_TWICE = """
import sys, warnings
from ctxslots import ReadOnlyStoreError
from ctxslots.stores.engines import open_backend
from ctxslots.stores.writes.access_writer import AccessWriter
warnings.simplefilter("always")
writer = AccessWriter(lambda: open_backend(sys.argv[1], create=False, vector_cache=False))
backend = open_backend(sys.argv[1], create=False, vector_cache=False)
for _ in range(2):
    try:
        writer._write(backend, [([1], 0.0)])
    except ReadOnlyStoreError:
        print("refused")
writer.close()
backend.close()
"""


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX file permissions")
def test_counts_refused_twice_in_the_background_are_said_once(tmp_path):
    """The background writer warns of a read-only store once, however many of the batches
    queued before it knew are refused."""
    ordinary_child()  # skips, with the reason, where permissions cannot hold
    path = tmp_path / "read-only" / "memory.db"
    path.parent.mkdir()
    with FactStore(path) as store:
        store.add("agent", "The VPN needs a fresh token.")
    done = run_on_read_only_file(path, ["-c", REFUSED_TWICE, str(path)])
    assert 0 == done.returncode, done.stderr
    assert ["refused", "refused"] == done.stdout.splitlines()
    assert 1 == done.stderr.count("accesses are not counted")


@pytest.mark.parametrize("drop", [
    "DROP TABLE facts_fts", "DROP TRIGGER facts_ai", "DROP TRIGGER facts_log_au",
    "DROP INDEX facts_owner_key", "DROP TABLE archive_fts"])
def test_doctor_finds_a_dropped_derived_object_and_reindex_rebuilds_it(db_path, drop):
    """Each missing FTS table, trigger or index is reported; reindex recreates it and search works again."""
    with FactStore(db_path) as store:
        before = store.add("agent", "The staging VPN rotates its keys weekly.")
    conn = raw(store)
    conn.execute(drop)
    conn.close()
    with FactStore(db_path) as store:
        report = store.doctor()
        assert not report.ok and "run `ctxslots reindex`" in report.problems[0]
        store.reindex()
        assert store.doctor().ok
        after = store.add("agent", "The billing VPN rotates nothing.")
        assert {before.id, after.id} == {h.fact.id for h in store.search("vpn rotates")}


def test_a_dropped_facts_table_is_said_plainly(db_path):
    """Without the facts table doctor says the facts are gone and reindex fails in one clear error."""
    with FactStore(db_path) as store:
        store.add("agent", "Soon gone.")
    conn = raw(store)
    conn.execute("DROP TABLE facts")
    conn.close()
    result = CliRunner().invoke(cli, ["--db", str(db_path), "doctor"])
    assert 1 == result.exit_code and "the facts themselves are gone" in result.output
    result = CliRunner().invoke(cli, ["--db", str(db_path), "reindex"])
    assert 0 != result.exit_code and "Traceback" not in result.output
    assert 1 == len(result.output.strip().splitlines())


@pytest.mark.parametrize("ending", ["-wal", "-shm", "-journal"])
def test_a_store_named_as_another_stores_log_is_refused(tmp_path, ending):
    """SQLite deletes or rewrites memory.db-wal when it opens memory.db: a store of that name
    would lose its facts the next time its neighbour opens. It is refused, nothing made."""
    beside = tmp_path / f"memory.db{ending}"
    with pytest.raises(StoreError, match=r"named as the .* file of the store .*memory\.db"):
        FactStore(beside)
    assert not beside.exists()
    result = CliRunner().invoke(cli, ["--db", str(beside), "remember", "user", "Tea."])
    assert 1 == result.exit_code and 1 == len(result.output.splitlines()), result.output
    assert not beside.exists()


#: Every reading command, then a write, through the CLI; each one's exit code and output.
COMMANDS = """
import sys
from click.testing import CliRunner
from ctxslots.cli import cli
for command in (["search", "vpn token"], ["doctor"], ["stats"], ["export"],
                ["remember", "agent", "Never written."]):
    result = CliRunner().invoke(cli, ["--db", sys.argv[1], *command])
    print(command[0], result.exit_code, (result.output.strip().splitlines() or [""])[-1])
"""


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX file permissions")
def test_a_writable_file_in_a_read_only_folder_is_read_and_refuses_writes(tmp_path):
    """A file its user may write, in a folder they may not (where SQLite must make the
    write-ahead log's files): the store opens read-only, searches answer and a write is
    refused naming the folder; the same through every reading command of the CLI."""
    ordinary_child()  # skips, with the reason, where permissions cannot hold
    path = tmp_path / "read-only" / "memory.db"
    path.parent.mkdir()
    with FactStore(path) as store:
        store.add("agent", "The VPN needs a fresh token.")
    assert ["memory.db"] == os.listdir(path.parent)
    done = run_on_read_only_file(path, ["-c", CHILD, str(path), "inline"], file_too=False)
    assert 0 == done.returncode, done.stderr
    lines = done.stdout.splitlines()
    assert ["['The VPN needs a fresh token.']"] * 2 == lines[:2]
    assert lines[2].startswith("refused:") and f"may not write the folder {path.parent}" \
        in lines[2]
    done = run_on_read_only_file(path, ["-c", COMMANDS, str(path)], file_too=False)
    assert 0 == done.returncode, done.stderr
    said = {line.split()[0]: line for line in done.stdout.splitlines()}
    assert ["search", "doctor", "stats", "export", "remember"] == list(said)
    for command in ("search", "doctor", "stats", "export"):
        assert said[command].startswith(f"{command} 0 "), said[command]
    assert said["remember"].startswith("remember 1 Error: ") \
        and f"may not write the folder {path.parent}" in said["remember"]
    with FactStore(path) as store:
        assert ["The VPN needs a fresh token."] == [f.value for f in store.facts()]


SEARCH = """
import sys, warnings
from ctxslots import FactStore
warnings.simplefilter("ignore")
with FactStore(sys.argv[1], create=False) as store:
    print(sorted(h.fact.value for h in store.search("vpn")))
"""


@contextmanager
def _new_fact_in_the_log(path: Path) -> Iterator[None]:
    """A store at ``path`` (its folder made) holding an old fact in the file and a new one
    only in the write-ahead log of a writer kept open for the block."""
    path.parent.mkdir()
    with FactStore(path) as store:
        store.add("agent", "The old VPN token.")
    with FactStore(path) as writer:
        writer.add("agent", "The new VPN token.")
        yield


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX file permissions")
def test_a_read_only_store_another_process_writes_is_read_through_its_log(tmp_path):
    """A file its user may not write while another process holds it open: the facts that
    process wrote since its last checkpoint, still only in the write-ahead log, are read."""
    ordinary_child()  # skips, with the reason, where permissions cannot hold
    path = tmp_path / "read-only" / "memory.db"
    with _new_fact_in_the_log(path):
        assert os.path.getsize(f"{path}-wal") > 0
        done = run_on_read_only_file(path, ["-c", SEARCH, str(path)])
    assert 0 == done.returncode, done.stderr
    assert ["['The new VPN token.', 'The old VPN token.']"] == done.stdout.splitlines()


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX file permissions")
def test_a_log_that_cannot_be_read_in_a_read_only_folder_names_the_folder(tmp_path):
    """A write-ahead log left beside the file without its -shm file, in a folder its user
    may not write: SQLite cannot read the log, and the error says so and names the folder
    (reading the file alone could miss the facts in the log)."""
    ordinary_child()  # skips, with the reason, where permissions cannot hold
    path = tmp_path / "read-only" / "memory.db"
    with _new_fact_in_the_log(path):
        shm = Path(f"{path}-shm")
        kept = shm.read_bytes()
        shm.unlink()
        try:
            done = run_on_read_only_file(path, ["-c", COMMANDS, str(path)], file_too=False)
        finally:
            shm.write_bytes(kept)
    assert 0 == done.returncode, done.stderr
    for line in done.stdout.splitlines():
        assert " 1 Error: cannot read " in line and f"read-only folder {path.parent}" in line


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX file permissions")
def test_a_log_this_user_may_not_read_is_named_rather_than_the_folder(tmp_path):
    """The write-ahead log's files are there but this user may not read them (another
    user's, 0600 as SQLite makes them): the error names those files, not the folder."""
    ordinary_child()  # skips, with the reason, where permissions cannot hold
    path = tmp_path / "read-only" / "memory.db"
    with _new_fact_in_the_log(path):
        log = [Path(f"{path}-wal"), Path(f"{path}-shm")]
        for part in log:
            part.chmod(0)
        try:
            done = run_on_read_only_file(path, ["-c", COMMANDS, str(path)], file_too=False)
        finally:
            for part in log:
                part.chmod(0o600)
    assert 0 == done.returncode, done.stderr
    for line in done.stdout.splitlines():
        assert " 1 Error: cannot read " in line, line
        assert f"this user may not read {path}-wal and {path}-shm" in line, line
        assert "read-only folder" not in line, line


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX file permissions")
def test_a_read_only_store_from_a_newer_ctxslots_says_to_upgrade_ctxslots(tmp_path):
    """A read-only file written by a newer ctxslots is refused as a writable one is, by
    telling to upgrade ctxslots (it was told to open the file where it can be written,
    which is refused in turn); the file is left as it was."""
    from ctxslots.stores.sqlite._connect import open_connection
    from ctxslots.stores.sqlite._migrations import SCHEMA_VERSION

    ordinary_child()  # skips, with the reason, where permissions cannot hold
    path = tmp_path / "read-only" / "memory.db"
    path.parent.mkdir()
    with FactStore(path) as store:
        store.add("agent", "The VPN needs a fresh token.")
    conn = open_connection(path, migrate=False)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    before = path.read_bytes()
    done = run_on_read_only_file(path, ["-m", "ctxslots", "--db", str(path), "search", "VPN"])
    assert 1 == done.returncode
    said = (f"Error: {path} has schema version {SCHEMA_VERSION + 1}, newer than the "
            f"{SCHEMA_VERSION} this ctxslots understands; upgrade ctxslots")
    assert [said] == done.stderr.splitlines()
    assert before == path.read_bytes()
