"""Values, keys, tags, scopes and batches over their limits are refused with an error
naming the field, and nothing is written."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from click.testing import CliRunner

from _sql import stored_rows
from ctxslots import (
    FactNotFoundError,
    FactStore,
    InvalidFactError,
    Limits,
    MemoryFlusher,
    OpenAIChatClient,
)
from ctxslots.cli import cli
from ctxslots.testing import ScriptedChatServer
from ctxslots.tools import MemoryTools

LIMITS = Limits()


def snapshot(store: FactStore) -> list[tuple[Any, ...]]:
    """Every stored fact, archived fact and history entry."""
    return stored_rows(store)


# (field, keyword arguments of upsert that break it)
OVER_LIMIT: list[tuple[str, dict[str, Any]]] = [
    ("value", {"value": "v" * (LIMITS.max_value_bytes + 1)}),
    ("value", {"value": "é" * (LIMITS.max_value_bytes // 2 + 1)}),  # counted in UTF-8 bytes
    ("value", {"value": "   \n\t"}),
    ("value", {"value": 42}),
    ("value", {"value": "null\x00byte"}),
    ("key", {"key": "k" * (LIMITS.max_key_chars + 1)}),
    ("key", {"key": "two\nlines"}),
    ("key", {"key": "  "}),
    ("key", {"key": None}),
    ("tags", {"tags": [f"t{i}" for i in range(LIMITS.max_tags + 1)]}),
    ("tags", {"tags": ["t" * (LIMITS.max_tag_chars + 1)]}),
    ("tags", {"tags": ["tab\there"]}),
    ("tags", {"tags": [""]}),
    ("tags", {"tags": 5}),
    ("scope", {"scope": "s" * (LIMITS.max_scope_chars + 1)}),
    ("scope", {"scope": "sc\x00pe"}),
    ("scope", {"scope": ""}),
    ("scope", {"scope": 7}),
    ("slot", {"slot": "Project"}),
    ("slot", {"slot": "x" * 65}),
    ("slot", {"slot": ""}),
    ("confidence", {"confidence": 1.5}),
    ("confidence", {"confidence": math.nan}),
    ("confidence", {"confidence": True}),
    ("source", {"source": "s" * 1001}),
    ("expires_at", {"expires_at": "tomorrow"}),
    ("expires_at", {"expires_at": math.inf}),
]


def _upsert(store: FactStore, **change: Any) -> Any:
    args = {"slot": "project", "key": "deploy.day", "value": "The shop deploys on Fridays.",
            "scope": "shop", "tags": ["ops"]}
    args.update(change)
    return store.upsert(args.pop("slot"), args.pop("key"), args.pop("value"), **args)


def _add(store: FactStore, **change: Any) -> Any:
    args = {"slot": "agent", "value": "The CI cache is cold on Mondays.", "scope": "shop",
            "tags": ["ci"]}
    args.update(change)
    args.pop("key", None)
    return store.add(args.pop("slot"), args.pop("value"), **args)


def _assert_names_field(exc: InvalidFactError, field: str) -> None:
    assert field == exc.field
    assert field.rstrip("s").replace("_", "") in str(exc).replace("_", "")


def _ids(cases: list[tuple[str, dict[str, Any]]]) -> list[str]:
    return [f"{field}-{i}" for i, (field, _) in enumerate(cases)]


@pytest.mark.parametrize(("field", "change"), OVER_LIMIT, ids=_ids(OVER_LIMIT))
def test_upsert_over_a_limit_names_the_field_and_writes_nothing(store, field, change):
    """A keyed write with one bad field raises InvalidFactError naming it; the store is unchanged."""
    _upsert(store)
    before = snapshot(store)
    with pytest.raises(InvalidFactError) as info:
        _upsert(store, **change)
    _assert_names_field(info.value, field)
    assert isinstance(info.value, ValueError)
    assert before == snapshot(store)


ADD_CASES = [(f, c) for f, c in OVER_LIMIT if f != "key"]


@pytest.mark.parametrize(("field", "change"), ADD_CASES, ids=_ids(ADD_CASES))
def test_add_over_a_limit_names_the_field_and_writes_nothing(store, field, change):
    """A free memory with one bad field is refused the same way."""
    before = snapshot(store)
    with pytest.raises(InvalidFactError) as info:
        _add(store, **change)
    _assert_names_field(info.value, field)
    assert before == snapshot(store)


UPDATE_CASES = [(f, c) for f, c in OVER_LIMIT if f in ("value", "tags", "confidence", "source")]


@pytest.mark.parametrize(("field", "change"), UPDATE_CASES, ids=_ids(UPDATE_CASES))
def test_update_over_a_limit_names_the_field_and_writes_nothing(store, field, change):
    """Changing a stored fact to a bad field is refused and leaves the fact as it was."""
    fact = _upsert(store)
    before = snapshot(store)
    with pytest.raises(InvalidFactError) as info:
        store.update(fact.id, **change)
    _assert_names_field(info.value, field)
    assert before == snapshot(store)


def test_values_exactly_at_each_limit_are_accepted(store):
    """The limits are inclusive: the largest allowed value, key, tags and scope are stored."""
    fact = _upsert(store, value="é" * (LIMITS.max_value_bytes // 2), key="k" * LIMITS.max_key_chars,
                   tags=[f"{i:0{LIMITS.max_tag_chars}d}" for i in range(LIMITS.max_tags)],
                   scope="s" * LIMITS.max_scope_chars, source="s" * 1000)
    assert LIMITS.max_value_bytes == len(fact.value.encode("utf-8"))
    assert (LIMITS.max_tags, LIMITS.max_key_chars) == (len(fact.tags), len(fact.key or ""))


def test_custom_limits_are_enforced(db_path):
    """A store built with smaller limits refuses what the defaults would accept."""
    with FactStore(db_path, limits=Limits(max_value_bytes=16, max_tags=1)) as store:
        store.add("agent", "sixteen bytes ok")
        with pytest.raises(InvalidFactError, match="17 bytes"):
            store.add("agent", "seventeen bytes!!")
        with pytest.raises(InvalidFactError) as info:
            store.add("agent", "two tags", tags=["a", "b"])
        assert "tags" == info.value.field
        assert 1 == len(store.facts())


def test_a_bad_fact_inside_a_batch_rolls_the_whole_batch_back(store):
    """One refused fact in a batch leaves none of the batch's earlier writes."""
    _upsert(store)
    before = snapshot(store)
    with pytest.raises(InvalidFactError), store.batch():
        store.add("agent", "A good memory written first.")
        _upsert(store, value="Replaced inside the batch.")
        _add(store, value="x" * (LIMITS.max_value_bytes + 1))
    assert before == snapshot(store)


