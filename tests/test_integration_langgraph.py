"""The LangGraph integration: ``CtxslotsStore`` checked against LangGraph's own
``InMemoryStore`` on the same operations, on both engines; hybrid search, filters,
owners; and a compiled graph whose model is the real openai client talking to a
scripted chat-completions server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from typing import Annotated, Any, TypedDict

import pytest

pytest.importorskip("langgraph")
openai = pytest.importorskip("openai")

import pydantic
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.store.base import BaseStore, InvalidNamespaceError, PutOp
from langgraph.store.memory import InMemoryStore

from _agent_scripts import flush_reply, tool_calls
from ctxslots import (
    ANY,
    FactStore,
    FlushPolicy,
    InvalidArgumentError,
    InvalidFactError,
    MemoryFlusher,
    OpenAIChatClient,
)
from ctxslots.errors import MemoryUnavailableError
from ctxslots.integrations import Memory, RunIdentity
from ctxslots.integrations.langgraph import (
    CtxslotsStore,
    context_node,
    flush_node,
    identity_from_config,
    to_messages,
)
from ctxslots.testing import ScriptedChatServer

ITEMS = [
    (("user", "alice"), "editor", {"content": "Alice edits code in Helix.", "age": 0}),
    (("user", "alice"), "pet", {"kind": "cat", "name": "Miso", "age": 3}),
    (("user", "bob"), "pet", {"kind": "dog", "name": "Rex", "age": 7}),
    (("project", "shop"), "stack", {"language": "Go", "tags": ["api", "grpc"]}),
    (("project",), "style", {"content": "Answers are short."}),
    (("agent", "billing"), "invoices", {"content": "Invoices go out on the first."}),
    (("agent", "billing", "shop"), "currency", {"content": "The shop bills in euros."}),
]


def _both(store: FactStore) -> list[BaseStore]:
    """LangGraph's own store and ours, given the same items."""
    pair: list[BaseStore] = [InMemoryStore(), CtxslotsStore(store)]
    for target in pair:
        for namespace, key, value in ITEMS:
            target.put(namespace, key, value)
    return pair


def _view(items) -> list[tuple]:
    return [(i.namespace, i.key, i.value) for i in items]


def test_get_put_delete_match_langgraphs_own_store(store):
    """Get, overwrite, delete and a missing key answer as InMemoryStore does."""
    ours, theirs = CtxslotsStore(store), InMemoryStore()
    for target in (theirs, ours):
        for namespace, key, value in ITEMS:
            target.put(namespace, key, value)
        target.put(("user", "alice"), "pet", {"kind": "cat", "name": "Miso", "age": 4})
        target.delete(("user", "bob"), "pet")
        target.delete(("user", "bob"), "never-there")
    for namespace, key, _ in [*ITEMS, (("user", "carol"), "pet", None)]:
        mine, want = ours.get(namespace, key), theirs.get(namespace, key)
        assert (want is None) == (mine is None), (namespace, key)
        if want is not None:
            assert (want.namespace, want.key, want.value) == (mine.namespace, mine.key,
                                                              mine.value)
    assert 4 == ours.get(("user", "alice"), "pet").value["age"]
    assert store.get_by_key("user", "pet", user="bob") is None


def test_a_content_that_looks_like_json_or_is_empty_reads_back_as_put(store):
    """``{"content": '{"theme": "dark"}'}`` and ``{"content": ""}`` read back as they
    were put, as in LangGraph's own store."""
    for target in (InMemoryStore(), CtxslotsStore(store)):
        for key, value in (("json", {"content": '{"theme": "dark"}'}), ("empty", {"content": ""}),
                           ("brace", {"content": "{not json"})):
            target.put(("user", "alice"), key, value)
            assert value == target.get(("user", "alice"), key).value, (type(target), key)


