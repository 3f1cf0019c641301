"""What every framework integration shares: whose run it is, and memory that never
stops a run.

:class:`Memory` holds the store, the assembler and the flusher an agent's memory
needs, and runs each of the three steps of a turn (assemble the context, serve a
tool set, flush the conversation) so that a failing store or model is logged and
the run goes on without memory, unless ``strict`` asks for the error.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from .._checks import names
from .._sync import off_loop
from ..assembler import PromptAssembler
from ..errors import BudgetExceededError, InvalidArgumentError, MemoryUnavailableError
from ..flusher import FlushReport, MemoryFlusher
from ..model import AssembledPrompt, Message
from ..request import DEFAULT_BUDGET, AssemblyRequest
from ..stores import FactStore
from ..tools import DEFAULT_SLOTS, MemoryTools

__all__ = ["Memory", "MemoryContext", "RunIdentity", "identity_of"]

logger = logging.getLogger("ctxslots.integrations")

#: Longest conversation id (the flusher's own limit).
_MAX_CONVERSATION = 200


@attrs.define
class MemoryContext:
    """Whose run it is: pass it as the run's context (OpenAI Agents SDK) or
    dependencies (pydantic-ai). Any object with these attributes, or a mapping
    with these keys, works the same; this one also receives the flush report.

    Attributes:
        user: The user the run serves (``None``: the store's default user).
        scope: The workspace (``None``: global facts only).
        agent: The agent (``None``: the framework's agent name, else the
            store's default agent).
        conversation: Identifies the conversation across runs, so each flush
            reads only what is new (``None``: ``"default"``).
        flush_report: Set when the run ends: what the flush did (``None``: no
            flush ran, or it failed before reporting).
    """

    user: str | None = None
    scope: str | None = None
    agent: str | None = None
    conversation: str | None = None
    flush_report: FlushReport | None = None


@attrs.frozen
class RunIdentity:
    """The owners and conversation one run reads and writes memory for.

    Attributes:
        user: The user (``None``: the store's default user).
        agent: The agent (``None``: the store's default agent).
        scope: The workspace (``None``: global facts only).
        conversation: The conversation id of the flush.
    """

    user: str | None = None
    agent: str | None = None
    scope: str | None = None
    conversation: str = "default"


def _described(who: RunIdentity) -> str:
    """Whose run it is, in words for a log line: the user (or the store's default user),
    the agent and scope when named, and the conversation."""
    user = "the default user" if who.user is None else f"user {who.user[:80]!r}"
    parts = [user] + [f"{kind} {name[:80]!r}" for kind, name in
                      (("agent", who.agent), ("scope", who.scope)) if name is not None]
    return f"{', '.join(parts)}, conversation {who.conversation[:80]!r}"


def _field(source: object, name: str) -> object:
    if isinstance(source, Mapping):
        return source.get(name)
    return getattr(source, name, None)


def _text_or_none(name: str, value: object) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise InvalidArgumentError(f"the run's {name} must be a string or None, not "
                               f"{type(value).__name__}", field=name, value=value)


def identity_of(source: object, *, agent: str | None = None,
                conversation: str | None = None) -> RunIdentity:
    """The identity a run's context names: attributes (or mapping keys) ``user``,
    ``scope``, ``agent`` and ``conversation``; missing ones are ``None``.

    :param agent: The agent when the context names none (the framework's agent name).
    :param conversation: The conversation when the context names none (the
        framework's own conversation id; else ``"default"``).
    :raises InvalidArgumentError: One of them is neither a string nor ``None``.
    """
    user = _text_or_none("user", _field(source, "user"))
    scope = _text_or_none("scope", _field(source, "scope"))
    named = _text_or_none("agent", _field(source, "agent"))
    named_conversation = _text_or_none("conversation", _field(source, "conversation"))
    return RunIdentity(user=user, agent=named if named is not None else agent, scope=scope,
                       conversation=named_conversation or conversation or "default")


def record_report(source: object, report: FlushReport | None) -> None:
    """Hand the run's flush report to a :class:`MemoryContext` (other contexts are left
    alone); ``None`` when the flush failed before reporting, so a context used for
    several runs never keeps an earlier run's report."""
    if isinstance(source, MemoryContext):
        source.flush_report = report


def _check_store(_instance: object, _attribute: object, store: FactStore) -> None:
    if not isinstance(store, FactStore):
        raise InvalidArgumentError(f"store must be a FactStore, not {type(store).__name__}",
                                   field="store", value=store)


def _check_flusher(_instance: object, _attribute: object, flusher: MemoryFlusher | None) -> None:
    if flusher is not None and not isinstance(flusher, MemoryFlusher):
        raise InvalidArgumentError(f"flusher must be a MemoryFlusher or None, not "
                                   f"{type(flusher).__name__}", field="flusher", value=flusher)


def _slot_tuple(slots: Sequence[str]) -> tuple[str, ...]:
    if isinstance(slots, str):
        return (slots,)
    return tuple(slots)


def _slot_set(slots: Iterable[str]) -> frozenset[str]:
    # As MemoryTools and MemoryFlusher take them: one string is one slot name.
    return frozenset(names(slots, "scoped_slots"))


@attrs.define
class Memory:
    """An agent's memory for a framework integration: what it sees, its tools, what
    it keeps.

    ::

        memory = Memory(store, flusher=MemoryFlusher(store, client))

    A failure of the store, the assembler or the flusher's model is logged on
    the ``ctxslots.integrations`` logger and the run goes on without memory (no
    context, no flush); with ``strict`` the error is raised into the run
    instead. A tool call that fails answers ``Error: ...`` to the model either
    way, as the tools always do.

    Attributes:
        store: The fact store.
        flusher: Writes facts from each run's conversation when the run ends
            (through its policy); ``None``: no flush.
        assembler: Builds the context (default: a :class:`PromptAssembler` over
            ``store`` with the built-in memory slots).
        budget: Tokens the assembled context may use.
        slots: The slots the tools may read and write.
        scoped_slots: The slots whose facts the tools write in the run's scope (the
            others are global), as :class:`~ctxslots.MemoryTools` takes them; the
            flusher's must be the same (it decides where the flush writes).
        allow_delete: Offer the ``memory_delete`` tool (erases a fact for good).
        strict: Raise memory failures into the run instead of logging them.
        force_flush: Flush at the end of every run, whatever the policy says.
        require_user: A run whose context names no user gets no memory (no context,
            tool calls answer an error, no flush), as a failure: logged, or raised
            with ``strict``. For a service of many users, where a run that forgot to
            name its user (a ``user_id`` field, LangGraph's ``context=``) would read
            and write the store's default user's memory. Off: such a run is the
            default user's, as a single-user store wants.
    """

    store: FactStore = attrs.field(validator=_check_store)
    flusher: MemoryFlusher | None = attrs.field(default=None, kw_only=True,
                                                validator=_check_flusher)
    assembler: PromptAssembler | None = attrs.field(default=None, kw_only=True)
    budget: int = attrs.field(default=DEFAULT_BUDGET, kw_only=True)
    slots: tuple[str, ...] = attrs.field(default=DEFAULT_SLOTS, kw_only=True,
                                         converter=_slot_tuple)
    scoped_slots: frozenset[str] = attrs.field(default=frozenset({"project"}), kw_only=True,
                                               converter=_slot_set)
    allow_delete: bool = attrs.field(default=False, kw_only=True)
    strict: bool = attrs.field(default=False, kw_only=True)
    force_flush: bool = attrs.field(default=False, kw_only=True)
    require_user: bool = attrs.field(default=False, kw_only=True)

    def __attrs_post_init__(self) -> None:
        if self.assembler is None:
            self.assembler = PromptAssembler(self.store)
        # A budget that no request can hold is a mistake of the program: said now.
        AssemblyRequest("", budget=self.budget)
        MemoryTools(self.store, slots=self.slots, scoped_slots=self.scoped_slots)
        if self.flusher is not None and self.flusher.scoped_slots != self.scoped_slots:
            # Else the tools keep a slot's facts in the workspace and the flush global.
            raise InvalidArgumentError(
                f"Memory(scoped_slots={sorted(self.scoped_slots)}) and its flusher's "
                f"scoped_slots {sorted(self.flusher.scoped_slots)} differ: give the "
                "MemoryFlusher the same scoped_slots", field="scoped_slots",
                value=sorted(self.scoped_slots))

    # -- the context ---------------------------------------------------------

    def _unnamed(self, who: RunIdentity) -> bool:
        """Whether this run may not have memory: it names no user and one is required."""
        return self.require_user and who.user is None

    def _no_user(self, step: str, fallback: Any, who: RunIdentity) -> Any:
        return self.handle_failure(step, "the run's context names no user, and require_user "
                                         "is set", fallback, who=who)

    def _request(self, message: str, who: RunIdentity) -> AssemblyRequest:
        return AssemblyRequest(message, user=who.user, agent=who.agent, scope=who.scope,
                               budget=self.budget)

    def context(self, message: str, who: RunIdentity) -> str:
        """The assembled memory for ``message``: the prompt text, ``""`` when memory
        fails (logged; :class:`~ctxslots.errors.MemoryUnavailableError` with ``strict``).
        A section whose contributor failed is left out, and the assembler's warning on
        the ``ctxslots.assembler`` logger names it (raised with ``strict``)."""
        assert self.assembler is not None  # set in __attrs_post_init__
        if self._unnamed(who):
            return str(self._no_user("assembling the context", "", who))
        try:
            prompt = self.assembler.assemble(self._request(message, who))
        except BudgetExceededError as exc:  # the sticky sections, cut to fit: still memory
            prompt = exc.prompt
        except Exception as exc:  # noqa: BLE001 - memory must not stop the run
            return str(self.handle_failure("assembling the context", exc, "", who=who))
        return self._checked(prompt, who)

    async def acontext(self, message: str, who: RunIdentity) -> str:
        """:meth:`context` for async frameworks (the store is read in worker threads)."""
        assert self.assembler is not None  # set in __attrs_post_init__
        if self._unnamed(who):
            return str(self._no_user("assembling the context", "", who))
        try:
            prompt = await self.assembler.aassemble(self._request(message, who))
        except BudgetExceededError as exc:
            prompt = exc.prompt
        except Exception as exc:  # noqa: BLE001 - memory must not stop the run
            return str(self.handle_failure("assembling the context", exc, "", who=who))
        return self._checked(prompt, who)

    def _checked(self, prompt: AssembledPrompt, who: RunIdentity) -> str:
        """The prompt's text; with ``strict``, an error naming its failed sections instead
        (without, the assembler has logged each, and the other sections still go out)."""
        failed = [f"{s.name}: {s.error}" for s in prompt.sections if s.status == "error"]
        if failed and self.strict:
            self.handle_failure("assembling the context", "; ".join(failed), None, who=who)
        return prompt.text

    # -- the tools -----------------------------------------------------------

    def tools(self, who: RunIdentity) -> MemoryTools:
        """The memory tools bound to this run's owners.

        :raises InvalidFactError: An owner is malformed.
        """
        return MemoryTools(self.store, user=who.user, agent=who.agent, scope=who.scope,
                           slots=self.slots, scoped_slots=self.scoped_slots,
                           allow_delete=self.allow_delete)

    def dispatch(self, name: str, arguments: str | Mapping[str, Any] | None,
                 who: RunIdentity) -> str:
        """Run one tool call for this run's owners; always text (``Error: ...`` on failure,
        logged when the run's owners are ones the store refuses; never raised, even with
        ``strict``)."""
        if self._unnamed(who):  # answered, not raised, with strict too: a tool call's rule
            logger.warning("memory is unavailable for %s (calling a memory tool failed: the "
                           "run's context names no user, and require_user is set); the tool "
                           "call is answered with the error", _described(who))
            return "Error: memory is unavailable (the run names no user)"
        try:
            tools = self.tools(who)
        except Exception as exc:  # noqa: BLE001 - a tool call always gets an answer
            reason = f"{type(exc).__name__}: {exc}"
            logger.warning("memory is unavailable for %s (calling a memory tool failed: %s); "
                           "the tool call is answered with the error", _described(who), reason)
            return f"Error: memory is unavailable ({reason})"
        return tools.dispatch(name, arguments)

    async def adispatch(self, name: str, arguments: str | Mapping[str, Any] | None,
                        who: RunIdentity) -> str:
        """:meth:`dispatch` in a worker thread, for async frameworks (inside a
        :meth:`~ctxslots.FactStore.batch` this thread has open, here, as part of it: a
        worker thread's call would wait for the batch to end)."""
        return await off_loop(lambda: self.dispatch(name, arguments, who),
                              here=self.store.in_batch)

    # -- the flush -----------------------------------------------------------

    async def aflush(self, messages: Sequence[Message], who: RunIdentity) -> FlushReport | None:
        """Flush a run's conversation through the flusher's policy (or always, with
        ``force_flush``).

        :return: The report (``not_due`` and ``nothing_new`` are logged at INFO), or
            ``None`` when there is no flusher or the flush failed (logged; raised with
            ``strict``). A failed flush's report is returned when the flusher made one.
        """
        if self.flusher is None or not messages:
            return None
        if self._unnamed(who):
            self._no_user("flushing the conversation", None, who)
            return None
        try:
            conversation = who.conversation[:_MAX_CONVERSATION]
            report = await self.flusher.aflush(list(messages), conversation=conversation,
                                               user=who.user, agent=who.agent, scope=who.scope,
                                               force=self.force_flush)
        except Exception as exc:  # noqa: BLE001 - memory must not stop the run
            failed = getattr(exc, "report", None)
            self.handle_failure("flushing the conversation", exc, None, who=who)
            return failed if isinstance(failed, FlushReport) else None
        if report.status in ("not_due", "nothing_new"):
            logger.info("memory flush of conversation %r for user %r: %s (%s)", conversation,
                        report.user, report.status, report.detail)
        return report

    def handle_failure(self, step: str, exc: Exception | str, fallback: Any, *,
                       who: RunIdentity | None = None) -> Any:
        """Log a memory failure (an exception, or what failed in words) and return
        ``fallback``: the run goes on without memory. With ``strict``, raise
        :class:`~ctxslots.errors.MemoryUnavailableError` instead.

        :param who: The run that failed, named in the message (its user, agent, scope
            and conversation), when known.
        """
        reason = exc if isinstance(exc, str) else f"{type(exc).__name__}: {exc}"
        run = "" if who is None else f" for {_described(who)}"
        if self.strict:
            raise MemoryUnavailableError(f"memory is unavailable{run} ({step} failed: {reason})",
                                         step=step) from (exc if isinstance(exc, Exception)
                                                          else None)
        logger.warning("memory is unavailable%s (%s failed: %s); the run goes on without it",
                       run, step, reason)
        return fallback
