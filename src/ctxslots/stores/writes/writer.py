"""The writing half of FactStore: validated rows, history, vectors at commit, access counts."""

from __future__ import annotations

import contextlib
import contextvars
import logging
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import attrs

from ..._readable import count
from ...errors import (
    DuplicateKeyError,
    FactNotFoundError,
    InvalidArgumentError,
    InvalidFactError,
    ReadOnlyStoreError,
    StoreBusyError,
    StoreError,
    StoreFullError,
)
from ...model import Fact, Hit, from_timestamp
from ..backend import Backend, FactFields, FactFilter, FactRow, HistoryEntry, Row, VectorRow
from ..links import strengthen
from ..owners import DEFAULT_AGENT, DEFAULT_USER, Owners
from .access_writer import AccessWriter
from .limits import Limits
from .vectors import Pending, VectorSink

__all__ = ["CHANGES", "Writer", "Written", "check_id", "check_ids"]

#: Where a redacted secret is reported (the CLI shows its warnings).
logger = logging.getLogger("ctxslots.secrets")
_log = logging.getLogger(__name__)

_MAX_ID = 2**63 - 1
#: The write transactions (each a token of its own) the current context opened: a thread,
#: or an asyncio task, which has a context of its own. A task of an async server that waits
#: for something inside a batch lets the loop's other tasks run on the same thread; their
#: store calls are no part of that batch.
_OPENED: contextvars.ContextVar[frozenset[object]] = contextvars.ContextVar(
    "ctxslots_opened_writes", default=frozenset())
#: Seconds an access count waits for another process's write lock before it is owed to
#: the next count: a read must not wait out a long import or batch for its count.
COUNT_WAIT_S = 0.25
#: Most accesses owed at once (the oldest are dropped past it).
MAX_OWED_COUNTS = 10_000
#: Seconds after a count found the store busy during which counts try once without
#: waiting: readers on several threads would otherwise each wait in turn.
BUSY_BACKOFF_S = 1.0
#: How many times an upsert inserts a key it read as free before giving up: another writer
#: has to store the key, and yet another remove it, between each read and insert.
_KEY_TAKEN_RETRIES = 3


#: What a keyed or free write did: wrote a new fact; gave a stored one a new value;
#: changed only other fields it holds (tags, context, source, confidence, expiry); or left
#: what it holds as it was (a new observation of the same fact, its time moved, is kept).
CHANGES = ("inserted", "replaced", "updated", "kept")


def _held(row: Mapping[str, Any]) -> tuple[Any, ...]:
    """The fields besides the value whose change makes a write ``"updated"``."""
    return (row.get("tags") or "", row.get("context"), row.get("source"),
            float(row["confidence"]), row.get("expires_at"))


@attrs.frozen
class Written:
    """A fact as written, and what the write did to the store.

    Attributes:
        fact: The fact as it stands after the write.
        change: One of :data:`CHANGES`.
    """

    fact: Fact
    change: str = attrs.field(validator=attrs.validators.in_(CHANGES))


def check_id(fact_id: object) -> int:
    """Return ``fact_id`` if it is a 64-bit integer (not a bool); raise InvalidFactError otherwise."""
    if isinstance(fact_id, bool) or not isinstance(fact_id, int):
        raise InvalidFactError(f"fact id must be an integer, not {fact_id!r}", field="id", value=fact_id)
    if not -_MAX_ID - 1 <= fact_id <= _MAX_ID:
        raise InvalidFactError(f"fact id {fact_id} is out of range ({-_MAX_ID - 1} to {_MAX_ID})",
                               field="id", value=fact_id)
    return fact_id


def check_ids(fact_ids: object) -> list[int]:
    """The ids of ``fact_ids`` (any iterable of them), each checked, each once.

    :raises InvalidFactError: ``fact_ids`` is no collection of ids (a string is one
        malformed value, not its characters), or an id is not an integer.
    """
    if isinstance(fact_ids, (str, bytes)) or not isinstance(fact_ids, Iterable):
        raise InvalidArgumentError(f"fact_ids must be a list of fact ids, not {fact_ids!r}",
                                   field="fact_ids", value=fact_ids)
    return list(dict.fromkeys(check_id(i) for i in fact_ids))


