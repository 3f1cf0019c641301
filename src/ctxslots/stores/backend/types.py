"""What crosses the storage seam: rows, filters, plans, candidates and reports.

Rows cross as :class:`FactRow` dictionaries with the column names of
:data:`FACT_COLUMNS`; times are Unix seconds (floats), tags one string with a
newline between tags, and the global scope is the empty string ``""``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, NamedTuple, NotRequired, TypedDict

import attrs
import numpy as np

from ...errors import DuplicateKeyError, StoreError

__all__ = [
    "CONTEXT_WEIGHT",
    "FACT_COLUMNS",
    "MAX_COUNT",
    "META_EMBEDDER_DIMENSION",
    "META_EMBEDDER_MODEL",
    "MOST_OWNER_KEYS",
    "READABLE_RANGES",
    "BadValue",
    "CacheStatus",
    "DuplicateKeyError",
    "Erased",
    "FactFields",
    "FactFilter",
    "FactKey",
    "FactRow",
    "GroupCount",
    "Health",
    "HistoryEntry",
    "KeptRead",
    "LexicalCandidate",
    "QueryPlan",
    "Row",
    "TermCounts",
    "ValueRange",
    "VectorRow",
    "VectorState",
    "failed_batch_error",
    "is_live",
    "owner_keys",
    "rows_in",
    "visible_scopes",
    "visible_to",
]

#: The columns of a fact row, in the order engines store them.
FACT_COLUMNS: tuple[str, ...] = (
    "id", "slot", "scope", "key", "value", "tags", "source", "confidence", "score",
    "created_at", "updated_at", "observed_at", "last_accessed", "access_count", "expires_at",
    "superseded_by", "context", "user_id", "agent_id",
)

#: The weight of a memory's context words against its own in BM25 (both
#: engines): a word of the context counts as half an occurrence. Chosen on the
#: conversation dev set among 0.25, 0.5 and 1 (see BENCHMARKS.md).
CONTEXT_WEIGHT = 0.5

#: The store settings :meth:`Backend.reset_vectors` records: the embedder's
#: model id and dimension (read back with :meth:`Backend.get_meta`).
META_EMBEDDER_MODEL = "embedder.model_id"
META_EMBEDDER_DIMENSION = "embedder.dimension"

#: The largest count or reinforcement score a store keeps: up to 2**53 a
#: float still counts every +1 (ids from a file are kept below it too).
MAX_COUNT = 2**53

#: The last Unix second :class:`datetime.datetime` can represent (9999-12-31T23:59:59Z).
MAX_TIME = 253402300799.0


@attrs.frozen
class ValueRange:
    """The stored values of one number column that every read can use.

    Attributes:
        table: ``"facts"``, ``"archive"`` or ``"fact_history"``.
        column: The column.
        low: The smallest value.
        high: The largest value.
        nullable: Whether ``NULL`` is a valid value.
        fallback: What :meth:`Backend.repair_values` writes in place of a value
            outside the range: a number, ``None`` (``NULL``) or ``"now"`` (the
            time of the repair).
    """

    table: str
    column: str
    low: float
    high: float
    nullable: bool = False
    fallback: float | str | None = "now"


def _fact_ranges(table: str) -> tuple[ValueRange, ...]:
    times = [ValueRange(table, c, 0.0, MAX_TIME) for c in ("created_at", "updated_at")]
    # A row written before observed times existed may hold none: it reads as created_at.
    times.append(ValueRange(table, "observed_at", 0.0, MAX_TIME, nullable=True))
    times += [ValueRange(table, c, 0.0, MAX_TIME, nullable=True, fallback=None)
              for c in ("last_accessed", "expires_at")]
    if table == "archive":
        times.append(ValueRange(table, "archived_at", 0.0, MAX_TIME))
    return (*times,
            ValueRange(table, "score", -float(MAX_COUNT), float(MAX_COUNT), fallback=0.0),
            ValueRange(table, "confidence", 0.0, 1.0, fallback=1.0),
            ValueRange(table, "access_count", 0.0, float(MAX_COUNT), fallback=0))


#: Every number column a read turns into a datetime, an int or a float, with
#: the values it can use: times from 1970 to the year 9999, counts and scores
#: within :data:`MAX_COUNT`, confidences from 0 to 1. Every way in checks
#: them; :meth:`Backend.bad_values` finds a row stored before it did.
READABLE_RANGES: tuple[ValueRange, ...] = (
    *_fact_ranges("facts"), *_fact_ranges("archive"),
    ValueRange("fact_history", "valid_from", 0.0, MAX_TIME),
    ValueRange("fact_history", "valid_to", 0.0, MAX_TIME),
    ValueRange("fact_history", "confidence", 0.0, 1.0, fallback=1.0),
    # A value replaced before said times were kept holds none: it reads as valid_from.
    ValueRange("fact_history", "observed_at", 0.0, MAX_TIME, nullable=True, fallback=None),
)


@attrs.frozen
class TimeOrder:
    """Two times of one row where the first may not come after the second.

    Attributes:
        table: ``"facts"``, ``"archive"`` or ``"fact_history"``.
        earlier: The column that may not be later (``created_at``).
        later: The column that may not be earlier; a repair sets it to ``earlier``.
    """

    table: str
    earlier: str
    later: str


#: The times a row must hold in order: a fact is not updated before it was created,
#: an earlier value is not replaced before it was written. Every import checks them;
#: :meth:`Backend.misordered_times` finds a row stored before it did.
TIME_ORDERS: tuple[TimeOrder, ...] = (
    TimeOrder("facts", "created_at", "updated_at"),
    TimeOrder("archive", "created_at", "updated_at"),
    TimeOrder("fact_history", "valid_from", "valid_to"),
)


@attrs.frozen
class MisorderedTimes:
    """A stored row whose times break a :class:`TimeOrder`.

    Attributes:
        rule: The order broken.
        fact_id: The fact the row belongs to.
        earlier: The value of ``rule.earlier``.
        later: The value of ``rule.later`` (smaller than ``earlier``).
    """

    rule: TimeOrder
    fact_id: int
    earlier: float
    later: float

    def describe(self) -> str:
        """``fact 12 updated_at 1000.0 is before created_at 2000.0``."""
        where = {"facts": "fact", "archive": "archived fact",
                 "fact_history": "history of fact"}.get(self.rule.table, self.rule.table)
        return (f"{where} {self.fact_id} {self.rule.later} {self.later!r} is before "
                f"{self.rule.earlier} {self.earlier!r}")


@attrs.frozen
class BadValue:
    """A stored number outside its :class:`ValueRange`, or a stored text that is not
    UTF-8 (its bytes as ``value``): a read of it would fail.

    Attributes:
        table: Where it is stored.
        fact_id: The fact it belongs to.
        column: The column.
        value: The value as stored (``None`` when the engine cannot hand it over).
    """

    table: str
    fact_id: int
    column: str
    value: Any

    def describe(self) -> str:
        """``fact 12 created_at = 1e+300`` (``archived fact``, ``history of fact``);
        ``fact 12 value is not UTF-8: b'The user g\\xffreen'`` for stored bytes."""
        where = {"facts": "fact", "archive": "archived fact",
                 "fact_history": "history of fact"}.get(self.table, self.table)
        if isinstance(self.value, bytes):
            cut = repr(self.value[:40]) + ("..." if len(self.value) > 40 else "")
            row = f"{where} {self.fact_id}" if self.fact_id else where
            what = "holds a NUL" if b"\x00" in self.value else "is not UTF-8"
            return f"{row} {self.column} {what}: {cut}"
        return f"{where} {self.fact_id} {self.column} = {self.value!r}"


class FactFields(TypedDict):
    """A fact's stored columns but its id: what an insert writes.

    ``user_id`` and ``agent_id`` are its owners (``""``: none; see
    :mod:`ctxslots.stores.owners`), as ``scope`` is.
    """

    slot: str
    scope: str
    user_id: str
    agent_id: str
    key: str | None
    value: str
    tags: str
    source: str | None
    confidence: float
    score: float
    created_at: float
    updated_at: float
    observed_at: float
    last_accessed: float | None
    access_count: int
    expires_at: float | None
    superseded_by: int | None
    context: NotRequired[str | None]


class FactRow(FactFields):
    """One stored fact (see :data:`FACT_COLUMNS`); an archived one also carries
    ``archived_at`` and ``reason``."""

    id: int
    archived_at: NotRequired[float]
    reason: NotRequired[str | None]


#: A fact row as engines hand it over (see :class:`FactRow`).
Row = FactRow


@attrs.frozen
class FactFilter:
    """Which facts a read may see; every engine applies it before any cut.

    Attributes:
        scopes: The stored scope values visible (``""`` is the global scope).
            ``None``: every scope (export, maintenance).
        slots: Only these slots (``None``: every slot).
        live_at: Leave out facts expired at this moment (``None``: keep them).
        include_superseded: Keep facts a newer near-duplicate hides.
        users: The stored user ids visible (``""``: facts of no user, such as
            project facts). ``None``: every user.
        agents: The stored agent ids visible, as ``users``.
        tags: Only facts that carry every one of these tags.
        source: Only facts with this source.
        observed_after: Only facts observed at or after this moment.
        observed_before: Only facts observed before this moment.
    """

    scopes: tuple[str, ...] | None = None
    slots: tuple[str, ...] | None = None
    live_at: float | None = None
    include_superseded: bool = True
    users: tuple[str, ...] | None = None
    agents: tuple[str, ...] | None = None
    tags: tuple[str, ...] = ()
    source: str | None = None
    observed_after: float | None = None
    observed_before: float | None = None

    def owns(self, row: FactFields) -> bool:
        """Whether ``row``'s slot and owners are among those this filter sees (a check
        of a fact found by id; expiry and the rest are not looked at)."""
        return all(allowed is None or value in allowed for value, allowed in (
            (row["user_id"], self.users), (row["agent_id"], self.agents),
            (row["scope"], self.scopes), (row["slot"], self.slots)))

    @property
    def narrowed(self) -> bool:
        """Whether it filters by tags, source or time (what in-memory copies do not hold)."""
        return bool(self.tags) or self.source is not None \
            or self.observed_after is not None or self.observed_before is not None


@attrs.frozen
class LexicalCandidate:
    """One match of the lexical leg.

    Attributes:
        row: The fact row.
        score: The engine's relevance, more negative is better (FTS5's
            ``bm25()`` convention; engines with another scale map to it).
    """

    row: Row
    score: float


@attrs.frozen
class QueryPlan:
    """What a search looks for, made once from its text (see :mod:`ctxslots.stores.query`).

    Attributes:
        text: The text as given.
        words: The words the lexical leg looks for (sanitized; stop words and
            words common to much of the store left out), any of which may match;
            each engine stems them with :mod:`ctxslots.stores.stemming`.
        match: The same words, unstemmed, as an FTS5 expression (quoted,
            OR-joined); ``""`` when there are none. No engine reads it.
        vector: The text's embedding for the vector leg, or ``None``.
        periods: ``(start, end)`` Unix seconds of the periods the text names.
        common: The text's words held by a large share of the store's facts
            (a name said in most of them), whether or not ``words`` kept
            them: BM25 weighs them at nearly nothing, so the ranking lifts the
            candidates holding one (:attr:`~ctxslots.stores.ranking.RankingPolicy.common_word_boost`).
    """

    text: str
    words: tuple[str, ...] = ()
    match: str = ""
    vector: np.ndarray | None = attrs.field(default=None, eq=False)
    periods: tuple[tuple[float, float], ...] = ()
    common: tuple[str, ...] = ()


@attrs.frozen
class TermCounts:
    """How many facts hold each word of a query, out of how many.

    Attributes:
        rows: The facts counted.
        docs: Facts holding each word (stemmed as the index stems it); a word
            missing from it is in none.
    """

    rows: int
    docs: Mapping[str, int]


@attrs.frozen
class CacheStatus:
    """The in-memory copies an engine keeps of its indexes.

    Attributes:
        lexical_loaded: The lexical copy is loaded.
        lexical_loading: It is being loaded in the background.
        lexical_rows: Rows it holds, live and dead (a dead row is a fact
            changed or gone since the last full load).
        lexical_live: Rows of live facts it holds (one per fact).
        vector_loaded: The vector copy is loaded.
        vector_loading: It is being loaded in the background.
        vector_rows: Rows it holds, live and dead.
    """

    lexical_loaded: bool = False
    lexical_loading: bool = False
    lexical_rows: int = 0
    lexical_live: int = 0
    vector_loaded: bool = False
    vector_loading: bool = False
    vector_rows: int = 0


class VectorRow(NamedTuple):
    """Where a fact's vector is filed: its id and the slot and owners a search filters on."""

    fact_id: int
    scope: str
    slot: str
    user_id: str = ""
    agent_id: str = ""

    @classmethod
    def of(cls, fact_id: int, row: FactFields) -> VectorRow:
        """Where the vector of the fact ``row`` (stored under ``fact_id``) is filed."""
        return cls(int(fact_id), row["scope"], row["slot"], row["user_id"], row["agent_id"])


