"""The SQLite engine: one file, FTS5 for words, sqlite-vec distances for vectors.

:class:`SQLiteBackend` implements :class:`~ctxslots.stores.backend.types.Backend`.
Everything that knows SQLite's SQL, its files and its driver lives in this
package; the facade above it sees rows, filters and candidates only.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import apsw
import numpy as np

from ...errors import DuplicateKeyError, ReadOnlyStoreError, StoreError
from ..backend.types import (
    FACT_COLUMNS,
    BadValue,
    FactFilter,
    Health,
    HistoryEntry,
    LexicalCandidate,
    Row,
    VectorState,
    rows_in,
)
from ..sanitize import to_match
from . import _lookup, _values
from ._common_terms import CommonTerms
from ._connection import open_connection, sqlite_version
from ._loader import CacheSlot
from ._vectors import (
    META_DIM,
    META_GENERATION,
    META_MODEL,
    TABLE,
    VectorCache,
    get_meta,
    log_bounds,
    set_meta,
    vector_cache_builder,
)
from .lexical_cache import LexicalCache, build_lexical_cache, trim_fact_log
from .migrations import FTS_TOKENIZE, IMPORTANCE, IMPORTANT_WHERE, schema_version

__all__ = ["SQLiteBackend"]

#: The fact columns to store into, by name.
COLUMNS = ", ".join(FACT_COLUMNS)
#: The fact columns to read: a fact written before ``observed_at`` existed was
#: observed when it was written.
_OBSERVED = "coalesce(observed_at, created_at)"
READ = COLUMNS.replace("observed_at", f"{_OBSERVED} AS observed_at")
_COPY = COLUMNS.replace("observed_at", _OBSERVED)
_INSERT_COLUMNS = tuple(c for c in FACT_COLUMNS if c != "id")
_UPDATABLE = frozenset(_INSERT_COLUMNS)
_LOG_KEEP = 50_000
_HISTORY_COLUMNS = ("fact_id, slot, scope, key, value, tags, source, confidence, "
                    "valid_from, valid_to")


def _insert_values(row: Row) -> list[Any]:
    """``row``'s values in ``_INSERT_COLUMNS`` order (a row may leave out its context)."""
    return [row.get(c) if c == "context" else row[c] for c in _INSERT_COLUMNS]


def _marks(count: int) -> str:
    return ",".join("?" * count)


def where(flt: FactFilter, alias: str = "") -> tuple[str, list[Any]]:
    """The SQL condition and parameters for ``flt`` (``"1"`` when it filters nothing)."""
    clauses: list[str] = []
    params: list[Any] = []
    if flt.scopes is not None:
        clauses.append(f"{alias}scope IN ({_marks(len(flt.scopes))})")
        params.extend(flt.scopes)
    if flt.slots is not None:
        clauses.append(f"{alias}slot IN ({_marks(len(flt.slots))})")
        params.extend(flt.slots)
    if not flt.include_superseded:
        clauses.append(f"{alias}superseded_by IS NULL")
    if flt.live_at is not None:
        clauses.append(f"({alias}expires_at IS NULL OR {alias}expires_at > ?)")
        params.append(flt.live_at)
    return " AND ".join(clauses) or "1", params


def _history(row: Mapping[str, Any]) -> HistoryEntry:
    return HistoryEntry(
        fact_id=int(row["fact_id"]), slot=row["slot"], scope=row["scope"], key=row["key"],
        value=row["value"], tags=row["tags"], source=row["source"],
        confidence=float(row["confidence"]), valid_from=float(row["valid_from"]),
        valid_to=float(row["valid_to"]))


