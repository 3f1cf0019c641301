"""The storage seam: what a storage engine does for :class:`~ctxslots.FactStore`.

:class:`Backend` is the only interface between the public facade and an engine
(SQLite in :mod:`ctxslots.stores.sqlite`, PostgreSQL in
:mod:`ctxslots.stores.postgres`). An engine owns its connections and
transactions, its schema and migrations, the rows of facts with their
history, archive, links and flush progress, the two candidate legs (filters
applied before the cut), the change feed of any in-process cache, and its
health checks. It never validates input (the facade does), never ranks (the
candidates it returns are ranked by :mod:`ctxslots.stores.ranking`) and never
embeds (the facade hands it vectors).

Rows cross the seam as plain mappings with the column names of
:data:`FACT_COLUMNS`; times are Unix seconds (floats), tags one string with a
newline between tags, and the global scope is the empty string ``""``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import attrs
import numpy as np

from ...errors import DuplicateKeyError

__all__ = [
    "CONTEXT_WEIGHT",
    "FACT_COLUMNS",
    "MAX_COUNT",
    "META_EMBEDDER_DIMENSION",
    "META_EMBEDDER_MODEL",
    "READABLE_RANGES",
    "Backend",
    "BadValue",
    "DuplicateKeyError",
    "ExactHit",
    "FactFilter",
    "Health",
    "HistoryEntry",
    "LexicalCandidate",
    "Row",
    "ValueRange",
    "VectorState",
]

#: The columns of a fact row, in the order engines store them.
FACT_COLUMNS: tuple[str, ...] = (
    "id", "slot", "scope", "key", "value", "tags", "source", "confidence", "score",
    "created_at", "updated_at", "observed_at", "last_accessed", "access_count", "expires_at",
    "superseded_by", "context",
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
)


@attrs.frozen
class BadValue:
    """A stored number outside its :class:`ValueRange` (a read of it would fail).

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
        """``fact 12 created_at = 1e+300`` (``archived fact``, ``history of fact``)."""
        where = {"facts": "fact", "archive": "archived fact",
                 "fact_history": "history of fact"}.get(self.table, self.table)
        return f"{where} {self.fact_id} {self.column} = {self.value!r}"


#: One fact row: column name to value (see :data:`FACT_COLUMNS`). Archived rows
#: also carry ``archived_at`` and ``reason``.
Row = Mapping[str, Any]


@attrs.frozen
class FactFilter:
    """Which facts a read may see; every engine applies it before any cut.

    Attributes:
        scopes: The stored scope values visible (``""`` is the global scope).
            ``None``: every scope (export, maintenance).
        slots: Only these slots (``None``: every slot).
        live_at: Leave out facts expired at this moment (``None``: keep them).
        include_superseded: Keep facts a newer near-duplicate hides.
    """

    scopes: tuple[str, ...] | None = None
    slots: tuple[str, ...] | None = None
    live_at: float | None = None
    include_superseded: bool = True


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
class ExactHit:
    """A stored fact found by exact content (same slot, scope, key and value)."""

    fact_id: int


@attrs.frozen
class HistoryEntry:
    """An earlier value of a fact, valid from ``valid_from`` to ``valid_to``."""

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


@attrs.frozen
class VectorState:
    """What an engine's vector index holds.

    Attributes:
        model_id: The embedder that built it (``None``: none bound yet).
        dimension: Its dimension, or ``None``.
        vectors: Vectors held.
        missing: Live facts without a vector.
        orphans: Vectors whose fact is gone.
    """

    model_id: str | None
    dimension: int | None
    vectors: int
    missing: int
    orphans: int


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