@attrs.define
class Writer:
    """Writes facts through a backend; one per :class:`~ctxslots.FactStore`.

    Attributes:
        backend: The engine.
        limits: The checks every field passes.
        clock: The store's clock.
        vectors: Embeds what a transaction wrote, before it commits or after.
        access: Where access counts are queued when they are written in the
            background (``None``: each is written at once).
        default_user: The user a fact of a user's slot belongs to when its
            write names none.
        default_agent: The agent a fact of an agent's slot belongs to when its
            write names none.
    """

    backend: Backend
    limits: Limits
    clock: Callable[[], float]
    vectors: VectorSink
    access: AccessWriter | None = None
    default_user: str = DEFAULT_USER
    default_agent: str = DEFAULT_AGENT
    # Per thread: the vectors and the count of facts of the write transaction it has open
    # (absent or None: none). Threads write in transactions of their own (on PostgreSQL at
    # once, on separate connections), so one thread's writes are no part of another's.
    _open: threading.local = attrs.Factory(threading.local)
    _read_only: bool = False
    # Per thread: the ids ``counts_together`` gathers (absent or None: none is open).
    _gathering: threading.local = attrs.Factory(threading.local)
    # Accesses not yet counted because another process held the write lock, and the
    # moment until which a count does not wait for it (both under _owed_lock).
    _owed: dict[int, None] = attrs.Factory(dict)
    _busy_until: float = 0.0
    _owed_lock: threading.Lock = attrs.Factory(threading.Lock)
    _warned_busy: bool = False

    @contextlib.contextmanager
    def writing(self, *, savepoints: bool = True) -> Iterator[None]:
        """A write transaction; the vectors of what it wrote are stored before it commits.
        ``savepoints`` as in :meth:`~ctxslots.stores.backend.Lifecycle.transaction`."""
        outer = self._pending is None
        opened = None
        if outer:
            self._open.pending, self._open.written = {}, 0
            self._open.token = token = object()
            opened = _OPENED.set(_OPENED.get() | {token})
        try:
            with self.backend.transaction(savepoints=savepoints):
                yield
                if outer and self._pending:
                    self.vectors.before_commit(self._pending)
            if outer and self._pending:
                self.vectors.after_commit(self._pending)
        finally:
            if outer:
                self._open.pending = None
            if opened is not None:
                try:
                    _OPENED.reset(opened)
                except ValueError:  # ended in another context than it began in
                    _OPENED.set(_OPENED.get() - {self._open.token})
                self._open.token = None

    @property
    def opened_here(self) -> bool:
        """Whether this thread has a write transaction open that this context (this
        thread's code, or this asyncio task) opened: the calls that belong in it. Another
        task of the same event loop, run while that one waits inside its batch, is on the
        same thread and no part of the batch (nor is a task begun in a batch that has
        ended, in the next)."""
        token = getattr(self._open, "token", None)
        return token is not None and token in _OPENED.get() and self.backend.in_transaction

    @property
    def _pending(self) -> Pending | None:
        """The vectors this thread's open write transaction owes (``None``: none open)."""
        pending: Pending | None = getattr(self._open, "pending", None)
        return pending

    def queue_vector(self, fact_id: int, row: FactFields) -> None:
        """Embed ``row``'s value for ``fact_id`` when the current transaction commits."""
        if self._pending is not None:
            self._pending[fact_id] = (VectorRow.of(fact_id, row), row["value"])

    def find(self, fact_id: int, now: float, visible: FactFilter | None) -> FactRow:
        """The live fact with this id (``visible``: only if that filter sees its owners).

        :raises FactNotFoundError: No such live fact (or one ``visible`` does not see).
        """
        row = self.backend.get(fact_id, live_at=now)
        if row is None or (visible is not None and not visible.owns(row)):
            raise FactNotFoundError(fact_id)
        return row

    def count_write(self) -> None:
        """Count one fact written in the current transaction against ``limits.max_batch``."""
        self._open.written = getattr(self._open, "written", 0) + 1
        if self._open.written > self.limits.max_batch:
            raise InvalidFactError(
                f"a batch may write at most {count(self.limits.max_batch, 'fact')}; split it into "
                "smaller batches (nothing from this batch was written)",
                field="batch", value=self._open.written,
            )

    def validated(self, slot: Any, value: Any, owners: Owners | tuple[str, str, str],
                  tags: Any, confidence: Any, source: Any, expires_at: Any, context: Any = None,
                  now: float | None = None) -> dict[str, Any]:
        """The checked fields of a fact written to ``slot`` for ``owners``
        (``InvalidFactError`` on the first bad one, an owner the slot does not have
        included); given ``now``, a new expiry must come after it. Stored owners
        (``(user_id, agent_id, scope)`` of a fact being changed) are kept unchecked."""
        lim = self.limits
        checked_slot = lim.slot(slot)
        if isinstance(owners, tuple):
            user_id, agent_id, scope = owners
        else:
            user_id, agent_id, scope = lim.write_owners(
                checked_slot, user=owners.user, agent=owners.agent, scope=owners.scope,
                default_user=self.default_user, default_agent=self.default_agent)
        stored, secrets = lim.screen(value)
        if secrets:
            logger.warning("a value written to %s held %s; stored with [redacted] in its place "
                           "(Limits.secrets)", checked_slot, ", ".join(secrets))
        stored_context, context_secrets = lim.context(context)
        if context_secrets:
            logger.warning("a context written to %s held %s; stored with [redacted] in its "
                           "place (Limits.secrets)", checked_slot, ", ".join(context_secrets))
        return {
            "context": stored_context,
            "slot": checked_slot,
            "scope": scope,
            "user_id": user_id,
            "agent_id": agent_id,
            "value": stored,
            "tags": lim.tags(tags),
            "confidence": lim.confidence(confidence),
            "source": lim.source(source),
            "expires_at": lim.expires_at(expires_at, now),
        }

    def _observed(self, observed_at: Any, now: float) -> float:
        return now if observed_at is None else self.limits.moment(observed_at, "observed_at")

    def upsert(self, slot: str, key: str, value: str, *, owners: Owners,
               tags: Iterable[str] | None, confidence: float, source: str | None,
               expires_at: Any, observed_at: Any, context: Any = None) -> Written:
        """Insert a keyed fact, or replace the value of the one with the same key
        (the same slot and owners); what it did is decided inside the write's own
        transaction, so a writer racing for the same key is never missed.

        ``tags=None`` keeps a replaced fact's tags (a new fact gets none). Without a
        ``context``, a replaced fact keeps its context while its value stays the
        same, and loses it with a new value.
        """
        now = self.clock()
        row = self.validated(slot, value, owners, () if tags is None else tags, confidence,
                             source, expires_at, context, now)
        key = self.limits.key(key)
        row["observed_at"] = self._observed(observed_at, now)
        with self.writing():
            old = self.backend.get_by_key(row["slot"], row["scope"], key,
                                          user_id=row["user_id"], agent_id=row["agent_id"])
            for _ in range(_KEY_TAKEN_RETRIES):
                if old is not None:
                    break
                try:
                    return Written(self.insert(row, key, now), "inserted")
                except DuplicateKeyError:
                    # Another writer stored the key after it was read (an engine that does
                    # not lock a key with no row): its value is replaced, and kept in history.
                    self._open.written -= 1  # the insert wrote nothing
                    old = self.backend.get_by_key(row["slot"], row["scope"], key,
                                                  user_id=row["user_id"],
                                                  agent_id=row["agent_id"])
            if old is None:  # stored and removed again by others, each time it was read
                raise DuplicateKeyError(row["slot"], row["scope"], key, path=self.backend.location)
            if row["context"] is None and old["value"] == row["value"]:
                row["context"] = old.get("context")
            if tags is None:
                row["tags"] = old["tags"]
            change = ("replaced" if old["value"] != row["value"]
                      else "updated" if _held(old) != _held(row) else "kept")
            return Written(self.rewrite(old, row, now), change)

    def add(self, slot: str, value: str, *, owners: Owners, tags: Iterable[str],
            confidence: float, source: str | None, expires_at: Any, observed_at: Any,
            context: Any = None) -> Written:
        """Insert a free memory; an identical live one of the same slot and owners is
        returned instead (``"kept"``). One hidden behind a near-duplicate that is no
        longer live (forgotten or expired) is shown again (``"updated"``): nothing
        stands for it, and it was just said again."""
        now = self.clock()
        row = self.validated(slot, value, owners, tags, confidence, source, expires_at, context,
                             now)
        row["observed_at"] = self._observed(observed_at, now)
        with self.writing():
            same = self.backend.find_same(row["slot"], row["scope"], None, row["value"],
                                          user_id=row["user_id"], agent_id=row["agent_id"],
                                          live_at=now)
            if same is not None:
                existing = self.backend.get(same)
                assert existing is not None
                hider = existing["superseded_by"]
                if hider is not None and self.backend.get(int(hider), live_at=now) is None:
                    self.count_write()
                    self.backend.set_superseded([(same, None)])
                    return Written(Fact.from_row({**existing, "superseded_by": None}), "updated")
                return Written(Fact.from_row(existing), "kept")
            return Written(self.insert(row, None, now), "inserted")

    def update(self, fact_id: int, *, value: str | None, tags: Iterable[str] | None,
               confidence: float | None, source: str | None, context: Any = None,
               visible: FactFilter | None = None) -> Fact:
        """Change some fields of a live fact by id (``context=""`` removes the context);
        its slot and owners stay. With ``visible``, a fact it does not see is not found."""
        fact_id = check_id(fact_id)
        now = self.clock()
        with self.writing():
            prev = self.find(fact_id, now, visible)
            # The owners stay as stored: a user fact an older release kept in a scope too.
            owners = (prev["user_id"], prev["agent_id"], prev["scope"])
            row = self.validated(
                prev["slot"], prev["value"] if value is None else value, owners,
                [t for t in (prev["tags"] or "").split("\n") if t] if tags is None else tags,
                prev["confidence"] if confidence is None else confidence,
                prev["source"] if source is None else source, prev["expires_at"],
                prev.get("context") if context is None else context,
            )
            row["observed_at"] = prev["observed_at"]  # an edit, not a new observation
            return self.rewrite(prev, row, now)

    def insert(self, row: dict[str, Any], key: str | None, now: float) -> Fact:
        """Insert a new live fact (inside :meth:`writing`)."""
        self.count_write()
        full: FactFields = {
            "slot": row["slot"], "scope": row["scope"], "user_id": row["user_id"],
            "agent_id": row["agent_id"], "key": key, "value": row["value"],
            "tags": row["tags"], "source": row["source"], "confidence": row["confidence"],
            "score": 0.0, "created_at": now, "updated_at": now,
            "observed_at": row.get("observed_at", now), "last_accessed": None,
            "access_count": 0, "expires_at": row["expires_at"], "superseded_by": None,
            "context": row["context"]}
        fact_id = self.backend.insert(full)
        self.queue_vector(fact_id, full)
        # What was written is what a read would return: no statement to read it back.
        return Fact.from_row({**full, "id": fact_id})

    def rewrite(self, prev: Row, row: dict[str, Any], now: float) -> Fact:
        """Replace a stored fact's fields, keeping the old value in history."""
        self.count_write()
        # A writer that read the clock, then waited for the lock while another replaced
        # the value, is not earlier than that value: its history entry would end before
        # it began.
        now = max(now, float(prev["updated_at"]))
        changed = prev["value"] != row["value"]
        # From its creation: the engine starts it at the end of the fact's latest entry
        # instead, so a value said again or edited since keeps the start it had.
        history = HistoryEntry(
            fact_id=int(prev["id"]), slot=prev["slot"], scope=prev["scope"], key=prev["key"],
            value=prev["value"], tags=prev["tags"], source=prev["source"],
            confidence=float(prev["confidence"]), valid_from=float(prev["created_at"]),
            valid_to=now, observed_at=prev["observed_at"],
        ) if changed or prev["tags"] != row["tags"] else None
        # The key (unchanged) goes with the other texts the stems are made of, so the
        # engine need not read them back to stem them.
        fields = {"key": prev["key"], "value": row["value"], "tags": row["tags"],
                  "source": row["source"], "confidence": row["confidence"], "updated_at": now,
                  "expires_at": row["expires_at"], "context": row.get("context"),
                  "observed_at": row.get("observed_at", prev["observed_at"])}
        if changed:  # a new value is no longer the near-duplicate it was marked as
            fields["superseded_by"] = None
        self.backend.update(int(prev["id"]), fields, history=history)
        if changed:
            self.vectors.replaced(int(prev["id"]))
            self.queue_vector(int(prev["id"]), prev | {"value": row["value"]})
        return Fact.from_row({**prev, **fields})

    def adjust_score(self, fact_id: int, delta: float, partners: Iterable[int],
                     visible: FactFilter | None = None) -> Fact:
        """Add ``delta`` to a live fact's score; a reinforcement (``delta > 0``) also
        strengthens its co-recall links with ``partners``. With ``visible``, a fact
        it does not see is not found."""
        fact_id = check_id(fact_id)
        now = self.clock()
        with self.backend.transaction():
            if visible is not None:
                self.find(fact_id, now, visible)
            if not self.backend.adjust_score(fact_id, delta, live_at=now):
                raise FactNotFoundError(fact_id)
            if delta > 0:
                strengthen(self.backend, fact_id, partners, now)
            row = self.backend.get(fact_id)
        assert row is not None
        return Fact.from_row(row)

    def forget(self, fact_id: int, *, reason: str | None,
               visible: FactFilter | None = None) -> Fact:
        """Move a fact to the archive. With ``visible``, a fact it does not see is not found."""
        fact_id = check_id(fact_id)
        reason, secrets = self.limits.screen_reason(reason)
        if secrets:
            logger.warning("a reason for forgetting fact %d held %s; stored with [redacted] in "
                           "its place (Limits.secrets)", fact_id, ", ".join(secrets))
        with self.writing():
            self.count_write()
            if visible is not None:
                self.find(fact_id, self.clock(), visible)
            row = self.backend.archive(fact_id, archived_at=self.clock(), reason=reason)
            if row is None:
                raise FactNotFoundError(fact_id)
            if self._pending:
                self._pending.pop(fact_id, None)
        return Fact.from_row(row, archived=True)

    def touch(self, fact_ids: list[int], now: float) -> int:
        """Count an access of each fact: queued for the background writer when
        there is one (returns how many were queued), else as a write of its own
        (returns how many live facts were counted). Inside a batch, counts join the
        batch's transaction.

        A read-only store counts nothing: the first time it says so with one
        :class:`RuntimeWarning`, and returns 0 from then on.
        """
        if self._read_only:
            return 0
        gathered: dict[int, None] | None = getattr(self._gathering, "ids", None)
        if gathered is not None:
            gathered.update(dict.fromkeys(fact_ids))
            return len(fact_ids)
        if self.access is not None and not self.backend.in_transaction:
            if self.access.read_only:
                self._read_only = True
                return 0
            self.access.put(fact_ids, now)
            return len(fact_ids)
        try:
            if not self.backend.in_transaction:
                return self._touch_or_owe(fact_ids, now)  # a write of its own
            with self.backend.transaction():  # a failed count leaves the batch usable
                return self.backend.touch(fact_ids, now)
        except ReadOnlyStoreError as exc:
            self._read_only = True
            warnings.warn(f"{exc}: searches answer, but accesses are not counted",
                          RuntimeWarning, stacklevel=4)
            return 0

    def _touch_or_owe(self, fact_ids: list[int], now: float) -> int:
        """Count these accesses, with those owed; while another process holds the
        store's write lock past :data:`COUNT_WAIT_S`, or the disk is full, owe them all
        instead (0 counted): a read answers all the same.
        For :data:`BUSY_BACKOFF_S` after that, a count tries once without waiting, so
        threads reading at once do not queue behind each other's waits."""
        with self._owed_lock:
            owed, self._owed = self._owed, {}
            wait = 0.0 if time.monotonic() < self._busy_until else COUNT_WAIT_S
        ids = list(dict.fromkeys([*owed, *fact_ids]))
        try:
            counted = self.backend.touch(ids, now, wait=wait)
        except (StoreBusyError, StoreFullError) as exc:
            with self._owed_lock:
                kept = dict.fromkeys(ids)  # the oldest first
                kept.update(self._owed)  # what other threads owed meanwhile
                while len(kept) > MAX_OWED_COUNTS:  # the oldest go first
                    del kept[next(iter(kept))]
                self._owed = kept
                self._busy_until = time.monotonic() + BUSY_BACKOFF_S
                warn, self._warned_busy = not self._warned_busy, True
            if warn:
                warnings.warn(f"{exc}; the reads answer, and their access counts are "
                              "written with a later count", RuntimeWarning, stacklevel=5)
            return 0
        return counted

    def write_owed_counts(self) -> None:
        """Count the accesses owed while the store was busy (on closing: those still
        owed when the lock stays held are dropped; counts are not worth a wait)."""
        if self._owed and not self._read_only and not self.backend.in_transaction:
            with contextlib.suppress(StoreError):
                self._touch_or_owe([], self.clock())
            with self._owed_lock:
                self._owed.clear()

    @contextlib.contextmanager
    def counts_together(self) -> Iterator[None]:
        """Gather the ids ``touch`` counts on this thread inside, and count them once at
        the end (nested: the outermost writes)."""
        if getattr(self._gathering, "ids", None) is not None:
            yield
            return
        gathered: dict[int, None] = {}
        self._gathering.ids = gathered
        try:
            yield
        except BaseException:
            self._gathering.ids = None
            if gathered:  # the facts were shown all the same; the first error is the one told
                try:
                    self.touch(list(gathered), self.clock())
                except StoreError:
                    _log.warning("access counts of %d facts were not written", len(gathered),
                                 exc_info=True)
            raise
        self._gathering.ids = None
        if gathered:
            self.touch(list(gathered), self.clock())

    def track_access(self, hits: list[Hit], now: float) -> list[Hit]:
        """Count the live hits as shown to a model, and show it in the returned facts."""
        live_ids = [h.fact.id for h in hits if not h.fact.archived]
        if not live_ids or not self.touch(live_ids, now):
            return hits
        when = from_timestamp(now)
        return [h if h.fact.archived else attrs.evolve(
                    h, fact=attrs.evolve(h.fact, access_count=h.fact.access_count + 1,
                                         last_accessed=when))
                for h in hits]
