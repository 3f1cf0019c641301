"""Hostile input, generated: search, the CLI, the flusher's parser and the tool dispatcher.

Properties: no crash (only the documented errors), no SQLite error text, and no
write outside the requested slot and scope (table contents compared before and
after). Each property runs ``CTXSLOTS_FUZZ_EXAMPLES`` examples (default 100);
10,000 or more is the long run, marked ``slow``::

    CTXSLOTS_FUZZ_EXAMPLES=10000 python -m pytest -m slow tests/test_reliability_fuzz.py

Lone surrogates and ids beyond 64 bits have their own regression tests at
the end of this file (and in tests/test_reliability_limits.py).
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import ctxslots
from _sql import engine_of, stored_rows
from ctxslots import (
    FactStore,
    FlushError,
    InvalidFactError,
    Limits,
    MemoryFlusher,
    OpenAIChatClient,
    RankingPolicy,
)
from ctxslots.cli import cli
from ctxslots.flusher import DEFAULT_SLOTS, Forget, ReplyFormatError, Upsert, parse_reply
from ctxslots.flusher.operations import check_operation
from ctxslots.stores.backend import FactFilter
from ctxslots.testing import ScriptedChatServer, ScriptedReply

_conversations = itertools.count()
_copies = itertools.count()

EXAMPLES = int(os.environ.get("CTXSLOTS_FUZZ_EXAMPLES", "100"))

#: 10,000 examples or more is the long run: ``-m slow`` selects it, ``-m "not slow"`` skips it.
pytestmark = [pytest.mark.slow] if EXAMPLES >= 10_000 else []

fuzz = settings(max_examples=EXAMPLES, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                       HealthCheck.data_too_large])

#: Words that only an SQLite or driver error would print.
SQL_WORDS = ("sqlite", "apsw", "sql logic", "no such table", "no such column", "fts5",
             "database is locked", "syntax error", "unrecognized token", "traceback")

#: Fragments that mean something to FTS5, SQL, shells, click or markdown.
HOSTILE_TOKENS = [
    '"', "'", "NEAR(a b)", "AND", "OR NOT", "*", "^", "col:x", "{a b}", "(", ")", "--", "-",
    "'; DROP TABLE facts; --", "%", "_", "\\", "\x00", "\n", "\r\n", "\t", "\u200b", "\u202e",
    "😀", "日本語", "-x", "--json", "--help", "=", "1e309", "nan", "-1", "0", "9" * 30,
    "https://example.com/a?b", "[id:1]", "# heading", "```", "<|im_start|>", "a" * 5000,
]

#: Any Unicode text (hypothesis leaves out lone surrogates unless asked).
text = st.text(max_size=60)
#: Text with lone surrogates: what a non-UTF-8 argv byte or a JSON ``\\ud800`` escape becomes.
surrogate_text = st.text(alphabet=st.one_of(st.characters(), st.sampled_from(
    ["\ud800", "\udcff", "\udfff"])), min_size=1, max_size=20)
hostile = st.one_of(text, surrogate_text, st.sampled_from(HOSTILE_TOKENS),
                    st.lists(st.sampled_from(HOSTILE_TOKENS), max_size=4).map(" ".join))


def mostly(good: Any, bad: Any) -> Any:
    """``good`` four times in five, else ``bad`` (so most examples get past the first check)."""
    return st.sampled_from([good, good, good, good, bad]).flatmap(lambda s: s)


builtin_slots = st.sampled_from(["user", "project", "agent"])
slots = mostly(builtin_slots, hostile)
plain_text = st.text(alphabet=st.characters(exclude_categories=("Cs",)), min_size=1,
                     max_size=60).filter(str.strip)
scopes = st.one_of(st.none(), st.sampled_from(["a", "b"]), hostile)
#: Ids in SQLite's range, and any integer at all.
ids = st.one_of(st.integers(min_value=-(2**63), max_value=2**63 - 1), st.integers())


def snapshot(store: FactStore, *, access: bool = True) -> list[tuple[Any, ...]]:
    """Every row of every fact table; without ``access``, access counts are left out."""
    return stored_rows(store, access=access)


def fact_rows(store: FactStore) -> dict[int, tuple[str, str | None]]:
    """Live facts by id: ``(slot, scope)``."""
    with engine_of(store) as backend:
        return {int(r["id"]): (r["slot"], r["scope"] or None)
                for r in backend.select(FactFilter())}


def _fill(store: FactStore) -> None:
    with store.batch():
        for scope in ("a", "b", None):
            for slot in ("user", "project", "agent"):
                # user facts belong to a user (here one per scope), not to a scope
                owners = {"user": f"user-{scope}"} if slot == "user" else {"scope": scope}
                store.upsert(slot, f"deploy.{slot}", f"The {slot} of {scope} deploys on Friday.",
                             **owners)
                store.add(slot, f"A {slot} memory of {scope}: the cache is cold.", **owners)


@pytest.fixture(name="filled")
def fixture_filled(db_path, clock):
    """A store with keyed and free facts in scopes a, b and global, vector leg on."""
    with FactStore(db_path, clock=clock, ranking=RankingPolicy(vector_weight=1.0)) as store:
        _fill(store)
        yield store


# -- search ---------------------------------------------------------------------


@fuzz
@given(query=hostile, scope=scopes, slot_list=st.one_of(st.none(), st.lists(slots, max_size=3)),
       limit=st.one_of(st.integers(-5, 2000), st.sampled_from([True, 1.5, "10", None])),
       archive=st.booleans())
def test_search_returns_only_the_asked_scope_and_slots(filled, query, scope, slot_list, limit,
                                                       archive):
    """Any query, scope, slots and limit: hits from the scope and slots asked, or
    InvalidFactError; nothing but access counts changes."""
    before = snapshot(filled, access=False)
    try:
        hits = filled.search(query, scope=scope, slots=slot_list, limit=limit,
                             include_archive=archive)
    except InvalidFactError as exc:
        assert exc.field in ("scope", "slot", "slots", "limit")
    else:
        assert len(hits) <= limit
        for hit in hits:
            assert hit.fact.scope in (scope, None)
            assert slot_list is None or hit.fact.slot in slot_list
    assert before == snapshot(filled, access=False)


# -- the CLI --------------------------------------------------------------------


@pytest.fixture(name="cli_db")
def fixture_cli_db(tmp_path):
    """A filled store file for the CLI, which opens it on every call."""
    db = tmp_path / "cli.db"
    with FactStore(db) as store:
        _fill(store)
    return db


def invoke(db: Path, argv: list[str]) -> Any:
    """Run the CLI in-process on ``db`` and check the outcome is an exit status, never a crash."""
    result = CliRunner().invoke(cli, ["--db", str(db), *argv], env={"CTXSLOTS_EMBEDDER": None})
    assert result.exit_code in (0, 1, 2), result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        repr(result.exception))
    given_text = " ".join(argv).lower()
    for word in SQL_WORDS:
        if word not in given_text:
            assert word not in result.output.lower(), result.output
    return result


def _options(draw: Callable[..., Any], spec: dict[str, Any]) -> list[str]:
    out = []
    for name, strategy in spec.items():
        value = draw(st.one_of(st.none(), strategy))
        if value is True:
            out.append(name)
        elif isinstance(value, list):
            out += [f"{name}={v}" for v in value]
        elif value is not None and value is not False:
            out.append(f"{name}={value}")
    return draw(st.permutations(out)) if out else out


@fuzz
@given(data=st.data())
def test_cli_remember_writes_only_the_asked_slot_and_scope(cli_db, data):
    """remember with any slot, value and options: exit 0 with one fact written where asked,
    or 1/2 with nothing written."""
    slot = data.draw(slots)
    value = data.draw(mostly(plain_text, hostile))
    plain = st.sampled_from(["a", "b", "deploy.day", "ops,ci"])
    opts = _options(data.draw, {"--key": mostly(plain, hostile),
                                "--scope": mostly(plain, hostile),
                                "--tags": mostly(plain, hostile),
                                "--confidence": mostly(st.floats(0, 1).map(str), st.one_of(
                                    st.floats().map(str), hostile)),
                                "--json": st.just(True)})
    scope = next((o.split("=", 1)[1] for o in opts if o.startswith("--scope=")), None)
    # A fresh copy per example: the store stays small however many examples run.
    db = cli_db.with_name(f"remember-{next(_copies)}.db")
    shutil.copyfile(cli_db, db)
    try:
        with FactStore(db) as store:
            before = fact_rows(store), snapshot(store)
        result = invoke(db, ["remember", *opts, "--", slot, value])
        with FactStore(db) as store:
            after = fact_rows(store), snapshot(store)
    finally:
        for path in (db, Path(f"{db}-wal"), Path(f"{db}-shm")):
            path.unlink(missing_ok=True)
    event(f"remember exit {result.exit_code}")
    if result.exit_code != 0:
        assert before == after
        return
    changed = {i: where for i, where in after[0].items() if before[0].get(i) != where}
    old_rows = set(before[1])
    rewritten = [r for r in after[1] if r not in old_rows and r[0] == "facts"]
    assert 1 == len(rewritten)
    assert {(slot, scope)} == {(r[2], r[3] or None) for r in rewritten}
    assert set(changed.values()) <= {(slot, scope)}


@fuzz
@given(query=hostile, data=st.data())
def test_cli_search_shows_only_the_asked_scope(cli_db, query, data):
    """search with any query and options answers 0/1/2; its hits are of the asked scope."""
    opts = _options(data.draw, {"--scope": hostile, "--limit": st.one_of(hostile, ids.map(str)),
                                "--archive": st.just(True), "--superseded": st.just(True)})
    opts += [f"--slot={s}" for s in data.draw(st.lists(slots, max_size=2))]
    scope = next((o.split("=", 1)[1] for o in opts if o.startswith("--scope=")), None)
    with FactStore(cli_db) as store:
        before = snapshot(store, access=False)
    result = invoke(cli_db, ["search", "--json", *opts, "--", query])
    if result.exit_code == 0:
        for hit in json.loads(result.output):
            assert hit["scope"] in (scope, None)
    with FactStore(cli_db) as store:
        assert before == snapshot(store, access=False)


@fuzz
@given(command=st.sampled_from(["get", "forget"]),
       fact_id=st.one_of(ids.map(str), st.integers(1, 25).map(str), hostile))
def test_cli_get_and_forget_touch_only_the_given_id(cli_db, command, fact_id):
    """get changes nothing; forget moves exactly the given live fact to the archive, or fails cleanly."""
    with FactStore(cli_db) as store:
        before = fact_rows(store), snapshot(store)
    result = invoke(cli_db, [command, "--", fact_id])
    with FactStore(cli_db) as store:
        after = fact_rows(store), snapshot(store)
    event(f"{command} exit {result.exit_code}")
    if command == "get" or result.exit_code != 0:
        assert before == after
        return
    gone = set(before[0]) - set(after[0])
    assert {int(fact_id)} == gone and set(after[0]) < set(before[0])


@fuzz
@given(command=st.sampled_from(["remember", "search", "get", "forget"]),
       rest=st.lists(st.one_of(hostile, st.sampled_from(
           ["--key", "--scope", "--tags", "--slot", "--limit", "--json", "--archive", "--db",
            "--confidence", "user", "project", "agent", "1", "--"])), max_size=8))
def test_cli_random_argv_never_crashes(cli_db, command, rest):
    """Any argv after a command: exit 0, 1 or 2, never a traceback; a failed command writes nothing."""
    with FactStore(cli_db) as store:
        before = snapshot(store)
    result = invoke(cli_db, [command, *rest])
    if result.exit_code != 0:
        with FactStore(cli_db) as store:
            assert before == snapshot(store)


# -- the flusher's parser -------------------------------------------------------


json_leaf = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), text,
                      st.sampled_from(["upsert", "forget", "user", "project", "agent", "deploy.day"]))
json_value = st.recursive(json_leaf, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(text, inner, max_size=4)), max_leaves=20)
FIELDS = ["op", "slot", "key", "value", "confidence", "tags", "reason", "extra"]
operation = st.dictionaries(st.sampled_from(FIELDS), st.one_of(
    json_value, st.lists(text, max_size=3)), max_size=7)
keys = mostly(st.one_of(st.from_regex(r"[a-z0-9][a-z0-9_.\-]{0,20}", fullmatch=True),
                       st.sampled_from(["deploy.project", "deploy.agent", "deploy.user"])),
              hostile)
good_operation = st.one_of(
    st.builds(lambda s, k, v, c, t: {"op": "upsert", "slot": s, "key": k, "value": v,
                                     "confidence": c, "tags": t},
              slots, keys, mostly(plain_text.map("A fact: {}".format), hostile),
              mostly(st.floats(0, 1), st.one_of(st.floats(), st.integers(-2, 2))),
              st.lists(mostly(st.sampled_from(["ops", "ci"]), hostile), max_size=3)),
    st.builds(lambda s, k, r: {"op": "forget", "slot": s, "key": k, "reason": r},
              slots, keys, hostile),
)
reply_object = st.one_of(
    st.fixed_dictionaries({"operations": st.lists(good_operation, max_size=5)}),
    st.fixed_dictionaries({"operations": st.lists(good_operation, max_size=5)}),
    st.fixed_dictionaries({"operations": st.lists(st.one_of(good_operation, operation, json_value),
                                                  max_size=5)}),
    st.dictionaries(st.sampled_from(["operations", "ops", "extra"]), json_value, max_size=3),
    json_value,
)
JSON_FRAGMENTS = ['{', '}', '[', ']', ':', ',', '"operations"', '"op"', '"upsert"', '"forget"',
                  '"slot"', '"user"', '"key"', '"value"', '"confidence"', '"tags"', '"reason"',
                  '"x"', "1", "0.5", "-0", "1e999", "NaN", "null", "true", '"\\u0000"',
                  "```json\n", "\n```", "~~~\n", "Sure! ", "\n", " "]
jsonish = st.lists(st.one_of(st.sampled_from(JSON_FRAGMENTS), text), max_size=40).map("".join)


def _wrap(obj: Any, style: int) -> str:
    raw = json.dumps(obj)
    return [raw, f"```json\n{raw}\n```", f"Here you go:\n{raw}\nDone.",
            f"```\n{raw}\n```\n```\n{raw}\n```", raw[: len(raw) // 2]][style]


def _assert_parsed(raw: str) -> None:
    try:
        ops = parse_reply(raw)
    except ReplyFormatError as exc:
        assert exc.raw == raw and str(exc)
        return
    for op in ops:
        assert isinstance(op, (Upsert, Forget))
        reason = check_operation(op, slots=list(DEFAULT_SLOTS), limits=Limits())
        assert reason is None or isinstance(reason, str)


@fuzz
@given(raw=st.one_of(text, jsonish))
def test_parser_takes_any_text(raw):
    """Any text is parsed into operations or refused with ReplyFormatError, nothing else."""
    _assert_parsed(raw)


@fuzz
@given(obj=reply_object, style=st.integers(0, 4))
def test_parser_takes_any_json_structure(obj, style):
    """Any JSON structure, bare, fenced, in prose, twice or cut off: operations or ReplyFormatError;
    every operation it returns is then accepted or rejected with a reason."""
    _assert_parsed(_wrap(obj, style))


@fuzz
@given(first=reply_object, second=reply_object,
       styles=st.tuples(*[st.sampled_from([0, 0, 1, 2, 3, 4])] * 2))
def test_flush_of_any_reply_writes_only_its_scope(filled, first, second, styles):
    """A flush for scope a whatever the model says: applied or FlushError; scope b is untouched,
    and what it writes is in the allowed slots, in scope a or global (a project fact in a,
    or a fact the model was shown there: a global project fact, an agent lesson of a)."""
    before = snapshot(filled)
    before_b = [r for r in before if r[0] != "fact_history" and r[3] == "b"]
    replies = [ScriptedReply(_wrap(first, styles[0])), ScriptedReply(_wrap(second, styles[1]))]
    with ScriptedChatServer(replies) as server:
        flusher = MemoryFlusher(filled, OpenAIChatClient(server.base_url, "scripted",
                                                         max_retries=0), prune=None)
        try:
            report = flusher.flush([{"role": "user", "content": "deploy notes"}],
                                   conversation=f"fz{next(_conversations)}", scope="a",
                                   force=True)
        except FlushError:
            event("flush failed")
            assert before == snapshot(filled)
            return
    event(f"flush applied, {len(report.added) + len(report.updated) + len(report.forgotten)} "
          "changes" if report.added or report.updated or report.forgotten else "flush, no change")
    after = snapshot(filled)
    assert before_b == [r for r in after if r[0] != "fact_history" and r[3] == "b"]
    old_rows = set(before)
    for row in after:
        if row not in old_rows and row[0] in ("facts", "archive"):
            slot, scope = row[2], row[3] or None
            assert slot in DEFAULT_SLOTS
            assert scope in ("a", None) and (slot != "user" or scope is None)


# -- the tool dispatcher --------------------------------------------------------


# The tools module was written alongside this suite: its tests skip, saying why, where it
# cannot be imported.
try:
    from ctxslots.tools import TOOL_SPECS, MemoryTools
except ImportError as _exc:  # pragma: no cover - it ships with the package now
    TOOL_SPECS, MemoryTools, _TOOLS_MISSING = (), None, str(_exc)
else:
    _TOOLS_MISSING = ""

needs_tools = pytest.mark.skipif(
    MemoryTools is None, reason=f"ctxslots.tools is not importable yet: {_TOOLS_MISSING}")


#: Tool arguments may hold lone surrogates (JSON allows ``\\ud800``): the tools check them.
tool_text = st.one_of(hostile, st.text(alphabet=st.one_of(
    st.characters(), st.sampled_from(["\ud800", "\udcff"])), max_size=30))
PLAUSIBLE = {
    "query": mostly(plain_text, tool_text), "slot": mostly(st.sampled_from(["project", "agent"]),
                                                           slots),
    "limit": st.integers(-1, 60), "value": mostly(plain_text, tool_text),
    "key": mostly(st.sampled_from(["deploy.project", "deploy.agent", "deploy.user", "new.key"]),
                  tool_text),
    "tags": st.lists(mostly(st.sampled_from(["ops", "ci"]), tool_text), max_size=4),
    "id": mostly(st.integers(1, 40), st.integers()),
    "reason": tool_text, "context": mostly(plain_text, tool_text),
    "before": st.integers(-1, 25), "after": st.integers(-1, 25),
    "source": mostly(st.sampled_from(["tool", "seed"]), tool_text),
    "said_after": mostly(st.sampled_from(["2020-01-01", "2026-05-01T10:00Z"]), tool_text),
    "said_before": mostly(st.sampled_from(["2030-01-01", "2026-05-01T10:00+02:00"]), tool_text),
}


def _tool_calls() -> Any:
    """``(name, arguments)``: mostly a real tool with plausible arguments, else anything."""
    specs = TOOL_SPECS
    plausible = [st.tuples(st.just(spec.name), st.fixed_dictionaries(
        {p.name: PLAUSIBLE[p.name] for p in spec.params if p.required},
        optional={p.name: PLAUSIBLE[p.name] for p in spec.params if not p.required}))
        for spec in specs]
    values = st.one_of(json_leaf, tool_text, slots, st.integers(1, 40), st.integers(),
                       st.lists(tool_text, max_size=4), json_value)
    anything = st.dictionaries(st.one_of(st.sampled_from(list(PLAUSIBLE)), text), values,
                               max_size=5)
    names = st.one_of(st.sampled_from([spec.name for spec in specs]), hostile)
    random_call = st.tuples(names, st.one_of(st.none(), anything, anything.map(json.dumps),
                                             jsonish, text))
    as_json = st.one_of(*plausible).map(lambda c: (c[0], json.dumps(c[1])))
    return st.one_of(*plausible, *plausible, as_json, random_call)


@needs_tools
@fuzz
@given(call=st.deferred(_tool_calls))
def test_tool_dispatch_never_raises_nor_leaves_its_scope(filled, call):
    """Any tool call answers with text; scope b, the user slot and other scopes never change."""
    name, arguments = call
    tools = MemoryTools(filled, scope="a", slots=("project", "agent"))
    before = snapshot(filled)
    answer = tools.dispatch(name, arguments)
    assert isinstance(answer, str) and answer
    assert "the memory tool failed" not in answer  # its catch-all: an unexpected exception
    if answer.startswith("Error:"):
        given_text = f"{name} {arguments}".lower()
        assert not [w for w in SQL_WORDS if w in answer.lower() and w not in given_text], answer
    event("tool error" if answer.startswith("Error:") else f"tool {name} answered")
    after = snapshot(filled)
    if answer.startswith("Error:"):
        assert before == after
    untouchable = [r for r in before if r[0] != "fact_history" and (r[3] not in ("a", "")
                                                                   or r[2] == "user")]
    new_rows = set(after)
    assert all(r in new_rows for r in untouchable)
    known_ids = {r[1] for r in before if r[0] in ("facts", "archive")}
    old_rows = set(before)
    for row in after:
        if row not in old_rows and row[0] in ("facts", "archive"):
            where = (row[2], row[3] or None)
            assert where[0] in ("project", "agent") and where[1] in ("a", None)
            if row[1] not in known_ids:  # a new fact: written where the tools write
                assert where in {("project", "a"), ("agent", None)}


# -- regressions: each once a gap, with a precise reproduction -----------------


def _child_env() -> dict[str, str]:
    src = str(Path(ctxslots.__file__).resolve().parents[1])
    return {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")]),
            "CTXSLOTS_EMBEDDER": "hash"}


@pytest.mark.skipif(sys.platform == "win32", reason="argv bytes are POSIX only")
@pytest.mark.parametrize("argv", [[b"remember", b"agent", b"bad \xff byte"],
                                  [b"remember", b"--scope", b"\xff", b"agent", b"ok"]])
def test_cli_non_utf8_argument_is_one_error_line(tmp_path, argv):
    """A non-UTF-8 argument gives exit status 1 and one error line, not a traceback."""
    proc = subprocess.run([sys.executable, "-m", "ctxslots", "--db", str(tmp_path / "u.db"), *argv],
                          capture_output=True, env=_child_env(), timeout=60, check=False)
    assert b"Traceback" not in proc.stderr
    assert 1 == proc.returncode


@pytest.mark.parametrize("command", ["get", "forget"])
def test_cli_id_beyond_64_bits_is_one_error_line(cli_db, command):
    """An id too large for SQLite is refused by the argument's own check: one usage line
    naming the range, not a traceback."""
    result = CliRunner().invoke(cli, ["--db", str(cli_db), command, str(2**64)])
    assert isinstance(result.exception, SystemExit)
    assert 2 == result.exit_code
    assert 1 == len(result.output.splitlines())
    assert "must be a whole number from 1 to 9,223,372,036,854,775,807" in result.output


@needs_tools
def test_tool_dispatch_with_a_lone_surrogate_answers_an_error(filled):
    """A tool call whose JSON holds a lone surrogate escape is answered with an error text."""
    tools = MemoryTools(filled, scope="a")
    before = snapshot(filled)
    answer = tools.dispatch("memory_store", '{"slot": "agent", "value": "bad \\ud800 text"}')
    assert answer.startswith("Error:") and "the memory tool failed" not in answer
    assert before == snapshot(filled)


@needs_tools
@pytest.mark.parametrize("name", ["memory_forget", "memory_reinforce", "memory_timeline"])
def test_tool_dispatch_with_an_id_beyond_64_bits_answers_an_error(filled, name):
    """A tool call with an id too large for SQLite is answered with an error text."""
    answer = MemoryTools(filled, scope="a").dispatch(name, {"id": 2**64})
    assert answer.startswith("Error:") and "the memory tool failed" not in answer


DEEP = '{"operations": ' + "[" * 100_000 + "]" * 100_000 + "}"
HUGE_NUMBER = ('{"operations": [{"op": "upsert", "slot": "user", "key": "k", "value": "v", '
               '"confidence": 1' + "0" * 5000 + ', "tags": []}]}')


@pytest.mark.parametrize("raw", [DEEP, HUGE_NUMBER], ids=["deep-nesting", "huge-integer"])
def test_parser_refuses_pathological_json_with_reply_format_error(raw):
    """Deeply nested or huge-number JSON is refused with ReplyFormatError."""
    with pytest.raises(ReplyFormatError):
        parse_reply(raw)


def test_flush_of_a_pathological_reply_fails_with_flush_error(filled):
    """A model reply nested too deeply fails the flush with FlushError and writes nothing."""
    before = snapshot(filled)
    with ScriptedChatServer([DEEP, DEEP]) as server:
        flusher = MemoryFlusher(filled, OpenAIChatClient(server.base_url, "scripted",
                                                         max_retries=0))
        with pytest.raises(FlushError):
            flusher.flush([{"role": "user", "content": "hi"}], scope="a", force=True)
    assert before == snapshot(filled)