def test_a_blank_content_reads_back_as_put(store):
    """``{"content": "  "}`` (spaces or line breaks only) is kept and reads back as it
    was put, as in LangGraph's own store, though no fact's text may be blank."""
    for target in (InMemoryStore(), CtxslotsStore(store)):
        for key, value in (("spaces", {"content": "  "}), ("lines", {"content": "\n\t"})):
            target.put(("user", "alice"), key, value)
            assert value == target.get(("user", "alice"), key).value, (type(target), key)


@pytest.mark.parametrize("prefix", [("user", "alice"), ("user",), ("agent",), ("project",), ()])
def test_listing_search_matches_langgraphs_own_store(store, prefix):
    """A search without a query lists the same items under each prefix."""
    theirs, ours = _both(store)
    want = sorted(_view(theirs.search(prefix, limit=100)))
    assert want == sorted(_view(ours.search(prefix, limit=100)))
    assert want  # every prefix holds items


@pytest.mark.parametrize(("prefix", "filter_"), [
    ((), {"kind": "cat"}), (("user",), {"age": {"$gt": 5}}),
    (("user",), {"age": {"$gte": 3, "$lt": 7}}), ((), {"kind": {"$ne": "cat"}}),
    ((), {"tags": ["api", "grpc"]}), ((), {"name": "Nobody"})])
def test_filters_match_langgraphs_own_store(store, prefix, filter_):
    """``filter`` keeps the items whose value fields match, as InMemoryStore does
    (comparisons under a prefix where every item has the field: InMemoryStore raises
    TypeError on a missing one, where ours, like PostgreSQL's JSONB, does not match)."""
    theirs, ours = _both(store)
    assert sorted(_view(theirs.search(prefix, filter=filter_, limit=100))) == \
        sorted(_view(ours.search(prefix, filter=filter_, limit=100)))


def test_a_comparison_on_a_missing_field_matches_nothing(store):
    """Items without the compared field are left out, not an error."""
    _, ours = _both(store)
    assert [("user", "bob")] == [i.namespace for i in ours.search((), filter={"age": {"$gt": 5}})]


@pytest.mark.parametrize("options", [{}, {"prefix": ("agent",)}, {"suffix": ("shop",)},
                                     {"max_depth": 1}, {"prefix": ("user", "*"), "limit": 1},
                                     {"offset": 2, "limit": 2}])
def test_list_namespaces_matches_langgraphs_own_store(store, options):
    """Prefix, suffix, wildcards, depth and paging list the same namespaces."""
    theirs, ours = _both(store)
    assert theirs.list_namespaces(**options) == ours.list_namespaces(**options)


def test_a_query_is_ranked_by_hybrid_search(store):
    """With a query the best match comes first, scored; filters and paging apply after."""
    ours = CtxslotsStore(store)
    ours.put(("user", "alice"), "a", {"content": "Alice rides a red bicycle to work."})
    ours.put(("user", "alice"), "b", {"content": "Alice drinks green tea every morning."})
    ours.put(("user", "alice"), "c", {"note": "weekend", "text": "She hikes in the mountains."})
    ours.put(("user", "bob"), "a", {"content": "Bob drinks green tea too."})
    hits = ours.search(("user", "alice"), query="what tea does she drink")
    assert "b" == hits[0].key and hits[0].score is not None and hits[0].score > 0
    assert all(h.namespace == ("user", "alice") for h in hits)
    assert ["c"] == [h.key for h in ours.search(("user", "alice"), query="mountains hike")][:1]
    assert [] == ours.search(("user", "alice"), query="tea", filter={"note": "weekend"})
    everyone = ours.search(("user",), query="green tea", limit=2)
    assert {("user", "alice"), ("user", "bob")} == {h.namespace for h in everyone}


def test_a_workspace_search_is_not_crowded_out_by_global_facts(store):
    """The global facts a workspace's owners also see, however much better they match,
    never push the workspace's own items out of its search."""
    ours = CtxslotsStore(store)
    for n in range(20):
        ours.put(("project",), f"g{n}", {"content": f"zebra zebra zebra global note {n}"})
    ours.put(("project", "w"), "mine", {"content": "a zebra note of workspace w among others"})
    hits = ours.search(("project", "w"), query="zebra", limit=10)
    assert [(("project", "w"), "mine")] == [(h.namespace, h.key) for h in hits]
    assert [("project", "w")] == [h.namespace for h in ours.search(("project", "w"),
                                                                  query="zebra", limit=1)]


