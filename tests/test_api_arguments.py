"""Arguments of the wrong type to the store's public calls raise InvalidArgumentError
naming the argument, and change nothing."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ctxslots import (
    CtxslotsError,
    FactStore,
    FlushPolicy,
    InvalidArgumentError,
    InvalidFactError,
    MemoryFlusher,
    MemoryTools,
    Message,
    OpenAIChatClient,
    SlotOwners,
    TokenCounter,
    sanitize_query,
)


def _exported(store: FactStore) -> list[str]:
    out = io.StringIO()
    store.export_jsonl(out)
    return [line for line in out.getvalue().splitlines() if '"exported_at"' not in line]


CALLS: dict[str, tuple[str, Callable[[FactStore, int], Any]]] = {
    "search-slots-int": ("slots", lambda s, f: s.search("deploy", slots=5)),  # type: ignore[arg-type]
    "search-slots-float": ("slots", lambda s, f: s.search("deploy", slots=1.5)),  # type: ignore[arg-type]
    "facts-slots-bool": ("slots", lambda s, f: s.facts(slots=True)),  # type: ignore[arg-type]
    "search_ranked-slots": ("slots", lambda s, f: s.search_ranked("deploy", slots=7)),  # type: ignore[arg-type]
    "search-boost-text": ("boost", lambda s, f: s.search("deploy", boost="recent")),  # type: ignore[arg-type]
    "touch-none": ("fact_ids", lambda s, f: s.touch(None)),  # type: ignore[arg-type]
    "touch-bytes": ("fact_ids", lambda s, f: s.touch(b"\x01")),
    "touch-int": ("fact_ids", lambda s, f: s.touch(f)),  # type: ignore[arg-type]
    "prune-policy-dict": ("policy", lambda s, f: s.prune({"default_cap": 1})),  # type: ignore[arg-type]
}


@pytest.mark.parametrize("call", sorted(CALLS))
def test_a_wrong_type_is_an_invalid_argument(store: FactStore, call: str) -> None:
    """The call raises InvalidArgumentError naming the argument; the store is as it was."""
    fact = store.add("agent", "The deploy runs on Fridays.")
    before = _exported(store)
    field, run = CALLS[call]
    with pytest.raises(InvalidArgumentError) as raised:
        run(store, fact.id)
    assert field == raised.value.field
    assert before == _exported(store)
    assert 0 == store.get(fact.id).access_count  # type: ignore[union-attr]


OPTIONS: dict[str, tuple[str, dict[str, Any]]] = {
    "ranking-dict": ("ranking", {"ranking": {"vector_weight": 1.0}}),
    "limits-text": ("limits", {"limits": "strict"}),
    "query_policy-none": ("query_policy", {"query_policy": None}),
    "clock-number": ("clock", {"clock": 1_700_000_000}),
    "embedder-true": ("embedder", {"embedder": True}),
    "embedder-number": ("embedder", {"embedder": 384}),
}


@pytest.mark.parametrize("case", sorted(OPTIONS))
def test_a_store_option_of_the_wrong_type_is_refused_before_the_file_is_made(
        db_path: Path, case: str) -> None:
    """FactStore refuses the option with InvalidArgumentError and creates no file."""
    field, options = OPTIONS[case]
    with pytest.raises(InvalidArgumentError) as raised:
        FactStore(db_path, **options)
    assert field == raised.value.field
    assert not db_path.exists()


@pytest.mark.parametrize("path", [5, b"memory.db", ["memory.db"]])
def test_a_path_that_is_no_path_is_refused(path: Any) -> None:
    """A path that is not a str or a path object raises InvalidArgumentError naming it."""
    with pytest.raises(InvalidFactError) as raised:
        FactStore(path)
    assert "path" == raised.value.field


def _chat_client() -> OpenAIChatClient:
    return OpenAIChatClient("http://127.0.0.1:9/v1", "m")


BUILT: dict[str, tuple[str, Callable[[FactStore], Any]]] = {
    "tools-store-none": ("store", lambda s: MemoryTools(None)),  # type: ignore[arg-type]
    "tools-store-path": ("store", lambda s: MemoryTools(str(s.path))),  # type: ignore[arg-type]
    "tools-slots-int": ("slots", lambda s: MemoryTools(s, slots=3)),  # type: ignore[arg-type]
    "tools-scoped_slots-none": ("scoped_slots", lambda s: MemoryTools(s, scoped_slots=None)),  # type: ignore[arg-type]
    "flusher-store-none": ("store", lambda s: MemoryFlusher(None, _chat_client())),  # type: ignore[arg-type]
    "flusher-slots-int": ("slots", lambda s: MemoryFlusher(s, _chat_client(), slots=3)),  # type: ignore[arg-type]
    "flusher-scoped_slots-none": (
        "scoped_slots", lambda s: MemoryFlusher(s, _chat_client(), scoped_slots=None)),  # type: ignore[arg-type]
    "message-from-text": ("data", lambda s: Message.from_dict("user: hi")),  # type: ignore[arg-type]
    "owners-none": ("owners", lambda s: SlotOwners.parse(None)),  # type: ignore[arg-type]
    "sanitize-bytes": ("query", lambda s: sanitize_query(b"deploy")),  # type: ignore[arg-type]
    "sanitize-policy": ("policy", lambda s: sanitize_query("deploy", {"max_tokens": 3})),  # type: ignore[arg-type]
    "count-list": ("text", lambda s: TokenCounter().count(["deploy"])),  # type: ignore[arg-type]
    "count_joined-none": ("parts", lambda s: TokenCounter().count_joined(None)),  # type: ignore[arg-type]
}


@pytest.mark.parametrize("case", sorted(BUILT))
def test_a_wrong_type_to_the_other_entry_points_is_a_ctxslots_error(
        db_path: Path, case: str) -> None:
    """Tools, flusher, messages, owners, queries and token counts refuse a wrong type with
    a CtxslotsError (a ValueError) naming the argument."""
    field, run = BUILT[case]
    with FactStore(db_path) as store:
        with pytest.raises(CtxslotsError) as raised:
            run(store)
    assert isinstance(raised.value, ValueError)
    assert field == raised.value.field  # type: ignore[attr-defined]


def test_flush_policy_reads_mappings_as_the_flusher_does() -> None:
    """FlushPolicy's methods take {role, content} mappings like MemoryFlusher.flush."""
    policy = FlushPolicy(every_n_turns=2, token_threshold=None)
    messages = [{"role": "user", "content": "hi"}, {"role": "user", "content": "again"}]
    assert (True, 2) == (policy.should_flush(messages), policy.turns(messages))
    assert "2 of 2 turns" == policy.explain(messages)
    assert policy.tokens(messages) == policy.tokens([Message.from_dict(m) for m in messages])


@pytest.mark.parametrize("messages", [None, "hi", ["hi"], 5])
def test_flush_policy_refuses_what_is_no_list_of_messages(messages: Any) -> None:
    """Anything else raises InvalidArgumentError naming messages."""
    with pytest.raises(InvalidArgumentError) as raised:
        FlushPolicy().should_flush(messages)
    assert "messages" == raised.value.field