class GroupCount(NamedTuple):
    """How many facts one slot holds for one set of owners (``stats``, pruning caps)."""

    slot: str
    scope: str
    user_id: str
    agent_id: str
    facts: int
    expired: int


#: One fact as an import checks it against the store: ``(slot, scope, user_id,
#: agent_id, key, value)`` (``key`` ``None`` for a free memory).
FactKey = tuple[str, str, str, str, "str | None", str]


@attrs.frozen
class Erased:
    """What an erasure removed.

    Attributes:
        facts: Live facts.
        archived: Archived facts.
        history: Earlier values.
        vectors: Vectors.
        links: Co-recall links.
        progress: Flush progress records.
        unhidden: Facts that a removed fact hid as near-duplicates, shown again.
    """

    facts: int = 0
    archived: int = 0
    history: int = 0
    vectors: int = 0
    links: int = 0
    progress: int = 0
    unhidden: int = 0

    def __add__(self, other: Erased) -> Erased:
        return Erased(*(a + b for a, b in zip(attrs.astuple(self), attrs.astuple(other),
                                                  strict=True)))


@attrs.frozen
class HistoryEntry:
    """An earlier value of a fact, valid from ``valid_from`` to ``valid_to``.

    ``observed_at`` is when that value was said or observed (the fact's
    ``observed_at`` while it held it); ``None`` for a value replaced before
    stores kept it, which reads as ``valid_from``.
    """

    fact_id: int
    slot: str
    scope: str
    key: str | None
    value: str
    tags: str
    source: str | None
    confidence: float
    valid_from: float
    valid_to: float
    observed_at: float | None = None


