"""Memory for LangGraph: a ``BaseStore`` backed by a :class:`~ctxslots.FactStore`, and a
node that puts the assembled context into the graph's state.

::

    from langgraph.graph import StateGraph
    from ctxslots.integrations.langgraph import CtxslotsStore, context_node

    graph = builder.compile(store=CtxslotsStore(facts))
    graph.invoke(state, {"configurable": {"user_id": "alice", "thread_id": "t1"}})

**Namespaces are owners.** A namespace is ``(slot, *owners)``: the slot first, then
the owners that slot's facts carry, in the order user, agent, scope, the scope
optional (left out: global facts):

- ``("user", USER)``: the facts of one user (slot ``user``).
- ``("project", SCOPE)``: a workspace's shared facts (``("project",)``: global ones).
- ``("agent", AGENT)`` or ``("agent", AGENT, SCOPE)``: what an agent learned.
- a plugin slot: its declared owners the same way.

**Values.** An item's value ``{"content": TEXT}`` is stored as the fact's text, so
facts written by ctxslots (its tools, the flusher) read as ``{"content": ...}``; any
other value is stored as canonical JSON, with the text of its indexed fields (the
``index`` of the put, else every string in it) as the fact's search context. A free
memory (no key) reads with the key ``#ID`` (so a put refuses such a key). ``search``
with a ``query`` ranks by ctxslots' hybrid search; ``filter`` matches the value's fields as LangGraph's own
stores do (``$eq``, ``$ne``, ``$gt``, ``$gte``, ``$lt``, ``$lte``). TTLs are not
supported (``supports_ttl`` is false). Needs the ``langgraph`` extra.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from .._sync import off_loop, run_to_completion
from ..errors import IntegrationUnavailableError, InvalidArgumentError, InvalidFactError
from ..model import Message
from ..stores import FactStore
from ..stores.owners import ANY, OwnerArgs
from ._memory import Memory, RunIdentity, identity_of

try:
    from langchain_core.runnables import RunnableConfig, RunnableLambda
    from langgraph.store.base import (
        BaseStore,
        GetOp,
        InvalidNamespaceError,
        Item,
        ListNamespacesOp,
        MatchCondition,
        Op,
        PutOp,
        Result,
        SearchItem,
        SearchOp,
    )
    from langgraph.store.base.embed import get_text_at_path
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise IntegrationUnavailableError("ctxslots.integrations.langgraph", "langgraph") from exc

__all__ = ["CtxslotsStore", "context_node", "flush_node", "identity_from_config", "to_messages"]

#: Most facts a filtered search ranks before filtering (the filter runs on the values).
_FILTER_WINDOW = 1000


@attrs.frozen
class _Place:
    """Where a namespace's items live: a slot and its owners."""

    slot: str
    user: str | None = None
    agent: str | None = None
    scope: str | None = None

    def owners(self) -> OwnerArgs:
        return {"user": self.user, "agent": self.agent, "scope": self.scope}


# -- values ---------------------------------------------------------------------


def _encode(value: Mapping[str, Any]) -> str:
    content = value.get("content")
    # A content that would read back as JSON (or not at all: empty or blank, which the
    # store refuses as a fact's text) is stored as JSON.
    if set(value) == {"content"} and isinstance(content, str) and content.strip() \
            and not content.startswith("{"):
        return content
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _is_id(key: str) -> bool:
    """Whether ``key`` names a fact by id (``#12``), as a free memory reads."""
    return key.startswith("#") and key[1:].isdigit()


def _decode(text: str) -> dict[str, Any]:
    if text.startswith("{"):
        try:
            value = json.loads(text)
        except ValueError:
            value = None
        if isinstance(value, dict):
            return value
    return {"content": text}


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list | tuple):
        return [s for v in value for s in _strings(v)]
    return []


def _search_context(value: Mapping[str, Any], index: Sequence[str] | bool | None) -> str | None:
    if set(value) == {"content"} and isinstance(value["content"], str):
        return None  # the text is the fact itself
    if index is False:
        return None
    if isinstance(index, Sequence) and not isinstance(index, str):
        words = [t for path in index for t in get_text_at_path(value, path)]
    else:
        words = _strings(value)
    return " ".join(words)[:2000] or None


# -- filters, as LangGraph's own stores apply them ------------------------------


