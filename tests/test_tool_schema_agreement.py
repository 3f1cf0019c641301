"""The schema a model sees is the rule the dispatcher applies: arguments valid by a tool's
JSON Schema are accepted, the others refused, as judged by the jsonschema package."""

from __future__ import annotations

import json

import pytest

from ctxslots import FactStore, Limits
from ctxslots.tools import MemoryTools, tool_specs

jsonschema = pytest.importorskip("jsonschema")

CASES = [
    ("memory_query", {"query": "tea", "limit": 3.0}),
    ("memory_query", {"query": "tea", "limit": 3.5}),
    ("memory_query", {"query": "tea", "limit": 51.0}),
    ("memory_timeline", {"id": 1, "before": 2.0, "after": 0.0}),
    ("memory_reinforce", {"id": 1.0}),
    ("memory_demote", {"id": 1.5}),
    ("memory_query", {"query": "tea", "said_after": "2026-03-01"}),
    ("memory_query", {"query": "tea", "said_after": "2026-03-01T09:30Z"}),
    ("memory_query", {"query": "tea", "said_before": "2026-03-01 09:30:00.5+02:00"}),
    ("memory_query", {"query": "tea", "said_after": "on 2026-03-01 please"}),
    ("memory_query", {"query": "tea", "said_after": "2026-03-01 please"}),
    ("memory_query", {"query": "tea", "said_before": "2026-03-01\n"}),
    ("memory_store", {"slot": "user", "value": "Tea.", "tags": ["drinks", "a short label"]}),
    ("memory_store", {"slot": "user", "value": "Tea.", "tags": ["t" * 64]}),
    ("memory_store", {"slot": "user", "value": "Tea.", "tags": ["t" * 65]}),
    ("memory_store", {"slot": "user", "value": "Tea.", "tags": [""]}),
    ("memory_store", {"slot": "user", "value": "Tea.", "tags": ["   "]}),
    ("memory_store", {"slot": "user", "value": "Tea.", "tags": ["a\tb"]}),
    ("memory_store", {"slot": "user", "value": "Tea.", "tags": ["line\n"]}),
    ("memory_query", {"query": "tea", "tags": ["t" * 65]}),
    ("memory_update", {"id": 1, "tags": ["ok", "no\nway"]}),
    ("memory_update", {"id": 1.0, "tags": ["ok"]}),
    ("memory_store", {"slot": "user", "value": "Tea.", "key": "drink"}),
    ("memory_store", {"slot": "user", "value": "Tea.", "key": "drink\n"}),
    ("memory_store", {"slot": "user", "value": "Tea.", "key": "   "}),
    ("memory_forget", {"id": 1, "reason": "r" * 500}),
    ("memory_forget", {"id": 1, "reason": "r" * 501}),
]


def _valid(name: str, args: dict) -> bool:
    spec = next(s for s in tool_specs() if s.name == name)
    return jsonschema.Draft202012Validator(spec.input_schema(("user", "project", "agent"))) \
        .is_valid(args)


@pytest.mark.parametrize(("name", "args"), CASES)
def test_the_dispatcher_accepts_what_the_schema_allows(tmp_path, name, args):
    """For each call, valid by the JSON Schema exactly when the dispatcher runs it (given as
    a mapping and as JSON text)."""
    answers = []
    for form, arguments in enumerate((args, json.dumps(args))):
        with FactStore(tmp_path / f"{form}.db", embedder=False) as store:
            store.add("user", "Alice likes tea.")
            answers.append(MemoryTools(store).dispatch(name, arguments))
    assert [_valid(name, args)] * 2 == [not a.startswith("Error:") for a in answers], answers


def test_a_whole_number_written_as_a_float_is_that_integer(tmp_path):
    """limit 3.0 is limit 3, and id 1.0 is id 1."""
    with FactStore(tmp_path / "m.db", embedder=False) as store:
        for n in range(5):
            store.add("agent", f"Lesson {n} about tea.")
        tools = MemoryTools(store)
        assert "3 memories, best first:" == tools.dispatch(
            "memory_query", '{"query": "tea lesson", "limit": 3.0}').splitlines()[0]
        assert "Reinforced [id:1] (score now 3)." == tools.dispatch("memory_reinforce",
                                                                    '{"id": 1.0}')


@pytest.mark.parametrize("limits", [
    Limits(max_value_bytes=8192, max_context_bytes=6000, max_key_chars=300, max_tags=40,
           max_tag_chars=80),
    Limits(max_value_bytes=100, max_context_bytes=50, max_key_chars=10, max_tags=2,
           max_tag_chars=5),
], ids=["larger", "smaller"])
def test_a_tool_set_takes_what_its_store_takes(tmp_path, limits):
    """A store with other limits than the defaults: its tool set's schemas advertise them,
    and the dispatcher stores a value, context, key and tags exactly at each limit and
    refuses one over, as the schema says."""
    with FactStore(tmp_path / "m.db", embedder=False, limits=limits) as store:
        tools = MemoryTools(store)
        schema = next(t for t in tools.anthropic_tools()
                      if t["name"] == "memory_store")["input_schema"]
        props = schema["properties"]
        assert props["value"]["maxLength"] == limits.max_value_bytes
        assert props["context"]["maxLength"] == limits.max_context_bytes
        assert props["key"]["maxLength"] == limits.max_key_chars
        assert props["tags"]["maxItems"] == limits.max_tags
        assert props["tags"]["items"]["maxLength"] == limits.max_tag_chars
        at = {"slot": "user", "value": "v" * limits.max_value_bytes,
              "context": "c" * limits.max_context_bytes, "key": "k" * limits.max_key_chars,
              "tags": [f"{n}".rjust(limits.max_tag_chars, "t") for n in range(limits.max_tags)]}
        validator = jsonschema.Draft202012Validator(schema)
        assert validator.is_valid(at)
        assert tools.dispatch("memory_store", at).startswith("Stored [id:1]")
        fact = store.get_by_key("user", at["key"])
        assert (fact.value, fact.context, list(fact.tags)) == (at["value"], at["context"],
                                                               at["tags"])
        for field, over in (("value", at["value"] + "v"), ("context", at["context"] + "c"),
                            ("key", at["key"] + "k"), ("tags", [*at["tags"], "x"]),
                            ("tags", ["t" * (limits.max_tag_chars + 1)])):
            args = {**at, field: over}
            assert not validator.is_valid(args)
            assert tools.dispatch("memory_store", args).startswith("Error:"), field
        assert len(store.facts()) == 1


def test_a_call_at_every_limit_is_taken_as_escaped_json(tmp_path):
    """memory_store with its value, context, key and tags each at the store's limit, sent as
    the JSON text json.dumps writes (every character beyond ASCII escaped, an escape
    sequence of terminal output as \\u001b), is stored as given, though that text is over
    65,536 characters."""
    limits = Limits()
    args = {"slot": "user", "value": "\x1b" * limits.max_value_bytes,
            "context": "\x1b" * limits.max_context_bytes, "key": "😀" * limits.max_key_chars,
            "tags": [f"{n:02d}" + "😀" * (limits.max_tag_chars - 2)
                     for n in range(limits.max_tags)]}
    text = json.dumps(args)
    assert len(text) > 65_536
    with FactStore(tmp_path / "m.db", embedder=False) as store:
        answer = MemoryTools(store).dispatch("memory_store", text)
        assert answer.startswith("Stored [id:1]"), answer
        fact = store.get_by_key("user", args["key"])
        assert (fact.value, fact.context, list(fact.tags)) == (args["value"], args["context"],
                                                               args["tags"])