@attrs.frozen
class VectorState:
    """What an engine's vector index holds.

    Attributes:
        model_id: The embedder that built it (``None``: none bound yet).
        dimension: Its dimension, or ``None``.
        vectors: Vectors held.
        missing: Live facts without a vector.
        orphans: Vectors whose fact is gone.
        unusable: Vectors no search can use: with no direction (all zeros, or
            values that are not finite), not of unit length, or of another
            dimension (see :mod:`.unit_vectors`).
    """

    model_id: str | None
    dimension: int | None
    vectors: int
    missing: int
    orphans: int
    unusable: int = 0


@attrs.frozen
class Health:
    """What an engine's own checks found.

    Attributes:
        integrity: ``"ok"`` or what the engine's integrity check reported.
        lexical_in_sync: Whether the lexical index matches the facts.
        problems: One line per problem, each saying what to run.
        facts_readable: Whether the facts themselves can be read (when not,
            nothing derived can be rebuilt).
    """

    integrity: str
    lexical_in_sync: bool
    problems: tuple[str, ...] = ()
    facts_readable: bool = True


def visible_scopes(scope: str) -> tuple[str, ...]:
    """The stored scope values a search in ``scope`` sees: that scope and the global one."""
    return tuple(dict.fromkeys([scope, ""]))