def test_a_search_counts_only_the_items_it_returns_as_shown(store):
    """The facts a search read but did not return (filtered out, another namespace's,
    past the limit) keep their access counts; the returned ones count once."""
    ours = CtxslotsStore(store)
    for n in range(30):
        ours.put(("project",), f"g{n}", {"content": f"zebra note {n}", "kind": "other"})
    ours.put(("project",), "good", {"content": "zebra good note", "kind": "good"})
    ours.put(("project", "w"), "mine", {"content": "zebra note of w", "kind": "other"})
    hits = ours.search(("project",), query="zebra", filter={"kind": "good"}, limit=1)
    assert ["good"] == [h.key for h in hits]
    counted = {f.key: f.access_count for f in store.facts(scope=ANY) if f.access_count}
    assert {"good": 1} == counted
    assert ["mine"] == [h.key for h in ours.search(("project", "w"), query="zebra", limit=2)]
    counted = {f.key: f.access_count for f in store.facts(scope=ANY) if f.access_count}
    assert {"good": 1, "mine": 1} == counted


def test_namespaces_are_owners(store, clock):
    """An item under ("user", ALICE) is Alice's fact, seen by her assembled context and
    not by Bob's; facts ctxslots wrote read back as {"content": ...}."""
    ours = CtxslotsStore(store)
    ours.put(("user", "alice"), "diet", {"content": "Alice is vegetarian."})
    ours.put(("agent", "billing", "shop"), "tone", {"content": "Be formal with customers."})
    assert "Alice is vegetarian." == store.get_by_key("user", "diet", user="alice").value
    assert store.get_by_key("user", "diet", user="bob") is None
    assert "Be formal" in store.get_by_key("agent", "tone", agent="billing", scope="shop").value
    free = store.add("user", "Alice reads on the train.", user="alice")
    item = ours.get(("user", "alice"), f"#{free.id}")
    assert {"content": "Alice reads on the train."} == item.value
    assert ours.get(("user", "bob"), f"#{free.id}") is None
    memory = Memory(store)
    assert "vegetarian" in memory.context("What do I eat?", RunIdentity(user="alice"))
    assert "vegetarian" not in memory.context("What do I eat?", RunIdentity(user="bob"))


def test_the_async_methods_do_the_same(store):
    """aput, aget, asearch, alist_namespaces and adelete, on one event loop."""
    ours = CtxslotsStore(store)

    async def main():
        await ours.aput(("user", "alice"), "city", {"content": "Alice lives in Porto."})
        got = await ours.aget(("user", "alice"), "city")
        found = await ours.asearch(("user", "alice"), query="Porto")
        spaces = await ours.alist_namespaces()
        await ours.adelete(("user", "alice"), "city")
        return got, found, spaces, await ours.aget(("user", "alice"), "city")

    got, found, spaces, gone = asyncio.run(main())
    assert {"content": "Alice lives in Porto."} == got.value
    assert ["city"] == [h.key for h in found] and [("user", "alice")] == spaces
    assert gone is None


def test_the_async_methods_inside_a_batch_are_part_of_it(store):
    """Awaited inside a batch of the store the loop's thread has open, the operations run
    on that thread, as part of the batch: in a worker thread they waited for the batch to
    end, which waited for them (for ever on SQLite)."""
    ours = CtxslotsStore(store)
    found: list[list[str]] = []

    async def main(keep: bool) -> None:
        with contextlib.suppress(LookupError), store.batch():
            await ours.aput(("user", "alice"), "city", {"content": "Alice lives in Porto."})
            found.append([h.key for h in await ours.asearch(("user", "alice"), query="Porto")])
            if not keep:
                raise LookupError("undo the batch")

    for keep in (False, True):
        turn = threading.Thread(target=asyncio.run, args=(main(keep),), daemon=True)
        turn.start()
        turn.join(60)
        assert not turn.is_alive(), "the operations awaited inside the batch never returned"
        item = ours.get(("user", "alice"), "city")
        if keep:
            assert item is not None and {"content": "Alice lives in Porto."} == item.value
        else:
            assert item is None                             # rolled back with the batch
    assert [["city"], ["city"]] == found


