"""README.md's and docs/'s examples run, in order, and print what they say they print.

Each page runs in a fresh temporary directory (also its ``$HOME`` and data
directory, so the default store lands there too):

- ``python`` blocks run in one namespace per page, in order;
- ``console`` (``shell``, ``bash``, ``sh``) blocks run line by line (a trailing
  ``\\`` continues a line); a ``ctxslots ...`` line without shell operators runs
  in this process through click, any other line through ``bash``. In a block
  whose lines start with ``$ ``, only those are commands and the lines after
  one are its expected output;
- an ``output`` block right after a code block is what that block prints
  (stdout and stderr as a terminal shows them); ``...`` stands for any text.

An HTML comment right before a block tells the runner more (a reader does not
see it):

- ``<!-- test: skip REASON -->``: not run (installs, long-running servers, a
  synopsis with placeholders, examples needing a hosted model);
- ``<!-- test: write FILE -->``: the block's text is written to ``FILE``;
- ``<!-- test: llm-reply JSON -->``: what the model answers the next request
  (several before one block: the block's requests, in order).
  Every page has a :class:`~ctxslots.testing.ScriptedChatServer` answering
  the page's replies in order; ``http://127.0.0.1:8080/v1`` in an example
  stands for it (and ``$CTXSLOTS_LLM_BASE_URL`` points at it);
- ``<!-- test: exit N -->``: the block's last command exits with status N.

A page added under docs/ is picked up with no change here.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import attrs
import pytest
from click.testing import CliRunner

import ctxslots
from ctxslots.cli import cli
from ctxslots.testing import ScriptedChatServer

ROOT = Path(__file__).resolve().parents[1]
PAGES = ["README.md", *sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md"))]

#: The model server an example names; the runner puts its scripted server there.
EXAMPLE_BASE_URL = "http://127.0.0.1:8080/v1"

_RUNNABLE = {"python": "python", "console": "shell", "shell": "shell", "bash": "shell", "sh": "shell"}
_DIRECTIVE = re.compile(r"^<!--\s*test:\s*(.*?)\s*-->$")
_FENCE = re.compile(r"^(`{3,}|~{3,})\s*([\w-]*)")


@attrs.frozen
class Block:
    """One fenced block of a page.

    Attributes:
        line: Its first line (1-based) in the page.
        lang: The info string's first word.
        text: Its content.
        directives: The ``<!-- test: ... -->`` comments right before it.
        output: The ``output`` block right after it, if any.
    """

    line: int
    lang: str
    text: str
    directives: tuple[str, ...] = ()
    output: str | None = None

    def directive(self, name: str) -> str | None:
        """The argument of directive ``name`` (``""`` when it has none), or ``None``."""
        for d in self.directives:
            word, _, rest = d.partition(" ")
            if word == name:
                return rest.strip()
        return None

    def directives_named(self, name: str) -> list[str]:
        """The arguments of every directive ``name``, in order."""
        return [rest.strip() for word, _, rest in (d.partition(" ") for d in self.directives)
                if word == name]


def read_blocks(text: str) -> list[Block]:
    """The fenced blocks of a markdown page, with their directives and expected output."""
    lines = text.splitlines()
    blocks: list[Block] = []
    pending: list[str] = []
    gap_since_block = True
    i = 0
    while i < len(lines):
        line = lines[i]
        fence = _FENCE.match(line)
        if fence is None:
            directive = _DIRECTIVE.match(line.strip())
            if directive:
                pending.append(directive.group(1))
            elif line.strip():
                pending = []
                gap_since_block = True
            i += 1
            continue
        marker, lang = fence.group(1), fence.group(2)
        start = i + 1
        i += 1
        while i < len(lines) and lines[i].strip() != marker:
            i += 1
        content = "\n".join(lines[start:i]) + "\n"
        i += 1
        if lang == "output" and blocks and not gap_since_block and not pending:
            blocks[-1] = attrs.evolve(blocks[-1], output=content)
        else:
            blocks.append(Block(start, lang, content, tuple(pending)))
        pending = []
        gap_since_block = False
    return blocks


def matches(expected: str, actual: str) -> bool:
    """Whether ``actual`` reads as ``expected``, ``...`` matching any text (line ends trimmed)."""
    def norm(text: str) -> str:
        return "\n".join(line.rstrip() for line in text.strip("\n").splitlines())

    lines = norm(expected).split("\n")
    pattern = ""
    for n, line in enumerate(lines):
        if line == "...":  # a line of its own: any number of lines, none included
            pattern += ".*?" if len(lines) == 1 else "(?:.*?\n)?" if n == 0 else "(?:\n.*?)?"
            continue
        if n and not (n == 1 and lines[0] == "..."):
            pattern += "\n"
        pattern += ".*?".join(re.escape(part) for part in line.split("..."))
    return re.fullmatch(pattern, norm(actual), flags=re.DOTALL) is not None


def _commands(text: str) -> list[tuple[str, str | None]]:
    """``(command, expected output or None)`` of a console block."""
    joined = re.sub(r"\s*\\\n\s*", " ", text)
    lines = joined.splitlines()
    if not any(line.startswith("$ ") for line in lines):
        return [(line, None) for line in lines if line.strip() and not line.lstrip().startswith("#")]
    commands: list[tuple[str, list[str]]] = []
    for line in lines:
        if line.startswith("$ "):
            commands.append((line[2:], []))
        elif commands:
            commands[-1][1].append(line)
    return [(cmd, "\n".join(out) if any(o.strip() for o in out) else None) for cmd, out in commands]


def _in_process(command: str) -> list[str] | None:
    """The arguments of a ``ctxslots`` command click can run here, or ``None`` for bash."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    tokens = list(lexer)
    if not tokens or tokens[0] != "ctxslots" or any(set(t) <= set("();<>|&") for t in tokens):
        return None
    return tokens[1:]