# -- batch size ---------------------------------------------------------------


@pytest.fixture(name="small_batches")
def fixture_small_batches(db_path):
    """A store whose batches may write at most 5 facts."""
    with FactStore(db_path, limits=Limits(max_batch=5)) as store:
        yield store


def test_a_batch_at_the_limit_is_written(small_batches):
    """Exactly max_batch facts in one batch are all written."""
    with small_batches.batch():
        for i in range(5):
            small_batches.add("agent", f"Memory number {i}.")
    assert 5 == len(small_batches.facts())


def test_a_batch_over_the_limit_raises_and_writes_nothing(small_batches):
    """One fact more than max_batch in a batch raises InvalidFactError and none is written."""
    small_batches.upsert("user", "name", "The user is Ada.")
    before = snapshot(small_batches)
    with pytest.raises(InvalidFactError) as info, small_batches.batch():
        small_batches.upsert("user", "name", "The user is Grace.")
        for i in range(5):
            small_batches.add("agent", f"Memory number {i}.")
    assert "batch" == info.value.field
    assert "5" in str(info.value)
    assert before == snapshot(small_batches)


def test_single_writes_are_not_a_batch(small_batches):
    """Writes outside a batch each count alone, however many there are."""
    for i in range(7):
        small_batches.add("agent", f"Memory number {i}.")
    assert 7 == len(small_batches.facts())