def test_bad_input_is_refused_and_writes_nothing(store):
    """A namespace that names no owners, a value that is not a dict, a TTL, a bad key,
    an unknown operator: one clear error each, nothing written."""
    ours = CtxslotsStore(store)
    with pytest.raises(InvalidNamespaceError, match=r"use \('user', USER\)"):
        ours.put(("user",), "k", {"content": "x"})
    with pytest.raises(InvalidNamespaceError, match=r"use \('agent', AGENT, \[SCOPE\]\)"):
        ours.put(("agent", "a", "b", "c"), "k", {"content": "x"})
    with pytest.raises(InvalidNamespaceError, match="cannot be empty"):
        ours.put((), "k", {"content": "x"})
    with pytest.raises(InvalidArgumentError, match="value must be a dict"):
        ours.batch([PutOp(("user", "a"), "k", ["not", "a", "dict"])])
    with pytest.raises(NotImplementedError, match="TTL is not supported"):
        ours.put(("user", "a"), "k", {"content": "x"}, ttl=5)
    with pytest.raises(InvalidFactError):
        ours.put(("user", "a"), "", {"content": "x"})
    with pytest.raises(InvalidArgumentError, match="reads as a fact's id"):
        ours.put(("user", "a"), "#1", {"content": "x"})
    ours.put(("user", "a"), "k", {"n": 1})
    with pytest.raises(InvalidArgumentError, match=r"unsupported filter operator '\$in'"):
        ours.search(("user", "a"), filter={"n": {"$in": [1]}})
    with pytest.raises(InvalidArgumentError, match="store must be a FactStore"):
        CtxslotsStore("memory.db")
    assert [("user", "k")] == [(f.slot, f.key) for f in store.facts(user=ANY)]


# -- a graph --------------------------------------------------------------------


class State(TypedDict, total=False):
    """The graph's state: the chat and the memory context."""

    messages: Annotated[list, add_messages]
    memory_context: str


def test_a_namespace_naming_no_known_slot_is_refused(store):
    """A namespace (or search prefix) whose first label is not a slot the store knows
    raises LangGraph's InvalidNamespaceError naming the known slots; nothing is written."""
    ours = CtxslotsStore(store)
    known = r"unknown slot 'users' \(known: user, project, agent\)"
    calls = [lambda: ours.put(("users", "alice"), "k", {"content": "x"}),
             lambda: ours.get(("users", "alice"), "k"),
             lambda: ours.delete(("users", "alice"), "k"),
             lambda: ours.search(("users", "alice")),
             lambda: ours.search(("users",), query="x")]
    for call in calls:
        with pytest.raises(InvalidNamespaceError, match=known):
            call()
    with pytest.raises(InvalidNamespaceError, match="invalid slot name 'Users'"):
        ours.put(("Users", "alice"), "k", {"content": "x"})
    assert [] == store.facts(user=ANY, agent=ANY, scope=ANY)