@attrs.define
class PageRunner:
    """Runs one page's blocks in a directory, with a scripted model server."""

    page: str
    workdir: Path
    server: ScriptedChatServer
    bindir: Path
    namespace: dict[str, object] = attrs.Factory(lambda: {"__name__": "__docs__"})

    def run(self, block: Block) -> str:
        """Run ``block``; return what it printed."""
        where = f"{self.page}:{block.line}"
        text = block.text.replace(EXAMPLE_BASE_URL, self.server.base_url)
        if _RUNNABLE[block.lang] == "python":
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                exec(compile(text, where, "exec"), self.namespace)  # noqa: S102 - the docs' own code
            return out.getvalue()
        exit_code = block.directive("exit")
        commands = _commands(text)
        printed = []
        for n, (command, expected) in enumerate(commands):
            wanted = int(exit_code) if exit_code and n == len(commands) - 1 else 0
            status, output = self._shell(command)
            assert wanted == status, f"{where}: `{command}` exited {status}:\n{output}"
            if expected is not None:
                assert matches(expected, output), f"{where}: `{command}` printed:\n{output}"
            printed.append(output)
        return "".join(printed)

    def _shell(self, command: str) -> tuple[int, str]:
        args = _in_process(command)
        if args is not None:
            result = CliRunner().invoke(cli, args, prog_name="ctxslots", catch_exceptions=False)
            return result.exit_code, result.output
        env = {**os.environ, "PATH": f"{self.bindir}{os.pathsep}{os.environ.get('PATH', '')}"}
        done = subprocess.run(["bash", "-c", command], check=False, cwd=self.workdir, env=env,
                              text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              timeout=120)
        return done.returncode, done.stdout


def _ctxslots_script(bindir: Path) -> None:
    """A ``ctxslots`` command on PATH that runs the code under test with this Python."""
    bindir.mkdir()
    script = bindir / "ctxslots"
    source_root = Path(ctxslots.__file__).resolve().parents[1]
    script.write_text(f'#!/bin/sh\nPYTHONPATH={shlex.quote(str(source_root))} '
                      f'exec {shlex.quote(sys.executable)} -m ctxslots "$@"\n')
    script.chmod(0o755)


