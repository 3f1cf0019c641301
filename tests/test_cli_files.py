"""Files the command writes for a person (a prompt dump, the demo's store and page, a new store's
folders) are private whatever the umask, and never written through a symbolic link."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from click.testing import CliRunner

from ctxslots import FactStore
from ctxslots.cli import cli

pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX file modes and links")


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@contextmanager
def umask(mask: int) -> Iterator[None]:
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def _run(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


@pytest.fixture(name="filled")
def fixture_filled(db_path):
    with FactStore(db_path) as store:
        store.upsert("user", "editor", "The user edits code in Helix.")
    return db_path


@pytest.mark.parametrize("mask", [0o000, 0o022, 0o277], ids=["umask-000", "umask-022", "umask-277"])
@pytest.mark.parametrize("fmt", ["html", "json", "markdown"])
def test_a_dump_file_is_private_whatever_the_umask(filled, tmp_path, mask, fmt):
    """assemble --dump -o FILE writes FILE 0600 (not 0666 under umask 000, nor 0400 under 277),
    and its folders 0700."""
    out = tmp_path / "dumps" / "deep" / f"why.{fmt}"
    with umask(mask):
        result = _run("--db", str(filled), "assemble", "who am I", "--dump", fmt, "-o", str(out))
    assert 0 == result.exit_code, result.output
    assert "Helix" in out.read_text(encoding="utf-8")
    assert (0o600, 0o700, 0o700) == (_mode(out), _mode(out.parent), _mode(out.parent.parent))


def test_a_dump_over_an_existing_file_makes_it_private(filled, tmp_path):
    """An older dump left world-readable is replaced by a private one."""
    out = tmp_path / "why.html"
    out.write_text("old")
    out.chmod(0o644)
    assert 0 == _run("--db", str(filled), "assemble", "x", "--dump", "html", "-o", str(out)).exit_code
    assert 0o600 == _mode(out) and "old" != out.read_text()


def test_a_dump_never_writes_through_a_symbolic_link(filled, tmp_path):
    """A link at FILE is refused in one line; what it points at is left as it was."""
    target = tmp_path / "precious.txt"
    target.write_text("keep me")
    target.chmod(0o644)
    link = tmp_path / "why.html"
    link.symlink_to(target)
    result = _run("--db", str(filled), "assemble", "x", "--dump", "html", "-o", str(link))
    assert 1 == result.exit_code
    assert [(f"Error: cannot write {link}: is a symbolic link: ctxslots never writes a file "
             "through one (remove the link, or write elsewhere)")] == result.output.splitlines()
    assert ("keep me", 0o644) == (target.read_text(), _mode(target)) and link.is_symlink()


@pytest.mark.parametrize("mask", [0o000, 0o022], ids=["umask-000", "umask-022"])
def test_the_demo_folder_store_and_page_are_private(tmp_path, mask):
    """demo --db-dir creates each missing folder 0700, and the store and dump.html 0600."""
    folder = tmp_path / "a" / "b"
    with umask(mask):
        result = _run("demo", "--db-dir", str(folder))
    assert 0 == result.exit_code, result.output
    assert [0o700, 0o700] == [_mode(tmp_path / "a"), _mode(folder)]
    assert [0o600, 0o600] == [_mode(folder / "demo.db"), _mode(folder / "dump.html")]


def test_the_demo_never_writes_its_page_through_a_link(tmp_path):
    """A link where dump.html goes is refused in one line; its target is untouched."""
    target = tmp_path / "elsewhere.txt"
    target.write_text("keep me")
    folder = tmp_path / "demo"
    folder.mkdir()
    (folder / "dump.html").symlink_to(target)
    result = _run("demo", "--db-dir", str(folder))
    assert 1 == result.exit_code
    assert result.output.splitlines()[-1] == (
        f"Error: cannot write {folder / 'dump.html'}: is a symbolic link: ctxslots never writes "
        "a file through one (remove the link, or write elsewhere)")
    assert "keep me" == target.read_text()


@pytest.mark.parametrize("mask", [0o000, 0o022], ids=["umask-000", "umask-022"])
def test_folders_made_on_the_way_to_a_new_store_are_0700(tmp_path, mask):
    """remember into a store three new folders deep: every folder made is 0700, the file 0600."""
    db = tmp_path / "x" / "y" / "z" / "memory.db"
    with umask(mask):
        assert 0 == _run("--db", str(db), "remember", "user", "hello").exit_code
    made = [tmp_path / "x", tmp_path / "x" / "y", db.parent]
    assert [0o700] * 3 == [_mode(p) for p in made]
    assert 0o600 == _mode(db)