def test_a_flush_over_the_batch_limit_applies_what_fits_and_rejects_the_rest(small_batches):
    """A flush whose operations exceed max_batch applies the first max_batch in its one
    transaction and rejects the rest saying why (failing whole, it failed on every try)."""
    ops = [{"op": "upsert", "slot": "agent", "key": f"lesson.{i}", "value": f"Lesson {i}.",
            "confidence": 1.0, "tags": []} for i in range(6)]
    with ScriptedChatServer([json.dumps({"operations": ops})]) as server:
        flusher = MemoryFlusher(small_batches, OpenAIChatClient(server.base_url, "scripted",
                                                                max_retries=0))
        report = flusher.flush([{"role": "user", "content": "six lessons"}], force=True)
    assert 5 == len(report.added)
    assert ["a flush applies at most 5 operations"] == [
        r.reason.split(" (")[0] for r in report.rejected]
    assert {f"lesson.{i}" for i in range(5)} <= {f.key for f in small_batches.facts()}


# -- the same limits through the CLI and the tools ----------------------------


@pytest.mark.parametrize(("args", "field"), [
    (["remember", "agent", "v" * 5000], "value"),
    (["remember", "--key", "k" * 201, "agent", "ok"], "key"),
    (["remember", "--scope", "s" * 201, "project", "ok"], "scope"),
    (["remember", "--tags", ",".join(f"t{i}" for i in range(33)), "agent", "ok"], "tags"),
    (["remember", "--confidence", "2", "agent", "ok"], "confidence"),
])
def test_cli_reports_the_field_in_one_line_and_writes_nothing(tmp_path, args, field):
    """The CLI exits 1 with one error line naming the field; the store stays empty."""
    db = tmp_path / "cli.db"
    result = CliRunner().invoke(cli, ["--db", str(db), *args])
    assert 1 == result.exit_code
    assert isinstance(result.exception, SystemExit)
    lines = result.output.strip().splitlines()
    assert 1 == len(lines) and lines[0].startswith("Error: ")
    assert field.rstrip("s") in lines[0]
    with FactStore(db) as store:
        assert [] == snapshot(store)


def test_tools_report_a_value_over_the_byte_limit_and_write_nothing(store):
    """A value under the tool's character limit but over the store's byte limit is an error text."""
    tools = MemoryTools(store, scope="shop")
    value = "é" * 2100  # 2,100 characters, 4,200 bytes
    answer = tools.dispatch("memory_store", {"slot": "agent", "value": value})
    assert answer.startswith("Error: ") and "bytes" in answer
    assert [] == snapshot(store)


# -- regressions (each once a gap) ---------------------------------------------


@pytest.mark.parametrize("field", ["value", "key", "scope", "tags"])
def test_a_lone_surrogate_is_refused_naming_the_field(store, field):
    """Text that is not valid Unicode (a lone surrogate) is refused as InvalidFactError."""
    bad = "bad \udcff byte"
    change = {"value": {"value": bad}, "key": {"key": bad}, "scope": {"scope": bad},
              "tags": {"tags": [bad]}}[field]
    with pytest.raises(InvalidFactError) as info:
        _upsert(store, **change)
    assert field == info.value.field
    assert [] == snapshot(store)


@pytest.mark.parametrize("call", ["get", "forget", "reinforce", "update", "history", "timeline"])
def test_an_id_beyond_64_bits_is_not_found_or_refused(store, call):
    """An id no SQLite row can have reads as missing (or as a bad id), never as OverflowError."""
    huge = 2**63
    action = {
        "get": lambda: store.get(huge),
        "forget": lambda: store.forget(huge),
        "reinforce": lambda: store.reinforce(huge),
        "update": lambda: store.update(huge, value="x"),
        "history": lambda: store.history(huge),
        "timeline": lambda: store.timeline(huge),
    }[call]
    try:
        result = action()
    except (FactNotFoundError, InvalidFactError):
        result = None
    assert result in (None, [])
