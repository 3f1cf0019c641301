"""Export files under harm: symbolic links, stale files of forgotten facts, other people's
eyes (file modes), a full disk and a killed process."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

import ctxslots
from ctxslots import FactStore
from ctxslots.cli import cli

SRC = str(Path(ctxslots.__file__).parents[1])
#: The export's record of the files it wrote.
MANIFEST = ".ctxslots-export.json"


def mode(path: Path) -> int:
    """The permission bits of ``path`` (not following a link)."""
    return stat.S_IMODE(os.lstat(path).st_mode)


def tree(root: Path) -> list[str]:
    """Every entry below ``root``, relative, sorted (links not followed)."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.fixture(name="filled")
def fixture_filled(store):
    """A store with global user and agent facts and a project fact in scope shop/api."""
    store.upsert("user", "editor", "The user edits code in Helix.")
    store.add("agent", "The CI cache is cold on Mondays.")
    store.add("project", "The shop deploys on Thursdays.", scope="shop/api")
    return store


# -- symbolic links ----------------------------------------------------------------


def test_a_file_link_is_refused_and_its_target_kept(filled, tmp_path):
    """out/user.md -> ../outside/keep.txt: the export raises ELOOP, keep.txt is unchanged and
    nothing else is written."""
    out, outside = tmp_path / "out", tmp_path / "outside"
    out.mkdir()
    outside.mkdir()
    (outside / "keep.txt").write_text("keep me")
    (out / "user.md").symlink_to("../outside/keep.txt")
    with pytest.raises(OSError) as caught:
        filled.export_markdown(out)
    assert caught.value.errno == 40 and "symbolic link" in str(caught.value)
    assert "keep me" == (outside / "keep.txt").read_text()
    assert ["user.md"] == tree(out)


@pytest.mark.parametrize("link", ["scopes", "scopes/shop%2Fapi"])
def test_a_directory_link_is_refused(filled, tmp_path, link):
    """A scopes/ (or scope directory) link pointing elsewhere: refused, nothing written there."""
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    (out / link).parent.mkdir(parents=True)
    elsewhere.mkdir()
    (out / link).symlink_to(elsewhere)
    with pytest.raises(OSError) as caught:
        filled.export_markdown(out)
    assert "symbolic link" in str(caught.value)
    assert [] == tree(elsewhere)
    assert not (out / "user.md").exists()


def test_the_cli_says_so_in_one_line(filled, tmp_path):
    """`ctxslots export --format markdown` into a directory holding a link: one Error line."""
    if filled.engine != "sqlite":
        pytest.skip("the CLI test runs on a file store")
    out = tmp_path / "out"
    out.mkdir()
    (out / "agent.md").symlink_to(tmp_path / "target.txt")
    result = CliRunner().invoke(cli, ["--db", str(filled.path), "export", "--format",
                                      "markdown", "-o", str(out)])
    assert 1 == result.exit_code
    assert result.output.startswith("Error: cannot write") and "symbolic link" in result.output
    assert 1 == len(result.output.strip().splitlines())
    assert not (tmp_path / "target.txt").exists()


# -- stale files ------------------------------------------------------------------------


def test_files_of_forgotten_facts_are_removed_and_not_imported_again(filled, tmp_path):
    """After forgetting the only agent fact and the scoped one, re-exporting removes agent.md and
    the scope's file; importing the directory back brings neither fact back."""
    out = tmp_path / "out"
    filled.export_markdown(out)
    assert [MANIFEST, "agent.md", "scopes", "scopes/shop%2Fapi", "scopes/shop%2Fapi/project.md",
            "user.md"] == tree(out)
    (out / "notes.md").write_text("# notes\n\n- My own notes stay.\n")
    (out / "project.md").write_text("# not the title ctxslots writes\n")
    for fact in filled.facts(slots=["agent"]) + filled.facts(slots=["project"], scope="shop/api"):
        filled.forget(fact.id)
    filled.export_markdown(out)
    assert [MANIFEST, "notes.md", "project.md", "scopes", "user.md"] == tree(out)
    assert {"files": ["user.md"]}.items() <= json.loads((out / MANIFEST).read_text()).items()
    with FactStore(":memory:") as fresh:
        for path in out.glob("*.md"):
            if path.stem in ("user", "agent"):
                fresh.import_markdown(path, slot=path.stem)
        assert ["The user edits code in Helix."] == [f.value for f in fresh.facts()]


def test_an_export_of_some_slots_leaves_the_others(filled, tmp_path):
    """--slot user removes no agent.md, and --scope leaves global files alone."""
    out = tmp_path / "out"
    filled.export_markdown(out)
    for fact in filled.facts(slots=["user", "agent"]):
        filled.forget(fact.id)
    filled.export_markdown(out, slots=["agent"], scope="shop/api")
    assert {"agent.md", "user.md"} <= set(tree(out))
    filled.export_markdown(out, slots=["agent"])
    assert "agent.md" not in tree(out) and "user.md" in tree(out)


# -- private files ----------------------------------------------------------------------


def test_exports_are_private_whatever_the_umask(filled, tmp_path):
    """Under umask 022 the directories an export creates are 0700 and its files 0600 (Markdown
    directory, one Markdown file and JSONL through the CLI)."""
    old = os.umask(0o022)
    try:
        out = tmp_path / "new" / "out"
        filled.export_markdown(out)
        dirs = [tmp_path / "new", out, out / "scopes", out / "scopes" / "shop%2Fapi"]
        assert [0o700] * 4 == [mode(d) for d in dirs]
        files = [*out.rglob("*.md"), out / MANIFEST]
        assert 4 == len(files) and {0o600} == {mode(p) for p in files}
        if filled.engine == "sqlite":
            for name in ("facts.jsonl", "all.md"):
                target = tmp_path / "cli" / name
                args = ["--db", str(filled.path), "export", "-o", str(target)]
                args += ["--format", "markdown"] if name.endswith(".md") else []
                assert 0 == CliRunner().invoke(cli, args).exit_code
                assert (0o600, 0o700) == (mode(target), mode(target.parent))
    finally:
        os.umask(old)


