"""The storage seam, by role: what a storage engine does for :class:`~ctxslots.FactStore`.

An engine (SQLite in :mod:`ctxslots.stores.sqlite`, PostgreSQL in
:mod:`ctxslots.stores.postgres`) owns its connections and transactions, its
schema and migrations, the rows of facts with their history, archive, links and
flush progress, the two candidate legs (filters applied before the cut), the
change feed of any in-process cache, and its health checks. It never validates
input (the facade does), never ranks (the candidates it returns are ranked by
:mod:`ctxslots.stores.ranking`), never embeds (it is handed vectors) and never
reads a query's text (it is handed a :class:`~.types.QueryPlan`).

Each protocol below is one role, sized by what its callers use; :class:`Backend`
is their union, what an engine implements. Every method that writes must be
called inside :meth:`Lifecycle.transaction`; reads may be called anywhere.
Methods never raise on an empty input list. Engine errors surface as
:class:`~ctxslots.errors.StoreError` (with a message that says what to do); a
missing row is ``None`` or an empty result, never an exception.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from .types import (
    BadValue,
    CacheStatus,
    Erased,
    FactFields,
    FactFilter,
    FactKey,
    FactRow,
    GroupCount,
    Health,
    HistoryEntry,
    LexicalCandidate,
    MisorderedTimes,
    QueryPlan,
    TermCounts,
    VectorRow,
    VectorState,
)

__all__ = ["Backend", "Caches", "Candidates", "Erasure", "FactRows", "FlushProgress", "Lifecycle",
           "Links", "Upkeep", "Vectors"]


class Lifecycle(Protocol):
    """Connections, transactions and store-wide settings."""

    #: ``"sqlite"`` or ``"postgresql"``.
    engine: str
    #: Where the store lives, safe to print (no password).
    location: str


    def close(self) -> None:
        """Release connections and background work (idempotent)."""

    def transaction(self, *, savepoints: bool = True) -> contextlib.AbstractContextManager[None]:
        """One write transaction: all writes inside land together or not at all.

        Nested calls join the outer transaction (a failing inner block rolls
        back to where it started). Waits for other writers up to the engine's
        timeout. With ``savepoints=False`` the blocks nested in this one take no
        savepoint: the first that raises fails this whole block, which rolls back
        (to where it started) and raises :class:`~ctxslots.errors.StoreError` at
        its end (with :func:`~.types.failed_batch_error`) even if the error was
        caught; a block started after the failure raises that error at once.
        """

    def hold_writes(self) -> None:
        """Make every other writer of the store wait until this thread's open
        :meth:`transaction` ends (an import, whose duplicate checks must see every fact
        another writer stores meanwhile). Reads go on."""

    def snapshot(self) -> contextlib.AbstractContextManager[None]:
        """Reads inside see one consistent moment of the store (export)."""

    def reading(self) -> contextlib.AbstractContextManager[None]:
        """One search's reads and its access count, run so that their statements keep
        their plans where the engine plans them anew otherwise (PostgreSQL: on one
        connection held for the search); inside a transaction or a snapshot, nothing
        more."""

    @property
    def in_transaction(self) -> bool:
        """Whether this thread is inside a :meth:`transaction` block (another thread's
        block is no part of this thread's writes)."""

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


class FactRows(Protocol):
    """The rows of facts, their archive and their history."""

    def get(self, fact_id: int, *, live_at: float | None = None) -> FactRow | None:
        """The fact with this id (``None`` if absent, or expired at ``live_at``).

        Inside :meth:`transaction` the row stays locked against other writers
        until the transaction ends, so a read-modify-write of one fact is safe
        across processes and hosts."""

    def get_archived(self, fact_id: int) -> FactRow | None:
        """The archived fact with this id, with ``archived_at`` and ``reason``."""

    def get_by_key(self, slot: str, scope: str, key: str, *, user_id: str, agent_id: str,
                   live_at: float | None = None) -> FactRow | None:
        """The fact with this slot, owners and key.

        Inside :meth:`transaction` the row found is locked until the
        transaction ends: another writer's ``get_by_key`` of the same key
        waits. A key with no row may be left unlocked (PostgreSQL; a SQLite
        transaction holds the whole file), so another writer can store it
        before this transaction's :meth:`insert`, which then raises
        :class:`~ctxslots.errors.DuplicateKeyError` and leaves the transaction
        usable. Reading the key this way before :meth:`insert` or
        :meth:`update`, and again after that error, makes an upsert race-free."""

    def find_same(self, slot: str, scope: str, key: str | None, value: str, *, user_id: str,
                  agent_id: str, archived: bool = False, live_at: float | None = None
                  ) -> int | None:
        """The lowest id of a fact (or archived fact) with exactly this slot,
        owners, key and value, or ``None``. Inside a transaction, reading a live
        free memory (no key) holds its slot and owners until the transaction
        ends where the engine does not lock the whole store: another writer's
        ``find_same`` for them waits, so a read followed by :meth:`insert` never
        stores a memory twice."""

    def find_existing(self, items: Sequence[FactKey], *, archived: bool = False
                      ) -> list[int | None]:
        """For each ``(slot, scope, user_id, agent_id, key, value)``, the lowest id of a
        stored fact it duplicates, else ``None`` (in input order; an import checks a
        batch at once).

        Live facts: a keyed item matches the fact with its slot, owners and key
        (whatever the value); a free item (``key`` ``None``) the free fact with
        its slot, owners and exact value. ``archived``: an archived fact with the
        same slot, owners, key and value. Takes time in the number of items, not
        in the number of stored facts (both engines index free values)."""

    def taken_ids(self, fact_ids: Sequence[int]) -> set[int]:
        """Which of these ids a live, archived or historical fact ever had."""

    def insert(self, row: FactFields, *, fact_id: int | None = None) -> int:
        """Insert a live fact (every column of :data:`FACT_COLUMNS` but ``id``
        given); keep ``fact_id`` when given (the caller checked it is free).
        Return the id. Ids are never reused, also after an archived id.

        :raises DuplicateKeyError: The row has a key that a live fact of the
            same slot and owners holds; nothing is written."""

    def insert_archived(self, row: FactRow, fact_id: int) -> None:
        """Insert a fact straight into the archive (import), with
        ``archived_at`` and ``reason`` in ``row``."""

    def update(self, fact_id: int, fields: Mapping[str, Any], *,
               history: HistoryEntry | None = None) -> None:
        """Set some columns of a live fact; with ``history``, record that earlier value
        in the same write (as :meth:`add_history` would), from when it began: the end of
        the fact's latest history entry, or ``history.valid_from`` (the fact's creation)
        when it has none or that is later. A value said again, or edited without a new
        entry, keeps the start it had."""

    def add_history(self, entries: Sequence[HistoryEntry]) -> None:
        """Record earlier values."""

    def archive(self, fact_id: int, *, archived_at: float, reason: str | None) -> FactRow | None:
        """Move a live fact, with its vector, to the archive; return the
        archived row (``None``: no such live fact)."""

    def adjust_score(self, fact_id: int, delta: float, *, live_at: float) -> bool:
        """Add ``delta`` to a live fact's score; whether it existed."""

    def touch(self, fact_ids: Sequence[int], now: float, *, wait: float | None = None) -> int:
        """``access_count + 1`` and ``last_accessed = now``; how many changed. Outside a
        :meth:`transaction`, a write of its own (all or nothing). With ``wait`` (a
        count that may be put off): an engine that locks the whole store for a writer
        waits at most that many seconds, then raises
        :class:`~ctxslots.errors.StoreBusyError`; one that locks rows skips the rows
        another transaction holds, uncounted."""

    def id_is_free(self, fact_id: int) -> bool:
        """Whether no live, archived or historical fact ever had this id."""

    def history(self, fact_id: int) -> list[HistoryEntry]:
        """Earlier values of one fact, oldest first."""

    def all_history(self) -> Iterator[HistoryEntry]:
        """Every history entry, by fact id then time (export)."""

    def history_of(self, fact_ids: Sequence[int]) -> Iterator[HistoryEntry]:
        """The history entries of these facts, by fact id then time (an export of one
        owner's facts, which reads theirs, not the whole store's)."""

    def select(self, flt: FactFilter, *, order: str = "id", archived: bool = False,
               newest_first: bool = False, limit: int | None = None, offset: int = 0
               ) -> Iterator[FactRow]:
        """Facts passing ``flt``; ``order`` is ``"id"`` or ``"created"`` (by
        observed time, then id), the highest first when ``newest_first``; at most
        ``limit`` of them (``None``: all) after skipping ``offset``."""

    def count(self, flt: FactFilter) -> int:
        """How many facts pass ``flt``."""

    def important(self, flt: FactFilter, limit: int) -> list[FactRow]:
        """Up to ``limit`` facts passing ``flt`` that are keyed or reinforced (score
        above 0), most important first: score, access count and confidence
        (highest first), keyed before unkeyed, latest ``updated_at``, then id."""

    def rows_by_ids(self, fact_ids: Sequence[int], flt: FactFilter, *, archived: bool = False,
                    held: bool = False) -> list[FactRow]:
        """The facts (or archived facts) with these ids that pass ``flt``, in no
        particular order. ``held`` (inside a transaction): none of them can be deleted
        by another connection until it ends, and one another connection is deleting is
        left out (so what is written about them meanwhile, such as a vector, is never
        left behind by an erase)."""

    def neighbours(self, row: FactRow, flt: FactFilter, *, before: int, after: int
                   ) -> tuple[list[FactRow], list[FactRow]]:
        """Facts passing ``flt`` just before (newest first) and after (oldest
        first) ``row`` in time order (timelines)."""

    def group_counts(self, *, live_at: float) -> list[GroupCount]:
        """Facts and expired facts per slot and owners, sorted."""

    def counts(self) -> dict[str, int]:
        """``{"facts", "archived", "history"}`` row counts."""

    def set_superseded(self, pairs: Sequence[tuple[int, int | None]], *, archived: bool = False
                       ) -> None:
        """Set ``superseded_by`` for ``(fact_id, by)`` pairs."""

    def hand_over_superseded(self, old: int, new: int) -> None:
        """Facts hidden by ``old`` are hidden by ``new`` instead."""

    def hidden_counts(self, fact_ids: Sequence[int]) -> dict[int, int]:
        """How many live facts each of these facts hides."""


class Links(Protocol):
    """Co-recall links between facts."""

    def strengthen_links(self, pairs: Sequence[tuple[int, int]], now: float) -> None:
        """Add one to each ``(a, b)`` link (``a < b``), creating it at 1."""

    def merge_links(self, rows: Sequence[tuple[int, int, float, float]]) -> None:
        """Write ``(a, b, strength, updated_at)`` links; the stronger wins on a clash."""

    def links_of(self, fact_id: int) -> dict[int, float]:
        """Every fact linked to ``fact_id``, with the strength."""

    def links_among(self, fact_ids: Sequence[int], min_strength: float
                    ) -> list[tuple[int, int, float]]:
        """``(a, b, strength)`` of links at least ``min_strength`` touching these facts."""

    def links_and_hidden(self, fact_ids: Sequence[int], min_strength: float | None
                         ) -> tuple[list[tuple[int, int, float]], dict[int, int]]:
        """What a search asks about its hits, read together: :meth:`links_among` (none
        when ``min_strength`` is ``None``) and :meth:`hidden_counts`."""

    def all_links(self) -> Iterator[tuple[int, int, float, float]]:
        """Every link ``(a, b, strength, updated_at)``, by ``a, b`` (export)."""

    def links_within(self, fact_ids: Sequence[int]) -> list[tuple[int, int, float, float]]:
        """The links ``(a, b, strength, updated_at)`` both of whose facts are among these,
        by ``a, b`` (an export of one owner's facts, which reads theirs alone)."""


class FlushProgress(Protocol):
    """How far each conversation of each user and agent was read by the flusher."""

    def read_progress(self, conversation: str, *, user_id: str, agent_id: str
                      ) -> tuple[int, str] | None:
        """``(messages_read, fingerprint)`` of a conversation, or ``None``. Inside a
        write transaction no other one may write this conversation's progress until
        it ends (SQLite's write lock holds every writer; PostgreSQL reserves the name)."""

    def write_progress(self, conversation: str, messages_read: int, fingerprint: str,
                       now: float, *, user_id: str, agent_id: str) -> None:
        """Record how far a conversation was read (inside the flush's transaction)."""

    def erase_progress(self, kind: str, owner: str) -> int:
        """Remove the progress of every conversation whose ``kind`` (``"user"`` or
        ``"agent"``) is ``owner`` (inside a transaction); how many were removed."""


class Candidates(Protocol):
    """The two candidate legs of a search, filters applied before the cut."""

    def lexical(self, plan: QueryPlan, flt: FactFilter, pool: int, *,
                archived: bool = False) -> list[LexicalCandidate]:
        """The best ``pool`` matches of the plan's words (any of which may match)
        among facts passing ``flt``, best first; none when it has no words."""

    def document_counts(self, words: Sequence[str], *, min_rows: int) -> TermCounts | None:
        """How many live facts hold each word (stemmed as the index stems it), or
        ``None`` when the store holds fewer than ``min_rows`` facts (nothing is
        counted). Counts may be a few minutes or a fifth of the store's growth old."""

    def holding(self, words: Sequence[str], fact_ids: Sequence[int], *,
                archived: bool = False) -> set[int]:
        """Which of ``fact_ids`` (of the archive, when ``archived``) hold any of
        ``words`` in their text or context, stemmed as the index stems them."""

    def terms(self, texts: Sequence[str]) -> list[list[str]]:
        """The terms the lexical index holds for each text, as it indexes a fact's text
        (stemmed, case folded), each once: what a query word must share with a fact to
        match it."""

    def vector_knn(self, vector: np.ndarray, flt: FactFilter, k: int) -> list[tuple[int, float]]:
        """The ``k`` live facts passing ``flt`` nearest to ``vector``:
        ``(fact_id, cosine)``, best first. Never short for a small scope: an
        engine whose index walks candidates before filtering (pgvector's HNSW)
        scans small filtered sets exactly and falls back to an exact scan when the
        index comes back short. SQLite is exact always; PostgreSQL is exact up to
        a few thousand visible vectors and approximate (HNSW) above."""


class Vectors(Protocol):
    """The vector index."""

    def vector_state(self) -> VectorState:
        """What the vector index holds."""

    def reset_vectors(self, model_id: str, dimension: int) -> None:
        """Drop every vector and bind the index to this embedder (inside a
        transaction), recording :data:`META_EMBEDDER_MODEL` and
        :data:`META_EMBEDDER_DIMENSION`."""

    def put_vectors(self, rows: Sequence[VectorRow], vectors: np.ndarray) -> None:
        """Write the vectors of these facts (inside a transaction), each as
        :func:`~.unit_vectors.unit_rows` makes it."""

    def delete_vectors(self, fact_ids: Sequence[int]) -> None:
        """Remove the vectors of these facts (inside a transaction)."""

    def vectors_of(self, fact_ids: Sequence[int]) -> dict[int, np.ndarray]:
        """The stored vectors of these facts (float32)."""

    def without_vectors(self, *, limit: int, after: int = 0) -> list[FactRow]:
        """Up to ``limit`` live facts that have no vector, by id, from the first id
        above ``after``."""

    def drop_unusable_vectors(self) -> int:
        """Remove the vectors no search can use (:attr:`VectorState.unusable`) and those
        whose fact is gone (inside a transaction); how many there were. Their facts
        then have no vector, for a repair to embed."""


class Caches(Protocol):
    """In-memory copies of the indexes (an engine may keep none)."""

    def cache_status(self) -> CacheStatus:
        """Which copies are loaded or loading."""

    def load_lexical_cache(self, timeout: float | None = None) -> bool:
        """Load the in-memory lexical copy now; whether it is loaded (false only
        when ``timeout`` seconds passed first).

        :raises StoreError: The engine keeps no such copy, the store was opened
            without it, or loading failed."""

    def load_vector_cache(self, timeout: float | None = None) -> bool:
        """Load the in-memory vector copy now; whether it is loaded.

        :raises StoreError: The engine keeps no such copy, the store was opened
            without it, or loading failed."""


class Erasure(Protocol):
    """Removing facts for good: their rows, history, vectors and links."""

    def owned_ids(self, kind: str, owner: str) -> list[int]:
        """The ids of the live and archived facts whose ``kind`` (``"user"``,
        ``"agent"`` or ``"scope"``) is ``owner``; a workspace's are those of no user
        (the facts a user keeps in a workspace are the user's own)."""

    def erase_facts(self, fact_ids: Sequence[int]) -> Erased:
        """Remove these facts, live or archived, with their history, vectors and
        links (inside a transaction); what was removed."""

    def erase_all(self) -> Erased:
        """Remove every fact, archived fact, history entry, vector, link and flush
        progress record (inside a transaction); the store stays bound to its embedder."""

    def scrub(self) -> None:
        """After an erasure: leave no trace of the removed text in the engine's files
        (on SQLite: its free pages and write-ahead log); inside a transaction, once the
        outermost one commits."""


class Upkeep(Protocol):
    """Health checks and rebuilds."""

    def check(self) -> Health:
        """Integrity of the store and of its derived indexes."""

    def bad_values(self, *, limit: int) -> list[BadValue]:
        """Up to ``limit`` stored numbers outside :data:`READABLE_RANGES` (values
        of the wrong type included), by table, column and fact id."""

    def repair_values(self, now: float) -> int:
        """Set every stored number outside :data:`READABLE_RANGES` to its range's
        fallback (``"now"`` is ``now``), inside a transaction; how many were set."""

    def rebuild(self) -> None:
        """Rebuild every derived object (lexical index, triggers, indexes, the vector
        table and its indexes when missing) from the facts."""

    def refresh_statistics(self) -> None:
        """Let the engine's planner count the tables again, during or after a bulk write
        (inside a transaction, its own rows are counted): plans made from counts taken
        before it can read far too much."""

    def misordered_times(self, *, limit: int) -> list[MisorderedTimes]:
        """Up to ``limit`` stored rows whose times break a :data:`TIME_ORDERS` rule."""

    def repair_times(self) -> int:
        """Set the later time of every row that breaks a :data:`TIME_ORDERS` rule to its
        earlier time (inside a transaction); how many rows were set."""

    def superseded_links(self, *, archived: bool = False) -> list[tuple[int, int]]:
        """Every ``(fact id, superseded_by)`` of the live facts (or the archive)."""


@runtime_checkable
class Backend(Lifecycle, FactRows, Links, FlushProgress, Candidates, Vectors, Caches, Erasure,
              Upkeep, Protocol):
    """A storage engine behind :class:`~ctxslots.FactStore`: every role above."""