def _graph(memory: Memory, server: ScriptedChatServer, store: BaseStore):
    """recall (the context node) -> chat (the openai client on the scripted server) ->
    remember (writes what the model asked to keep, through the graph's store)."""
    client = openai.OpenAI(base_url=server.base_url, api_key="test-key", max_retries=0)
    tool = {"type": "function", "function": {
        "name": "remember", "description": "Keep a fact about the user.",
        "parameters": {"type": "object", "properties": {"key": {"type": "string"},
                                                        "fact": {"type": "string"}},
                       "required": ["key", "fact"]}}}

    def chat(state: State) -> dict[str, Any]:
        system = "Answer briefly.\n\n" + state.get("memory_context", "")
        sent = [{"role": "system", "content": system.strip()}] + [
            {"role": "user" if m.type == "human" else "assistant", "content": m.content}
            for m in state["messages"]]
        reply = client.chat.completions.create(model="scripted", messages=sent, tools=[tool])
        message = reply.choices[0].message
        calls = [json.loads(c.function.arguments) for c in message.tool_calls or []]
        return {"messages": [{"role": "assistant",
                              "content": message.content or json.dumps(calls)}]}

    def remember(state: State, config: RunnableConfig, *, store: BaseStore) -> dict[str, Any]:
        user = config["configurable"]["user_id"]
        last = state["messages"][-1].content
        if last.startswith("["):
            for call in json.loads(last):
                store.put(("user", user), call["key"], {"content": call["fact"]})
        return {}

    builder = StateGraph(State)
    builder.add_node("recall", context_node(memory))
    builder.add_node("chat", chat)
    builder.add_node("remember", remember)
    builder.add_edge(START, "recall")
    builder.add_edge("recall", "chat")
    builder.add_edge("chat", "remember")
    if memory.flusher is None:
        builder.add_edge("remember", END)
    else:
        builder.add_node("flush", flush_node(memory))
        builder.add_edge("remember", "flush")
        builder.add_edge("flush", END)
    return builder.compile(store=store)


def _config(user: str) -> dict[str, Any]:
    return {"configurable": {"user_id": user, "thread_id": f"t-{user}"}}


def test_a_graph_remembers_and_recalls_per_user(db_path, clock):
    """Alice's first run writes a fact through the graph's store; her second run's
    model sees it; Bob's does not."""
    facts = FactStore(db_path, clock=clock)
    server = ScriptedChatServer([
        tool_calls(("remember", {"key": "diet", "fact": "The user is vegetarian."})),
        "You are vegetarian.", "I do not know."])
    try:
        graph = _graph(Memory(facts), server, CtxslotsStore(facts))

        async def main():
            await graph.ainvoke({"messages": [("user", "I am vegetarian.")]}, _config("alice"))
            second = await graph.ainvoke({"messages": [("user", "What do I eat?")]},
                                         _config("alice"))
            await graph.ainvoke({"messages": [("user", "What do I eat?")]}, _config("bob"))
            return second

        second = asyncio.run(main())
        assert "You are vegetarian." == second["messages"][-1].content
        assert "The user is vegetarian." in second["memory_context"]
        assert "vegetarian" in server.requests[1]["messages"][0]["content"]
        assert "vegetarian" not in server.requests[2]["messages"][0]["content"]
        assert store_user(facts, "diet") == ["alice"]
    finally:
        server.close()
        facts.close()


def store_user(facts: FactStore, key: str) -> list[str]:
    """The users who have a user fact with this key."""
    return [f.user for f in facts.facts(slots=["user"], user=ANY) if f.key == key]


def test_the_flush_node_keeps_the_runs_messages(db_path, clock, caplog):
    """The last node flushes the graph's messages for the configurable's user, with the
    thread as the conversation; another user's flush is not due yet and says so."""
    facts = FactStore(db_path, clock=clock)
    model = ScriptedChatServer(["Lisbon is lovely.", "Hello."])
    flush = ScriptedChatServer([flush_reply(("user", "city", "The user lives in Lisbon."))])
    flusher = MemoryFlusher(facts, OpenAIChatClient(flush.base_url, "scripted", max_retries=0),
                            policy=FlushPolicy(every_n_turns=2))
    try:
        graph = _graph(Memory(facts, flusher=flusher), model, CtxslotsStore(facts))

        async def main():
            await graph.ainvoke({"messages": [("user", "Hello."), ("assistant", "Hi!"),
                                              ("user", "I moved to Lisbon.")]},
                                _config("alice"))
            await graph.ainvoke({"messages": [("user", "Hi.")]}, _config("bob"))

        with caplog.at_level(logging.INFO, logger="ctxslots.integrations"):
            asyncio.run(main())
        assert "The user lives in Lisbon." == facts.get_by_key("user", "city",
                                                              user="alice").value
        assert facts.get_by_key("user", "city", user="bob") is None
        sent = flush.requests[0]["messages"][-1]["content"]
        assert "I moved to Lisbon." in sent and "Lisbon is lovely." in sent
        assert 1 == len(flush.requests)
        assert any("'t-bob' for user 'bob': not_due (not due yet: 1 of 2 turns" in r.getMessage()
                   for r in caplog.records)
    finally:
        model.close()
        flush.close()
        facts.close()


