"""SQLiteBackend: the storage seam implemented on one SQLite file (apsw, FTS5, sqlite-vec)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Self

import apsw
import attrs
import numpy as np

from ...errors import ReadOnlyStoreError, StoreFullError
from ..backend import (
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
from . import _health, _links, _meta, _rows, _values, _vectors
from ._connect import open_connection
from ._connection import DEFAULT_BUSY_TIMEOUT_S, io_error
from ._lexical import LexicalLeg
from ._terms import count_erasure, index_terms
from ._vectors import VectorIndex
from .lexical_cache import trim_fact_log

__all__ = ["SQLiteBackend"]


class SQLiteBackend:
    """A store in one SQLite file (apsw, FTS5 with the porter tokenizer, sqlite-vec).

    One connection per backend: reads run in autocommit mode, writes in
    :meth:`transaction`. Each role's SQL lives in its module (``_rows``,
    ``_links``, ``_meta``, ``_lexical``, ``_vectors``, ``_health``,
    ``_values``), as in the PostgreSQL engine.

    :param path: The file; ``":memory:"`` for a throwaway store.
    :param create: Create a missing file (and its directory, private to the
        owner); when false a missing file is a :class:`StoreError`.
    :param lexical_cache: Score words from an in-memory copy of the index,
        loaded in the background (see :mod:`.lexical_cache`).
    :param vector_cache: Search an in-memory copy of the vectors, loaded in
        the background, instead of reading them from the file each time.
    :param busy_timeout: Seconds a write waits for another connection's lock
        before :class:`~ctxslots.errors.StoreBusyError`.
    :raises StoreError: The file cannot be opened, is not a store, or is newer
        than this version understands.
    """

    engine = "sqlite"

    def __init__(self, path: str | os.PathLike[str], *, create: bool = True,
                 lexical_cache: bool = False, vector_cache: bool = True,
                 busy_timeout: float = DEFAULT_BUSY_TIMEOUT_S) -> None:
        self.path = os.fspath(path)
        self.location = self.path
        self._conn = open_connection(self.path, create=create, busy_timeout=busy_timeout)
        self._lexical = LexicalLeg(use_copy=lexical_cache)
        self._vectors = VectorIndex(use_copy=vector_cache)
        # An erasure inside a transaction owes the log its emptying once that commits.
        self._scrub_owed = False

    # -- lifecycle ---------------------------------------------------------------

    def close(self) -> None:
        """Stop background loads and close the file (idempotent)."""
        self._lexical.close()
        self._vectors.close()
        self._conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @contextlib.contextmanager
    def transaction(self, *, savepoints: bool = True, wait: float | None = None
                    ) -> Iterator[None]:
        """``BEGIN IMMEDIATE`` (savepoints when nested, unless a block around says
        ``savepoints=False``; waiting ``wait`` seconds for the lock instead of the busy
        timeout, when given); the change log is trimmed at commit, and the write-ahead
        log emptied after it when an erasure ran inside (see :meth:`scrub`)."""
        outer = not self._conn.in_transaction
        committed = False
        try:
            with self._write_errors(), self._conn.write(savepoints=savepoints, wait=wait):
                yield
                if outer:
                    trim_fact_log(self._conn)
            committed = outer
        finally:
            owed = outer and self._scrub_owed
            if outer:
                self._scrub_owed = False
        if owed and committed:
            _health.checkpoint(self._conn)

    def snapshot(self) -> contextlib.AbstractContextManager[None]:
        """A read transaction, so every read inside sees one moment of the file (other
        threads wait for its end, see :meth:`Connection.read_transaction`)."""
        return self._conn.read_transaction()

    @contextlib.contextmanager
    def _write_errors(self) -> Iterator[None]:
        """A full disk, a read-only file or a write the system refused (a file size
        limit), as the store's own errors."""
        try:
            yield
        except apsw.FullError as exc:
            raise StoreFullError(f"the disk holding {self.path} is full; nothing was written",
                                 path=self.path) from exc
        except apsw.ReadOnlyError as exc:
            raise ReadOnlyStoreError(f"{self.path} is read-only{self._conn.read_only_because}; "
                                     "nothing was written",
                                     path=self.path) from exc
        except apsw.IOError as exc:
            raise io_error(self.path, self._conn.raw, exc) from exc

    def reading(self) -> contextlib.AbstractContextManager[None]:
        """Nothing to do: SQLite prepares each statement once and keeps it."""
        return contextlib.nullcontext()

    @property
    def in_transaction(self) -> bool:
        """Whether this thread has a write transaction open."""
        return self._conn.in_transaction

    def hold_writes(self) -> None:
        """Nothing to do: a write transaction (``BEGIN IMMEDIATE``) holds the file's one
        write lock until it ends."""

    def info(self) -> dict[str, Any]:
        """Engine, file, size, schema and library versions."""
        return _health.info(self._conn)

    def used_bytes(self) -> int:
        """The bytes of the file that hold data (pages not on the free list)."""
        return _health.used_bytes(self._conn)

    def get_meta(self, name: str) -> str | None:
        """A store-wide setting."""
        return _meta.get_meta(self._conn, name)

    def set_meta(self, name: str, value: str) -> None:
        """Write a store-wide setting."""
        _meta.set_meta(self._conn, name, value)

    # -- fact rows -----------------------------------------------------------------

    def get(self, fact_id: int, *, live_at: float | None = None) -> FactRow | None:
        """The fact with this id."""
        return _rows.get(self._conn, fact_id, live_at)

    def get_archived(self, fact_id: int) -> FactRow | None:
        """The archived fact with this id."""
        return _rows.get_archived(self._conn, fact_id)

    def get_by_key(self, slot: str, scope: str, key: str, *, user_id: str, agent_id: str,
                   live_at: float | None = None) -> FactRow | None:
        """The fact with this slot, owners and key."""
        conn = self._conn
        if not conn.in_transaction:
            return _rows.get_by_key(conn, slot, scope, user_id, agent_id, key, live_at)
        # A flush reads a key, then writes it: the write's own read is the same row, or
        # the same absence of one (the one row with this key, live or not).
        return conn.kept_read.read(
            ("key", slot, scope, user_id, agent_id, key),
            lambda: _rows.get_by_key(conn, slot, scope, user_id, agent_id, key, None), live_at)

    def find_same(self, slot: str, scope: str, key: str | None, value: str, *, user_id: str,
                  agent_id: str, archived: bool = False, live_at: float | None = None
                  ) -> int | None:
        """The lowest id with exactly this slot, owners, key and value (by the value index)."""
        return _rows.find_same(self._conn, slot, scope, user_id, agent_id, key, value,
                               archived=archived, live_at=live_at)

    def find_existing(self, items: Sequence[FactKey], *, archived: bool = False
                      ) -> list[int | None]:
        """The stored fact each item duplicates, a batch per statement."""
        return _rows.find_existing(self._conn, items, archived=archived)

    def taken_ids(self, fact_ids: Sequence[int]) -> set[int]:
        """Which of these ids a fact ever had."""
        return _rows.taken_ids(self._conn, fact_ids)

    def insert(self, row: FactFields, *, fact_id: int | None = None) -> int:
        """Insert a live fact; a taken key raises :class:`~ctxslots.errors.DuplicateKeyError`."""
        return _rows.insert(self._conn, row, fact_id, self.path)

    def insert_archived(self, row: FactRow, fact_id: int) -> None:
        """Insert straight into the archive and keep its id from being handed out."""
        _rows.insert_archived(self._conn, row, fact_id)

    def update(self, fact_id: int, fields: Mapping[str, Any], *,
               history: HistoryEntry | None = None) -> None:
        """Set some columns of a fact, recording ``history`` first when given (from when
        that value began, see :func:`_rows.add_replaced`)."""
        if history is not None:
            _rows.add_replaced(self._conn, history)
        _rows.update(self._conn, fact_id, fields)

    def add_history(self, entries: Sequence[HistoryEntry]) -> None:
        """Record earlier values."""
        _rows.add_history(self._conn, entries)

    def archive(self, fact_id: int, *, archived_at: float, reason: str | None
                ) -> FactRow | None:
        """Move a fact to the archive and drop its vector."""
        archived = _rows.archive(self._conn, fact_id, archived_at, reason)
        if archived is not None:
            _vectors.delete(self._conn, [fact_id])
        return archived

    def adjust_score(self, fact_id: int, delta: float, *, live_at: float) -> bool:
        """Add to a live fact's score."""
        return _rows.adjust_score(self._conn, fact_id, delta, live_at)

    def touch(self, fact_ids: Sequence[int], now: float, *, wait: float | None = None) -> int:
        """Count an access of each fact (in a transaction of its own when none is open,
        waiting ``wait`` seconds for the write lock when given)."""
        if self._conn.in_transaction:
            return _rows.touch(self._conn, fact_ids, now)
        with self.transaction(wait=wait):
            return _rows.touch(self._conn, fact_ids, now)

    def id_is_free(self, fact_id: int) -> bool:
        """Whether no fact ever had this id (live, archived, in history or handed out)."""
        return _rows.id_is_free(self._conn, fact_id)

    def history(self, fact_id: int) -> list[HistoryEntry]:
        """Earlier values of one fact, oldest first."""
        return _rows.history(self._conn, fact_id)

    def all_history(self) -> Iterator[HistoryEntry]:
        """Every history entry."""
        return _rows.all_history(self._conn)

    def history_of(self, fact_ids: Sequence[int]) -> Iterator[HistoryEntry]:
        """The history entries of these facts, by fact id then time."""
        return _rows.history_of(self._conn, fact_ids)

    def select(self, flt: FactFilter, *, order: str = "id", archived: bool = False,
               newest_first: bool = False, limit: int | None = None, offset: int = 0
               ) -> Iterator[FactRow]:
        """Facts passing ``flt``, by id or by observed time, a page of them if asked."""
        return _rows.select(self._conn, flt, order, archived, newest_first, limit, offset)

    def count(self, flt: FactFilter) -> int:
        """How many facts pass ``flt``."""
        return _rows.count(self._conn, flt)

    def important(self, flt: FactFilter, limit: int) -> list[FactRow]:
        """Keyed or reinforced facts passing ``flt``, most important first (an index walk)."""
        return _rows.important(self._conn, flt, limit)

    def rows_by_ids(self, fact_ids: Sequence[int], flt: FactFilter, *, archived: bool = False,
                    held: bool = False) -> list[FactRow]:
        """The facts with these ids that pass ``flt`` (``held``: the write transaction
        already keeps every other connection from deleting them)."""
        return _rows.rows_by_ids(self._conn, fact_ids, flt, archived)

    def neighbours(self, row: FactRow, flt: FactFilter, *, before: int, after: int
                   ) -> tuple[list[FactRow], list[FactRow]]:
        """Facts just before and after ``row`` by observed time."""
        return _rows.neighbours(self._conn, row, flt, before, after)

    def group_counts(self, *, live_at: float) -> list[GroupCount]:
        """Facts and expired facts per slot and owners."""
        return _rows.group_counts(self._conn, live_at)

    def counts(self) -> dict[str, int]:
        """Rows in facts, archive and history."""
        return _rows.counts(self._conn)

    def set_superseded(self, pairs: Sequence[tuple[int, int | None]], *, archived: bool = False
                       ) -> None:
        """Set ``superseded_by``."""
        _rows.set_superseded(self._conn, pairs, archived)

    def hand_over_superseded(self, old: int, new: int) -> None:
        """Facts hidden by ``old`` are hidden by ``new``."""
        _rows.hand_over_superseded(self._conn, old, new)

    def hidden_counts(self, fact_ids: Sequence[int]) -> dict[int, int]:
        """How many facts each of these hides."""
        return _rows.hidden_counts(self._conn, fact_ids)

    # -- links and flush progress ----------------------------------------------------

    def strengthen_links(self, pairs: Sequence[tuple[int, int]], now: float) -> None:
        """Add one to each link."""
        _links.strengthen_links(self._conn, pairs, now)

    def merge_links(self, rows: Sequence[tuple[int, int, float, float]]) -> None:
        """Write links; the stronger one wins."""
        _links.merge_links(self._conn, rows)

    def links_of(self, fact_id: int) -> dict[int, float]:
        """Every fact linked to ``fact_id``."""
        return _links.links_of(self._conn, fact_id)

    def links_among(self, fact_ids: Sequence[int], min_strength: float
                    ) -> list[tuple[int, int, float]]:
        """Strong links touching these facts."""
        return _links.links_among(self._conn, fact_ids, min_strength)

    def links_and_hidden(self, fact_ids: Sequence[int], min_strength: float | None
                         ) -> tuple[list[tuple[int, int, float]], dict[int, int]]:
        """A search's links among its hits and their hidden counts (two cheap reads here)."""
        links = [] if min_strength is None else self.links_among(fact_ids, min_strength)
        return links, self.hidden_counts(fact_ids)

    def all_links(self) -> Iterator[tuple[int, int, float, float]]:
        """Every link."""
        return _links.all_links(self._conn)

    def links_within(self, fact_ids: Sequence[int]) -> list[tuple[int, int, float, float]]:
        """The links both of whose facts are among these, by ``a, b``."""
        return _links.links_within(self._conn, fact_ids)

    def read_progress(self, conversation: str, *, user_id: str, agent_id: str
                      ) -> tuple[int, str] | None:
        """How far a conversation was read."""
        return _meta.read_progress(self._conn, conversation, user_id, agent_id)

    def write_progress(self, conversation: str, messages_read: int, fingerprint: str,
                       now: float, *, user_id: str, agent_id: str) -> None:
        """Record how far a conversation was read."""
        _meta.write_progress(self._conn, conversation, messages_read, fingerprint, now,
                             user_id, agent_id)

    def erase_progress(self, kind: str, owner: str) -> int:
        """Remove the progress of this user's or agent's conversations."""
        return _meta.erase_progress(self._conn, kind, owner)

    # -- the two candidate legs ----------------------------------------------------------

    def lexical(self, plan: QueryPlan, flt: FactFilter, pool: int, *,
                archived: bool = False) -> list[LexicalCandidate]:
        """BM25 from FTS5 (or its in-memory copy), filters applied before the cut."""
        return self._lexical.search(self._conn, plan, flt, pool, archived=archived)

    def document_counts(self, words: Sequence[str], *, min_rows: int) -> TermCounts | None:
        """Facts holding each word, from the index's vocabulary (fts5vocab)."""
        return self._lexical.document_counts(self._conn, words, min_rows=min_rows)

    def holding(self, words: Sequence[str], fact_ids: Sequence[int], *,
                archived: bool = False) -> set[int]:
        """Which of ``fact_ids`` hold any of ``words`` (their stored stems)."""
        return self._lexical.holding(self._conn, words, fact_ids, archived=archived)

    def terms(self, texts: Sequence[str]) -> list[list[str]]:
        """Each text's terms as the index holds them (its Snowball stems)."""
        return index_terms(list(texts))

    def vector_knn(self, vector: np.ndarray, flt: FactFilter, k: int) -> list[tuple[int, float]]:
        """Exact cosine KNN among the facts passing ``flt``."""
        return self._vectors.knn(self._conn, vector, flt, k)

    # -- vectors -----------------------------------------------------------------

    def vector_state(self) -> VectorState:
        """What the vector table holds against the facts."""
        return _vectors.state(self._conn)

    def reset_vectors(self, model_id: str, dimension: int) -> None:
        """Drop every vector; bind the table to this embedder."""
        _vectors.reset(self._conn, model_id, dimension)
        self._vectors.forget_copy()  # its copy is of the vectors just dropped

    def put_vectors(self, rows: Sequence[VectorRow], vectors: np.ndarray) -> None:
        """Write vectors and log them for the in-memory copy."""
        _vectors.put(self._conn, rows, vectors)

    def delete_vectors(self, fact_ids: Sequence[int]) -> None:
        """Remove vectors and log it."""
        _vectors.delete(self._conn, fact_ids)

    def vectors_of(self, fact_ids: Sequence[int]) -> dict[int, np.ndarray]:
        """Stored vectors by fact id."""
        return _vectors.vectors_of(self._conn, fact_ids)

    def without_vectors(self, *, limit: int, after: int = 0) -> list[FactRow]:
        """Live facts lacking a vector, by id, above ``after``."""
        return _vectors.without_vectors(self._conn, limit, after)

    def drop_unusable_vectors(self) -> int:
        """Remove the vectors no search can use and those of no fact, and log it."""
        return _vectors.drop_unusable(self._conn)

    # -- in-memory copies --------------------------------------------------------

    def cache_status(self) -> CacheStatus:
        """Which in-memory copies are loaded or loading."""
        lexical, vectors = self._lexical.copy, self._vectors.copy
        return CacheStatus(
            lexical_loaded=lexical is not None, lexical_loading=self._lexical.loading,
            lexical_rows=0 if lexical is None else lexical.rows_loaded,
            lexical_live=0 if lexical is None else lexical.live,
            vector_loaded=vectors is not None, vector_loading=self._vectors.loading,
            vector_rows=0 if vectors is None else vectors.rows)

    def load_lexical_cache(self, timeout: float | None = None) -> bool:
        """Load the in-memory lexical copy now; whether it is loaded."""
        return self._lexical.load(self._conn, timeout)

    def load_vector_cache(self, timeout: float | None = None) -> bool:
        """Load the in-memory vector copy now; whether it is loaded."""
        return self._vectors.load(self._conn, timeout)

    # -- erasure ---------------------------------------------------------------------

    def owned_ids(self, kind: str, owner: str) -> list[int]:
        """The ids of the live and archived facts of this owner."""
        return _rows.owned_ids(self._conn, kind, owner)

    def erase_facts(self, fact_ids: Sequence[int]) -> Erased:
        """Remove these facts with their history, vectors and links (zeroed in the file)."""
        erased = _rows.erase_facts(self._conn, fact_ids)
        count_erasure(self._conn)
        return attrs.evolve(erased, vectors=_vectors.delete(self._conn, fact_ids))

    def erase_all(self) -> Erased:
        """Remove every fact, archived fact, history entry, vector, link and progress record."""
        erased = attrs.evolve(_rows.erase_all(self._conn), vectors=_vectors.erase_all(self._conn),
                              progress=_meta.erase_all_progress(self._conn))
        count_erasure(self._conn)
        self._vectors.forget_copy()
        return erased

    def scrub(self) -> None:
        """Write the log back into the file and empty it: erased rows were zeroed in the
        file (``secure_delete``, and FTS5's own), and the log held their earlier pages.
        Inside a transaction, done once the outermost one commits."""
        if self._conn.in_transaction:
            self._scrub_owed = True
            return
        _health.checkpoint(self._conn)

    # -- health --------------------------------------------------------------------

    def check(self) -> Health:
        """``PRAGMA integrity_check`` and FTS5's own integrity check."""
        return _health.check(self._conn)

    def rebuild(self) -> None:
        """Rebuild the FTS5 indexes and every trigger and index from the facts."""
        with self._write_errors():
            _health.rebuild(self._conn)

    def refresh_statistics(self) -> None:
        """Nothing to do: the queries of this engine do not depend on table counts."""

    def bad_values(self, *, limit: int) -> list[BadValue]:
        """Stored numbers no read can use (see :mod:`._values`)."""
        return _values.bad_values(self._conn, limit)

    def repair_values(self, now: float) -> int:
        """Reset stored numbers no read can use to their fallbacks."""
        return _values.repair_values(self._conn, now)

    def misordered_times(self, *, limit: int) -> list[MisorderedTimes]:
        """Rows whose times break a :data:`~..backend.TIME_ORDERS` rule."""
        return _values.misordered_times(self._conn, limit)

    def repair_times(self) -> int:
        """Set the later time of each such row to its earlier time."""
        return _values.repair_times(self._conn)

    def superseded_links(self, *, archived: bool = False) -> list[tuple[int, int]]:
        """Every ``(id, superseded_by)`` of the live facts or the archive."""
        return _rows.superseded_links(self._conn, archived)