def _operator(value: Any, operator: str, wanted: Any) -> bool:
    if operator == "$eq":
        return bool(value == wanted)
    if operator == "$ne":
        return bool(value != wanted)
    if operator not in ("$gt", "$gte", "$lt", "$lte"):
        raise InvalidArgumentError(f"unsupported filter operator {operator!r}: use $eq, $ne, "
                                   "$gt, $gte, $lt or $lte", field="filter", value=operator)
    try:
        left, right = float(value), float(wanted)
    except (TypeError, ValueError):
        return False
    return {"$gt": left > right, "$gte": left >= right, "$lt": left < right,
            "$lte": left <= right}[operator]


def _matches(value: Any, wanted: Any) -> bool:
    if isinstance(wanted, Mapping):
        if any(str(k).startswith("$") for k in wanted):
            return all(_operator(value, k, v) for k, v in wanted.items())
        return isinstance(value, Mapping) and all(_matches(value.get(k), v)
                                                  for k, v in wanted.items())
    if isinstance(wanted, list | tuple):
        return isinstance(value, list | tuple) and len(value) == len(wanted) \
            and all(_matches(a, b) for a, b in zip(value, wanted, strict=True))
    return bool(value == wanted)


def _namespace_matches(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    pairs = zip(namespace, path, strict=False) if condition.match_type == "prefix" \
        else zip(reversed(namespace), reversed(path), strict=False)
    return all(p == "*" or n == p for n, p in pairs)


# -- the store ------------------------------------------------------------------


class CtxslotsStore(BaseStore):
    """A LangGraph ``BaseStore`` whose items are the facts of a
    :class:`~ctxslots.FactStore` (SQLite or PostgreSQL); see the module's text for
    how namespaces map onto owners.

    The async methods run the store's work in a worker thread (inside a ``batch()``
    of the store this thread has open, on this thread, as part of it). A namespace that
    does not name a slot the store knows and its owners (a search prefix: that does
    not start with such a slot) raises LangGraph's ``InvalidNamespaceError``;
    a malformed key or owner raises :class:`~ctxslots.errors.InvalidFactError`; nothing
    is written by an operation that fails.
    """

    supports_ttl = False

    def __init__(self, store: FactStore) -> None:
        if not isinstance(store, FactStore):
            raise InvalidArgumentError(f"store must be a FactStore, not {type(store).__name__}",
                                       field="store", value=store)
        self.store = store

    # -- namespaces --

    def _check_prefix(self, namespace: tuple[str, ...]) -> None:
        """Refuse a namespace (or the start of one) that is not a tuple of non-empty
        strings, the first a slot the store knows."""
        if not isinstance(namespace, tuple) \
                or not all(isinstance(n, str) and n for n in namespace):
            raise InvalidNamespaceError(f"a namespace is a tuple of non-empty strings, not "
                                        f"{namespace!r}")
        if namespace:
            try:
                self.store.limits.slot(namespace[0])
            except InvalidFactError as exc:
                raise InvalidNamespaceError(f"namespace {namespace!r} does not start with a "
                                            f"slot of this store: {exc}") from None

    def _place(self, namespace: tuple[str, ...]) -> _Place:
        """The slot and owners a namespace names."""
        if not isinstance(namespace, tuple) or not namespace:
            raise InvalidNamespaceError(f"a namespace is a tuple of non-empty strings, not "
                                        f"{namespace!r}")
        self._check_prefix(namespace)
        slot, rest = namespace[0], list(namespace[1:])
        owners = self.store.limits.owners_of(slot)
        kinds = [k for k in ("user", "agent") if getattr(owners, k)]
        shape = "(" + ", ".join([repr(slot), *(k.upper() for k in kinds)]) + \
            (", [SCOPE])" if owners.scope else ")")
        if not len(kinds) <= len(rest) <= len(kinds) + int(owners.scope):
            raise InvalidNamespaceError(f"namespace {namespace!r} does not name the owners of "
                                        f"slot {slot!r}: use {shape}")
        named = dict(zip(kinds, rest, strict=False))
        scope = rest[len(kinds)] if len(rest) > len(kinds) else None
        return _Place(slot, user=named.get("user"), agent=named.get("agent"), scope=scope)

    def _leaf(self, namespace: tuple[str, ...]) -> bool:
        """Whether a namespace names every owner its slot can carry (none lies under it)."""
        if not namespace or not all(isinstance(n, str) and n for n in namespace):
            return False
        owners = self.store.limits.owners_of(namespace[0])
        return len(namespace) == 1 + int(owners.user) + int(owners.agent) + int(owners.scope)

    def _namespace(self, slot: str, user: str | None, agent: str | None,
                   scope: str | None) -> tuple[str, ...]:
        owners = self.store.limits.owners_of(slot)
        parts = [slot]
        if owners.user and user:
            parts.append(user)
        if owners.agent and agent:
            parts.append(agent)
        if owners.scope and scope:
            parts.append(scope)
        return tuple(parts)

    def _owned(self, place: _Place, fact: Any) -> bool:
        """Whether a fact the owners see is the namespace's own (not a shared or global one)."""
        return (fact.slot, fact.scope) == (place.slot, place.scope) \
            and (place.user is None or fact.user == place.user) \
            and (place.agent is None or fact.agent == place.agent)

    def _item(self, fact: Any, score: float | None = None, search: bool = False) -> Item:
        namespace = self._namespace(fact.slot, fact.user, fact.agent, fact.scope)
        key = fact.key if fact.key is not None else f"#{fact.id}"
        if search:
            return SearchItem(namespace, key, _decode(fact.value), fact.created_at,
                              fact.updated_at, score)
        return Item(value=_decode(fact.value), key=key, namespace=namespace,
                    created_at=fact.created_at, updated_at=fact.updated_at)

    def _fact(self, place: _Place, key: str) -> Any:
        if _is_id(key):
            fact = self.store.get(int(key[1:]), **place.owners())
            return fact if fact is not None and self._owned(place, fact) else None
        return self.store.get_by_key(place.slot, key, **place.owners())

    def _all_namespaces(self, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
        slots = [prefix[0]] if prefix else None
        facts = self.store.facts(slots=slots, user=ANY, agent=ANY, scope=ANY)
        return sorted({self._namespace(f.slot, f.user, f.agent, f.scope) for f in facts})

    # -- operations --

    def _get(self, op: GetOp) -> Item | None:
        fact = self._fact(self._place(op.namespace), op.key)
        return self._item(fact) if fact is not None else None

    def _put(self, op: PutOp) -> None:
        place = self._place(op.namespace)
        if op.value is None:
            fact = self._fact(place, op.key)
            if fact is not None:
                self.store.delete(fact.id, **place.owners())
            return
        if not isinstance(op.value, Mapping):
            raise InvalidArgumentError(f"an item's value must be a dict, not "
                                       f"{type(op.value).__name__}", field="value",
                                       value=op.value)
        if op.ttl is not None:
            raise NotImplementedError("TTL is not supported by CtxslotsStore; set ttl=None")
        if _is_id(op.key):
            raise InvalidArgumentError(f"the key {op.key!r} reads as a fact's id (#ID names a "
                                       "free memory): choose a key that is not '#' and digits",
                                       field="key", value=op.key)
        text = _encode(op.value)
        self.store.upsert(place.slot, op.key, text, **place.owners(),
                          context=_search_context(op.value, op.index))

    def _search(self, op: SearchOp) -> list[SearchItem]:
        prefix = tuple(op.namespace_prefix)
        self._check_prefix(prefix)
        if self._leaf(prefix):
            places = [self._place(prefix)]
        else:  # every namespace under the prefix
            places = [self._place(ns) for ns in self._all_namespaces(prefix)
                      if ns[:len(prefix)] == prefix]
        found: list[tuple[Any, float | None]] = []
        query = op.query if isinstance(op.query, str) and op.query.strip() else None
        window = _FILTER_WINDOW if op.filter else min(op.offset + op.limit, _FILTER_WINDOW)
        for place in places:
            if query is not None:
                found.extend(self._ranked(place, query, window))
            else:
                found.extend((f, None) for f in self.store.facts(slots=[place.slot],
                                                                 **place.owners())
                             if self._owned(place, f))
        if query is not None:
            found.sort(key=lambda pair: -(pair[1] or 0.0))
        pairs = [(fact, self._item(fact, score, search=True)) for fact, score in found]
        if op.filter:
            pairs = [(fact, i) for fact, i in pairs
                     if all(_matches(i.value.get(k), v) for k, v in op.filter.items())]
        shown = [(fact, i) for fact, i in pairs[op.offset:op.offset + op.limit]
                 if isinstance(i, SearchItem)]
        if query is not None and shown:  # the items returned count as shown, and no others
            self.store.touch([fact.id for fact, _ in shown])
        return [i for _, i in shown]

    def _ranked(self, place: _Place, query: str, window: int) -> list[tuple[Any, float | None]]:
        """The namespace's own facts among the best ``window`` matches of ``query`` its
        owners see, with their scores. The owners also see facts of other namespaces (a
        workspace's search, the global ones): when those take some of the places, the
        search reads as deep as a filtered one, so they never push its own facts out."""
        def search(limit: int) -> list[Any]:
            return self.store.search(query, slots=[place.slot], limit=limit,
                                     track_access=False, **place.owners())

        hits = search(window)
        owned = [h for h in hits if self._owned(place, h.fact)]
        if len(hits) == window < _FILTER_WINDOW and len(owned) < window:
            owned = [h for h in search(_FILTER_WINDOW) if self._owned(place, h.fact)]
        return [(h.fact, h.score) for h in owned]

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        namespaces = self._all_namespaces()
        if op.match_conditions:
            namespaces = [ns for ns in namespaces
                          if all(_namespace_matches(c, ns) for c in op.match_conditions)]
        if op.max_depth is not None:
            namespaces = sorted({ns[:op.max_depth] for ns in namespaces})
        return namespaces[op.offset:op.offset + op.limit]

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the operations in order: one result each (``None`` for a put)."""
        results: list[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                results.append(self._get(op))
            elif isinstance(op, SearchOp):
                results.append(self._search(op))
            elif isinstance(op, PutOp):
                self._put(op)
                results.append(None)
            elif isinstance(op, ListNamespacesOp):
                results.append(self._list_namespaces(op))
            else:
                raise InvalidArgumentError(f"unknown store operation {type(op).__name__}",
                                           field="op", value=op)
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """:meth:`batch` in a worker thread (inside a :meth:`~ctxslots.FactStore.batch`
        this thread has open, here, as part of it: a worker thread's operations would
        wait for the batch to end)."""
        given = list(ops)
        return await off_loop(lambda: self.batch(given), here=self.store.in_batch)


# -- the context node -----------------------------------------------------------


def identity_from_config(config: RunnableConfig | Mapping[str, Any] | None) -> RunIdentity:
    """Whose memory a graph run uses, from its ``configurable``: ``user_id`` (or
    ``user``), ``agent_id`` (or ``agent``), ``scope`` and ``thread_id`` (the
    conversation; an integer or UUID one as its text); missing ones are ``None``.

    :raises InvalidArgumentError: One of them is neither a string nor ``None``.
    """
    configurable = (config or {}).get("configurable") or {}
    if not isinstance(configurable, Mapping):
        raise InvalidArgumentError("the run's configurable must be a mapping",
                                   field="configurable", value=configurable)
    fields = {"user": configurable.get("user_id", configurable.get("user")),
              "agent": configurable.get("agent_id", configurable.get("agent")),
              "scope": configurable.get("scope")}
    thread = configurable.get("thread_id")
    if isinstance(thread, int | uuid.UUID) and not isinstance(thread, bool):
        thread = str(thread)  # LangGraph's checkpointers take these as thread ids too
    return identity_of(fields, conversation=thread if isinstance(thread, str) else None)


_ROLES = {"human": "user", "user": "user", "ai": "assistant", "assistant": "assistant",
          "system": "system", "developer": "system", "tool": "tool"}


def _role_and_text(message: object) -> tuple[str | None, str]:
    # LangChain's shorthand, kept as it is by a state with no add_messages reducer: a
    # ("role", text) pair (a list of two once it came through JSON, as LangChain reads it
    # too), or a plain string (a user's message).
    if isinstance(message, str):
        return "user", message
    if isinstance(message, tuple | list) and len(message) == 2:
        role, content = message
    elif isinstance(message, Mapping):
        role, content = message.get("role", message.get("type")), message.get("content")
    else:
        role, content = getattr(message, "type", None), getattr(message, "content", None)
    if not isinstance(content, str):
        # A content list: its text parts and plain strings (LangChain's lists hold both).
        content = " ".join(p if isinstance(p, str) else p["text"] for p in content
                           if isinstance(p, str) or (isinstance(p, Mapping)
                                                     and isinstance(p.get("text"), str))) \
            if isinstance(content, list) else ""
    return _ROLES.get(role) if isinstance(role, str) else None, content


def _state_messages(state: Any, messages_key: str) -> list[Any]:
    """The messages under ``messages_key`` in a graph's state: a mapping (a ``TypedDict``
    state) or an object (a dataclass or pydantic state); none when it has no such key."""
    found = state.get(messages_key) if isinstance(state, Mapping) \
        else getattr(state, messages_key, None)
    return list(found or [])


def _latest_user_text(state: Any, messages_key: str) -> str:
    for message in reversed(_state_messages(state, messages_key)):
        role, text = _role_and_text(message)
        if role == "user":
            return text
    return ""


def to_messages(messages: Iterable[object]) -> list[Message]:
    """A graph's messages (LangChain messages, role/content mappings, or LangChain's
    shorthand: ``(role, text)`` pairs, or lists of the two, and plain strings, a user's)
    as conversation messages for the flusher; those with no text are left out."""
    out: list[Message] = []
    for message in messages:
        role, text = _role_and_text(message)
        if role is not None and text.strip():
            out.append(Message(role, text))
    return out


def context_node(memory: Memory, *, key: str = "memory_context", messages_key: str = "messages"
                 ) -> RunnableLambda[Any, dict[str, str]]:
    """A graph node that assembles the memory for the latest user message in
    ``state[messages_key]`` (the state a ``TypedDict``, a dataclass or a pydantic model)
    and returns ``{key: text}``, for the owners in the run's
    ``configurable`` (:func:`identity_from_config`); it runs under ``invoke`` and
    ``ainvoke`` alike. When memory fails the text is ``""`` (logged; raised with
    ``memory.strict``).

    :raises InvalidArgumentError: ``memory`` is not a :class:`~ctxslots.integrations.Memory`.
    """
    if not isinstance(memory, Memory):
        raise InvalidArgumentError(f"memory must be a ctxslots Memory, not "
                                   f"{type(memory).__name__}", field="memory", value=memory)

    def who(config: RunnableConfig | None) -> RunIdentity | None:
        try:
            return identity_from_config(config)
        except InvalidArgumentError as exc:
            memory.handle_failure("reading the run's identity", exc, None)
            return None

    def memory_context(state: Any, config: RunnableConfig) -> dict[str, str]:
        owners = who(config)
        text = memory.context(_latest_user_text(state, messages_key), owners) if owners else ""
        return {key: text}

    async def amemory_context(state: Any, config: RunnableConfig
                              ) -> dict[str, str]:
        owners = who(config)
        text = await memory.acontext(_latest_user_text(state, messages_key), owners) \
            if owners else ""
        return {key: text}

    return RunnableLambda(memory_context, afunc=amemory_context, name="memory_context")


def flush_node(memory: Memory, *, messages_key: str = "messages"
               ) -> RunnableLambda[Any, dict[str, Any]]:
    """A graph node that flushes ``state[messages_key]`` (the state a ``TypedDict``, a
    dataclass or a pydantic model) through the memory's flusher
    (and its policy) for the owners in the run's ``configurable``, the ``thread_id`` as
    the conversation; put it last. It leaves the state as it is. A flush that is not
    due is logged at INFO; a failure is logged (raised with ``memory.strict``).

    :raises InvalidArgumentError: ``memory`` is not a :class:`~ctxslots.integrations.Memory`
        or has no flusher.
    """
    if not isinstance(memory, Memory):
        raise InvalidArgumentError(f"memory must be a ctxslots Memory, not "
                                   f"{type(memory).__name__}", field="memory", value=memory)
    if memory.flusher is None:
        raise InvalidArgumentError("flush_node needs a Memory with a flusher",
                                   field="memory", value=memory)

    async def aflush_memory(state: Any, config: RunnableConfig
                            ) -> dict[str, Any]:
        try:
            who = identity_from_config(config)
        except InvalidArgumentError as exc:
            memory.handle_failure("reading the run's identity", exc, None)
            return {}
        await memory.aflush(to_messages(_state_messages(state, messages_key)), who)
        return {}

    def flush_memory(state: Any, config: RunnableConfig) -> dict[str, Any]:
        return run_to_completion(aflush_memory(state, config))

    return RunnableLambda(flush_memory, afunc=aflush_memory, name="flush_memory")