@pytest.fixture(name="page_env")
def fixture_page_env(tmp_path, monkeypatch):
    workdir = tmp_path / "work"
    workdir.mkdir()
    monkeypatch.chdir(workdir)
    monkeypatch.setenv("HOME", str(workdir))
    monkeypatch.setenv("XDG_DATA_HOME", str(workdir / ".local" / "share"))
    for name in ("CTXSLOTS_DB", "CTXSLOTS_EMBEDDER", "CTXSLOTS_EMBED_BASE_URL", "CTXSLOTS_LLM_MODEL",
                 "CTXSLOTS_LOAD_PLUGINS", "OPENAI_API_KEY", "CTXSLOTS_LLM_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    _ctxslots_script(tmp_path / "bin")
    return workdir, tmp_path / "bin"


@pytest.mark.parametrize("page", PAGES)
def test_page_examples_run_and_print_what_they_claim(page, page_env, monkeypatch):
    """Every runnable block of the page runs in order and prints its ``output`` block."""
    workdir, bindir = page_env
    blocks = read_blocks((ROOT / page).read_text(encoding="utf-8"))
    replies = [r for b in blocks for r in b.directives_named("llm-reply")]
    with ScriptedChatServer(replies) as server:
        monkeypatch.setenv("CTXSLOTS_LLM_BASE_URL", server.base_url)
        runner = PageRunner(page, workdir, server, bindir)
        for block in blocks:
            target = block.directive("write")
            if block.directive("skip") is not None:
                continue
            if target:
                (workdir / target).parent.mkdir(parents=True, exist_ok=True)
                (workdir / target).write_text(block.text, encoding="utf-8")
                continue
            if block.lang not in _RUNNABLE:
                continue
            printed = runner.run(block)
            if block.output is not None:
                assert matches(block.output, printed), (
                    f"{page}:{block.line} printed:\n{printed}\nexpected:\n{block.output}")
        assert len(replies) == len(server.requests), f"{page}: scripted replies left unused"


def test_the_runner_reads_directives_outputs_and_prompts():
    """Directives attach to the next block, an output block to the one before, ``$`` lines are commands."""
    page = ("<!-- test: write chat.jsonl -->\n```jsonl\n{}\n```\n\ntext\n\n"
            "<!-- test: exit 1 -->\n```console\nctxslots get 9\n```\n```output\nError: ...\n```\n"
            "```console\n$ ctxslots stats\n3 facts\n$ echo a \\\n  b\n```\n")
    blocks = read_blocks(page)
    assert [("jsonl", "chat.jsonl"), ("console", None), ("console", None)] == [
        (b.lang, b.directive("write")) for b in blocks]
    assert ("1", "Error: ...\n") == (blocks[1].directive("exit"), blocks[1].output)
    assert [("ctxslots stats", "3 facts"), ("echo a b", None)] == _commands(blocks[2].text)
    assert _in_process("ctxslots --db x.db get 1  # a comment") == ["--db", "x.db", "get", "1"]
    assert _in_process("ctxslots export | head") is None
    two = read_blocks('<!-- test: llm-reply "a" -->\n<!-- test: llm-reply {"b": 1} -->\n'
                      "```python\npass\n```\n")
    assert ['"a"', '{"b": 1}'] == two[0].directives_named("llm-reply")


def test_output_matching_allows_ellipses_and_nothing_else():
    """``...`` matches any text; anything else must be the same, but for trailing spaces."""
    assert matches("[id:1] user ...\n", "[id:1] user The user edits code.  \n\n")
    assert matches("a\n...\nz", "a\nb\nc\nz")
    assert not matches("[id:1] user", "[id:2] user")
    assert not matches("a", "a\nb")
    # A line of dots alone stands for any number of lines, none included.
    assert matches("a\nb\n...", "a\nb\n")
    assert matches("a\nb\n...", "a\nb\nc\nd")
    assert matches("...\nz", "z")
    assert matches("...\nz", "x\ny\nz")
    assert matches("a\n...\nz", "a\nz")
    assert not matches("a\nb\n...", "a\nc")
    assert not matches("a\n...\nz", "a\nzz")


#: A dotted name in the package, as a page gives it (``ctxslots.plugins.load_plugins``).
_DOTTED = re.compile(r"(?<![\w.])ctxslots(?:\.[A-Za-z_]\w*)+")


def _logger_names() -> set[str]:
    """The loggers the package writes to by a name of their own (a page may name one)."""
    source = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "src").rglob("*.py"))
    return set(re.findall(r'getLogger\("(ctxslots[\w.]*)"\)', source))


def _found(dotted: str) -> bool:
    """Whether ``dotted`` is a module of the package, or a name in one."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        module = ".".join(parts[:cut])
        try:
            found: object = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:  # the module exists but needs a package not installed
                raise
            continue
        break
    for name in parts[cut:]:
        if not hasattr(found, name):
            return False
        found = getattr(found, name)
    return True


@pytest.mark.parametrize("page", PAGES)
def test_every_dotted_name_a_page_gives_is_found_there(page):
    """Each ``ctxslots.module.name`` in a page's code spans imports: a reader copying it
    finds the name where the page says (the name of one of the package's loggers aside)."""
    text = (ROOT / page).read_text(encoding="utf-8")
    dotted = {m for span in re.findall(r"`([^`\n]+)`", text) for m in _DOTTED.findall(span)}
    missing = sorted(dotted - _logger_names() - {d for d in dotted if _found(d)})
    assert [] == missing


def test_every_variable_the_code_reads_is_documented_and_every_documented_one_is_read():
    """CTXSLOTS_LLM_CLIENT, CTXSLOTS_LLM_BASE_URL and CTXSLOTS_LLM_MODEL were read by
    ``ctxslots flush`` and named on no page: an operator configuring through the
    environment could not learn of them."""
    pattern = re.compile(r"\bCTXSLOTS_[A-Z_]*[A-Z]\b")
    read = {name for path in (ROOT / "src" / "ctxslots").rglob("*.py")
            for name in pattern.findall(path.read_text(encoding="utf-8"))}
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    documented = {name for page in pages
                  for name in pattern.findall(page.read_text(encoding="utf-8"))}
    tests = {name for path in (ROOT / "tests").glob("*.py")
             for name in pattern.findall(path.read_text(encoding="utf-8"))}
    assert {"CTXSLOTS_DB", "CTXSLOTS_LLM_MODEL"} <= read
    assert [] == sorted(read - documented)
    assert [] == sorted(documented - read - tests)
