"""PostgresBackend: the storage seam implemented on PostgreSQL with pgvector."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Self

import attrs
import numpy as np
import psycopg
from psycopg import errors as pgerrors

from ...errors import StoreError
from ..backend import (
    BadValue,
    CacheStatus,
    Erased,
    FactFields,
    FactFilter,
    FactKey,
    GroupCount,
    Health,
    HistoryEntry,
    LexicalCandidate,
    MisorderedTimes,
    QueryPlan,
    Row,
    TermCounts,
    VectorRow,
    VectorState,
)
from . import _health, _links, _meta, _rows, _values, _vectors
from ._connect import CLIENT_ENCODING, connect_error, prepare_database
from ._connections import Connections
from ._errors import read_only_role, store_error
from ._lexical import LEXICAL_RANKINGS, LexicalLeg, index_terms
from ._session import Session, plan_settings
from ._url import safe_location
from ._vector_io import register_vector

__all__ = ["PostgresBackend"]


@attrs.define
class PostgresBackend:
    """Facts in a PostgreSQL database, shared by any number of processes and hosts.

    Opening connects once to check the server (version, pgvector), applies
    the schema migrations under an advisory lock, then opens a pool.
    Transactions are per thread: a thread's :meth:`transaction` holds one pool
    connection until it ends, and every call that thread makes inside it uses
    that connection; other calls borrow a connection for themselves.

    Attributes:
        url: A ``postgresql://`` URL (libpq also reads ``PGPASSWORD``,
            ``~/.pgpass`` and the other ``PG*`` variables).
        pool_size: Most connections the pool opens (see docs/postgres.md).
        connect_timeout: Seconds to wait for the server when connecting.
        lock_timeout: Seconds a statement waits for another writer's lock.
        lexical_ranking: ``"bm25"`` (FTS5's formula; the default) or
            ``"ts_rank_cd"`` (PostgreSQL's cover density).
        create: Create the ctxslots tables in a database that has none (the
            default); ``False`` refuses such a database with a
            :class:`StoreError` and creates nothing.
    """

    url: str = attrs.field(repr=False)
    pool_size: int = attrs.field(default=4, validator=attrs.validators.ge(1))
    connect_timeout: float = 10.0
    lock_timeout: float = 30.0
    lexical_ranking: str = attrs.field(default="bm25",
                                       validator=attrs.validators.in_(LEXICAL_RANKINGS))
    create: bool = True
    engine: str = attrs.field(init=False, default="postgresql")
    location: str = attrs.field(init=False, default="")
    _session: Session = attrs.field(init=False, repr=False)
    _lexical: LexicalLeg = attrs.field(init=False, repr=False)
    _vector_oid: int = attrs.field(init=False, default=0, repr=False)

    def __attrs_post_init__(self) -> None:
        self.location = safe_location(self.url)
        self._lexical = LexicalLeg(self.lexical_ranking)
        try:
            first = psycopg.connect(self.url, autocommit=True, client_encoding=CLIENT_ENCODING,
                                    connect_timeout=max(2, int(self.connect_timeout)))
        except psycopg.Error as exc:
            raise connect_error(exc, self.url) from None
        with first:
            try:
                self._vector_oid = prepare_database(first, self.location, create=self.create)
            except psycopg.Error as exc:
                raise store_error(exc, self.location) from exc
        self._session = Session(self.location, Connections(
            self.url, self.pool_size, self.connect_timeout, self._configure))

    def _configure(self, conn: psycopg.Connection[Any]) -> None:
        register_vector(conn, self._vector_oid)
        # 0 would mean "wait for ever" to PostgreSQL; here it means "do not wait".
        conn.execute(f"SET lock_timeout = {max(1, int(self.lock_timeout * 1000))}")
        # Floats (times, confidences, strengths) come back as text: with fewer digits
        # than the shortest exact form (extra_float_digits = 0 on the database or role)
        # a time read back is not the one stored, and comparing the two goes wrong.
        conn.execute("SET extra_float_digits = 3")
        # PostgreSQL plans a prepared statement once for any parameters when that looks no
        # dearer; in a store of many users such a plan scanned every fact of the scopes
        # asked (39 ms against 1 ms; BENCHMARKS.md, "Many users in one store"). So only
        # statements that ask are prepared outside a write transaction.
        plan_settings(conn)

    def close(self) -> None:
        """Close the pool (idempotent)."""
        self._session.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def transaction(self, *, savepoints: bool = True) -> AbstractContextManager[None]:
        """One write transaction; nested blocks are savepoints (none inside a block
        that says ``savepoints=False``)."""
        return self._session.transaction(savepoints=savepoints)

    def snapshot(self) -> AbstractContextManager[None]:
        """Reads inside see one moment of the store (a repeatable-read, read-only transaction)."""
        return self._session.snapshot()

    def reading(self) -> AbstractContextManager[None]:
        """One search's statements on one connection, each committed on its own."""
        return self._session.reading()

    @property
    def in_transaction(self) -> bool:
        """Whether this thread has a :meth:`transaction` block open."""
        return self._session.writing

    def hold_writes(self) -> None:
        """Lock the facts and the archive against every other writer until the open
        transaction ends (each statement of it then reads what they committed before)."""
        with self._session.conn() as conn:
            _rows.hold_writes(conn)

    def info(self) -> dict[str, Any]:
        """Engine, location, schema version, size, server and pgvector versions."""
        with self._session.conn() as conn:
            return _health.info(conn, self.location)

    def used_bytes(self) -> int:
        """Bytes of the store's tables and indexes."""
        with self._session.conn() as conn:
            return _health.used_bytes(conn)

    def get_meta(self, name: str) -> str | None:
        """A store-wide setting (reserved until the transaction ends, inside one)."""
        with self._session.conn() as conn:
            if self._session.writing:
                self._session.reserve(conn, "meta", name)
            return _meta.get_meta(conn, name)

    def set_meta(self, name: str, value: str) -> None:
        """Write a store-wide setting."""
        with self._session.conn() as conn:
            _meta.set_meta(conn, name, value)

    # -- fact rows -----------------------------------------------------------------

    def get(self, fact_id: int, *, live_at: float | None = None) -> Row | None:
        """The fact with this id (locked until the transaction ends, inside one)."""
        with self._session.conn() as conn:
            return _rows.get(conn, fact_id, live_at, lock=self._session.writing)

    def get_archived(self, fact_id: int) -> Row | None:
        """The archived fact with this id."""
        with self._session.conn() as conn:
            return _rows.get_archived(conn, fact_id)

    def get_by_key(self, slot: str, scope: str, key: str, *, user_id: str, agent_id: str,
                   live_at: float | None = None) -> Row | None:
        """The fact with this slot, owners and key (its row locked, inside a transaction).

        The absence of a row is not locked: another writer may store the key before this
        transaction does, and :meth:`insert` then finds it taken (the writer reads it
        again and replaces its value)."""
        session, name = self._session, ("key", slot, scope, user_id, agent_id, key)
        if not session.writing:
            with session.conn() as conn:
                return _rows.get_by_key(conn, slot, scope, user_id, agent_id, key, live_at,
                                        lock=False)

        # A flush reads a key, then writes it: the write's own read is the same row, or
        # the same absence of one.
        def read() -> Row | None:  # the one row with this key, live or not
            with session.conn() as conn:
                return _rows.get_by_key(conn, slot, scope, user_id, agent_id, key, None,
                                        lock=True)

        return session.kept_read.read(name, read, live_at)

    def find_same(self, slot: str, scope: str, key: str | None, value: str, *, user_id: str,
                  agent_id: str, archived: bool = False, live_at: float | None = None
                  ) -> int | None:
        """The lowest id of a fact with exactly this slot, owners, key and value.

        Inside a write transaction, a free memory's slot and owners are reserved until it
        ends: no unique index covers a memory without a key, so two transactions adding
        the same one would each find none and both insert it. One reservation a slot and
        owners, not one a value: a batch of thousands of memories would fill the server's
        lock table, and take a round trip more each."""
        with self._session.conn() as conn:
            if key is None and not archived and self._session.writing:
                self._session.reserve(conn, "memory", slot, scope, user_id, agent_id)
            return _rows.find_same(conn, slot, scope, user_id, agent_id, key, value,
                                   archived=archived, live_at=live_at)

    def find_existing(self, items: Sequence[FactKey], *, archived: bool = False
                      ) -> list[int | None]:
        """The stored fact each item duplicates, a batch per statement."""
        with self._session.conn() as conn:
            return _rows.find_existing(conn, items, archived=archived)

    def taken_ids(self, fact_ids: Sequence[int]) -> set[int]:
        """Which of these ids a fact ever had."""
        with self._session.conn() as conn:
            return _rows.taken_ids(conn, fact_ids)

    def insert(self, row: FactFields, *, fact_id: int | None = None) -> int:
        """Insert a live fact; a taken key raises :class:`~ctxslots.errors.DuplicateKeyError`."""
        with self._session.conn() as conn:
            return _rows.insert(conn, row, fact_id, self.location)

    def insert_archived(self, row: Row, fact_id: int) -> None:
        """Insert a fact straight into the archive."""
        with self._session.conn() as conn:
            _rows.insert_archived(conn, row, fact_id)

    def update(self, fact_id: int, fields: Mapping[str, Any], *,
               history: HistoryEntry | None = None) -> None:
        """Set some columns of a live fact; with ``history``, in the statement that records it."""
        with self._session.conn() as conn:
            _rows.update(conn, fact_id, fields, history)

    def add_history(self, entries: Sequence[HistoryEntry]) -> None:
        """Record earlier values."""
        with self._session.conn() as conn:
            _rows.add_history(conn, entries)

    def archive(self, fact_id: int, *, archived_at: float, reason: str | None) -> Row | None:
        """Move a live fact and its vector to the archive."""
        with self._session.conn() as conn:
            archived = _rows.archive(conn, fact_id, archived_at, reason)
            if archived is not None:
                _vectors.delete(conn, [fact_id])
            return archived

    def adjust_score(self, fact_id: int, delta: float, *, live_at: float) -> bool:
        """Add ``delta`` to a live fact's score; whether it existed."""
        with self._session.conn() as conn:
            return _rows.adjust_score(conn, fact_id, delta, live_at)

    def touch(self, fact_ids: Sequence[int], now: float, *, wait: float | None = None) -> int:
        """Count an access of each fact; how many changed. With ``wait`` (a count that may
        be put off) a row another transaction is rewriting is not waited for: that one
        access goes uncounted. Outside a transaction, such a count waits at most ``wait``
        seconds for the facts table, which an import holds against every writer until it
        commits (:meth:`hold_writes`): a search answers meanwhile, its counts owed.

        :raises StoreBusyError: The facts table stayed held past ``wait``.
        :raises ReadOnlyStoreError: The role may not update the facts (granted
            ``SELECT`` alone): its searches answer, uncounted, as on a replica.
        """
        with self._session.conn() as conn:
            try:
                if wait is None or self._session.writing:
                    return _rows.touch(conn, fact_ids, now, skip_locked=wait is not None)
                return _rows.touch_waiting(conn, fact_ids, now, wait)
            except pgerrors.InsufficientPrivilege as exc:
                raise read_only_role(exc, self.location, conn.info.user) from exc

    def id_is_free(self, fact_id: int) -> bool:
        """Whether no fact ever had this id."""
        with self._session.conn() as conn:
            return _rows.id_is_free(conn, fact_id)

    def history(self, fact_id: int) -> list[HistoryEntry]:
        """Earlier values of one fact, oldest first."""
        with self._session.conn() as conn:
            return _rows.history(conn, fact_id)

    def all_history(self) -> Iterator[HistoryEntry]:
        """Every history entry, by fact id then time."""
        return self._session.iterate(_rows.all_history)

    def history_of(self, fact_ids: Sequence[int]) -> Iterator[HistoryEntry]:
        """The history entries of these facts, by fact id then time."""
        with self._session.conn() as conn:
            return iter(_rows.history_of(conn, fact_ids))

    def select(self, flt: FactFilter, *, order: str = "id", archived: bool = False,
               newest_first: bool = False, limit: int | None = None, offset: int = 0
               ) -> Iterator[Row]:
        """Facts passing ``flt``, by id or by observed time, a page of them if asked."""
        return self._session.iterate(_rows.select, flt, order, archived, newest_first,
                                     limit, offset)

    def count(self, flt: FactFilter) -> int:
        """How many facts pass ``flt``."""
        with self._session.conn() as conn:
            return _rows.count(conn, flt)

    def important(self, flt: FactFilter, limit: int) -> list[Row]:
        """Keyed or reinforced facts passing ``flt``, most important first."""
        with self._session.conn() as conn:
            return _rows.important(conn, flt, limit)

    def rows_by_ids(self, fact_ids: Sequence[int], flt: FactFilter, *, archived: bool = False,
                    held: bool = False) -> list[Row]:
        """The facts (or archived facts) with these ids that pass ``flt`` (``held``:
        locked ``FOR KEY SHARE`` until the transaction ends, skipping those being deleted)."""
        with self._session.conn() as conn:
            return _rows.rows_by_ids(conn, fact_ids, flt, archived, held=held)

    def neighbours(self, row: Row, flt: FactFilter, *, before: int, after: int
                   ) -> tuple[list[Row], list[Row]]:
        """Facts just before (newest first) and after (oldest first) ``row``."""
        with self._session.conn() as conn:
            return _rows.neighbours(conn, row, flt, before, after)

    def group_counts(self, *, live_at: float) -> list[GroupCount]:
        """``(slot, scope, facts, expired)`` per slot and scope."""
        with self._session.conn() as conn:
            return _rows.group_counts(conn, live_at)

    def counts(self) -> dict[str, int]:
        """Row counts of facts, archive and history."""
        with self._session.conn() as conn:
            return _rows.counts(conn)

    def set_superseded(self, pairs: Sequence[tuple[int, int | None]], *, archived: bool = False
                       ) -> None:
        """Set ``superseded_by`` for ``(fact_id, by)`` pairs."""
        with self._session.conn() as conn:
            _rows.set_superseded(conn, pairs, archived)

    def hand_over_superseded(self, old: int, new: int) -> None:
        """Facts hidden by ``old`` are hidden by ``new`` instead."""
        with self._session.conn() as conn:
            _rows.hand_over_superseded(conn, old, new)

    def hidden_counts(self, fact_ids: Sequence[int]) -> dict[int, int]:
        """How many live facts each of these facts hides."""
        with self._session.conn() as conn:
            return _links.links_and_hidden(conn, fact_ids, None)[1]

    # -- links and flush progress ----------------------------------------------------

    def strengthen_links(self, pairs: Sequence[tuple[int, int]], now: float) -> None:
        """Add one to each ``(a, b)`` link."""
        with self._session.conn() as conn:
            _links.strengthen_links(conn, pairs, now)

    def merge_links(self, rows: Sequence[tuple[int, int, float, float]]) -> None:
        """Write links; the stronger wins on a clash."""
        with self._session.conn() as conn:
            _links.merge_links(conn, rows)

    def links_of(self, fact_id: int) -> dict[int, float]:
        """Every fact linked to ``fact_id``, with the strength."""
        with self._session.conn() as conn:
            return _links.links_of(conn, fact_id)

    def links_among(self, fact_ids: Sequence[int], min_strength: float
                    ) -> list[tuple[int, int, float]]:
        """Links at least ``min_strength`` touching these facts."""
        with self._session.conn() as conn:
            return _links.links_among(conn, fact_ids, min_strength)

    def links_and_hidden(self, fact_ids: Sequence[int], min_strength: float | None
                         ) -> tuple[list[tuple[int, int, float]], dict[int, int]]:
        """A search's links among its hits and their hidden counts, in one round trip."""
        with self._session.conn() as conn:
            return _links.links_and_hidden(conn, fact_ids, min_strength)

    def all_links(self) -> Iterator[tuple[int, int, float, float]]:
        """Every link, by ``a, b``."""
        with self._session.conn() as conn:
            return iter(list(_links.all_links(conn)))

    def links_within(self, fact_ids: Sequence[int]) -> list[tuple[int, int, float, float]]:
        """The links both of whose facts are among these, by ``a, b``."""
        with self._session.conn() as conn:
            return _links.links_within(conn, fact_ids)

    def read_progress(self, conversation: str, *, user_id: str, agent_id: str
                      ) -> tuple[int, str] | None:
        """``(messages_read, fingerprint)`` of a conversation (reserved until the
        transaction ends, inside one: a second flush of it waits, then reads what the
        first wrote, though no row existed to lock)."""
        with self._session.conn() as conn:
            if self._session.writing:
                self._session.reserve(conn, "progress", user_id, agent_id, conversation)
            return _meta.read_progress(conn, conversation, user_id, agent_id)

    def write_progress(self, conversation: str, messages_read: int, fingerprint: str,
                       now: float, *, user_id: str, agent_id: str) -> None:
        """Record how far a conversation was read."""
        with self._session.conn() as conn:
            _meta.write_progress(conn, conversation, messages_read, fingerprint, now,
                                 user_id, agent_id)

    def erase_progress(self, kind: str, owner: str) -> int:
        """Remove the progress of this user's or agent's conversations."""
        with self._session.conn() as conn:
            return _meta.erase_progress(conn, kind, owner)

    # -- the two candidate legs ----------------------------------------------------------

    def lexical(self, plan: QueryPlan, flt: FactFilter, pool: int, *,
                archived: bool = False) -> list[LexicalCandidate]:
        """The best ``pool`` matches of the plan's words among facts passing ``flt``."""
        with self._session.conn() as conn:
            return self._lexical.search(conn, "archive" if archived else "facts", plan, flt,
                                        pool)

    def document_counts(self, words: Sequence[str], *, min_rows: int) -> TermCounts | None:
        """Facts holding each word (stemmed as the indexed words are)."""
        with self._session.conn() as conn:
            return self._lexical.counts(conn, words, min_rows=min_rows)

    def holding(self, words: Sequence[str], fact_ids: Sequence[int], *,
                archived: bool = False) -> set[int]:
        """Which of ``fact_ids`` hold any of ``words`` (their ``search`` tsvector)."""
        with self._session.conn() as conn:
            return self._lexical.holding(conn, words, fact_ids, archived=archived)

    def terms(self, texts: Sequence[str]) -> list[list[str]]:
        """Each text's terms as the index holds them (its Snowball stems)."""
        return index_terms(list(texts))

    def vector_knn(self, vector: np.ndarray, flt: FactFilter, k: int) -> list[tuple[int, float]]:
        """The ``k`` nearest facts passing ``flt``: exact for small sets, HNSW otherwise."""
        with self._session.conn() as conn:
            return _vectors.knn(conn, vector, flt, k)

    # -- vectors -----------------------------------------------------------------

    def vector_state(self) -> VectorState:
        """What the vector table holds."""
        with self._session.conn() as conn:
            return _vectors.state(conn)

    def reset_vectors(self, model_id: str, dimension: int) -> None:
        """Drop every vector and bind the table to this embedder."""
        with self._session.conn() as conn:
            _vectors.reset(conn, model_id, dimension)

    def put_vectors(self, rows: Sequence[VectorRow], vectors: np.ndarray) -> None:
        """Write the vectors of ``(fact_id, scope, slot)`` rows."""
        with self._session.conn() as conn:
            _vectors.put(conn, rows, vectors)

    def delete_vectors(self, fact_ids: Sequence[int]) -> None:
        """Remove the vectors of these facts."""
        with self._session.conn() as conn:
            _vectors.delete(conn, fact_ids)

    def vectors_of(self, fact_ids: Sequence[int]) -> dict[int, np.ndarray]:
        """The stored vectors of these facts."""
        with self._session.conn() as conn:
            return _vectors.vectors_of(conn, fact_ids)

    def without_vectors(self, *, limit: int, after: int = 0) -> list[Row]:
        """Up to ``limit`` facts without a vector, by id, above ``after``."""
        with self._session.conn() as conn:
            return _vectors.without_vectors(conn, limit, after)

    def drop_unusable_vectors(self) -> int:
        """Remove the vectors no search can use and those of no fact."""
        with self._session.conn() as conn:
            return _vectors.drop_unusable(conn)

    # -- in-memory copies --------------------------------------------------------

    def cache_status(self) -> CacheStatus:
        """None: this engine keeps no in-memory copy (the server caches what it reads)."""
        return CacheStatus()

    def load_lexical_cache(self, timeout: float | None = None) -> bool:
        """Refused: this engine keeps no in-memory lexical copy."""
        raise StoreError("the postgresql engine keeps no in-memory lexical copy",
                         path=self.location)

    def load_vector_cache(self, timeout: float | None = None) -> bool:
        """Refused: this engine keeps no in-memory vector copy."""
        raise StoreError("the postgresql engine keeps no in-memory vector copy",
                         path=self.location)

    # -- erasure ---------------------------------------------------------------------

    def owned_ids(self, kind: str, owner: str) -> list[int]:
        """The ids of the live and archived facts of this owner."""
        with self._session.conn() as conn:
            return _rows.owned_ids(conn, kind, owner)

    def erase_facts(self, fact_ids: Sequence[int]) -> Erased:
        """Remove these facts with their history, vectors and links."""
        with self._session.conn() as conn:
            erased = _rows.erase_facts(conn, fact_ids)
            return attrs.evolve(erased, vectors=_vectors.delete(conn, fact_ids))

    def erase_all(self) -> Erased:
        """Remove every fact, archived fact, history entry, vector, link and progress record."""
        with self._session.conn() as conn:
            return attrs.evolve(_rows.erase_all(conn), vectors=_vectors.erase_all(conn),
                                progress=_meta.erase_all_progress(conn))

    def scrub(self) -> None:
        """Nothing to do: deleted rows are gone from every table a read can reach."""

    # -- health --------------------------------------------------------------------

    def check(self) -> Health:
        """Schema version, readable facts, valid indexes."""
        with self._session.conn() as conn:
            return _health.check(conn)

    def rebuild(self) -> None:
        """Recreate missing indexes and rebuild the invalid ones."""
        with self._session.conn() as conn:
            _health.rebuild(conn)

    def refresh_statistics(self) -> None:
        """``ANALYZE`` the facts and the archive (autovacuum does it only later)."""
        with self._session.conn() as conn:
            conn.execute("ANALYZE facts, archive, fact_history")

    def bad_values(self, *, limit: int) -> list[BadValue]:
        """Stored numbers no read can use (NaN and infinities included)."""
        with self._session.conn() as conn:
            return _values.bad_values(conn, limit)

    def repair_values(self, now: float) -> int:
        """Reset stored numbers no read can use to their fallbacks."""
        with self._session.conn() as conn:
            return _values.repair_values(conn, now)

    def misordered_times(self, *, limit: int) -> list[MisorderedTimes]:
        """Rows whose times break a :data:`~..backend.TIME_ORDERS` rule."""
        with self._session.conn() as conn:
            return _values.misordered_times(conn, limit)

    def repair_times(self) -> int:
        """Set the later time of each such row to its earlier time."""
        with self._session.conn() as conn:
            return _values.repair_times(conn)

    def superseded_links(self, *, archived: bool = False) -> list[tuple[int, int]]:
        """Every ``(id, superseded_by)`` of the live facts or the archive."""
        with self._session.conn() as conn:
            return _rows.superseded_links(conn, archived)