def test_graph_messages_become_conversation_lines():
    """LangChain messages and role/content mappings keep their role and text."""
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    lines = to_messages([HumanMessage("Hi"), AIMessage(""), ToolMessage("sunny", tool_call_id="a"),
                         {"role": "assistant", "content": [{"type": "text", "text": "Sunny."}]}])
    assert [("user", "Hi"), ("tool", "sunny"), ("assistant", "Sunny.")] == \
        [(m.role, m.content) for m in lines]


def test_string_parts_of_a_message_are_its_text(db_path, clock):
    """A user message whose content list holds plain strings beside an image (as LangChain
    allows) is the text the context node searches with and the flush node sends; a
    developer mapping is a system line."""
    from langchain_core.messages import HumanMessage
    from langgraph.graph import MessagesState

    facts = FactStore(db_path, clock=clock)
    facts.add("user", "Salt cod needs a day of soaking before bacalhau.", user="alice")
    flush = ScriptedChatServer([flush_reply(("user", "dish", "The user cooks bacalhau."))])
    flusher = MemoryFlusher(facts, OpenAIChatClient(flush.base_url, "scripted", max_retries=0),
                            policy=FlushPolicy(every_n_turns=1))
    memory = Memory(facts, flusher=flusher)

    class Turn(MessagesState):
        memory_context: str

    said = HumanMessage(content=["In Porto I cook bacalhau.",
                                 {"type": "image_url", "image_url": {"url": "https://x/y.png"}}])
    try:
        out = _recall_then_flush(memory, Turn).invoke({"messages": [said]}, _config("alice"))
        assert "Salt cod needs a day of soaking" in out["memory_context"]  # found by it
        assert "The user cooks bacalhau." == facts.get_by_key("user", "dish", user="alice").value
        assert "```text\nIn Porto I cook bacalhau.\n```" in flush.requests[0]["messages"][-1][
            "content"]
    finally:
        flush.close()
        facts.close()
    assert [("system", "Be brief."), ("user", "a b")] == [
        (m.role, m.content) for m in to_messages([{"role": "developer", "content": "Be brief."},
                                                  HumanMessage(content=["a", "b"])])]


def test_the_nodes_run_under_invoke_too(db_path, clock):
    """A synchronous ``invoke`` runs the same context and flush nodes."""
    facts = FactStore(db_path, clock=clock)
    facts.upsert("user", "editor", "The user edits code in Helix.", user="alice")
    server = ScriptedChatServer(["You use Helix."])
    flush = ScriptedChatServer([flush_reply(("user", "asks", "The user asks about editors."))])
    flusher = MemoryFlusher(facts, OpenAIChatClient(flush.base_url, "scripted", max_retries=0),
                            policy=FlushPolicy(every_n_turns=1))
    try:
        out = _graph(Memory(facts, flusher=flusher), server, CtxslotsStore(facts)).invoke(
            {"messages": [("user", "Which editor do I use?")]}, _config("alice"))
        assert "The user edits code in Helix." in out["memory_context"]
        assert "Helix" in server.requests[0]["messages"][0]["content"]
        assert facts.get_by_key("user", "asks", user="alice") is not None
    finally:
        server.close()
        flush.close()
        facts.close()