# -- a full disk and a killed process ------------------------------------------------------


def run_python(code: str, *args: str) -> subprocess.Popen[str]:
    """Start ``code`` in a fresh interpreter that imports this checkout."""
    env = {**os.environ, "PYTHONPATH": SRC}
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_a_full_disk_keeps_the_old_file_whole(tmp_path):
    """A write that runs out of space (a file size limit) fails with OSError; agent.md keeps
    its old content and no temporary file is left."""
    db, out = tmp_path / "memory.db", tmp_path / "out"
    with FactStore(db) as store:
        store.add("agent", "The first export.")
        store.export_markdown(out)
        for n in range(200):
            store.add("agent", f"Fact number {n} makes the next export longer than before.")
    before = (out / "agent.md").read_bytes()
    child = run_python("""
        import resource, signal, sys
        from ctxslots import FactStore
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        store = FactStore(sys.argv[1])
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
        try:
            store.export_markdown(sys.argv[2])
        except OSError as exc:
            print("failed", exc.errno)
    """, str(db), str(out))
    output, _ = child.communicate(timeout=60)
    assert "failed 27" in output  # EFBIG
    assert before == (out / "agent.md").read_bytes()
    assert [MANIFEST, "agent.md"] == tree(out)


def test_a_killed_jsonl_export_leaves_no_temporary_file(tmp_path):
    """SIGKILL at several moments of `ctxslots export -o facts.jsonl`: the directory holds the
    old file or the new one, whole, and nothing else."""
    db, out = tmp_path / "memory.db", tmp_path / "exports"
    with FactStore(db) as store:
        for start in (0, 10_000):
            with store.batch():
                for n in range(start, start + 10_000):
                    store.add("agent", f"Memory {n} of a store large enough to take a while.")
    out.mkdir()
    target = out / "facts.jsonl"
    target.write_text("old\n")
    outcomes = set()
    for delay in (0.2, 0.5, 0.8, 1.2, 2.0, 3.0):
        child = run_python("from ctxslots.cli import main; main()", "--db", str(db), "export",
                           "-o", str(target))
        time.sleep(delay)
        child.send_signal(signal.SIGKILL)
        child.communicate(timeout=60)
        assert ["facts.jsonl"] == tree(out)
        lines = target.read_text().splitlines()
        if lines != ["old"]:
            assert 20_001 == len(lines) and "ctxslots-facts" == json.loads(lines[0])["format"]
        outcomes.add(lines == ["old"])
    assert True in outcomes  # at least one kill landed before the rename


def test_without_o_tmpfile_leftovers_of_dead_processes_are_swept(filled, tmp_path, monkeypatch):
    """Where O_TMPFILE is missing a hidden temporary name is used; one left by a process that no
    longer runs is removed by the next export of that file."""
    from ctxslots import _files

    monkeypatch.setattr(_files, "_O_TMPFILE", 0)
    out = tmp_path / "out"
    out.mkdir()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    (out / f".user.md.{dead}.0a1b2c3d.tmp").write_text("torn")
    filled.export_markdown(out)
    assert "scopes" in tree(out)
    assert [MANIFEST] == [p for p in tree(out) if p.startswith(".")]
    assert 0o600 == mode(out / "user.md")


@pytest.fixture(name="tiny_disk")
def fixture_tiny_disk(tmp_path):
    """A 1 MB tmpfs (needs the right to mount; skipped elsewhere)."""
    mount = tmp_path / "tiny"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)],
                          capture_output=True, check=False)
    if done.returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=False)


def test_a_really_full_disk_keeps_old_files_and_the_store_says_so(tmp_path, tiny_disk):
    """On a 1 MB file system: an export that no longer fits leaves agent.md as it was and no
    temporary file, and a write to a store that fills the disk ends in one CLI error line."""
    db = tmp_path / "memory.db"
    with FactStore(db) as store:
        store.add("agent", "Small.")
        store.export_markdown(tiny_disk / "out")
        before = (tiny_disk / "out" / "agent.md").read_bytes()
        (tiny_disk / "filler").write_bytes(b"\0" * (1024 * 1024 - 64 * 1024))
        for n in range(2_000):
            store.add("agent", f"Fact {n} that makes the export far larger than the space left.")
        with pytest.raises(OSError) as caught:
            store.export_markdown(tiny_disk / "out")
    assert 28 == caught.value.errno  # ENOSPC
    assert before == (tiny_disk / "out" / "agent.md").read_bytes()
    assert [MANIFEST, "agent.md"] == tree(tiny_disk / "out")
    (tiny_disk / "filler").unlink()
    full_db = tiny_disk / "full.db"
    runner = CliRunner()
    assert 0 == runner.invoke(cli, ["--db", str(full_db), "remember", "agent", "First."]).exit_code
    free = os.statvfs(tiny_disk).f_bavail * os.statvfs(tiny_disk).f_frsize
    (tiny_disk / "filler").write_bytes(b"\0" * max(0, free - 4096))
    result = runner.invoke(cli, ["--db", str(full_db), "remember", "agent", "x" * 4000])
    assert 1 == result.exit_code and "Traceback" not in result.output
    assert 1 == len(result.output.strip().splitlines()) and "full" in result.output