def visible_to(owner: str) -> tuple[str, ...]:
    """The stored owner values a request for ``owner`` sees: its own, and ``""`` (none)."""
    return tuple(dict.fromkeys([owner, ""]))


#: Most combinations of owners, slot and scope a read names one by one (:func:`owner_keys`);
#: above it, the read filters by each list instead, and its statement stays short.
MOST_OWNER_KEYS = 64


def owner_keys(flt: FactFilter) -> list[tuple[str, str, str, str]]:
    """Each ``(user, agent, slot, scope)`` ``flt`` asks for, in its lists' order; empty
    when a list is left open (``None``), holds nothing, or the combinations number more
    than :data:`MOST_OWNER_KEYS`."""
    users, agents, slots, scopes = flt.users, flt.agents, flt.slots, flt.scopes
    if users is None or agents is None or slots is None or scopes is None \
            or len(users) * len(agents) * len(slots) * len(scopes) > MOST_OWNER_KEYS:
        return []
    return list(itertools.product(users, agents, slots, scopes))


@attrs.define
class KeptRead:
    """The row (or its absence) a write transaction last read by one name under lock, kept
    until its engine forgets it at the transaction's next statement: a flush reads a key
    and then writes it, and the write's own read is the same row.

    The engine calls :meth:`forget` before every statement, at the start of a transaction
    and where a savepoint rolls back; a row lock (or SQLite's write lock) keeps other
    writers of a stored row out meanwhile.
    """

    _kept: tuple[tuple[str, ...], FactRow | None] | None = None

    def forget(self) -> None:
        """Forget what was kept."""
        self._kept = None

    def read(self, name: tuple[str, ...], read: Callable[[], FactRow | None],
             live_at: float | None) -> FactRow | None:
        """The row of ``name`` that ``read`` (one statement) returns, live or not, read once
        while nothing else runs; ``None`` when there is none or it is not live at
        ``live_at``. Each call returns a copy its caller may change."""
        kept = self._kept
        if kept is not None and kept[0] == name:
            row = None if kept[1] is None else kept[1].copy()
        else:
            row = read()
            self._kept = (name, None if row is None else row.copy())
        return row if row is None or live_at is None or is_live(row, live_at) else None


def is_live(row: Mapping[str, Any], moment: float) -> bool:
    """Whether ``row`` is live at ``moment``: it has no expiry, or expires after it."""
    expires = row["expires_at"]
    return expires is None or float(expires) > moment


def failed_batch_error(failure: BaseException | None, where: str) -> StoreError:
    """The error a write transaction whose blocks take no savepoints raises once one of
    them failed (``failure``, kept as its cause): nothing of it is written."""
    what = f"{type(failure).__name__}: {failure}" if failure is not None else "an error"
    error = StoreError(f"a write inside this batch failed ({what}), so nothing in the batch "
                       "is written; run the batch again without the failing write", path=where)
    error.__cause__ = failure
    return error


def rows_in(values: Iterable[int], size: int = 500) -> Iterator[list[int]]:
    """``values`` in lists of at most ``size`` (bounded parameter lists)."""
    chunk: list[int] = []
    for value in values:
        chunk.append(value)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk
