"""Tools an agent uses on its own memory: query, store, update, reinforce, demote, forget,
timeline, and (when allowed) delete.

Every tool answers with text for a model. Facts are shown as
``[id:12] (project, key deploy.day, 3 days ago) The shop deploys on Fridays.``
so the agent can pass the id back to reinforce, demote, update or forget it.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs

from .._checks import names, store_of
from ..errors import (
    FactNotFoundError,
    InvalidArgumentError,
    InvalidFactError,
    ReadOnlyStoreError,
    StoreBusyError,
    StoreError,
)
from ..model import Fact
from ..prompts.escape import bullet
from ..stores import KEY_PATTERN, FactStore, Limits
from ..stores.owners import OwnerArgs
from ._age import age_in_words
from ._spec import ArgumentError, Param, ToolSpec, parse_arguments, whole

__all__ = ["BUSY_ANSWER", "DEFAULT_SLOTS", "DELETE_SPEC", "READ_ONLY_ANSWER", "SLOT_NOTES",
           "TOOL_SPECS", "UNAVAILABLE_ANSWER", "MemoryTools", "anthropic_tools", "openai_tools",
           "responses_tools", "tool_specs"]

_log = logging.getLogger(__name__)

# What a tool call answers when the store fails. The store's own message names its file
# or server, and a busy one the process holding its lock: fine for the log, not for a
# model or a remote MCP client.
#: The answer when another writer holds the store's write lock too long.
BUSY_ANSWER = "Error: the memory store is busy; try again"
#: The answer when the store may be read but not written.
READ_ONLY_ANSWER = "Error: the memory store is read-only; nothing was written"
#: The answer when the store is closed, unreachable or failing.
UNAVAILABLE_ANSWER = "Error: the memory store is unavailable; try again later"

_ID = Param("id", "integer", "The memory's id, the N shown as [id:N].", required=True,
            minimum=1, maximum=2**63 - 1)
_VALUE = "One self-contained fact in a full sentence; it is read later without this conversation."
#: One line of text, not only spaces: a key or a tag, as the store takes them.
_ONE_LINE = whole(KEY_PATTERN)
_ONE_LINE_RULE = "one line of text, not only spaces"
#: Tags as the store takes them (its default limits).
_TAGS: dict[str, Any] = {"item_max_length": Limits().max_tag_chars, "item_pattern": _ONE_LINE,
                         "item_rule": _ONE_LINE_RULE}
#: What the model is told of the agent slot: its facts are the agent's, not a user's.
AGENT_SLOT_NOTE = ("lessons for yourself, visible to every user you serve (never a user's "
                   "private details).")
#: What memory_store's slot argument tells the model each built-in slot holds.
SLOT_NOTES: dict[str, str] = {"user": "about the user", "project": "about this workspace",
                              "agent": AGENT_SLOT_NOTE}
#: A calendar date or an ISO 8601 moment, as the query tool's time bounds take them.
_DATE = whole(r"\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?)?")
_DATE_RULE = "a date such as 2026-03-01 or a moment such as 2026-03-01T09:30Z"

#: The definition of every tool, in the order they are listed.
TOOL_SPECS: tuple[ToolSpec, ...] = (
    ToolSpec("memory_query",
             "Search long-term memory for facts relevant to a question or topic. Returns the best "
             "matches, each with its [id:N], slot and age.",
             (Param("query", "string", "What to look for, in plain words.", required=True,
                    max_length=2000),
              Param("slot", "string", "Only this memory slot (default: all).", slot_enum=True),
              Param("limit", "integer", "Most results to return (default 10).",
                    minimum=1, maximum=50),
              Param("tags", "string_list", "Only facts carrying every one of these labels.",
                    max_length=32, **_TAGS),
              Param("source", "string", "Only facts with this source, such as tool.",
                    max_length=200),
              Param("said_after", "string", "Only facts said on or after this date (UTC).",
                    max_length=40, pattern=_DATE, pattern_rule=_DATE_RULE),
              Param("said_before", "string", "Only facts said before this date (UTC).",
                    max_length=40, pattern=_DATE, pattern_rule=_DATE_RULE)),
             title="Search memory", read_only=True, idempotent=True),
    ToolSpec("memory_store",
             "Save a new fact to long-term memory. With a key, a fact already stored under the "
             "same slot and key is replaced (the old value is kept in its history).",
             (Param("slot", "string", "The memory slot the fact belongs to.", required=True,
                    slot_enum=True, slot_notes=tuple(SLOT_NOTES.items())),
              Param("value", "string", _VALUE, required=True, max_length=4096),
              Param("key", "string", "A short stable name such as editor or deploy.day, to "
                    "replace the fact later.", max_length=200, pattern=_ONE_LINE,
                    pattern_rule=_ONE_LINE_RULE),
              Param("tags", "string_list", "A few short labels.", max_length=32, **_TAGS),
              Param("context", "string", "The words the fact was drawn from, such as the "
                    "user's message: searched so that questions worded like the conversation "
                    "find the fact, never shown with it.", max_length=4096)),
             title="Store a fact"),
    ToolSpec("memory_update",
             "Change the text or tags of a stored fact by its id; the old value is kept in its "
             "history.",
             (_ID, Param("value", "string", _VALUE, max_length=4096),
              Param("tags", "string_list", "The new labels (replacing the old ones).",
                    max_length=32, **_TAGS)),
             title="Update a fact", idempotent=True),
    ToolSpec("memory_reinforce",
             "Mark a fact as useful: it ranks higher in later searches.", (_ID,),
             title="Reinforce a fact"),
    ToolSpec("memory_demote",
             "Mark a fact as unhelpful or doubtful: it ranks lower in later searches.", (_ID,),
             title="Demote a fact"),
    ToolSpec("memory_forget",
             "Remove a fact that is wrong or no longer true. It moves to the archive and stops "
             "showing up.",
             (_ID, Param("reason", "string", "Why it no longer holds.", max_length=500)),
             title="Forget a fact", destructive=True, idempotent=True),
    ToolSpec("memory_timeline",
             "Show the facts written just before and after one fact, oldest first, to see what "
             "else was learned at the time.",
             (_ID, Param("before", "integer", "How many earlier facts (default 3).",
                         minimum=0, maximum=20),
              Param("after", "integer", "How many later facts (default 3).",
                    minimum=0, maximum=20)),
             title="Facts around a fact", read_only=True, idempotent=True),
)

#: The tool that erases a fact for good: offered only by a tool set that allows it.
DELETE_SPEC = ToolSpec(
    "memory_delete",
    "Erase a fact for good, with its history: for what must not be kept at all (the user "
    "asked for it to be deleted). To retire a fact that is no longer true, use memory_forget.",
    (_ID,), title="Erase a fact", destructive=True, idempotent=True)

_SPECS = {spec.name: spec for spec in (*TOOL_SPECS, DELETE_SPEC)}

#: What memory_store answers for what its write did (a free memory found already
#: stored answers "Already stored").
_VERBS = {"inserted": "Stored", "replaced": "Replaced", "updated": "Updated", "kept": "Kept"}

#: The slots a tool set may use unless told otherwise.
DEFAULT_SLOTS: tuple[str, ...] = ("user", "project", "agent")


def _within(param: Param, limits: Limits) -> Param:
    """``param`` held to a store's ``limits``: a value, context, key or tags as long as
    that store takes them (:data:`TOOL_SPECS` holds the default limits)."""
    if param.name == "tags":
        return attrs.evolve(param, max_length=limits.max_tags,
                            item_max_length=limits.max_tag_chars)
    # A byte limit allows as many characters at most; the store counts the bytes.
    longest = {"value": limits.max_value_bytes, "context": limits.max_context_bytes,
               "key": limits.max_key_chars}.get(param.name)
    return param if longest is None else attrs.evolve(param, max_length=longest)


def _noted(param: Param, slot_notes: Mapping[str, str]) -> Param:
    """``param`` with ``slot_notes`` added to (or replacing) its own notes on what each
    slot holds."""
    if not param.slot_notes or not slot_notes:
        return param
    return attrs.evolve(param, slot_notes=tuple({**dict(param.slot_notes),
                                                 **slot_notes}.items()))


def _bound(spec: ToolSpec, limits: Limits | None,
           slot_notes: Mapping[str, str] | None = None) -> ToolSpec:
    if limits is None and not slot_notes:
        return spec
    params = spec.params if limits is None else tuple(_within(p, limits) for p in spec.params)
    return attrs.evolve(spec, params=tuple(_noted(p, slot_notes or {}) for p in params))


def tool_specs(*, delete: bool = False, limits: Limits | None = None,
               slot_notes: Mapping[str, str] | None = None) -> tuple[ToolSpec, ...]:
    """The tools offered: every one of :data:`TOOL_SPECS`, and ``memory_delete`` with
    ``delete``; with ``limits`` (a store's), a value, context, key and tags as long as
    they allow, else as the default :class:`~ctxslots.Limits` do; with ``slot_notes``,
    what those slots hold (a plugin's slot, say), as ``memory_store``'s slot argument
    tells the model (:data:`SLOT_NOTES` for the built-in ones)."""
    specs = (*TOOL_SPECS, DELETE_SPEC) if delete else TOOL_SPECS
    return tuple(_bound(spec, limits, slot_notes) for spec in specs)


def openai_tools(slots: Iterable[str] = DEFAULT_SLOTS, *, strict: bool = False,
                 delete: bool = False, limits: Limits | None = None) -> list[dict[str, Any]]:
    """Every tool in the OpenAI chat-completions ``tools`` format, ``slot`` limited to ``slots``.

    :param strict: Mark each tool ``"strict": true`` and keep to strict mode's
        schema subset: every argument required, the optional ones nullable
        (``null`` means "not given"). Frameworks that force strict mode (the
        OpenAI Agents SDK) need this form, or every optional argument turns
        mandatory.
    :param delete: Include ``memory_delete``.
    :param limits: The store's limits, that the argument lengths follow (default:
        :class:`~ctxslots.Limits`'s defaults).
    """
    return [spec.openai(tuple(slots), strict=strict)
            for spec in tool_specs(delete=delete, limits=limits)]


def responses_tools(slots: Iterable[str] = DEFAULT_SLOTS, *, strict: bool = True,
                    delete: bool = False, limits: Limits | None = None) -> list[dict[str, Any]]:
    """Every tool in the OpenAI Responses API ``tools`` format (strict unless told
    otherwise); ``limits`` as for :func:`openai_tools`."""
    return [spec.responses(tuple(slots), strict=strict)
            for spec in tool_specs(delete=delete, limits=limits)]


def anthropic_tools(slots: Iterable[str] = DEFAULT_SLOTS, *, delete: bool = False,
                    limits: Limits | None = None) -> list[dict[str, Any]]:
    """Every tool in the Anthropic Messages API ``tools`` format, ``slot`` limited to
    ``slots``; ``limits`` as for :func:`openai_tools`."""
    return [spec.anthropic(tuple(slots)) for spec in tool_specs(delete=delete, limits=limits)]


def _slot_tuple(slots: Iterable[str]) -> tuple[str, ...]:
    return names(slots, "slots")


def _slot_set(slots: Iterable[str]) -> frozenset[str]:
    return frozenset(names(slots, "scoped_slots"))


def _note_dict(notes: Mapping[str, str]) -> dict[str, str]:
    return dict(notes)


def _check_slots(_instance: Any, _attribute: Any, slots: tuple[str, ...]) -> None:
    if not slots:
        raise InvalidArgumentError("a tool set needs at least one slot", field="slots", value=slots)


@attrs.define
class MemoryTools:
    """The memory tools, bound to one store, one user, one agent, one scope and the
    slots the agent may use.

    The model never chooses the owners: a user fact it writes belongs to
    ``user``, an agent fact to ``agent``, a fact of ``scoped_slots`` to
    ``scope``; reads see those owners' facts and the shared ones. A fact of
    another user, agent or scope, or of a slot not in ``slots``, is answered
    exactly like an unknown id. An agent fact belongs to the agent, not to a user:
    tool sets of the same agent for other users read, change and forget it too
    (the slot's description tells the model so).

    ::

        tools = MemoryTools(store, user="alice", scope="shop-api")
        response = client.chat.completions.create(..., tools=tools.openai_tools())
        for call in response.choices[0].message.tool_calls or []:
            text = tools.dispatch(call.function.name, call.function.arguments)

    Attributes:
        store: The fact store.
        scope: The agent's workspace (``None``: global facts only).
        slots: The slots the tools may read and write.
        scoped_slots: Slots whose facts belong to ``scope``; the others are global.
        source: Recorded as the source of every fact the tools write.
        user: The user the agent serves (``None``: the store's default user).
        agent: The agent (``None``: the store's default agent).
        allow_delete: Offer ``memory_delete``, which erases a fact for good
            (off by default: forgetting keeps the fact in the archive).
        slot_notes: What slots hold, for the model: ``memory_store``'s ``slot``
            argument names each of ``slots``, and only those, with its note (the
            built-in slots have theirs, :data:`SLOT_NOTES`; a slot with none is
            "facts of the SLOT slot"). Give a plugin slot's description here. A slot
            the store does not know, or a note that is not text, is refused when the
            tool set is made.
    """

    store: FactStore = attrs.field(validator=store_of)
    scope: str | None = None
    slots: tuple[str, ...] = attrs.field(default=DEFAULT_SLOTS,
                                         converter=_slot_tuple, validator=_check_slots)
    scoped_slots: frozenset[str] = attrs.field(default=frozenset({"project"}),
                                               converter=_slot_set)
    source: str = "tool"
    user: str | None = None
    agent: str | None = None
    allow_delete: bool = False
    slot_notes: Mapping[str, str] = attrs.field(factory=dict, converter=_note_dict)

    def __attrs_post_init__(self) -> None:
        limits = self.store.limits
        for slot in self.slots:
            limits.slot(slot)
        for slot in self.scoped_slots:
            if not limits.owners_of(slot).scope:
                raise InvalidArgumentError(
                    f"{slot} facts do not belong to a workspace: leave {slot} out of "
                    "scoped_slots", field="scoped_slots", value=sorted(self.scoped_slots))
        for slot, note in self.slot_notes.items():
            limits.slot(slot)  # a misspelled slot is named, not passed over
            if not isinstance(note, str) or not note.strip():
                raise InvalidArgumentError(
                    f"the note on the {slot} slot must be text saying what it holds, not "
                    f"{note!r}", field="slot_notes", value=note)
        limits.scope(self.scope)
        self.user = self.store.user if self.user is None else limits.owner(self.user, "user")
        self.agent = (self.store.agent if self.agent is None
                      else limits.owner(self.agent, "agent"))

    # -- schemas -----------------------------------------------------------

    @property
    def specs(self) -> tuple[ToolSpec, ...]:
        """The tools this tool set offers, their arguments held to the store's limits
        (a value, context, key and tags as long as the store takes them), the slots
        described with :attr:`slot_notes`."""
        return tool_specs(delete=self.allow_delete, limits=self.store.limits,
                          slot_notes=self.slot_notes)

    def openai_tools(self, *, strict: bool = False) -> list[dict[str, Any]]:
        """The tools in the OpenAI chat-completions ``tools`` format, for this tool set's slots."""
        return [spec.openai(self.slots, strict=strict) for spec in self.specs]

    def responses_tools(self, *, strict: bool = True) -> list[dict[str, Any]]:
        """The tools in the OpenAI Responses API ``tools`` format, for this tool set's slots."""
        return [spec.responses(self.slots, strict=strict) for spec in self.specs]

    def anthropic_tools(self) -> list[dict[str, Any]]:
        """The tools in the Anthropic Messages API ``tools`` format, for this tool set's slots."""
        return [spec.anthropic(self.slots) for spec in self.specs]

    # -- dispatch ----------------------------------------------------------

    def dispatch(self, name: str, arguments: str | Mapping[str, Any] | None = None) -> str:
        """Run one tool call and return its text result; never raises for bad input.

        :param name: The tool name the model called.
        :param arguments: The arguments as a JSON text (OpenAI) or a mapping
            (Anthropic); ``None`` or ``""`` for none.
        :return: The result, or ``Error: ...`` naming what was wrong (an unknown
            tool, invalid JSON, a missing, unknown or ill-typed argument, a value
            the store refuses, an unknown id). A failing store is answered with a
            fixed text (:data:`BUSY_ANSWER`, :data:`READ_ONLY_ANSWER`,
            :data:`UNAVAILABLE_ANSWER`) that names no file, server or process; its
            own message goes to the ``ctxslots.tools.memory_tools`` log. Nothing
            is written when the answer is an error.
        """
        spec = next((s for s in self.specs if s.name == name), None)
        if spec is None:
            return (f"Error: unknown tool {str(name)[:80]!r}; the tools are "
                    f"{', '.join(s.name for s in self.specs)}")
        try:
            args = parse_arguments(spec, arguments, self.slots)
            method: Callable[..., str] = getattr(self, name)
            return method(**args)
        except (ArgumentError, InvalidFactError) as exc:  # the caller's own input
            return f"Error: {exc}"
        except FactNotFoundError as exc:
            return f"Error: no memory with id {exc.fact_id}"
        except StoreBusyError as exc:
            _log.warning("%s failed: %s", name, exc)
            return BUSY_ANSWER
        except ReadOnlyStoreError as exc:
            _log.warning("%s failed: %s", name, exc)
            return READ_ONLY_ANSWER
        except StoreError:
            _log.exception("%s failed", name)
            return UNAVAILABLE_ANSWER
        except Exception as exc:  # noqa: BLE001 - a tool call must always get an answer
            _log.exception("%s failed", name)
            return f"Error: the memory tool failed ({type(exc).__name__})"

    # -- the tools ---------------------------------------------------------

    def memory_query(self, query: str, slot: str | None = None, limit: int | None = 10,
                     tags: list[str] | None = None, source: str | None = None,
                     said_after: str | None = None, said_before: str | None = None) -> str:
        """Search memory; one line per fact, best first (``limit=None``: 10).

        :raises ArgumentError: An argument does not fit the tool's definition.
        """
        limit = self._check("memory_query", query=query, slot=slot, limit=limit, tags=tags,
                            source=source, said_after=said_after,
                            said_before=said_before).get("limit", 10)
        slots = [slot] if slot is not None else list(self.slots)
        hits = self.store.search(query, slots=slots, limit=limit, tags=tags or (),
                                 source=source, said_after=_moment("said_after", said_after),
                                 said_before=_moment("said_before", said_before),
                                 **self._owners())
        if not hits:
            return f"No memories match {bullet(query)[:200]!r}."
        lines = [f"{len(hits)} memor{'y' if len(hits) == 1 else 'ies'}, best first:"]
        lines += [self._line(hit.fact) for hit in hits]
        return "\n".join(lines)

    def memory_store(self, slot: str, value: str, key: str | None = None,
                     tags: list[str] | None = None, context: str | None = None) -> str:
        """Save a fact (replacing the one with the same key, if given).

        ``context`` is stored as the fact's context (see :meth:`FactStore.add`):
        searched, never shown. A fact already stored without a key keeps its own.
        With a key, ``tags`` replace the stored fact's tags; left out (``None``),
        they stay. The answer says what the write itself did, decided in its own
        transaction: ``Stored`` (a new fact), ``Replaced`` (a new value),
        ``Updated`` (the same value, other tags, context or source; or an identical free
        memory, hidden behind a near-duplicate since forgotten, shown again), ``Kept``
        (nothing changed), ``Already stored`` (an identical free memory).

        :raises ArgumentError: An argument does not fit the tool's definition.
        :raises InvalidFactError: The store refuses the fact or its context; nothing
            is written.
        """
        self._check("memory_store", slot=slot, value=value, key=key, tags=tags,
                    context=context)
        note = self._redaction_note(value)
        if context is not None:
            note += self._redaction_note(context, "context")
        written = self.store.write(slot, value, key=key, tags=tags, source=self.source,
                                   context=context, **self._owners(slot))
        verb = _VERBS[written.change] if key is not None or written.change != "kept" \
            else "Already stored"
        fact = written.fact
        return f"{verb} {self._line(fact)}{note}"

    def memory_update(self, id: int, value: str | None = None,
                      tags: list[str] | None = None) -> str:
        """Change a fact's value or tags.

        :raises ArgumentError: An argument does not fit, or neither is given.
        :raises FactNotFoundError: The tools may not touch this id.
        :raises InvalidFactError: The store refuses the change; nothing is written.
        """
        id = self._check("memory_update", id=id, value=value, tags=tags)["id"]
        if value is None and tags is None:
            raise ArgumentError("give 'value', 'tags' or both to change")
        self._visible(id)
        note = "" if value is None else self._redaction_note(value)
        fact = self.store.update(id, value=value, tags=tags, **self._owners())
        return f"Updated {self._line(fact)}{note}"

    def memory_reinforce(self, id: int) -> str:
        """Raise a fact's reinforcement score.

        :raises FactNotFoundError: The tools may not touch this id.
        """
        id = self._check("memory_reinforce", id=id)["id"]
        self._visible(id)
        fact = self.store.reinforce(id, **self._owners())
        return f"Reinforced [id:{fact.id}] (score now {fact.score:g})."

    def memory_demote(self, id: int) -> str:
        """Lower a fact's reinforcement score.

        :raises FactNotFoundError: The tools may not touch this id.
        """
        id = self._check("memory_demote", id=id)["id"]
        self._visible(id)
        fact = self.store.demote(id, **self._owners())
        return f"Demoted [id:{fact.id}] (score now {fact.score:g})."

    def memory_forget(self, id: int, reason: str | None = None) -> str:
        """Move a fact to the archive.

        :raises FactNotFoundError: The tools may not touch this id.
        """
        id = self._check("memory_forget", id=id, reason=reason)["id"]
        self._visible(id)
        fact = self.store.forget(id, reason=reason or f"forgotten through {self.source}",
                                 **self._owners())
        note = self._redaction_note(reason, "reason") if reason else ""
        return f"Forgot [id:{fact.id}]: {bullet(fact.value)[:200]}{note}"

    def memory_timeline(self, id: int, before: int | None = 3, after: int | None = 3) -> str:
        """The facts written around one fact, oldest first.

        Facts of slots the tools may not use are left out, so fewer than
        ``before`` + ``after`` may be shown. ``None`` for either is 3.

        :raises FactNotFoundError: The tools may not touch this id.
        """
        args = self._check("memory_timeline", id=id, before=before, after=after)
        id, before, after = args["id"], args.get("before", 3), args.get("after", 3)
        self._visible(id)
        facts = [f for f in self.store.timeline(id, before=before, after=after,
                                                **self._owners()) if f.slot in self.slots]
        noun = "memory" if len(facts) == 1 else "memories"
        lines = [f"{len(facts)} {noun} around [id:{id}], oldest first:"]
        lines += [("-> " if f.id == id else "   ") + self._line(f) for f in facts]
        return "\n".join(lines)

    def memory_delete(self, id: int) -> str:
        """Erase a fact for good, with its history, vector and links (only offered
        with ``allow_delete``).

        :raises FactNotFoundError: The tools may not touch this id.
        """
        id = self._check("memory_delete", id=id)["id"]
        if not self.allow_delete:
            raise ArgumentError("memory_delete is not offered by this tool set")
        self._visible(id)
        self.store.delete(id, **self._owners())
        return f"Erased [id:{id}] and its history for good."

    # -- helpers -----------------------------------------------------------

    def _owners(self, slot: str | None = None) -> OwnerArgs:
        """The owners a read names (``slot=None``), or those a fact of ``slot`` is
        written with: the user and agent as far as the slot has them, the scope for
        the scoped slots."""
        if slot is None:
            return {"user": self.user, "agent": self.agent, "scope": self.scope}
        has = self.store.limits.owners_of(slot)
        return {"user": self.user if has.user else None,
                "agent": self.agent if has.agent else None,
                "scope": self.scope if slot in self.scoped_slots else None}

    def _check(self, name: str, **args: Any) -> dict[str, Any]:
        """Check a direct call against the same definition the dispatcher uses; the
        arguments as it takes them (``None``, not given, left out: the tool's default
        applies; ``3.0`` as ``3``)."""
        return parse_arguments(_bound(_SPECS[name], self.store.limits), args, self.slots)

    def _redaction_note(self, value: str, field: str = "value") -> str:
        """What the answer says when the store's secret policy redacts part of ``value``
        (a refused value raises before anything is written)."""
        limits = self.store.limits
        _, secrets = limits.screen(value) if field == "value" else \
            limits.screen_reason(value) if field == "reason" else limits.context(value)
        if not secrets:
            return ""
        return (f"\nNote: the {field} held {', '.join(secrets)}; it was stored as [redacted] "
                "instead. Memory is shown on every later turn: never store secrets.")

    def _visible(self, fact_id: int) -> Fact:
        """The live fact with this id if this tool set may touch it (one of its slots,
        its owners' or shared); else 'not found'."""
        fact = self.store.get(fact_id)
        if fact is None or fact.slot not in self.slots or fact.scope not in (self.scope, None) \
                or fact.user not in (self.user, None) or fact.agent not in (self.agent, None):
            raise FactNotFoundError(fact_id)
        return fact

    def _line(self, fact: Fact) -> str:
        when = fact.said_at
        age = age_in_words(when.timestamp(), self.store.clock()) if when else "unknown age"
        key = f", key {bullet(fact.key)}" if fact.key else ""
        return f"[id:{fact.id}] ({fact.slot}{key}, {age}) {bullet(fact.value)}"


def _moment(name: str, text: str | None) -> dt.datetime | None:
    """A date or ISO moment from a tool argument, in UTC when it names no zone."""
    if text is None:
        return None
    try:
        moment = dt.datetime.fromisoformat(text)
    except ValueError:
        raise ArgumentError(f"'{name}' must be {_DATE_RULE}, not {text!r}") from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=dt.UTC)
