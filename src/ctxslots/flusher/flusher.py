"""MemoryFlusher: new conversation messages in, validated fact operations out.

One flush reads the messages a conversation gained since the last flush, shows
them to a model with the facts already known, reads back the operations
(:mod:`.operations`), and applies the valid ones together with the new read
position in one transaction. See ``docs/flushing.md``.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs
import jinja2

from .._calendar import WEEKDAY_NAMES
from .._checks import names, store_of
from .._readable import count
from .._sync import off_loop
from ..errors import FlushError, InvalidArgumentError, InvalidFactError, StoreClosedError
from ..model import Fact, Message
from ..prompts import Templates, make_environment, render_template
from ..stores import FactStore
from ..stores.owners import OwnerArgs, Owners
from ..stores.upkeep.consolidate import DEFAULT_THRESHOLD
from ..stores.upkeep.prune import PrunePolicy
from ._batch import take_batch
from ._context import fact_context
from ._exchange import RETRY_PROMPT, aask, ask
from ._progress import (
    READ_AGAIN_NEXT,
    READING_AGAIN,
    Progress,
    check_conversation,
    check_messages,
    read_progress,
    start_position,
    write_progress,
)
from .llm_client import LLMClient
from .operations import (
    KEY_PATTERN,
    Forget,
    Operation,
    Upsert,
    check_operation,
    operations_schema,
)
from .report import Change, FlushPolicy, FlushReport, Rejection

__all__ = ["DEFAULT_MAX_FLUSH_TOKENS", "DEFAULT_SLOTS", "RETRY_PROMPT", "MemoryFlusher"]

#: The owners of each keyed fact a flush showed the model, by slot and key.
_Shown = dict[tuple[str, str], OwnerArgs]

#: The built-in slots and what each holds, as the extraction prompt explains them.
DEFAULT_SLOTS: Mapping[str, str] = {
    "user": "who the user is: name, role, preferences, habits, tools, constraints.",
    "project": "facts about the current workspace: architecture, commands, conventions, "
    "decisions, deadlines, people.",
    "agent": "lessons the assistant learned about doing its work: what failed, what worked, "
    "what to avoid next time.",
}

#: At most this much of the new messages' text (the end of it) is the search
#: query for relevant known facts.
QUERY_CHARS = 4000

#: What one flush sends at most, in tokens of messages with their headings (the instructions and
#: the known facts come on top): room for a long session in one request, and
#: within the context of small local models.
DEFAULT_MAX_FLUSH_TOKENS = 8000

OperationCallback = Callable[[int, Operation], None]


class _Failed(Exception):
    """Internal: a failure after which the flush reports ``"failed"``, and why (a
    :attr:`~ctxslots.errors.FlushError.reason`)."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


@attrs.frozen
class _Read:
    """What a flush read before asking the model, checked again when it commits: its
    conversation's progress, and for a first flush (no progress) the count of erasures of
    its owners (:meth:`~ctxslots.FactStore.owner_erasures_of`)."""

    progress: Progress | None
    erasures: int | None


class _Cancelled(Exception):
    """Internal: the flush was cancelled before its transaction committed (rolls it back)."""


def _slot_meanings(slots: Mapping[str, str] | Sequence[str]) -> dict[str, str]:
    if isinstance(slots, Mapping):
        meanings = dict(slots)
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in meanings.items()):
            raise InvalidArgumentError("slots must map slot names to what each holds (text), "
                                       f"not {slots!r}", field="slots", value=slots)
        return meanings
    return {name: DEFAULT_SLOTS.get(name, f"facts of the {name} slot.")
            for name in names(slots, "slots")}


def _scoped(slots: Iterable[str]) -> frozenset[str]:
    return frozenset(names(slots, "scoped_slots"))


def _said_later(fact: Fact | None, moment: dt.datetime | None) -> str | None:
    """When ``fact`` was said, where that is after ``moment`` (a flush of older messages,
    replayed after newer ones, must not replace what was said since), else ``None``."""
    said = None if fact is None else fact.said_at
    if said is None or moment is None:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return f"{said:%Y-%m-%d %H:%M:%S} UTC" if said > moment else None