@dataclasses.dataclass
class DataclassState:
    """A graph state as a dataclass (LangGraph reads its fields as channels)."""

    messages: Annotated[list[Any], add_messages] = dataclasses.field(default_factory=list)
    memory_context: str = ""


class PydanticState(pydantic.BaseModel):
    """A graph state as a pydantic model."""

    messages: Annotated[list[Any], add_messages] = []
    memory_context: str = ""


@contextlib.contextmanager
def _vegetarian_who_moves(db_path: Any, clock: Any
                          ) -> Iterator[tuple[FactStore, ScriptedChatServer, Memory]]:
    """Alice's store holding that she is vegetarian, the scripted model that learns she
    lives in Lisbon at the next flush, and the memory of both (closed after)."""
    facts = FactStore(db_path, clock=clock)
    facts.upsert("user", "diet", "The user is vegetarian.", user="alice")
    flush = ScriptedChatServer([flush_reply(("user", "city", "The user lives in Lisbon."))])
    flusher = MemoryFlusher(facts, OpenAIChatClient(flush.base_url, "scripted", max_retries=0),
                            policy=FlushPolicy(every_n_turns=1))
    try:
        yield facts, flush, Memory(facts, flusher=flusher, strict=True)
    finally:
        flush.close()
        facts.close()


def _recall_then_flush(memory: Memory, schema: Any) -> Any:
    """A compiled graph of state ``schema`` that recalls, then flushes."""
    builder = StateGraph(schema)
    builder.add_node("recall", context_node(memory))
    builder.add_node("flush", flush_node(memory))
    builder.add_edge(START, "recall")
    builder.add_edge("recall", "flush")
    builder.add_edge("flush", END)
    return builder.compile()


@pytest.mark.parametrize("schema", [DataclassState, PydanticState])
def test_the_nodes_read_a_dataclass_or_pydantic_state(db_path, clock, schema):
    """A state that is an object, not a mapping: the context node recalls for its latest
    user message and the flush node flushes its messages."""
    with _vegetarian_who_moves(db_path, clock) as (facts, flush, memory):
        out = _recall_then_flush(memory, schema).invoke(
            {"messages": [("user", "I moved to Lisbon. What should I cook?")]},
            _config("alice"))
        assert "The user is vegetarian." in out["memory_context"]
        assert "I moved to Lisbon." in flush.requests[0]["messages"][-1]["content"]
        assert "The user lives in Lisbon." == facts.get_by_key("user", "city",
                                                              user="alice").value


class ListState(TypedDict):
    """A graph state whose messages are a plain list (no ``add_messages`` reducer)."""

    messages: list[Any]
    memory_context: str


@pytest.mark.parametrize("through_json", [False, True])
def test_the_nodes_read_langchains_message_shorthand(db_path, clock, through_json):
    """A state with no reducer keeps ``("user", text)`` pairs and plain strings as given:
    the context node recalls for the latest user message, the flush node flushes them.
    Through JSON (a client of a graph server) each pair is a list of two, which LangChain
    reads as the same pair; the nodes found no user message in them, and flushed none."""
    with _vegetarian_who_moves(db_path, clock) as (facts, flush, memory):
        for i in range(6):  # more than the user's profile shows whatever the message
            facts.upsert("user", f"bike-{i}", f"The user owns bicycle number {i}.",
                         user="alice")
        given = {"messages": ["Hello.", ("ai", "Hi!"),
                              ("user", "I moved to Lisbon. Am I vegetarian?")]}
        if through_json:
            given = json.loads(json.dumps(given))
            assert ["ai", "Hi!"] == given["messages"][1]
        out = _recall_then_flush(memory, ListState).invoke(given, _config("alice"))
        assert "The user is vegetarian." in out["memory_context"]
        sent = flush.requests[0]["messages"][-1]["content"]
        assert "Hello." in sent and "Hi!" in sent and "I moved to Lisbon." in sent
        assert "The user lives in Lisbon." == facts.get_by_key("user", "city",
                                                              user="alice").value