@runtime_checkable
class Backend(Protocol):
    """A storage engine behind :class:`~ctxslots.FactStore`.

    Every method that writes must be called inside :meth:`transaction`;
    reads may be called anywhere. Methods never raise on an empty input list.
    Engine errors surface as :class:`~ctxslots.errors.StoreError` (with a
    message that says what to do); a missing row is ``None`` or an empty
    result, never an exception.
    """

    #: ``"sqlite"`` or ``"postgresql"``.
    engine: str
    #: Where the store lives, safe to print (no password).
    location: str

    # -- lifecycle ---------------------------------------------------------------

    def close(self) -> None:
        """Release connections and background work (idempotent)."""

    def transaction(self) -> contextlib.AbstractContextManager[None]:
        """One write transaction: all writes inside land together or not at all.

        Nested calls join the outer transaction (a failing inner block rolls
        back to where it started). Waits for other writers up to the engine's
        timeout.
        """

    def snapshot(self) -> contextlib.AbstractContextManager[None]:
        """Reads inside see one consistent moment of the store (export)."""

    @property
    def in_transaction(self) -> bool:
        """Whether a :meth:`transaction` block is open."""

    def info(self) -> dict[str, Any]:
        """Engine facts for ``stats``: ``engine``, ``location``, ``schema_version``,
        ``size_bytes`` and engine versions."""

    def used_bytes(self) -> int:
        """Bytes the store's data occupies (pruning by size)."""

    def get_meta(self, name: str) -> str | None:
        """A store-wide setting, or ``None``.

        Inside :meth:`transaction` the name is reserved for this transaction
        until it ends (another writer's ``get_meta`` of it waits), so a
        check-then-set (binding the vector index) happens once."""

    def set_meta(self, name: str, value: str) -> None:
        """Write a store-wide setting (inside a transaction)."""

    # -- fact rows -----------------------------------------------------------------

    def get(self, fact_id: int, *, live_at: float | None = None) -> Row | None:
        """The fact with this id (``None`` if absent, or expired at ``live_at``).

        Inside :meth:`transaction` the row stays locked against other writers
        until the transaction ends, so a read-modify-write of one fact is safe
        across processes and hosts."""

    def get_archived(self, fact_id: int) -> Row | None:
        """The archived fact with this id, with ``archived_at`` and ``reason``."""

    def get_by_key(self, slot: str, scope: str, key: str, *, live_at: float | None = None
                   ) -> Row | None:
        """The fact with this slot, scope and key.

        Inside :meth:`transaction` the key is reserved for this transaction
        until it ends, whether or not a fact holds it: another writer's
        ``get_by_key`` of the same key waits. Reading the key this way before
        :meth:`insert` or :meth:`update` makes an upsert race-free."""

    def find_same(self, slot: str, scope: str, key: str | None, value: str, *,
                  archived: bool = False, live_at: float | None = None) -> int | None:
        """The lowest id of a fact (or archived fact) with exactly this slot,
        scope, key and value, or ``None``."""

    def find_existing(self, items: Sequence[tuple[str, str, str | None, str]], *,
                      archived: bool = False) -> list[int | None]:
        """For each ``(slot, scope, key, value)``, the lowest id of a stored fact it
        duplicates, else ``None`` (in input order; an import checks a batch at once).

        Live facts: a keyed item matches the fact with its slot, scope and key
        (whatever the value); a free item (``key`` ``None``) the free fact with
        its slot, scope and exact value. ``archived``: an archived fact with the
        same slot, scope, key and value. Takes time in the number of items, not
        in the number of stored facts (both engines index free values)."""

    def taken_ids(self, fact_ids: Sequence[int]) -> set[int]:
        """Which of these ids a live, archived or historical fact ever had."""

    def insert(self, row: Row, *, fact_id: int | None = None) -> int:
        """Insert a live fact (every column of :data:`FACT_COLUMNS` but ``id``
        given); keep ``fact_id`` when given (the caller checked it is free).
        Return the id. Ids are never reused, also after an archived id.

        :raises DuplicateKeyError: The row has a key that a live fact of the
            same slot and scope holds; nothing is written."""

    def insert_archived(self, row: Row, fact_id: int) -> None:
        """Insert a fact straight into the archive (import), with
        ``archived_at`` and ``reason`` in ``row``."""

    def update(self, fact_id: int, fields: Mapping[str, Any]) -> None:
        """Set some columns of a live fact."""

    def add_history(self, entries: Sequence[HistoryEntry]) -> None:
        """Record earlier values."""

    def archive(self, fact_id: int, *, archived_at: float, reason: str | None) -> Row | None:
        """Move a live fact, with its vector, to the archive; return the
        archived row (``None``: no such live fact)."""

    def adjust_score(self, fact_id: int, delta: float, *, live_at: float) -> bool:
        """Add ``delta`` to a live fact's score; whether it existed."""

    def touch(self, fact_ids: Sequence[int], now: float) -> int:
        """``access_count + 1`` and ``last_accessed = now``; how many changed."""

    def id_is_free(self, fact_id: int) -> bool:
        """Whether no live, archived or historical fact ever had this id."""

    def history(self, fact_id: int) -> list[HistoryEntry]:
        """Earlier values of one fact, oldest first."""

    def all_history(self) -> Iterator[HistoryEntry]:
        """Every history entry, by fact id then time (export)."""

    def select(self, flt: FactFilter, *, order: str = "id", archived: bool = False
               ) -> Iterator[Row]:
        """Facts passing ``flt``; ``order`` is ``"id"`` or ``"created"`` (by
        observed time, then id)."""

    def important(self, flt: FactFilter, limit: int) -> list[Row]:
        """Up to ``limit`` facts passing ``flt`` that are keyed or reinforced (score
        above 0), most important first: score, access count and confidence
        (highest first), keyed before unkeyed, latest ``updated_at``, then id."""

    def rows_by_ids(self, fact_ids: Sequence[int], flt: FactFilter, *, archived: bool = False
                    ) -> list[Row]:
        """The facts (or archived facts) with these ids that pass ``flt``, in no
        particular order."""

    def neighbours(self, row: Row, flt: FactFilter, *, before: int, after: int
                   ) -> tuple[list[Row], list[Row]]:
        """Facts passing ``flt`` just before (newest first) and after (oldest
        first) ``row`` in time order (timelines)."""

    def group_counts(self, *, live_at: float) -> list[tuple[str, str, int, int]]:
        """``(slot, scope, facts, expired)`` per slot and scope, sorted."""

    def counts(self) -> dict[str, int]:
        """``{"facts", "archived", "history"}`` row counts."""

    def set_superseded(self, pairs: Sequence[tuple[int, int | None]], *, archived: bool = False
                       ) -> None:
        """Set ``superseded_by`` for ``(fact_id, by)`` pairs."""

    def hand_over_superseded(self, old: int, new: int) -> None:
        """Facts hidden by ``old`` are hidden by ``new`` instead."""

    def hidden_counts(self, fact_ids: Sequence[int]) -> dict[int, int]:
        """How many live facts each of these facts hides."""

    # -- links and flush progress ----------------------------------------------------

    def strengthen_links(self, pairs: Sequence[tuple[int, int]], now: float) -> None:
        """Add one to each ``(a, b)`` link (``a < b``), creating it at 1."""

    def merge_links(self, rows: Sequence[tuple[int, int, float, float]]) -> None:
        """Write ``(a, b, strength, updated_at)`` links; the stronger wins on a clash."""

    def links_of(self, fact_id: int) -> dict[int, float]:
        """Every fact linked to ``fact_id``, with the strength."""

    def links_among(self, fact_ids: Sequence[int], min_strength: float
                    ) -> list[tuple[int, int, float]]:
        """``(a, b, strength)`` of links at least ``min_strength`` touching these facts."""

    def all_links(self) -> Iterator[tuple[int, int, float, float]]:
        """Every link ``(a, b, strength, updated_at)``, by ``a, b`` (export)."""

    def read_progress(self, conversation: str) -> tuple[int, str] | None:
        """``(messages_read, fingerprint)`` of a conversation, or ``None``."""

    def write_progress(self, conversation: str, messages_read: int, fingerprint: str,
                       now: float) -> None:
        """Record how far a conversation was read (inside the flush's transaction)."""

    # -- the two candidate legs ----------------------------------------------------------

    def lexical(self, tokens: Sequence[str], flt: FactFilter, pool: int, *,
                archived: bool = False) -> list[LexicalCandidate]:
        """The best ``pool`` word matches of ``tokens`` (sanitized words, any
        of which may match) among facts passing ``flt``, best first."""

    def drop_common(self, tokens: list[str], *, share: float, min_rows: int,
                    total_share: float = 1.0) -> list[str]:
        """``tokens`` without words found in more than ``share`` of the facts, then
        without the most common until the rest are found in at most ``total_share``
        of them together (none dropped below ``min_rows`` facts; the rarest kept;
        :func:`~ctxslots.stores.sanitize.keep_words`)."""

    def vector_knn(self, vector: np.ndarray, flt: FactFilter, k: int) -> list[tuple[int, float]]:
        """The ``k`` live facts passing ``flt`` nearest to ``vector``:
        ``(fact_id, cosine)``, best first. Never short for a small scope: an
        engine whose index walks candidates before filtering (pgvector's HNSW)
        scans small filtered sets exactly and falls back to an exact scan when the
        index comes back short. SQLite is exact always; PostgreSQL is exact up to
        a few thousand visible vectors and approximate (HNSW) above."""

    # -- vectors -----------------------------------------------------------------

    def vector_state(self) -> VectorState:
        """What the vector index holds."""

    def reset_vectors(self, model_id: str, dimension: int) -> None:
        """Drop every vector and bind the index to this embedder (inside a
        transaction), recording :data:`META_EMBEDDER_MODEL` and
        :data:`META_EMBEDDER_DIMENSION`."""

    def put_vectors(self, rows: Sequence[tuple[int, str, str]], vectors: np.ndarray) -> None:
        """Write the vectors of ``(fact_id, scope, slot)`` rows (inside a transaction)."""

    def delete_vectors(self, fact_ids: Sequence[int]) -> None:
        """Remove the vectors of these facts (inside a transaction)."""

    def vectors_of(self, fact_ids: Sequence[int]) -> dict[int, np.ndarray]:
        """The stored vectors of these facts (float32)."""

    def without_vectors(self, *, limit: int) -> list[Row]:
        """Up to ``limit`` live facts that have no vector, by id."""

    # -- health --------------------------------------------------------------------

    def check(self) -> Health:
        """Integrity of the store and of its derived indexes."""

    def bad_values(self, *, limit: int) -> list[BadValue]:
        """Up to ``limit`` stored numbers outside :data:`READABLE_RANGES` (values
        of the wrong type included), by table, column and fact id."""

    def repair_values(self, now: float) -> int:
        """Set every stored number outside :data:`READABLE_RANGES` to its range's
        fallback (``"now"`` is ``now``), inside a transaction; how many were set."""

    def rebuild(self) -> None:
        """Rebuild every derived object (lexical index, triggers, indexes) from the facts."""


def visible_scopes(scope: str) -> tuple[str, ...]:
    """The stored scope values a search in ``scope`` sees: that scope and the global one."""
    return tuple(dict.fromkeys([scope, ""]))


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