def _date_line(when: dt.datetime) -> str:
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return f"{when:%Y-%m-%d} ({WEEKDAY_NAMES[when.weekday()]})"


@attrs.define
class MemoryFlusher:
    """Extracts facts from a conversation with a model and writes them to a store.

    ::

        flusher = MemoryFlusher(store, OpenAIChatClient("http://127.0.0.1:8080/v1", "m"))
        report = flusher.flush(messages, conversation="chat-42", scope="shop-api")

    Attributes:
        store: Where facts are read and written.
        client: The model: any :class:`~ctxslots.flusher.LLMClient` (an object
            with ``complete(messages, *, json_schema, temperature) -> ChatResult``).
        policy: Decides when :meth:`flush` without ``force`` does its work.
        slots: The slots the model may write, mapped to the meaning shown to
            it (a list of names takes the built-in meanings).
        scoped_slots: Slots whose facts belong to the flush's ``scope``; facts
            of the other slots are global. Each must be a slot whose facts may
            belong to a workspace. Facts of a slot that belongs to a user (an
            agent) go to the flush's ``user`` (``agent``).
        template: Name of the extraction prompt template.
        templates: Template overrides (a mapping of name to source, or a
            directory), tried before the built-in ``prompts/`` folder.
        max_known_facts: Most known facts shown to the model.
        temperature: Sampling temperature of the model call (0 to 2).
        send_schema: Send the reply schema as ``response_format``.
        on_operation: Called with ``(index, operation)`` inside the write
            transaction before each operation is applied (progress display);
            an exception it raises rolls the whole flush back.
        consolidate: Cosine threshold above which a fact the flush wrote
            supersedes an older near-duplicate of the same slot and scope (see
            :meth:`~ctxslots.FactStore.consolidate`); ``None``, or a store
            without an embedder: no consolidation here.
        prune: Caps checked after each flush that wrote facts, for the slots and
            owners it wrote to; over a cap, the least useful facts move to the
            archive (see :class:`~ctxslots.stores.upkeep.prune.PrunePolicy`).
            ``None``: never prune here.
        max_flush_tokens: Most tokens of messages one flush sends (counted with
            the policy's encoding, each message with its heading and fences in the
            prompt): the oldest unread messages that fit go,
            the rest wait for the next flush (``report.remaining``); a single
            message over the cap is sent cut to it. ``None``: send every unread
            message at once.
        context_before: Each fact's context is the messages its upsert names
            (``"messages"`` in the reply, within ``Limits.max_context_bytes``);
            this many messages said just before the first of them are added.
            A reply that names no messages writes the fact without a context.

    :raises InvalidFactError: A slot name is malformed (or unknown to a store
        with strict slots), or ``slots`` is empty.
    :raises InvalidArgumentError: An option has the wrong type or is out of range
        (``max_known_facts`` or ``context_before`` negative, ``temperature`` outside
        0 to 2, ``consolidate`` outside (0, 1], ``policy`` or ``prune`` not a policy).
    """

    store: FactStore = attrs.field(validator=store_of)
    client: LLMClient
    policy: FlushPolicy = attrs.field(factory=FlushPolicy)
    slots: Mapping[str, str] = attrs.field(factory=lambda: dict(DEFAULT_SLOTS),
                                           converter=_slot_meanings)
    scoped_slots: frozenset[str] = attrs.field(default=frozenset({"project"}), converter=_scoped)
    template: str = "extract.jinja2"
    templates: Templates | None = None
    max_known_facts: int = 50
    temperature: float = 0.0
    send_schema: bool = True
    on_operation: OperationCallback | None = None
    consolidate: float | None = DEFAULT_THRESHOLD
    prune: PrunePolicy | None = attrs.field(factory=PrunePolicy)
    max_flush_tokens: int | None = attrs.field(default=DEFAULT_MAX_FLUSH_TOKENS)
    context_before: int = 0
    _env: jinja2.Environment = attrs.field(init=False, repr=False)
    _lock: threading.RLock = attrs.field(init=False, repr=False, factory=threading.RLock)

    def __attrs_post_init__(self) -> None:
        self._check_options()
        cap = self.max_flush_tokens
        if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap < 1):
            raise InvalidArgumentError(f"max_flush_tokens must be a positive integer or None, "
                                       f"not {cap!r}", field="max_flush_tokens", value=cap)
        for slot in self.slots:
            self.store.limits.slot(slot)
        if not self.slots:
            raise InvalidArgumentError("slots must name at least one slot", field="slots",
                                   value=self.slots)
        self._env = make_environment(templates=self.templates)
        for slot in self.scoped_slots:
            if not self.store.limits.owners_of(slot).scope:
                raise InvalidArgumentError(
                    f"{slot} facts do not belong to a workspace: leave {slot} out of "
                    "scoped_slots", field="scoped_slots", value=sorted(self.scoped_slots))

    def _check_options(self) -> None:
        """Each option of the wrong type or out of range, as one clear error."""
        for name in ("max_known_facts", "context_before"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidArgumentError(f"{name} must be an integer >= 0, not {value!r}",
                                           field=name, value=value)
        heat = self.temperature
        if isinstance(heat, bool) or not isinstance(heat, (int, float)) or not 0 <= heat <= 2:
            raise InvalidArgumentError(f"temperature must be a number from 0 to 2, not {heat!r}",
                                       field="temperature", value=heat)
        near = self.consolidate
        if near is not None and (isinstance(near, bool) or not isinstance(near, (int, float))
                                 or not 0 < near <= 1):
            raise InvalidArgumentError(f"consolidate must be a cosine in (0, 1] or None, not "
                                       f"{near!r}", field="consolidate", value=near)
        for name, kind in (("policy", FlushPolicy), ("prune", PrunePolicy)):
            value = getattr(self, name)
            if not isinstance(value, kind) and not (name == "prune" and value is None):
                raise InvalidArgumentError(
                    f"{name} must be a {kind.__name__}{' or None' if name == 'prune' else ''}, "
                    f"not {type(value).__name__}", field=name, value=value)

    # -- progress ----------------------------------------------------------

    def _progress(self, conversation: str, user: str | None, agent: str | None
                  ) -> Progress | None:
        return read_progress(self.store, conversation, user=user, agent=agent)

    def messages_read(self, conversation: str, *, user: str | None = None,
                      agent: str | None = None) -> int:
        """How many messages of this user's and agent's ``conversation`` earlier
        flushes have read."""
        progress = self._progress(check_conversation(conversation), user, agent)
        return progress[0] if progress else 0

    def unflushed(self, messages: Sequence[Message | Mapping[str, Any]], *,
                  conversation: str = "default", user: str | None = None,
                  agent: str | None = None) -> list[Message]:
        """The messages a flush of ``conversation`` would read now.

        :raises InvalidArgumentError: ``messages`` or ``conversation`` is malformed.
        :raises InvalidFactError: ``user`` or ``agent`` is malformed.
        """
        msgs = check_messages(messages)
        start, _ = start_position(
            self._progress(check_conversation(conversation), user, agent), msgs)
        return msgs[start:]

    def should_flush(self, messages: Sequence[Message | Mapping[str, Any]], *,
                     conversation: str = "default", user: str | None = None,
                     agent: str | None = None) -> bool:
        """Whether the policy says the unflushed messages are due for a flush."""
        return self.policy.should_flush(self.unflushed(messages, conversation=conversation,
                                                       user=user, agent=agent))

    # -- flushing ----------------------------------------------------------

    def flush(
        self,
        messages: Sequence[Message | Mapping[str, Any]],
        *,
        conversation: str = "default",
        scope: str | None = None,
        user: str | None = None,
        agent: str | None = None,
        force: bool = False,
        written_at: dt.datetime | None = None,
    ) -> FlushReport:
        """Read the new messages of ``conversation`` and apply what the model extracts.

        Messages already read are not sent again; with none new, no model is
        called and nothing changes. When the messages read before have changed,
        the whole conversation is read again and the report says so.

        :param messages: The whole conversation so far, oldest first:
            :class:`~ctxslots.model.Message` objects or ``{role, content}`` mappings.
        :param conversation: Identifies the conversation across flushes (one
            record per user, agent and conversation).
        :param scope: The workspace for the scoped slots (``project``).
        :param user: Whose conversation it is: user facts are written as theirs,
            and the facts shown to the model as known are the ones they see
            (``None``: the store's default user).
        :param agent: The agent in the conversation, whose lessons agent facts
            become (``None``: the store's default agent).
        :param force: Flush even when the policy says it is not due yet (session
            end, before compaction: then again while ``report.remaining`` is not 0,
            as one flush sends at most ``max_flush_tokens`` of messages).
        :param written_at: When the messages were written (a datetime from 1970 on;
            default: now), so the model can turn relative dates into calendar
            dates; also the observed time of the facts the flush writes
            (``Fact.observed_at``), so a replayed conversation keeps its real dates;
            a fact said after it is left as it is (see ``report.rejected``).
        :return: The report; invalid operations are in ``report.rejected``.
        :raises FlushError: The model call failed, its reply could not be read
            after one retry, or applying failed (``error.reason`` says which; a store
            closed while the model answered is ``"store_closed"``). The store is
            unchanged and ``error.report`` holds the raw outputs.
        :raises StoreClosedError: The store was already closed when the flush began.
        :raises InvalidFactError: ``messages``, ``conversation``, ``written_at`` (these
            three InvalidArgumentError), ``scope``, ``user`` or ``agent`` is malformed;
            nothing is sent to the model.
        """
        prepared = self._prepare(messages, conversation, Owners(user, agent, scope), force,
                                 written_at)
        if isinstance(prepared, FlushReport):
            return prepared
        prompt, base, read, msgs, shown, when = prepared
        ops, base = self._ask(prompt, base)
        return self._apply(ops, base, read, msgs, shown, written_at=when)

    async def aflush(
        self,
        messages: Sequence[Message | Mapping[str, Any]],
        *,
        conversation: str = "default",
        scope: str | None = None,
        user: str | None = None,
        agent: str | None = None,
        force: bool = False,
        written_at: dt.datetime | None = None,
    ) -> FlushReport:
        """:meth:`flush` for async agent loops.

        The model is asked on the event loop when the client has an
        ``acomplete`` coroutine (the shipped HTTP client does), else in a worker
        thread; the store is read and written in worker threads. Cancelling the
        task stops it before anything is written: during the model call the
        request is abandoned, and a cancel that arrives while the operations are
        being applied rolls their transaction back, unless it has already
        committed (then the flush stands and the cancel is still raised). Inside a
        :meth:`~ctxslots.FactStore.batch` the calling thread has open, the store is
        read and written on this thread, as part of the batch (:meth:`flush` does so).
        """
        here = self.store.in_batch  # a worker thread would wait for this thread's batch
        owners = Owners(user, agent, scope)
        prepared = await off_loop(
            lambda: self._prepare(messages, conversation, owners, force, written_at), here=here)
        if isinstance(prepared, FlushReport):
            return prepared
        prompt, base, read, msgs, shown, when = prepared
        ops, base = await self._aask(prompt, base)
        if here:
            return self._apply(ops, base, read, msgs, shown, written_at=when)
        cancelled = threading.Event()
        applying = asyncio.ensure_future(asyncio.to_thread(
            self._apply, ops, base, read, msgs, shown, cancelled, when))
        try:
            return await asyncio.shield(applying)
        except asyncio.CancelledError:
            cancelled.set()
            with contextlib.suppress(BaseException):  # the rollback, or the committed flush
                await applying
            raise

    def _prepare(self, messages: Sequence[Message | Mapping[str, Any]], conversation: str,
                 owners: Owners, force: bool, written_at: dt.datetime | None
                 ) -> FlushReport | tuple[str, FlushReport, _Read, list[Message],
                                          _Shown, dt.datetime]:
        """Check the input and read what a flush needs: a report when there is nothing
        to ask, else the prompt, the report so far, the read position, the messages, the
        owners of each keyed fact the model is shown, and the moment the facts are said
        at (``written_at``, else the clock's now: one moment for every fact of the
        flush, which makes them one episode)."""
        msgs = check_messages(messages)
        conv = check_conversation(conversation)
        limits = self.store.limits
        if written_at is not None:
            if not isinstance(written_at, dt.datetime):
                raise InvalidArgumentError(f"written_at must be a datetime or None, not "
                                           f"{type(written_at).__name__}", field="written_at",
                                           value=written_at)
            try:
                limits.moment(written_at, "written_at")
            except InvalidFactError as exc:
                raise InvalidArgumentError(str(exc), field="written_at", value=written_at
                                           ) from None
        scope = limits.scope(owners.scope) or None
        user, agent = (None if owners.user is None else limits.owner(owners.user, "user"),
                       None if owners.agent is None else limits.owner(owners.agent, "agent"))
        flush_id = uuid.uuid4().hex[:12]
        with self._lock:
            progress = self._progress(conv, user, agent)
            # A first flush has no progress an erasure could remove: it is told by the
            # store's count of erasures instead.
            read = _Read(progress, None if progress is not None else
                         self.store.owner_erasures_of(user=user, agent=agent, scope=scope))
            start, warning = start_position(progress, msgs)
            new = msgs[start:]
            reads = bool(new) and (force or self.policy.should_flush(new))
            if warning is not None:
                warning += READING_AGAIN if reads else READ_AGAIN_NEXT
            base = FlushReport(
                status="nothing_new", conversation=conv, flush_id=flush_id, scope=scope,
                user=user, agent=agent,
                model=getattr(self.client, "name", None),
                first=start + 1, last=len(msgs), messages_read=start,
                restarted=warning is not None, warnings=(warning,) if warning else (),
                source=self._source(flush_id, conv, msgs, start),
            )
            if not new:
                return attrs.evolve(base, last=start, detail="no new messages since the last flush"
                                    if warning is None else "no messages to read")
            if not reads:  # not due yet
                return attrs.evolve(base, status="not_due", last=start, remaining=len(new),
                                    detail=f"not due yet: {self.policy.explain(new)}")
            batch = take_batch(new, self.max_flush_tokens, self.policy.encoding, start + 1)
            end = start + batch.count
            known = self._known_facts(list(batch.messages), Owners(user, agent, scope))
        base = attrs.evolve(
            base, known_facts={i: f.id for i, f in enumerate(known, start=1)}, last=end,
            remaining=len(msgs) - end, source=self._source(flush_id, conv, msgs[:end], start),
            warnings=(*base.warnings, *([batch.warning] if batch.warning else [])))
        when = written_at if written_at is not None else dt.datetime.fromtimestamp(
            self.store.clock(), tz=dt.UTC)
        prompt = render_template(self._env, self.template,
                                 **self._context(list(batch.messages), start, known, scope, when))
        shown: _Shown = {}
        for fact in known:  # the best-ranked first, as the model reads them
            if fact.key is not None:
                shown.setdefault((fact.slot, fact.key), OwnerArgs(
                    scope=fact.scope, user=fact.user, agent=fact.agent))
        return prompt, base, read, msgs[:end], shown, when

    def _source(self, flush_id: str, conv: str, msgs: list[Message], start: int) -> str:
        if start >= len(msgs):
            span = "-"
        else:
            first, last = msgs[start], msgs[-1]
            if first.id is not None and last.id is not None:
                span = f"{first.id[:100]}-{last.id[:100]}"
            else:
                span = f"{start + 1}-{len(msgs)}"
        return f"flush:{flush_id} conv:{conv} msgs:{span}"

    def _owners_for(self, slot: str, report: FlushReport) -> OwnerArgs:
        """The owners a fact of ``slot`` written by this flush gets: the flush's user or
        agent when the slot belongs to one, its scope when the slot is scoped."""
        has = self.store.limits.owners_of(slot)
        return {"user": report.user if has.user else None,
                "agent": report.agent if has.agent else None,
                "scope": report.scope if slot in self.scoped_slots else None}

    def _known_facts(self, new: list[Message], owners: Owners) -> list[Fact]:
        """Facts the flush's owners see that match the new messages, then the most
        recent keyed ones."""
        slots = list(self.slots)
        text = "\n".join(m.content for m in new)[-QUERY_CHARS:]
        limit = max(1, min(self.max_known_facts, 1000))
        found: dict[int, Fact] = {}
        whose = OwnerArgs(scope=owners.scope, user=owners.user, agent=owners.agent)
        for hit in self.store.search(text, slots=slots, limit=limit, track_access=False,
                                     **whose):
            found.setdefault(hit.fact.id, hit.fact)
        keyed = [f for f in self.store.facts(slots=slots, **whose) if f.key is not None]
        keyed.sort(key=lambda f: (f.updated_at or dt.datetime.min, f.id), reverse=True)
        for fact in keyed:
            found.setdefault(fact.id, fact)
        return list(found.values())[: max(0, self.max_known_facts)]

    def _context(self, new: list[Message], start: int, known: list[Fact], scope: str | None,
                 when: dt.datetime) -> dict[str, Any]:
        return {
            "date": _date_line(when),
            "scope": scope,
            "slots": [{"name": n, "meaning": m, "scoped": n in self.scoped_slots}
                      for n, m in self.slots.items()],
            "known_facts": [
                {"ref": i, "slot": f.slot, "key": f.key, "value": f.value,
                 "tags": list(f.tags), "confidence": f.confidence}
                for i, f in enumerate(known, start=1)
            ],
            "messages": [{"number": start + i, "role": m.role, "content": m.content}
                         for i, m in enumerate(new, start=1)],
            "first": start + 1,
            "last": start + len(new),
            "key_pattern": KEY_PATTERN,
            "max_value_bytes": self.store.limits.max_value_bytes,
            "schema": json.dumps(operations_schema(self.slots), ensure_ascii=False),
        }

    def _ask(self, prompt: str, base: FlushReport) -> tuple[tuple[Operation, ...], FlushReport]:
        """Call the model (once more after an unreadable reply); return the operations."""
        return ask(self.client, prompt, base, schema=self._schema(),
                   temperature=self.temperature)

    async def _aask(self, prompt: str, base: FlushReport
                    ) -> tuple[tuple[Operation, ...], FlushReport]:
        """:meth:`_ask` on the event loop (the client's ``acomplete``, else a worker thread)."""
        return await aask(self.client, prompt, base, schema=self._schema(),
                          temperature=self.temperature)

    def _schema(self) -> dict[str, Any] | None:
        return operations_schema(self.slots) if self.send_schema else None

    def _check(self, ops: Sequence[Operation]
               ) -> tuple[list[tuple[int, Operation]], list[Rejection]]:
        valid: list[tuple[int, Operation]] = []
        rejected: list[Rejection] = []
        targets: dict[tuple[str, str], int] = {}
        reasons = [check_operation(op, slots=list(self.slots), limits=self.store.limits)
                   for op in ops]
        # A forget and an upsert of one key in one reply mean the new value (the prompt
        # says to change a fact so): the old value stays in the fact's history. Applying
        # the forget because it came first archived the fact and dropped the new value.
        upserted: dict[tuple[str, str], int] = {}
        for index, op in enumerate(ops):
            if isinstance(op, Upsert) and reasons[index] is None:
                upserted.setdefault((op.slot, op.key), index)
        for index, op in enumerate(ops):
            reason = reasons[index]
            target = (op.slot, op.key)
            if reason is None and isinstance(op, Forget) and target in upserted:
                reason = (f"operations[{upserted[target]}] already targets {op.slot}/{op.key} "
                          "with an upsert, whose value replaces the old one (kept in its "
                          "history); one operation per slot and key")
            if reason is None and target in targets:
                reason = (f"operations[{targets[target]}] already targets {op.slot}/{op.key}; "
                          "one operation per slot and key")
            cap = self.store.limits.max_batch
            if reason is None and len(valid) >= cap:
                # One transaction writes at most that many; past it the whole flush would
                # fail on every try, and the conversation never be read further.
                reason = (f"a flush applies at most {count(cap, 'operation')} (the store's "
                          "Limits.max_batch); this one was not applied")
            if reason is not None:
                rejected.append(Rejection(index=index, operation=op, reason=reason))
                continue
            targets[target] = index
            valid.append((index, op))
        return valid, rejected

    def _apply(self, ops: Sequence[Operation], base: FlushReport,
               read: _Read, msgs: list[Message], shown: _Shown,
               cancelled: threading.Event | None = None,
               written_at: dt.datetime | None = None) -> FlushReport:
        """Apply the valid operations and the new read position in one transaction
        (rolled back if ``cancelled`` is set before it commits)."""
        valid, rejected = self._check(ops)
        changes: dict[str, list[Change]] = {"added": [], "updated": [], "unchanged": [],
                                             "forgotten": []}
        notes: list[str] = []
        try:
            with self._lock, self.store.batch(savepoints=False):
                # The counts of its owners' erasures first: an erasure holds its owner's
                # from its start to its commit (PostgreSQL), so one under way ends before
                # the progress is read, and one not begun waits for this flush to commit,
                # then erases it too. Another owner's erasure is none of this flush's.
                erasures = self.store.owner_erasures_of(user=base.user, agent=base.agent,
                                                        scope=base.scope)
                recorded = self._progress(base.conversation, base.user, base.agent)
                progress = read.progress
                if recorded is None and progress is not None:
                    raise _Failed(f"the progress of {base.conversation!r} was erased "
                                  "meanwhile, with its user's or agent's memory: nothing "
                                  "of this flush was written", "erased")
                if read.erasures is not None and recorded is None \
                        and erasures != read.erasures:
                    raise _Failed(f"its user's, agent's or workspace's memory (or that of "
                                  "an owner sharing its erasure counter) was erased while "
                                  f"this first flush of {base.conversation!r} waited for "
                                  "the model: nothing of this flush was written (flush "
                                  "again for an owner still kept)", "erased")
                if recorded != progress:
                    raise _Failed(f"another flush of {base.conversation!r} finished first; "
                                  "flush again to read what it left", "conflict")
                for index, op in valid:
                    if self.on_operation is not None:
                        self.on_operation(index, op)
                    change = self._apply_one(index, op, base, written_at, msgs, notes,
                                             shown)
                    if isinstance(change, Change):
                        changes[change.kind].append(change)
                    else:
                        rejected.append(Rejection(index=index, operation=op, reason=change))
                write_progress(self.store, base.conversation, msgs, user=base.user,
                               agent=base.agent)
                if cancelled is not None and cancelled.is_set():
                    raise _Cancelled
        except _Cancelled:
            raise asyncio.CancelledError from None
        except Exception as exc:
            reason = str(exc) if isinstance(exc, _Failed) else \
                f"applying the operations failed: {type(exc).__name__}: {exc}"
            why = exc.reason if isinstance(exc, _Failed) else \
                "store_closed" if isinstance(exc, StoreClosedError) else "store"
            failed = attrs.evolve(base, status="failed", error=reason,
                                  rejected=tuple(sorted(rejected, key=lambda r: r.index)))
            raise FlushError(f"flush {base.flush_id} of {base.conversation} failed: {reason}",
                             report=failed, reason=why) from exc
        report = attrs.evolve(
            base, status="applied", messages_read=len(msgs),
            rejected=tuple(sorted(rejected, key=lambda r: r.index)),
            added=tuple(changes["added"]), updated=tuple(changes["updated"]),
            unchanged=tuple(changes["unchanged"]), forgotten=tuple(changes["forgotten"]),
            warnings=(*base.warnings, *notes),
        )
        written = [c.fact.id for c in (*changes["added"], *changes["updated"])]
        return self._upkeep(report, written) if written else report

    def _upkeep(self, report: FlushReport, written: list[int]) -> FlushReport:
        """Consolidate and prune once the flush has committed.

        A failure here is a warning on the report, not a failed flush: the
        facts are already written.
        """
        if self.consolidate is not None and self.store.vector_leg_ready:
            try:
                found = self.store.consolidate(threshold=self.consolidate, fact_ids=written)
                report = attrs.evolve(report, superseded=tuple(s.fact_id for s in found.superseded))
            except Exception as exc:  # noqa: BLE001 - the facts are committed; report, never raise
                report = attrs.evolve(report, warnings=(*report.warnings,
                    f"consolidation after the flush failed: {type(exc).__name__}: {exc}"))
        if self.prune is not None:
            try:
                # Only what this flush wrote to: another user's facts are not its to prune.
                pruned = self.store.prune(self.prune, fact_ids=written)
                report = attrs.evolve(report, pruned=tuple(m.fact.id for m in pruned.moved))
            except Exception as exc:  # noqa: BLE001 - the facts are committed; report, never raise
                report = attrs.evolve(report, warnings=(*report.warnings,
                    f"pruning after the flush failed: {type(exc).__name__}: {exc}"))
        return report

    def _context_of(self, index: int, op: Upsert, base: FlushReport, msgs: list[Message],
                    notes: list[str]) -> str | None:
        """The context an upsert's fact is written with (``None``: none), as the store
        will take it; what could not be used becomes a note on the report."""
        found = fact_context(op.messages, msgs, first=base.first, last=base.last,
                             max_bytes=self.store.limits.max_context_bytes,
                             before=self.context_before)
        if found.ignored:
            notes.append(f"operations[{index}] names messages "
                         f"{', '.join(map(str, found.ignored))[:80]}, not among the messages "
                         f"{base.first} to {base.last} it was shown; those were left out of "
                         "its context")
        if found.text is None:
            return None
        try:
            self.store.limits.context(found.text)
        except InvalidFactError as exc:
            notes.append(f"operations[{index}] was written without a context: {exc}")
            return None
        return found.text

    def _apply_one(self, index: int, op: Operation, base: FlushReport,
                   observed_at: dt.datetime | None, msgs: list[Message],
                   notes: list[str], shown: _Shown) -> Change | str:
        """Apply one operation; return the change, or why it could not be applied.

        The slot and key name the fact of the flush's own owners; where they hold none,
        the fact the model was shown under that slot and key (a workspace's agent
        lesson, a global project fact), which the prompt tells it to change so."""
        where = self._owners_for(op.slot, base)
        old = self.store.get_by_key(op.slot, op.key, **where)
        seen = shown.get((op.slot, op.key))
        if old is None and seen is not None and seen != where:
            old = self.store.get_by_key(op.slot, op.key, **seen)
            if old is not None:
                where = seen
        # A fact of no user (the workspace's, an agent's) keeps none of the user's words:
        # no context from the conversation, and a source without the conversation's name
        # or the messages' ids (which a chat may derive from the user, or trace back to
        # her messages), only their positions. Erasing the user then leaves nothing of
        # theirs in the facts others share.
        own = base.user is None or where.get("user") is not None
        source = (base.source or "") if own else \
            f"flush:{base.flush_id} msgs:{base.first}-{base.last}"
        later = _said_later(old, observed_at)
        if isinstance(op, Forget):
            if old is None:
                return f"no live fact {op.slot}/{op.key} to forget"
            if later is not None:
                return f"{op.slot}/{op.key} was said {later}, after these messages; it stands"
            reason = f"{source}: {op.reason}" if op.reason.strip() else source
            _, secrets = self.store.limits.screen_reason(reason[:1000])  # as it will be stored
            gone = self.store.forget(old.id, reason=reason[:1000])
            return Change(kind="forgotten", index=index, fact=gone, previous=old.value,
                          redacted=secrets)
        assert isinstance(op, Upsert)
        tags = tuple(dict.fromkeys(op.tags))
        value, secrets = self.store.limits.screen(op.value)  # as it will be stored
        if old is not None and (old.value, old.tags, old.confidence) == \
                (value, tags, op.confidence):
            return Change(kind="unchanged", index=index, fact=old, redacted=secrets)
        if later is not None:
            return (f"{op.slot}/{op.key} holds a value said {later}, after these messages; "
                    "it stands")
        # A restated value keeps its expiry (a reply cannot name one); a new value is a
        # new statement, which holds until something replaces it.
        expires = old.expires_at if old is not None and old.value == value else None
        fact = self.store.upsert(op.slot, op.key, op.value, **where, tags=tags,
                                 confidence=op.confidence, source=source,
                                 observed_at=observed_at, expires_at=expires,
                                 context=self._context_of(index, op, base, msgs, notes)
                                 if own else None)
        if old is None:
            return Change(kind="added", index=index, fact=fact, redacted=secrets)
        return Change(kind="updated", index=index, fact=fact, previous=old.value,
                      redacted=secrets)