def test_the_sync_invoke_flushes_from_inside_a_running_event_loop(db_path, clock):
    """``invoke`` called where a loop already runs (a notebook cell, an async handler
    calling sync code): the flush node still flushes, nothing is raised."""
    facts = FactStore(db_path, clock=clock)
    server = ScriptedChatServer(["Noted."])
    flush = ScriptedChatServer([flush_reply(("user", "city", "The user lives in Lisbon."))])
    flusher = MemoryFlusher(facts, OpenAIChatClient(flush.base_url, "scripted", max_retries=0),
                            policy=FlushPolicy(every_n_turns=1))
    try:
        graph = _graph(Memory(facts, flusher=flusher, strict=True), server,
                       CtxslotsStore(facts))

        async def cell():
            return graph.invoke({"messages": [("user", "I live in Lisbon.")]},
                                _config("alice"))

        asyncio.run(cell())
        assert "The user lives in Lisbon." == facts.get_by_key("user", "city",
                                                              user="alice").value
    finally:
        server.close()
        flush.close()
        facts.close()


def test_a_failing_store_does_not_stop_the_graph(db_path, clock, caplog):
    """A closed store: the context node gives "" (logged) and the graph answers."""
    facts = FactStore(db_path, clock=clock)
    server = ScriptedChatServer(["Hello."])
    try:
        graph = _graph(Memory(facts), server, InMemoryStore())
        facts.close()
        with caplog.at_level(logging.WARNING, logger="ctxslots.integrations"):
            out = asyncio.run(graph.ainvoke({"messages": [("user", "Hi")]}, _config("alice")))
        assert "Hello." == out["messages"][-1].content and "" == out["memory_context"]
        assert "Answer briefly." == server.requests[0]["messages"][0]["content"]
        assert any("assembling the context failed" in r.getMessage() for r in caplog.records)
    finally:
        server.close()


def test_a_strict_memory_stops_the_graph(db_path, clock):
    """With strict memory the failure is raised from the node."""
    facts = FactStore(db_path, clock=clock)
    server = ScriptedChatServer(["Never sent."])
    try:
        graph = _graph(Memory(facts, strict=True), server, InMemoryStore())
        facts.close()
        with pytest.raises(MemoryUnavailableError, match="assembling the context failed"):
            asyncio.run(graph.ainvoke({"messages": [("user", "Hi")]}, _config("alice")))
        assert [] == server.requests
    finally:
        server.close()


def test_identity_comes_from_the_configurable():
    """user_id (or user), agent_id, scope and thread_id; a malformed one is refused."""
    who = identity_from_config({"configurable": {"user_id": "alice", "agent_id": "helper",
                                                 "scope": "shop", "thread_id": "t1"}})
    assert ("alice", "helper", "shop", "t1") == (who.user, who.agent, who.scope,
                                                 who.conversation)
    assert "bob" == identity_from_config({"configurable": {"user": "bob"}}).user
    assert "7" == identity_from_config({"configurable": {"thread_id": 7}}).conversation
    thread = uuid.uuid4()
    assert str(thread) == identity_from_config(
        {"configurable": {"thread_id": thread}}).conversation
    assert identity_from_config(None).user is None
    with pytest.raises(InvalidArgumentError, match="the run's user must be a string"):
        identity_from_config({"configurable": {"user_id": 7}})
    with pytest.raises(InvalidArgumentError, match="memory must be a ctxslots Memory"):
        context_node("memory")
    with pytest.raises(InvalidArgumentError, match="needs a Memory with a flusher"):
        flush_node(Memory(FactStore(":memory:")))


def test_without_langgraph_the_import_says_which_extra():
    """Importing the integration without LangGraph names the extra to install."""
    code = ("import sys; sys.modules['langgraph'] = None\n"
            "try:\n    import ctxslots.integrations.langgraph\n"
            "except ImportError as exc:\n    print(type(exc).__name__, exc)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == ("IntegrationUnavailableError ctxslots.integrations.langgraph "
                           "needs the 'langgraph' extra: pip install 'ctxslots[langgraph]'")