class SQLiteBackend:
    """A store in one SQLite file (apsw, FTS5 with the porter tokenizer, sqlite-vec).

    :param path: The file; ``":memory:"`` for a throwaway store.
    :param create: Create a missing file (and its directory, private to the
        owner); when false a missing file is a :class:`StoreError`.
    :param lexical_cache: Score words from an in-memory copy of the index,
        loaded in the background (see :mod:`.lexical_cache`).
    :param vector_cache: Search an in-memory copy of the vectors, loaded in
        the background, instead of reading them from the file each time.
    :raises StoreError: The file cannot be opened, is not a store, or is newer
        than this version understands.
    """

    engine = "sqlite"

    def __init__(self, path: str | os.PathLike[str], *, create: bool = True,
                 lexical_cache: bool = False, vector_cache: bool = True) -> None:
        self.path = os.fspath(path)
        self.location = self.path
        self.lexical_cache = lexical_cache
        self.vector_cache = vector_cache
        self._conn = open_connection(self.path, create=create)
        self._common: CommonTerms | None = None
        self._lexical_slot: CacheSlot[LexicalCache] = CacheSlot(
            "in-memory lexical index", build_lexical_cache, load_vec=False)
        self._lexical_lock = threading.Lock()
        self._vector_slot: CacheSlot[VectorCache] | None = None

    # -- lifecycle ---------------------------------------------------------------

    def close(self) -> None:
        """Stop background loads and close the file (idempotent)."""
        self._lexical_slot.stop()
        if self._vector_slot is not None:
            self._vector_slot.stop()
        self._conn.close()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """``BEGIN IMMEDIATE`` (savepoints when nested); the change log is trimmed at commit."""
        outer = not self._conn.in_transaction
        try:
            with self._conn.write():
                yield
                if outer:
                    trim_fact_log(self._conn)
        except apsw.FullError as exc:
            raise StoreError(f"the disk holding {self.path} is full; nothing was written",
                             path=self.path) from exc
        except apsw.ReadOnlyError as exc:
            raise ReadOnlyStoreError(f"{self.path} is read-only; nothing was written",
                                     path=self.path) from exc

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[None]:
        """A read transaction, so every read inside sees one moment of the file."""
        if self._conn.in_transaction:
            yield
            return
        self._conn.execute("BEGIN")
        try:
            yield
        finally:
            self._conn.execute("COMMIT")

    @property
    def in_transaction(self) -> bool:
        """Whether a write transaction is open."""
        return self._conn.in_transaction

    def info(self) -> dict[str, Any]:
        """Engine, file, schema and library versions."""
        return {
            "engine": self.engine,
            "location": self.location,
            "path": self.path,
            "size_bytes": os.path.getsize(self.path) if os.path.exists(self.path) else 0,
            "schema_version": schema_version(self._conn),
            "sqlite_version": sqlite_version(),
            "sqlite_vec_version": self._conn.vec_version,
        }

    def used_bytes(self) -> int:
        """The bytes of the file that hold data (pages not on the free list)."""
        conn = self._conn
        pages = int(conn.scalar("PRAGMA page_count")) - int(conn.scalar("PRAGMA freelist_count"))
        return pages * int(conn.scalar("PRAGMA page_size"))

    def get_meta(self, name: str) -> str | None:
        """A store-wide setting."""
        return get_meta(self._conn, name)

    def set_meta(self, name: str, value: str) -> None:
        """Write a store-wide setting."""
        set_meta(self._conn, name, value)

    # -- fact rows -----------------------------------------------------------------

    def _one(self, sql: str, params: Sequence[Any]) -> Row | None:
        rows = self._conn.rows(sql, params)
        return rows[0] if rows else None

    def get(self, fact_id: int, *, live_at: float | None = None) -> Row | None:
        """The fact with this id."""
        flt, params = where(FactFilter(live_at=live_at))
        return self._one(f"SELECT {READ} FROM facts WHERE id = ? AND {flt}",
                         (fact_id, *params))

    def get_archived(self, fact_id: int) -> Row | None:
        """The archived fact with this id."""
        return self._one(f"SELECT {READ}, archived_at, reason FROM archive WHERE id = ?",
                         (fact_id,))

    def get_by_key(self, slot: str, scope: str, key: str, *, live_at: float | None = None
                   ) -> Row | None:
        """The fact with this slot, scope and key."""
        flt, params = where(FactFilter(live_at=live_at))
        return self._one(
            f"SELECT {READ} FROM facts WHERE slot = ? AND scope = ? AND key = ? AND {flt}",
            (slot, scope, key, *params))

    def find_same(self, slot: str, scope: str, key: str | None, value: str, *,
                  archived: bool = False, live_at: float | None = None) -> int | None:
        """The lowest id with exactly this slot, scope, key and value (by the value index)."""
        return _lookup.find_same(self._conn, slot, scope, key, value, archived=archived,
                                 live_at=live_at)

    def find_existing(self, items: Sequence[tuple[str, str, str | None, str]], *,
                      archived: bool = False) -> list[int | None]:
        """The stored fact each item duplicates, a batch per statement."""
        return _lookup.find_existing(self._conn, items, archived=archived)

    def taken_ids(self, fact_ids: Sequence[int]) -> set[int]:
        """Which of these ids a fact ever had."""
        return _lookup.taken_ids(self._conn, fact_ids)

    def insert(self, row: Row, *, fact_id: int | None = None) -> int:
        """Insert a live fact; AUTOINCREMENT never hands out an id twice.

        :raises DuplicateKeyError: A live fact holds the slot, scope and key;
            nothing was written and the transaction goes on.
        """
        try:
            return self._insert(row, fact_id)
        except apsw.ConstraintError:
            if row["key"] is not None and self.get_by_key(row["slot"], row["scope"], row["key"]):
                raise DuplicateKeyError(row["slot"], row["scope"], row["key"],
                                        path=self.path) from None
            raise

    def _insert(self, row: Row, fact_id: int | None) -> int:
        values = _insert_values(row)
        if fact_id is None:
            cursor = self._conn.execute(
                f"INSERT INTO facts ({', '.join(_INSERT_COLUMNS)}) "
                f"VALUES ({_marks(len(values))}) RETURNING id", values)
            return int(cursor.fetchall()[0][0])
        self._conn.execute(f"INSERT INTO facts (id, {', '.join(_INSERT_COLUMNS)}) "
                           f"VALUES (?, {_marks(len(values))})", (fact_id, *values))
        return fact_id

    def insert_archived(self, row: Row, fact_id: int) -> None:
        """Insert straight into the archive and keep its id from being handed out."""
        values = _insert_values(row)
        self._conn.execute(
            f"INSERT INTO archive (id, {', '.join(_INSERT_COLUMNS)}, archived_at, reason) "
            f"VALUES (?, {_marks(len(values) + 2)})",
            (fact_id, *values, row["archived_at"], row["reason"]))
        changed = self._conn.execute(
            "UPDATE sqlite_sequence SET seq = max(seq, ?) WHERE name = 'facts' RETURNING seq",
            (fact_id,)).fetchall()
        if not changed:
            self._conn.execute("INSERT INTO sqlite_sequence (name, seq) VALUES ('facts', ?)",
                               (fact_id,))

    def update(self, fact_id: int, fields: Mapping[str, Any]) -> None:
        """Set some columns of a fact."""
        unknown = set(fields) - _UPDATABLE
        if unknown:
            raise ValueError(f"not fact columns: {sorted(unknown)}")
        if fields:
            sets = ", ".join(f"{name} = ?" for name in fields)
            self._conn.execute(f"UPDATE facts SET {sets} WHERE id = ?", (*fields.values(), fact_id))

    def add_history(self, entries: Sequence[HistoryEntry]) -> None:
        """Record earlier values."""
        self._conn.executemany(
            f"INSERT INTO fact_history ({_HISTORY_COLUMNS}) VALUES ({_marks(10)})",
            [(e.fact_id, e.slot, e.scope, e.key, e.value, e.tags, e.source, e.confidence,
              e.valid_from, e.valid_to) for e in entries])

    def archive(self, fact_id: int, *, archived_at: float, reason: str | None) -> Row | None:
        """Move a fact and drop its vector."""
        if self._conn.scalar("SELECT 1 FROM facts WHERE id = ?", (fact_id,)) is None:
            return None
        self._conn.execute(
            f"INSERT OR REPLACE INTO archive ({COLUMNS}, archived_at, reason) "
            f"SELECT {_COPY}, ?, ? FROM facts WHERE id = ?", (archived_at, reason, fact_id))
        self._conn.execute("DELETE FROM facts WHERE id = ?", (fact_id,))
        self.delete_vectors([fact_id])
        return self.get_archived(fact_id)

    def adjust_score(self, fact_id: int, delta: float, *, live_at: float) -> bool:
        """Add to a live fact's score."""
        flt, params = where(FactFilter(live_at=live_at))
        return bool(self._conn.execute(
            f"UPDATE facts SET score = score + ? WHERE id = ? AND {flt} RETURNING id",
            (float(delta), fact_id, *params)).fetchall())

    def touch(self, fact_ids: Sequence[int], now: float) -> int:
        """Count an access of each fact."""
        changed = 0
        for chunk in rows_in(fact_ids):
            changed += len(self._conn.execute(
                "UPDATE facts SET access_count = access_count + 1, last_accessed = ? "
                f"WHERE id IN ({_marks(len(chunk))}) RETURNING id", (now, *chunk)).fetchall())
        return changed

    def id_is_free(self, fact_id: int) -> bool:
        """Whether no fact ever had this id (live, archived, in history or handed out)."""
        return self._conn.scalar(
            "SELECT 1 WHERE EXISTS (SELECT 1 FROM facts WHERE id = ?) OR EXISTS "
            "(SELECT 1 FROM archive WHERE id = ?) OR EXISTS (SELECT 1 FROM fact_history "
            "WHERE fact_id = ?)", (fact_id, fact_id, fact_id)) is None

    def history(self, fact_id: int) -> list[HistoryEntry]:
        """Earlier values of one fact, oldest first."""
        return [_history(r) for r in self._conn.rows(
            f"SELECT {_HISTORY_COLUMNS} FROM fact_history WHERE fact_id = ? "
            "ORDER BY valid_to, id", (fact_id,))]

    def all_history(self) -> Iterator[HistoryEntry]:
        """Every history entry."""
        for r in self._conn.rows(f"SELECT {_HISTORY_COLUMNS} FROM fact_history "
                                 "ORDER BY fact_id, valid_to, id"):
            yield _history(r)

    def select(self, flt: FactFilter, *, order: str = "id", archived: bool = False
               ) -> Iterator[Row]:
        """Facts passing ``flt``, by id or by observed time."""
        cond, params = where(flt)
        table, extra = ("archive", ", archived_at, reason") if archived else ("facts", "")
        by = {"id": "id", "created": "observed_at, id"}[order]
        yield from self._conn.rows(
            f"SELECT {READ}{extra} FROM {table} WHERE {cond} ORDER BY {by}", params)

    def important(self, flt: FactFilter, limit: int) -> list[Row]:
        """Keyed or reinforced facts passing ``flt``, most important first (an index walk)."""
        cond, params = where(flt)
        return list(self._conn.rows(
            f"SELECT {READ} FROM facts WHERE {cond} AND {IMPORTANT_WHERE} "
            f"ORDER BY {IMPORTANCE} LIMIT ?", (*params, limit)))

    def rows_by_ids(self, fact_ids: Sequence[int], flt: FactFilter, *, archived: bool = False
                    ) -> list[Row]:
        """The facts with these ids that pass ``flt``."""
        cond, params = where(flt)
        table, extra = ("archive", ", archived_at, reason") if archived else ("facts", "")
        out: list[Row] = []
        for chunk in rows_in(fact_ids):
            # NOT INDEXED: one rowid lookup per id, the filter checked on the row; the
            # planner would otherwise seek (slot, scope, rowid) in an index first (1.6x
            # the time for a hundred ids at 100,000 facts).
            out += self._conn.rows(
                f"SELECT {READ}{extra} FROM {table} NOT INDEXED WHERE id IN "
                f"({_marks(len(chunk))}) AND {cond}", (*chunk, *params))
        return out

    def neighbours(self, row: Row, flt: FactFilter, *, before: int, after: int
                   ) -> tuple[list[Row], list[Row]]:
        """Facts just before and after ``row`` by observed time."""
        cond, params = where(flt)
        at = (row["observed_at"], row["id"])
        earlier: list[Row] = list(self._conn.rows(
            f"SELECT {READ} FROM facts WHERE {cond} AND (observed_at, id) < (?, ?) "
            "ORDER BY observed_at DESC, id DESC LIMIT ?", (*params, *at, before)))
        later: list[Row] = list(self._conn.rows(
            f"SELECT {READ} FROM facts WHERE {cond} AND (observed_at, id) > (?, ?) "
            "ORDER BY observed_at, id LIMIT ?", (*params, *at, after)))
        return list(earlier), list(later)

    def group_counts(self, *, live_at: float) -> list[tuple[str, str, int, int]]:
        """Facts and expired facts per slot and scope."""
        return [(str(r[0]), str(r[1]), int(r[2]), int(r[3] or 0)) for r in self._conn.execute(
            "SELECT slot, scope, count(*), sum(NOT (expires_at IS NULL OR expires_at > ?)) "
            "FROM facts GROUP BY slot, scope ORDER BY slot, scope", (live_at,)).fetchall()]

    def counts(self) -> dict[str, int]:
        """Rows in facts, archive and history."""
        return {name: int(self._conn.scalar(f"SELECT count(*) FROM {table}"))
                for name, table in (("facts", "facts"), ("archived", "archive"),
                                    ("history", "fact_history"))}

    def set_superseded(self, pairs: Sequence[tuple[int, int | None]], *, archived: bool = False
                       ) -> None:
        """Set ``superseded_by``."""
        self._conn.executemany(
            f"UPDATE {'archive' if archived else 'facts'} SET superseded_by = ? WHERE id = ?",
            [(by, fid) for fid, by in pairs])

    def hand_over_superseded(self, old: int, new: int) -> None:
        """Facts hidden by ``old`` are hidden by ``new``."""
        self._conn.execute("UPDATE facts SET superseded_by = ? WHERE superseded_by = ?", (new, old))

    def hidden_counts(self, fact_ids: Sequence[int]) -> dict[int, int]:
        """How many facts each of these hides."""
        out: dict[int, int] = {}
        # Every search asks; most stores hide nothing, which one index probe tells.
        if self._conn.scalar("SELECT EXISTS (SELECT 1 FROM facts WHERE superseded_by "
                             "IS NOT NULL)") == 0:
            return out
        for chunk in rows_in(fact_ids):
            out.update((int(a), int(n)) for a, n in self._conn.execute(
                f"SELECT superseded_by, count(*) FROM facts WHERE superseded_by IN "
                f"({_marks(len(chunk))}) GROUP BY superseded_by", chunk).fetchall())
        return out

    # -- links and flush progress ----------------------------------------------------

    def strengthen_links(self, pairs: Sequence[tuple[int, int]], now: float) -> None:
        """Add one to each link."""
        self._conn.executemany(
            "INSERT INTO fact_links (a, b, strength, updated_at) VALUES (?, ?, 1, ?) "
            "ON CONFLICT (a, b) DO UPDATE SET strength = strength + 1, "
            "updated_at = excluded.updated_at", [(a, b, now) for a, b in pairs])

    def merge_links(self, rows: Sequence[tuple[int, int, float, float]]) -> None:
        """Write links; the stronger one wins."""
        self._conn.executemany(
            "INSERT INTO fact_links (a, b, strength, updated_at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (a, b) DO UPDATE SET strength = excluded.strength, "
            "updated_at = excluded.updated_at WHERE excluded.strength > fact_links.strength",
            rows)

    def links_of(self, fact_id: int) -> dict[int, float]:
        """Every fact linked to ``fact_id``."""
        return {int(o): float(s) for o, s in self._conn.execute(
            "SELECT b, strength FROM fact_links WHERE a = ? UNION ALL "
            "SELECT a, strength FROM fact_links WHERE b = ?", (fact_id, fact_id)).fetchall()}

    def links_among(self, fact_ids: Sequence[int], min_strength: float
                    ) -> list[tuple[int, int, float]]:
        """Strong links touching these facts."""
        out: list[tuple[int, int, float]] = []
        # Every search asks; a store with no links says so in one probe.
        if self._conn.scalar("SELECT EXISTS (SELECT 1 FROM fact_links)") == 0:
            return out
        for chunk in rows_in(fact_ids, 400):
            marks = _marks(len(chunk))
            out += [(int(a), int(b), float(s)) for a, b, s in self._conn.execute(
                f"SELECT a, b, strength FROM fact_links WHERE strength >= ? AND "
                f"(a IN ({marks}) OR b IN ({marks}))", (min_strength, *chunk, *chunk)).fetchall()]
        return sorted(set(out))

    def all_links(self) -> Iterator[tuple[int, int, float, float]]:
        """Every link."""
        for a, b, s, u in self._conn.execute(
                "SELECT a, b, strength, updated_at FROM fact_links ORDER BY a, b").fetchall():
            yield int(a), int(b), float(s), float(u)

    def read_progress(self, conversation: str) -> tuple[int, str] | None:
        """How far a conversation was read."""
        row = self._one("SELECT messages_read, fingerprint FROM flush_progress "
                        "WHERE conversation = ?", (conversation,))
        return None if row is None else (int(row["messages_read"]), str(row["fingerprint"]))

    def write_progress(self, conversation: str, messages_read: int, fingerprint: str,
                       now: float) -> None:
        """Record how far a conversation was read."""
        self._conn.execute(
            "INSERT OR REPLACE INTO flush_progress (conversation, messages_read, fingerprint, "
            "updated_at) VALUES (?, ?, ?, ?)", (conversation, messages_read, fingerprint, now))

    # -- the two candidate legs ----------------------------------------------------------

    def lexical(self, tokens: Sequence[str], flt: FactFilter, pool: int, *,
                archived: bool = False) -> list[LexicalCandidate]:
        """BM25 from FTS5 (or its in-memory copy), filters applied before the cut."""
        match = to_match(list(tokens))
        if not match:
            return []
        if not archived and self.lexical_cache and flt.scopes is not None \
                and self._lexical_slot.ready(self._conn) is not None:
            ranked = self._cached_lexical(list(tokens), flt, pool)
        else:
            table = "archive" if archived else "facts"
            cond, params = where(flt, "f.")
            # FTS5 scores every matching row either way; the join applies the
            # filters before the LIMIT so they never starve the pool.
            ranked = [(int(fid), float(rank)) for fid, rank in self._conn.execute(
                f"SELECT f.id, {table}_fts.rank FROM {table}_fts JOIN {table} AS f "
                f"ON f.id = {table}_fts.rowid WHERE {table}_fts MATCH ? AND {cond} "
                f"ORDER BY {table}_fts.rank, f.id LIMIT ?", (match, *params, pool)).fetchall()]
        if not ranked:
            return []
        rows = {int(r["id"]): r for r in self.rows_by_ids([fid for fid, _ in ranked], flt,
                                                          archived=archived)}
        return [LexicalCandidate(rows[fid], score) for fid, score in ranked if fid in rows]

    def _cached_lexical(self, tokens: list[str], flt: FactFilter, pool: int
                        ) -> list[tuple[int, float]]:
        cache = self._lexical_slot.copy
        if cache is None:
            self.load_lexical_cache()
            cache = self._lexical_slot.copy
        assert cache is not None and flt.scopes is not None
        with self._lexical_lock:  # searches from several threads (asearch) share the copy
            cache.sync(self._conn)
            return cache.search(tokens, scopes=flt.scopes, slots=flt.slots,
                                now=float("-inf") if flt.live_at is None else flt.live_at,
                                include_superseded=flt.include_superseded, pool=pool)

    def load_lexical_cache(self, timeout: float | None = None) -> bool:
        """Load the in-memory lexical copy now; whether it is loaded."""
        if not self.lexical_cache:
            raise StoreError("this store was opened without lexical_cache=True", path=self.path)
        return self._lexical_slot.load_now(self._conn, timeout)

    def drop_common(self, tokens: list[str], *, share: float, min_rows: int,
                    total_share: float = 1.0) -> list[str]:
        """Leave out words found in more than ``share`` of the facts, then the most
        common until the rest hold at most ``total_share`` together (fts5vocab)."""
        if self._common is None:
            self._common = CommonTerms(FTS_TOKENIZE.split())
        return self._common.drop_common(self._conn, tokens, share=share, min_rows=min_rows,
                                        total_share=total_share)

    def vector_knn(self, vector: np.ndarray, flt: FactFilter, k: int) -> list[tuple[int, float]]:
        """Exact cosine KNN among the facts passing ``flt``."""
        if self.vector_cache and flt.scopes is not None:
            cache = self._vectors().ready(self._conn)
            if cache is not None:
                cache.sync(self._conn)
                return self._cached_knn(cache, vector, flt, k)
        cond, params = where(flt, "f.")
        blob = np.asarray(vector, np.float32).tobytes()
        scope_cond = "1"
        scope_params: list[Any] = []
        if flt.scopes is not None:
            scope_cond = f"v.scope IN ({_marks(len(flt.scopes))})"
            scope_params = list(flt.scopes)
        rows = self._conn.execute(
            f"SELECT v.fact_id, vec_distance_cosine(v.embedding, ?) AS d FROM {TABLE} AS v "
            f"JOIN facts AS f ON f.id = v.fact_id WHERE {scope_cond} AND {cond} "
            "ORDER BY d, v.fact_id LIMIT ?", (blob, *scope_params, *params, k)).fetchall()
        return [(int(fid), 1.0 - float(d)) for fid, d in rows]

    def _cached_knn(self, cache: VectorCache, vector: np.ndarray, flt: FactFilter, k: int
                    ) -> list[tuple[int, float]]:
        # The copy knows scopes and slots, not expiry or near-duplicates: ask for
        # more until enough of the nearest pass the filter or the rows run out.
        assert flt.scopes is not None
        want = k
        while True:
            nearest = cache.knn(vector, flt.scopes, flt.slots, want)
            passing = {int(r["id"]) for r in self.rows_by_ids([f for f, _ in nearest], flt)}
            kept = [(f, c) for f, c in nearest if f in passing]
            if len(kept) >= k or len(nearest) < want:
                return kept[:k]
            want *= 4

    def load_vector_cache(self, timeout: float | None = None) -> bool:
        """Load the in-memory vector copy now; whether it is loaded."""
        if not self.vector_cache:
            raise StoreError("this store was opened with vector_cache=False", path=self.path)
        return self._vectors().load_now(self._conn, timeout)

    @property
    def vector_copy(self) -> VectorCache | None:
        """The loaded in-memory copy of the vectors, or ``None``."""
        return None if self._vector_slot is None else self._vector_slot.copy

    @property
    def vector_loading(self) -> bool:
        """Whether a background load of the vector copy is under way."""
        return self._vector_slot is not None and self._vector_slot.loader is not None

    @property
    def lexical_copy(self) -> LexicalCache | None:
        """The loaded in-memory copy of the lexical index, or ``None``."""
        return self._lexical_slot.copy

    @property
    def lexical_loading(self) -> bool:
        """Whether a background load of the lexical copy is under way."""
        return self._lexical_slot.loader is not None

    def _vectors(self) -> CacheSlot[VectorCache]:
        if self._vector_slot is None:
            dim = get_meta(self._conn, META_DIM)
            self._vector_slot = CacheSlot("in-memory vector copy",
                                          vector_cache_builder(int(dim or 0)), load_vec=True)
        return self._vector_slot

    # -- vectors -----------------------------------------------------------------

    def vector_state(self) -> VectorState:
        """What the vector table holds against the facts."""
        dim = get_meta(self._conn, META_DIM)
        scalar = self._conn.scalar
        return VectorState(
            model_id=get_meta(self._conn, META_MODEL),
            dimension=int(dim) if dim else None,
            vectors=int(scalar(f"SELECT count(*) FROM {TABLE}")),
            missing=int(scalar(
                f"SELECT count(*) FROM facts WHERE id NOT IN (SELECT fact_id FROM {TABLE})")),
            orphans=int(scalar(
                f"SELECT count(*) FROM {TABLE} WHERE fact_id NOT IN (SELECT id FROM facts)")),
        )

    def reset_vectors(self, model_id: str, dimension: int) -> None:
        """Drop every vector; bind the table to this embedder."""
        self._conn.execute(f"DELETE FROM {TABLE}")
        self._conn.execute("DELETE FROM vector_log")
        set_meta(self._conn, META_MODEL, model_id)
        set_meta(self._conn, META_DIM, str(dimension))
        generation = int(get_meta(self._conn, META_GENERATION) or 0) + 1
        set_meta(self._conn, META_GENERATION, str(generation))
        if self._vector_slot is not None:  # its copy is of the vectors just dropped
            self._vector_slot.stop()
            self._vector_slot = None

    def put_vectors(self, rows: Sequence[tuple[int, str, str]], vectors: np.ndarray) -> None:
        """Write vectors and log them for the in-memory copy."""
        if not rows:
            return
        self._conn.executemany(
            f"INSERT OR REPLACE INTO {TABLE} (fact_id, scope, slot, embedding) VALUES (?,?,?,?)",
            [(fid, scope, slot, np.asarray(vectors[i], np.float32).tobytes())
             for i, (fid, scope, slot) in enumerate(rows)])
        self._log_vectors([r[0] for r in rows], "put")

    def delete_vectors(self, fact_ids: Sequence[int]) -> None:
        """Remove vectors and log it."""
        if not fact_ids:
            return
        self._conn.executemany(f"DELETE FROM {TABLE} WHERE fact_id = ?", [(i,) for i in fact_ids])
        self._log_vectors(fact_ids, "del")

    def _log_vectors(self, fact_ids: Sequence[int], op: str) -> None:
        self._conn.executemany("INSERT INTO vector_log (fact_id, op) VALUES (?, ?)",
                               [(fid, op) for fid in fact_ids])
        low, high = log_bounds(self._conn)
        if high is not None and low is not None and high - low > 2 * _LOG_KEEP:
            self._conn.execute("DELETE FROM vector_log WHERE seq <= ?", (high - _LOG_KEEP,))

    def vectors_of(self, fact_ids: Sequence[int]) -> dict[int, np.ndarray]:
        """Stored vectors by fact id."""
        out: dict[int, np.ndarray] = {}
        for chunk in rows_in(fact_ids):
            for fid, blob in self._conn.execute(
                    f"SELECT fact_id, embedding FROM {TABLE} WHERE fact_id IN "
                    f"({_marks(len(chunk))})", chunk).fetchall():
                out[int(fid)] = np.frombuffer(blob, np.float32)
        return out

    def without_vectors(self, *, limit: int) -> list[Row]:
        """Live facts lacking a vector, by id."""
        rows: list[Row] = list(self._conn.rows(
            f"SELECT {READ} FROM facts WHERE id NOT IN (SELECT fact_id FROM {TABLE}) "
            "ORDER BY id LIMIT ?", (limit,)))
        return rows

    # -- health --------------------------------------------------------------------

    def check(self) -> Health:
        """``PRAGMA integrity_check`` and FTS5's own integrity check."""
        from ._health import check

        return check(self._conn)

    def rebuild(self) -> None:
        """Rebuild the FTS5 indexes and every trigger and index from the facts."""
        from ._health import rebuild

        rebuild(self._conn)

    def bad_values(self, *, limit: int) -> list[BadValue]:
        """Stored numbers no read can use (see :mod:`._values`)."""
        return _values.bad_values(self._conn, limit)

    def repair_values(self, now: float) -> int:
        """Reset stored numbers no read can use to their fallbacks."""
        return _values.repair_values(self._conn, now)
