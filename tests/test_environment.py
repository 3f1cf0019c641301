"""Environments other than a developer's laptop: a container user with no home directory,
file names that are not UTF-8, an optimised interpreter, an HTTP proxy in the environment."""

from __future__ import annotations

import html
import json
import os
import pwd
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CLI = [sys.executable, "-m", "ctxslots"]


def _homeless_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("HOME", "CTXSLOTS_DB", "CTXSLOTS_CACHE_DIR") and not k.startswith("XDG_")}
    return env


def _run_homeless(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``args`` run as a user id with no account entry and no ``HOME``, as a container run
    with ``--user 4242`` is (a user namespace maps this process's user to it)."""
    unshare = shutil.which("unshare")
    uid = next(n for n in range(4242, 70000) if not _has_account(n))
    if unshare is None:
        pytest.skip("needs unshare(1) to run as a user with no account entry")
    done = subprocess.run([unshare, "-U", f"--map-user={uid}", f"--map-group={uid}", *args],
                          cwd=cwd, env=_homeless_env(), capture_output=True, text=True,
                          timeout=600, check=False)
    if "unshare:" in done.stderr:
        pytest.skip(f"no user namespace here: {done.stderr.strip()[:200]}")
    return done


def _has_account(uid: int) -> bool:
    try:
        pwd.getpwuid(uid)
    except KeyError:
        return False
    return True


_ASSEMBLE = """
import sys
from ctxslots import AssemblyRequest, FactStore, PromptAssembler
with FactStore(sys.argv[1]) as store:
    store.upsert("user", "editor", "The user edits code in Helix.")
    print(PromptAssembler(store).assemble(AssemblyRequest("which editor?")).text)
"""


def test_a_user_with_no_home_directory_assembles_and_counts_tokens(tmp_path):
    """With no HOME and no account entry there is no cache directory: tokens are counted
    without one, and an assembly, in Python or from the command line, answers."""
    done = _run_homeless([sys.executable, "-c", _ASSEMBLE, str(tmp_path / "m.db")], tmp_path)
    assert done.returncode == 0, done.stderr
    assert "- The user edits code in Helix." in done.stdout
    done = _run_homeless([*CLI, "--db", str(tmp_path / "m.db"), "assemble", "which editor?"],
                         tmp_path)
    assert (done.returncode, done.stderr) == (0, "")
    assert "- The user edits code in Helix." in done.stdout


def test_a_user_with_no_home_directory_is_told_to_name_the_store(tmp_path):
    """Without --db, CTXSLOTS_DB or a home directory there is no default store: one line
    says what to set, and nothing is created."""
    done = _run_homeless([*CLI, "remember", "user", "The user likes tea."], tmp_path)
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        ("Error: no home directory to keep the default store in (HOME is not set, and this "
         "user has no account entry): set CTXSLOTS_DB or give the store's path")]
    assert list(tmp_path.iterdir()) == []


_CACHE = """
import html
import json
import os
os.umask(0)
from ctxslots.tokens import ENCODINGS
from ctxslots.tokens._bpe import read_ranks
from ctxslots.tokens._rank_table import load_table
name = "cl100k_base"
sha = ENCODINGS[name].sha256
print(load_table(name, sha, read_ranks(name, sha)) is not None)
"""


def test_the_token_cache_folders_are_the_users_own_under_any_umask(tmp_path):
    """Under a umask of 000 the cache folders made for the rank table are 0700, not
    writable by everyone, and the table file 0600."""
    folder = tmp_path / "cache" / "ctxslots"
    done = subprocess.run([sys.executable, "-c", _CACHE],
                          env={**os.environ, "CTXSLOTS_CACHE_DIR": str(folder)},
                          capture_output=True, text=True, timeout=600, check=False)
    assert (done.stdout, done.stderr) == ("True\n", "")
    modes = {path.relative_to(tmp_path).as_posix(): oct(path.stat().st_mode & 0o777)
             for path in [tmp_path / "cache", folder, *folder.iterdir()]}
    assert set(modes.values()) <= {"0o700", "0o600"}, modes


def test_a_store_path_that_is_not_utf8_is_refused_in_one_line(tmp_path):
    """A file name in Latin-1 (as an older system writes one) reaches Python as lone
    surrogates, which SQLite cannot be given: one line names the path, and no file is
    left behind."""
    name = os.fsdecode(b"caf\xe9.db")
    done = subprocess.run([*CLI, "--db", name, "remember", "user", "The user likes tea."],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        ("Error: cannot open caf\\xe9.db: the path is not UTF-8, and SQLite takes file names "
         "in UTF-8 only; rename the file or the folder that is not")]
    assert list(tmp_path.iterdir()) == []


@pytest.fixture(name="proxy_in_environment")
def fixture_proxy_in_environment(monkeypatch):
    """A stand-in proxy on 127.0.0.1 named by every proxy variable, with no NO_PROXY."""
    from ctxslots.testing import ScriptedChatServer

    with ScriptedChatServer(["through the proxy"] * 8) as proxy:
        address = proxy.base_url.removesuffix("/v1")
        for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
            monkeypatch.setenv(name, address)
            monkeypatch.setenv(name.lower(), address)
        for name in ("NO_PROXY", "no_proxy"):
            monkeypatch.delenv(name, raising=False)
        yield proxy


def test_a_model_server_on_this_machine_is_reached_without_the_proxy(proxy_in_environment):
    """With a proxy in the environment (as in a CI job), a chat server on 127.0.0.1 or
    localhost is still reached directly, sync and async: the proxy would reach its own
    loopback."""
    import asyncio

    from ctxslots import OpenAIChatClient
    from ctxslots.testing import ScriptedChatServer

    with ScriptedChatServer(["direct", "direct", "direct"]) as server:
        client = OpenAIChatClient(server.base_url, "scripted")
        by_name = OpenAIChatClient(server.base_url.replace("127.0.0.1", "localhost"), "scripted")
        texts = [client.complete([]).text, by_name.complete([]).text,
                 asyncio.run(client.acomplete([])).text]
        client.close()
        by_name.close()
    assert ["direct", "direct", "direct"] == texts
    assert [] == proxy_in_environment.requests


@pytest.mark.parametrize("command", [[], ["search"], ["export"]], ids=["group", "search", "export"])
def test_help_is_the_same_under_python_OO(command):
    """python -OO (PYTHONOPTIMIZE=2, as some container images set) drops docstrings, which
    click builds help from: every command's help is still shown, word for word."""
    def helped(*flags: str) -> str:
        done = subprocess.run([sys.executable, *flags, "-m", "ctxslots", *command, "--help"],
                              capture_output=True, text=True, timeout=600, check=True)
        return done.stdout

    assert helped() == helped("-OO")


def test_the_demo_with_no_writable_temporary_folder_says_what_to_set(tmp_path):
    """In a read-only container (TMPDIR missing, /tmp and /var/tmp and the working folder
    read-only) ctxslots demo says in one line to set TMPDIR or use --db-dir."""
    unshare = shutil.which("unshare")
    if os.geteuid() != 0 or unshare is None:
        pytest.skip("needs root and unshare(1) to mount folders read-only")
    missing = tmp_path / "missing"
    script = ('for d in /tmp /var/tmp /usr/tmp; do [ -d "$d" ] && '
              '{ mount --bind "$d" "$d" && mount -o remount,bind,ro "$d" || exit 97; }; done\n'
              'cd /tmp && "$@" demo')
    done = subprocess.run([unshare, "-m", "sh", "-c", script, "sh", *CLI],
                          env={**os.environ, "TMPDIR": str(missing)}, capture_output=True,
                          text=True, timeout=600, check=False)
    if done.returncode == 97 or "unshare:" in done.stderr:
        pytest.skip(f"no private mount here: {done.stderr.strip()[:200]}")
    assert done.returncode == 1, done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith("Error: no folder to keep the demo's temporary store in: No usable "
                           "temporary directory found in "), line
    assert line.endswith("; set TMPDIR, or keep the demo in a folder with --db-dir DIR")


# -- a locale whose encoding is not UTF-8 -----------------------------------------------

_WIDE = "Café 東京 😀 שלום"


def _in_encoding(encoding: str, args: list[str], cwd: Path) -> subprocess.CompletedProcess[bytes]:
    """``ctxslots ARGS`` with standard streams in ``encoding`` (as a Latin-1 or an ASCII
    locale sets them: a character it has no byte for fails the write unless handled)."""
    env = {**os.environ, "PYTHONIOENCODING": encoding}
    return subprocess.run([*CLI, *args], cwd=cwd, env=env, capture_output=True, timeout=600,
                          check=False)


@pytest.fixture(name="wide_store")
def fixture_wide_store(tmp_path):
    from ctxslots import FactStore

    db = tmp_path / "m.db"
    with FactStore(db) as store:
        store.upsert("user", "café", _WIDE)
    return db


def test_stored_text_the_locale_cannot_encode_is_shown_escaped(wide_store):
    """In a Latin-1 locale, a fact holding CJK, an emoji and Hebrew is listed with those
    characters escaped (é as itself), and its JSON is ASCII that reads back as the value:
    no UnicodeEncodeError."""
    listed = _in_encoding("latin-1", ["--db", str(wide_store), "list"], wide_store.parent)
    assert (listed.returncode, listed.stderr) == (0, b"")
    assert ("café: Café \\u6771\\u4eac \\U0001f600 \\u05e9\\u05dc\\u05d5\\u05dd"
            in listed.stdout.decode("latin-1"))
    shown = _in_encoding("latin-1", ["--db", str(wide_store), "get", "1", "--json"],
                         wide_store.parent)
    assert (shown.returncode, shown.stderr) == (0, b"")
    assert shown.stdout.isascii()
    assert json.loads(shown.stdout)["value"] == _WIDE


@pytest.mark.parametrize("encoding", ["latin-1", "ascii"])
def test_documents_on_standard_output_are_utf8_in_any_locale(wide_store, encoding):
    """A JSONL or Markdown export and an HTML dump written to standard output are UTF-8
    whatever the locale's encoding, as their formats say (the dump declares it, and
    `import -` reads UTF-8): the values read back."""
    exported = _in_encoding(encoding, ["--db", str(wide_store), "export"], wide_store.parent)
    assert (exported.returncode, exported.stderr) == (0, b"")
    records = [json.loads(line) for line in exported.stdout.decode("utf-8").splitlines()]
    assert [r["value"] for r in records[1:]] == [_WIDE]
    markdown = _in_encoding(encoding, ["--db", str(wide_store), "export", "--format",
                                       "markdown"], wide_store.parent)
    assert (markdown.returncode, markdown.stderr) == (0, b"")
    assert f"- **café**: {_WIDE}\n" in markdown.stdout.decode("utf-8")
    dumped = _in_encoding(encoding, ["--db", str(wide_store), "assemble", "cafe", "--dump",
                                     "html"], wide_store.parent)
    assert (dumped.returncode, dumped.stderr) == (0, b"")
    page = dumped.stdout.decode("utf-8")
    assert '<meta charset="utf-8">' in page and html.escape(_WIDE) in page


def _ascii_locale() -> dict[str, str]:
    """The environment of the C locale with Python's UTF-8 mode and locale coercion off:
    file names and arguments are decoded as ASCII, their other bytes as lone surrogates."""
    return {**os.environ, "LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}


def test_a_utf8_store_name_opens_in_an_ascii_locale(tmp_path):
    """In the C locale without UTF-8 mode, a store named ``mém.db`` (UTF-8 on disk) reaches
    Python as lone surrogates; it is opened under its own name, not refused as not UTF-8."""
    done = subprocess.run([*CLI, "--db", "mém.db", "remember", "user", "The user likes tea."],
                          cwd=tmp_path, env=_ascii_locale(), capture_output=True, text=True,
                          timeout=600, check=False)
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    assert "mém.db" in os.listdir(tmp_path)
    from ctxslots import FactStore

    with FactStore(tmp_path / "mém.db", create=False) as store:
        assert [f.value for f in store.facts()] == ["The user likes tea."]


def _latin1_locale(folder: Path) -> dict[str, str]:
    """An environment in a Latin-1 locale: one the system has, else one built into
    ``folder`` with localedef; the test is skipped when neither can be had."""
    listed = subprocess.run(["locale", "-a"], capture_output=True, text=True, check=False) \
        if shutil.which("locale") else None
    for name in (listed.stdout.split() if listed else []):
        if name.lower().endswith((".iso88591", ".iso-8859-1")):
            return {**os.environ, "LC_ALL": name}
    if shutil.which("localedef") is None:
        pytest.skip("no Latin-1 locale, and no localedef to make one")
    made = subprocess.run(["localedef", "-i", "de_DE", "-f", "ISO-8859-1",
                           str(folder / "de_DE.ISO-8859-1")], capture_output=True, check=False)
    if not (folder / "de_DE.ISO-8859-1").exists():
        pytest.skip(f"cannot make a Latin-1 locale: {made.stderr[-200:]!r}")
    return {**os.environ, "LOCPATH": str(folder), "LC_ALL": "de_DE.ISO-8859-1"}


def test_a_latin1_store_name_in_a_latin1_locale_is_refused_not_written_elsewhere(tmp_path):
    """In a Latin-1 locale, ``mém.db`` is the byte e9 on disk, a name SQLite (UTF-8 only)
    cannot be given: one line says so, and no file under another name (``mÃ©m.db``)
    holds the facts."""
    locales, work = tmp_path / "locales", tmp_path / "work"
    locales.mkdir()
    work.mkdir()
    env = _latin1_locale(locales)
    done = subprocess.run([*CLI, "--db", b"m\xe9m.db", "remember", "user", "The user likes tea."],
                          cwd=work, env=env, capture_output=True, timeout=600, check=False)
    assert done.returncode == 1
    assert done.stderr.decode("latin-1").splitlines() == [
        ("Error: cannot open m\\xe9m.db: the path is not UTF-8, and SQLite takes file names "
         "in UTF-8 only; rename the file or the folder that is not")]
    assert os.listdir(work) == []


_IMPORT_DEFAULT_ENCODING = """
import sys
from ctxslots import FactStore
with FactStore(sys.argv[1]) as store:
    with open(sys.argv[2]) as fp:  # the locale's encoding, as a script opens a file
        store.import_jsonl(fp)
    print(ascii([f.value for f in store.facts()]))
"""


@pytest.mark.parametrize("where", ["ascii", "latin-1"])
def test_a_jsonl_file_opened_in_the_locales_encoding_imports_as_utf8(tmp_path, where):
    """``store.import_jsonl(open(path))`` in a locale that is not UTF-8 reads the file as
    UTF-8, its format: not as Latin-1 (``CafÃ©`` stored for ``Café``), nor refused as not
    UTF-8 in an ASCII locale."""
    env = _ascii_locale() if where == "ascii" else _latin1_locale(tmp_path)
    facts = tmp_path / "facts.jsonl"
    facts.write_text('{"format": "ctxslots-facts", "version": 1}\n'
                     '{"slot": "user", "value": "Café 東京"}\n', encoding="utf-8")
    done = subprocess.run([sys.executable, "-c", _IMPORT_DEFAULT_ENCODING,
                           str(tmp_path / "m.db"), str(facts)], env=env, capture_output=True,
                          text=True, timeout=600, check=False)
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    assert done.stdout == ascii(["Café 東京"]) + "\n"


_OPEN_STORE = """
from ctxslots import FactStore, StoreError
try:
    FactStore("\\u6771.db")  # an escape: the locale decodes this code as Latin-1
except StoreError as exc:
    print(ascii(str(exc)))
"""


def test_a_store_name_the_locale_cannot_encode_is_refused_in_one_line(tmp_path):
    """In a Latin-1 locale, ``東.db`` has no bytes on disk: opening it raises a
    :class:`StoreError` naming the character, not a ``UnicodeEncodeError``, and no file
    is written."""
    locales, work = tmp_path / "locales", tmp_path / "work"
    locales.mkdir()
    work.mkdir()
    done = subprocess.run([sys.executable, "-c", _OPEN_STORE],
                          cwd=work, env=_latin1_locale(locales), capture_output=True,
                          text=True, timeout=600, check=False)
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    assert done.stdout == ascii(
        "cannot open \u6771.db: file names are in latin-1 here, which has no bytes for "
        "'\u6771'; name the store in characters it has, or run in a UTF-8 locale") + "\n"
    assert os.listdir(work) == []


_CONVERSATION_ID = """
import os, sys
from pathlib import Path
from ctxslots.cli.flush import conversation_id
(name,) = os.listdir(sys.argv[1])
print(ascii(conversation_id(Path(sys.argv[1]) / name)))
"""


def test_a_conversation_file_has_the_same_id_in_a_latin1_locale(tmp_path):
    """``café.jsonl`` (UTF-8 on disk) read in a Latin-1 locale, where its name reaches
    Python as ``cafÃ©.jsonl``, has the conversation id it has in a UTF-8 locale, so a
    flush there goes on where the last one stopped instead of reading it all again."""
    from ctxslots.cli.flush import conversation_id

    chats, locales = tmp_path / "chats", tmp_path / "locales"
    chats.mkdir()
    locales.mkdir()
    (chats / "café.jsonl").write_text('{"role": "user", "content": "Hi."}\n', encoding="utf-8")
    here = conversation_id(chats / "café.jsonl")
    assert here.startswith("file:café.jsonl:")
    done = subprocess.run([sys.executable, "-c", _CONVERSATION_ID, str(chats)],
                          env=_latin1_locale(locales), capture_output=True, text=True,
                          timeout=600, check=False)
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    assert done.stdout == ascii(here) + "\n"
