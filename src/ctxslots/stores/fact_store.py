"""FactStore: facts in one SQLite file, searched by BM25 and ranked with decay.

The public interface speaks of facts, slots, scopes and hits only: no
connections, rowids or FTS5 syntax, so another backend can sit behind it.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import platformdirs

from ..errors import FactNotFoundError, InvalidFactError
from ..model import Fact, Hit, from_timestamp
from ._sqlite import Connection, open_connection, sqlite_version
from ._validate import Limits
from ._common_terms import CommonTerms
from .migrations import FTS_TOKENIZE, schema_version
from ._legs import COLUMNS as _COLUMNS
from ._legs import Found, lexical_leg, merge_vector_leg, placeholders as _placeholders
from .ranking import MODEL_VECTOR_WEIGHT, Candidate, RankingPolicy, rank_candidates
from .rerank import Boost, Reranker, apply_boost_and_rerank
from .sanitize import DEFAULT_POLICY, QueryPolicy, query_tokens, to_match
from .maintenance import DoctorReport, doctor, reindex
from .prune import PrunePolicy, PruneReport, prune
from .consolidate import DEFAULT_THRESHOLD, ConsolidationReport, consolidate
from .vectors import VectorCache, VectorIndex

__all__ = ["FactStore", "default_db_path"]

_LIVE = "(expires_at IS NULL OR expires_at > ?)"
_MAX_LIMIT = 1000


def default_db_path() -> Path:
    """Where the store lives when no path is given: ``$CTXSLOTS_DB``, else the
    user data directory (``~/.local/share/ctxslots/memory.db`` on Linux)."""
    env = os.environ.get("CTXSLOTS_DB")
    if env:
        return Path(env).expanduser()
    return Path(platformdirs.user_data_dir("ctxslots", appauthor=False)) / "memory.db"


def _check_id(fact_id: object) -> int:
    if isinstance(fact_id, bool) or not isinstance(fact_id, int):
        raise InvalidFactError(f"fact id must be an integer, not {fact_id!r}", field="id", value=fact_id)
    return fact_id


def _check_limit(limit: object) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= _MAX_LIMIT:
        raise InvalidFactError(
            f"limit must be an integer from 1 to {_MAX_LIMIT}, not {limit!r}", field="limit", value=limit
        )
    return limit


@attrs.define
class FactStore:
    """Facts and memories of every slot, in one SQLite file.

    Use it as a context manager, or call :meth:`close` when done::

        with FactStore("memory.db") as store:
            store.upsert("user", "editor", "The user edits code in Helix.")
            hits = store.search("which editor?")

    Attributes:
        path: The database file (``None``: :func:`default_db_path`).
        limits: Size limits and slot rules applied to every write.
        ranking: Decay constants per slot, reinforcement and fusion weights
            (after construction, with the vector weight resolved).
        query_policy: How query text becomes a lexical query (stop words,
            minimum token length).
        candidate_pool: How many candidates each retrieval leg contributes.
        clock: Returns the current time in Unix seconds (tests pass their own).
        embedder: What turns text into vectors for the vector leg: an object
            with ``model_id``, ``dimension`` and ``embed(texts)``, a spec string
            (``"hash"``, ``"sentence-transformers:PATH"``, ``"openai:MODEL"``),
            ``None`` for the default (``$CTXSLOTS_EMBEDDER``, else the hashing
            embedder), or ``False`` for no vector leg at all.
        vector_cache: Search an in-memory copy of the vectors, kept consistent
            with the file, instead of scanning ``vec0`` on every search.
        rerank: ``rerank(query, hits) -> hits | None``, given every fused
            candidate before the limit (see :mod:`ctxslots.stores.rerank`).
    """

    path: str | os.PathLike[str] | None = None
    limits: Limits = attrs.field(factory=Limits)
    ranking: RankingPolicy = attrs.field(factory=RankingPolicy)
    query_policy: QueryPolicy = DEFAULT_POLICY
    candidate_pool: int = 50
    clock: Callable[[], float] = time.time
    embedder: Any = None
    vector_cache: bool = True
    rerank: Reranker | None = None
    _conn: Connection = attrs.field(init=False, repr=False)
    _index: VectorIndex | None = attrs.field(init=False, default=None, repr=False)
    _cache: VectorCache | None = attrs.field(init=False, default=None, repr=False)
    _pending: dict[int, tuple[str, str, str]] | None = attrs.field(init=False, default=None, repr=False)
    _common: CommonTerms | None = attrs.field(init=False, default=None, repr=False)
    _written: int = attrs.field(init=False, default=0, repr=False)

    def __attrs_post_init__(self) -> None:
        self.path = os.fspath(self.path) if self.path is not None else str(default_db_path())
        if self.embedder is None or isinstance(self.embedder, str):
            from .embedders import default_embedder, embedder_from_spec

            spec = self.embedder
            self.embedder = default_embedder() if spec is None else embedder_from_spec(spec)
        if self.ranking.vector_weight is None:
            self.ranking = attrs.evolve(self.ranking, vector_weight=self._auto_vector_weight())
        self._conn = open_connection(self.path)
        if self.embedder is not False:
            self._index = VectorIndex(self._conn, self.embedder.model_id, self.embedder.dimension)
            self._index.bind()

    def _auto_vector_weight(self) -> float:
        from .embedders import HashingEmbedder

        if self.embedder is False or isinstance(self.embedder, HashingEmbedder):
            return 0.0
        return MODEL_VECTOR_WEIGHT

    # -- lifecycle ---------------------------------------------------------

    def close(self) -> None:
        """Close the database (idempotent)."""
        self._conn.close()

    def __enter__(self) -> FactStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @contextlib.contextmanager
    def batch(self) -> Iterator[FactStore]:
        """Group writes in one transaction: all of them land, or none.

        ::

            with store.batch():
                store.upsert("user", "name", "The user is called Ada.")
                store.add("agent", "The CI cache is cold on Mondays.")
        """
        with self._writing():
            yield self

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        """A write transaction; vectors of the facts it wrote are embedded in one
        batch and written before it commits, so facts and vectors land together."""
        outer = self._pending is None
        if outer:
            self._pending = {}
            self._written = 0
        try:
            with self._conn.write():
                yield
                if outer and self._pending:
                    self._write_vectors(self._pending)
        finally:
            if outer:
                self._pending = None

    def _write_vectors(self, pending: dict[int, tuple[str, str, str]]) -> None:
        if self._index is None or self._index.stale:
            return
        ids = list(pending)
        vectors = self.embedder.embed([pending[i][2] for i in ids])
        self._index.put([(i, pending[i][0], pending[i][1]) for i in ids], vectors)

    # -- writes ------------------------------------------------------------

    def upsert(
        self,
        slot: str,
        key: str,
        value: str,
        *,
        scope: str | None = None,
        tags: Iterable[str] = (),
        confidence: float = 1.0,
        source: str | None = None,
        expires_at: Any = None,
    ) -> Fact:
        """Write a keyed fact; a fact with the same slot, scope and key is replaced.

        The replaced value is kept in history (see :meth:`history`). Writing the
        same value again refreshes its metadata and ``updated_at`` without a
        history entry. Reinforcement score and access counts carry over.

        :raises InvalidFactError: A field is malformed or over its limit; nothing
            is written.
        """
        row = self._validated(slot, value, scope, tags, confidence, source, expires_at)
        key = self.limits.key(key)
        now = self.clock()
        with self._writing():
            old = self._conn.rows(
                f"SELECT {_COLUMNS} FROM facts WHERE slot = ? AND scope = ? AND key = ?",
                (row["slot"], row["scope"], key),
            )
            if not old:
                return self._insert(row, key, now)
            return self._rewrite(old[0], row, now)

    def update(
        self,
        fact_id: int,
        *,
        value: str | None = None,
        tags: Iterable[str] | None = None,
        confidence: float | None = None,
        source: str | None = None,
    ) -> Fact:
        """Change some fields of a live fact by id; ``None`` keeps a field as it is.

        Works for keyed facts and free memories alike. A changed value or tag
        list keeps the old one in :meth:`history`, as :meth:`upsert` does.

        :raises FactNotFoundError: No live fact has this id.
        :raises InvalidFactError: A field is malformed or over its limit; nothing
            is written.
        """
        fact_id = _check_id(fact_id)
        now = self.clock()
        with self._writing():
            old = self._conn.rows(
                f"SELECT {_COLUMNS} FROM facts WHERE id = ? AND {_LIVE}", (fact_id, now)
            )
            if not old:
                raise FactNotFoundError(fact_id)
            prev = old[0]
            row = self._validated(
                prev["slot"], prev["value"] if value is None else value, prev["scope"] or None,
                [t for t in (prev["tags"] or "").split("\n") if t] if tags is None else tags,
                prev["confidence"] if confidence is None else confidence,
                prev["source"] if source is None else source, prev["expires_at"],
            )
            return self._rewrite(prev, row, now)

    def _rewrite(self, prev: Any, row: dict[str, Any], now: float) -> Fact:
        """Replace a stored fact's fields, keeping the old value in history."""
        self._count_write()
        if prev["value"] != row["value"] or prev["tags"] != row["tags"]:
            self._conn.execute(
                "INSERT INTO fact_history (fact_id, slot, scope, key, value, tags, source, "
                "confidence, valid_from, valid_to) VALUES (?,?,?,?,?,?,?,?,?,?)",
                (prev["id"], prev["slot"], prev["scope"], prev["key"], prev["value"],
                 prev["tags"], prev["source"], prev["confidence"], prev["updated_at"], now),
            )
        # A new value is no longer the near-duplicate it was marked as.
        self._conn.execute(
            "UPDATE facts SET value = ?, tags = ?, source = ?, confidence = ?, updated_at = ?, "
            "expires_at = ?, superseded_by = CASE WHEN value = ? THEN superseded_by END "
            "WHERE id = ?",
            (row["value"], row["tags"], row["source"], row["confidence"], now,
             row["expires_at"], row["value"], prev["id"]),
        )
        if prev["value"] != row["value"]:
            self._queue_vector(prev["id"], row)
        return self._fetch(prev["id"])

    def add(
        self,
        slot: str,
        value: str,
        *,
        scope: str | None = None,
        tags: Iterable[str] = (),
        confidence: float = 1.0,
        source: str | None = None,
        expires_at: Any = None,
    ) -> Fact:
        """Write a free-form memory (a fact without a key).

        :raises InvalidFactError: A field is malformed or over its limit; nothing
            is written.
        """
        row = self._validated(slot, value, scope, tags, confidence, source, expires_at)
        with self._writing():
            return self._insert(row, None, self.clock())

    def _validated(
        self, slot: Any, value: Any, scope: Any, tags: Any, confidence: Any, source: Any,
        expires_at: Any,
    ) -> dict[str, Any]:
        lim = self.limits
        return {
            "slot": lim.slot(slot),
            "scope": lim.scope(scope),
            "value": lim.value(value),
            "tags": lim.tags(tags),
            "confidence": lim.confidence(confidence),
            "source": lim.source(source),
            "expires_at": lim.expires_at(expires_at),
        }

    def _count_write(self) -> None:
        """Count one fact written in the current transaction against ``limits.max_batch``."""
        self._written += 1
        if self._written > self.limits.max_batch:
            raise InvalidFactError(
                f"a batch may write at most {self.limits.max_batch} facts; split it into smaller "
                "batches (nothing from this batch was written)",
                field="batch", value=self._written,
            )

    def _insert(self, row: dict[str, Any], key: str | None, now: float) -> Fact:
        self._count_write()
        cursor = self._conn.execute(
            "INSERT INTO facts (slot, scope, key, value, tags, source, confidence, "
            "created_at, updated_at, expires_at) VALUES (?,?,?,?,?,?,?,?,?,?) RETURNING id",
            (row["slot"], row["scope"], key, row["value"], row["tags"], row["source"],
             row["confidence"], now, now, row["expires_at"]),
        )
        fact_id = int(cursor.fetchall()[0][0])
        self._queue_vector(fact_id, row)
        return self._fetch(fact_id)

    def _queue_vector(self, fact_id: int, row: dict[str, Any]) -> None:
        if self._pending is not None and self._index is not None:
            self._pending[fact_id] = (row["scope"], row["slot"], row["value"])

    def forget(self, fact_id: int, *, reason: str | None = None) -> Fact:
        """Move a fact to the archive, where ``search(include_archive=True)`` finds it.

        :raises FactNotFoundError: No live fact has this id.
        """
        fact_id = _check_id(fact_id)
        with self._writing():
            if self._conn.scalar("SELECT 1 FROM facts WHERE id = ?", (fact_id,)) is None:
                raise FactNotFoundError(fact_id)
            self._conn.execute(
                f"INSERT OR REPLACE INTO archive ({_COLUMNS}, archived_at, reason) "
                f"SELECT {_COLUMNS}, ?, ? FROM facts WHERE id = ?",
                (self.clock(), reason, fact_id),
            )
            self._count_write()
            self._conn.execute("DELETE FROM facts WHERE id = ?", (fact_id,))
            if self._index is not None:
                self._index.delete([fact_id])
            if self._pending:
                self._pending.pop(fact_id, None)
            rows = self._conn.rows(f"SELECT {_COLUMNS} FROM archive WHERE id = ?", (fact_id,))
        return Fact.from_row(rows[0], archived=True)

    def reinforce(self, fact_id: int, amount: float = 3.0) -> Fact:
        """Add ``amount`` (default 3) to a fact's reinforcement score.

        :raises FactNotFoundError: No live fact has this id.
        """
        return self._adjust_score(fact_id, amount)

    def demote(self, fact_id: int, amount: float = 1.0) -> Fact:
        """Take ``amount`` (default 1) from a fact's reinforcement score.

        :raises FactNotFoundError: No live fact has this id.
        """
        return self._adjust_score(fact_id, -amount)

    def _adjust_score(self, fact_id: int, delta: float) -> Fact:
        fact_id = _check_id(fact_id)
        with self._conn.write():
            changed = self._conn.execute(
                f"UPDATE facts SET score = score + ? WHERE id = ? AND {_LIVE} RETURNING id",
                (float(delta), fact_id, self.clock()),
            ).fetchall()
            if not changed:
                raise FactNotFoundError(fact_id)
            return self._fetch(fact_id)

    # -- reads -------------------------------------------------------------

    def get(self, fact_id: int, *, include_archive: bool = False) -> Fact | None:
        """Return the live fact with this id, or ``None`` (expired facts are not live).

        Reading by id is not shown to a model by itself, so it does not count as
        an access.
        """
        fact_id = _check_id(fact_id)
        rows = self._conn.rows(
            f"SELECT {_COLUMNS} FROM facts WHERE id = ? AND {_LIVE}", (fact_id, self.clock())
        )
        if rows:
            return Fact.from_row(rows[0])
        if include_archive:
            rows = self._conn.rows(f"SELECT {_COLUMNS} FROM archive WHERE id = ?", (fact_id,))
            if rows:
                return Fact.from_row(rows[0], archived=True)
        return None

    def get_by_key(self, slot: str, key: str, *, scope: str | None = None) -> Fact | None:
        """Return the live fact with this slot, scope and key, or ``None``."""
        rows = self._conn.rows(
            f"SELECT {_COLUMNS} FROM facts WHERE slot = ? AND scope = ? AND key = ? AND {_LIVE}",
            (self.limits.slot(slot), self.limits.scope(scope), self.limits.key(key), self.clock()),
        )
        return Fact.from_row(rows[0]) if rows else None

    def history(self, fact_id: int) -> list[Fact]:
        """Earlier values of a keyed fact, oldest first, as facts with the same id.

        Each returned fact's ``updated_at`` is when that value was written.
        """
        fact_id = _check_id(fact_id)
        rows = self._conn.rows(
            "SELECT fact_id AS id, slot, scope, key, value, tags, source, confidence, "
            "0.0 AS score, valid_from AS created_at, valid_from AS updated_at, "
            "NULL AS last_accessed, 0 AS access_count, valid_to AS expires_at, "
            "NULL AS superseded_by "
            "FROM fact_history WHERE fact_id = ? ORDER BY valid_to, id",
            (fact_id,),
        )
        return [Fact.from_row(row) for row in rows]

    def timeline(
        self, fact_id: int, *, before: int = 5, after: int = 5, scope: str | None = None
    ) -> list[Fact]:
        """A live fact and the live facts written just before and after it, oldest first.

        Only facts visible from ``scope`` (that scope and global facts) are
        considered, so a timeline never shows another scope's facts.

        :param before: How many earlier facts (0 to 100).
        :param after: How many later facts (0 to 100).
        :raises FactNotFoundError: No live fact with this id is visible from ``scope``.
        :raises InvalidFactError: ``before`` or ``after`` is out of range.
        """
        fact_id = _check_id(fact_id)
        counts = []
        for name, count in (("before", before), ("after", after)):
            if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= 100:
                raise InvalidFactError(f"{name} must be an integer from 0 to 100, not {count!r}",
                                       field=name, value=count)
            counts.append(count)
        where, params = self._filters(None, scope)
        anchor = self._conn.rows(
            f"SELECT {_COLUMNS} FROM facts WHERE id = ? AND {where}", (fact_id, *params)
        )
        if not anchor:
            raise FactNotFoundError(fact_id)
        at = (anchor[0]["created_at"], fact_id)
        earlier = self._conn.rows(
            f"SELECT {_COLUMNS} FROM facts WHERE {where} AND (created_at, id) < (?, ?) "
            "ORDER BY created_at DESC, id DESC LIMIT ?", (*params, *at, counts[0]),
        )
        later = self._conn.rows(
            f"SELECT {_COLUMNS} FROM facts WHERE {where} AND (created_at, id) > (?, ?) "
            "ORDER BY created_at, id LIMIT ?", (*params, *at, counts[1]),
        )
        rows = [*reversed(earlier), anchor[0], *later]
        return [Fact.from_row(row) for row in rows]

    def facts(
        self, *, slots: Sequence[str] | None = None, scope: str | None = None,
        include_expired: bool = False,
    ) -> list[Fact]:
        """Every live fact of the given slots in ``scope`` (and global ones), by id."""
        where, params = self._filters(slots, scope, include_expired=include_expired)
        rows = self._conn.rows(f"SELECT {_COLUMNS} FROM facts WHERE {where} ORDER BY id", params)
        return [Fact.from_row(row) for row in rows]

    def search(
        self,
        query: str,
        *,
        slots: Sequence[str] | None = None,
        scope: str | None = None,
        limit: int = 10,
        include_archive: bool = False,
        track_access: bool = True,
        boost: Boost | None = None,
        include_superseded: bool = False,
    ) -> list[Hit]:
        """Find the facts that best match ``query``, best first.

        Any string is accepted: it is sanitized into a safe lexical query, and a
        query with no usable words returns ``[]``. Facts of ``scope`` and global
        facts (scope ``None``) are searched; facts of other scopes never are.
        Expired facts never come back. Every returned live fact counts as
        accessed (``access_count + 1``, ``last_accessed = now``) unless
        ``track_access`` is false.

        :param query: Free text, usually the user's message.
        :param slots: Only these slots (default: all).
        :param scope: The workspace; ``None`` searches global facts only.
        :param limit: Most hits to return, 1 to 1000.
        :param include_archive: Also search forgotten facts (marked ``archived``).
        :param track_access: Count the returned facts as shown to a model.
        :param boost: ``boost(fact) -> factor`` multiplying each candidate's final
            score before the limit (recorded as ``trace.extra["boost"]``).
        :param include_superseded: Also return facts that a newer near-duplicate
            hides (see :meth:`consolidate`).
        :raises InvalidFactError: ``slots``, ``scope`` or ``limit`` is malformed,
            or ``boost`` returned a negative or non-finite factor.
        """
        if not isinstance(query, str):
            raise InvalidFactError("query must be a string", field="query", value=query)
        limit = _check_limit(limit)
        now = self.clock()
        where, params = self._filters(slots, scope, now=now, alias="f.",
                                      include_superseded=include_superseded)
        match = to_match(self._query_tokens(query))
        use_lexical = bool(match) and self.ranking.lexical_weight > 0
        use_vector = (bool(self.ranking.vector_weight) and bool(query.strip())
                      and self.vector_leg_ready)
        if not use_lexical and not use_vector:
            return []
        pool = max(limit, self.candidate_pool)
        found: Found = {}
        by_id: dict[int, Candidate] = {}
        if use_lexical:
            for table in ["facts"] + (["archive"] if include_archive else []):
                for cand, row in lexical_leg(self._conn, table, match, where, params, pool):
                    by_id[cand.fact_id] = cand
                    found[cand.fact_id] = (row, table == "archive")
        if use_vector:
            self._add_vector_leg(query, scope, slots, pool, where, params, by_id, found)
        adjust = boost is not None or self.rerank is not None
        ranked = rank_candidates(by_id.values(), now=now, policy=self.ranking,
                                 limit=len(by_id) if adjust else limit, fused=use_vector)
        hits = [Hit(fact=Fact.from_row(found[c.fact_id][0], archived=found[c.fact_id][1]),
                    trace=trace) for c, trace in ranked]
        if adjust:
            hits = apply_boost_and_rerank(query, hits, boost, self.rerank)[:limit]
        hits = self._count_hidden(hits)
        if track_access:
            hits = self._track_access(hits, now)
        return hits

    def _count_hidden(self, hits: list[Hit]) -> list[Hit]:
        ids = [h.fact.id for h in hits if not h.fact.archived]
        if not ids:
            return hits
        counts = dict(self._conn.execute(
            f"SELECT superseded_by, count(*) FROM facts WHERE superseded_by IN "
            f"({_placeholders(len(ids))}) GROUP BY superseded_by", ids,
        ).fetchall())
        if not counts:
            return hits
        return [attrs.evolve(h, trace=attrs.evolve(h.trace, hides=int(counts[h.fact.id])))
                if h.fact.id in counts and not h.fact.archived else h for h in hits]

    def _query_tokens(self, query: str) -> list[str]:
        policy = self.query_policy
        tokens = query_tokens(query, policy)
        if policy.max_doc_share < 1.0 and tokens:
            if self._common is None:
                self._common = CommonTerms(FTS_TOKENIZE.split())
            tokens = self._common.drop_common(self._conn, tokens, share=policy.max_doc_share,
                                              min_rows=policy.common_min_facts)
        return tokens

    def touch(self, fact_ids: Iterable[int]) -> int:
        """Count these facts as shown to a model: ``access_count + 1``, ``last_accessed = now``.

        For callers that search with ``track_access=False`` and show only some
        hits (the prompt assembler counts the facts that made it into the
        prompt). Ids of missing or archived facts are ignored; returns how many
        facts were counted.

        :raises InvalidFactError: An id is not an integer.
        """
        ids = list(dict.fromkeys(_check_id(i) for i in fact_ids))
        return self._touch(ids, self.clock()) if ids else 0

    def _touch(self, ids: list[int], now: float) -> int:
        with self._conn.write():
            changed = self._conn.execute(
                "UPDATE facts SET access_count = access_count + 1, last_accessed = ? "
                f"WHERE id IN ({_placeholders(len(ids))}) RETURNING id",
                (now, *ids),
            ).fetchall()
        return len(changed)

    def _track_access(self, hits: list[Hit], now: float) -> list[Hit]:
        live_ids = [h.fact.id for h in hits if not h.fact.archived]
        if not live_ids:
            return hits
        self._touch(live_ids, now)
        when = from_timestamp(now)
        return [h if h.fact.archived else attrs.evolve(
                    h, fact=attrs.evolve(h.fact, access_count=h.fact.access_count + 1,
                                         last_accessed=when))
                for h in hits]

    @property
    def vector_leg_ready(self) -> bool:
        """Whether searches can use the vector leg (an embedder, and an index it built)."""
        return self._index is not None and not self._index.stale

    def _add_vector_leg(
        self, query: str, scope: str | None, slots: Sequence[str] | None, pool: int,
        where: str, params: list[Any], by_id: dict[int, Candidate], found: Found,
    ) -> None:
        assert self._index is not None
        vector = self.embedder.embed([query])[0]
        if not np.any(vector):
            return
        scopes = list(dict.fromkeys([self.limits.scope(scope), ""]))
        slot_list = None if slots is None else [self.limits.slot(s) for s in
                                               ([slots] if isinstance(slots, str) else slots)]
        if self.vector_cache:
            if self._cache is None:
                self._cache = VectorCache(self._index.dimension)
            self._cache.sync(self._conn)
            nearest = self._cache.knn(vector, scopes, slot_list, pool)
        else:
            nearest = self._index.knn(vector, scopes, slot_list, pool)
        nearest = [(fid, cos) for fid, cos in nearest if cos > self.ranking.min_cosine]
        merge_vector_leg(self._conn, nearest, where, params, by_id, found)

    def _filters(
        self, slots: Sequence[str] | None, scope: str | None, *, now: float | None = None,
        alias: str = "", include_expired: bool = False, include_superseded: bool = True,
    ) -> tuple[str, list[Any]]:
        if isinstance(slots, str):
            slots = [slots]
        scope_value = self.limits.scope(scope)
        clauses = [f"{alias}scope IN (?, '')"]
        params: list[Any] = [scope_value]
        if slots is not None:
            checked = [self.limits.slot(s) for s in slots]
            if not checked:
                raise InvalidFactError("slots must name at least one slot", field="slots", value=slots)
            clauses.append(f"{alias}slot IN ({_placeholders(len(checked))})")
            params.extend(checked)
        if not include_superseded:
            clauses.append(f"{alias}superseded_by IS NULL")
        if not include_expired:
            clauses.append(f"({alias}expires_at IS NULL OR {alias}expires_at > ?)")
            params.append(self.clock() if now is None else now)
        return " AND ".join(clauses), params

    def _fetch(self, fact_id: int) -> Fact:
        rows = self._conn.rows(f"SELECT {_COLUMNS} FROM facts WHERE id = ?", (fact_id,))
        if not rows:
            raise FactNotFoundError(fact_id)
        return Fact.from_row(rows[0])

    # -- inspection --------------------------------------------------------

    def doctor(self) -> DoctorReport:
        """Check file integrity, the full-text index and the vector index."""
        return doctor(self)

    def reindex(self, *, progress: Callable[[int, int], None] | None = None) -> int:
        """Rebuild the full-text and vector indexes from the facts; return facts embedded."""
        count = reindex(self, progress=progress)
        self._cache = None
        return count

    def consolidate(
        self, *, threshold: float = DEFAULT_THRESHOLD, fact_ids: Iterable[int] | None = None,
        dry_run: bool = False,
    ) -> ConsolidationReport:
        """Mark older near-duplicates superseded by the newer fact of the same slot and scope.

        Superseded facts are never deleted: search hides them unless
        ``include_superseded=True``, the survivor's ``trace.hides`` counts them,
        and pruning archives them first. See :mod:`ctxslots.stores.consolidate`.

        :param threshold: Cosine similarity above which two facts are duplicates.
        :param fact_ids: Only check these facts against older ones (``None``: all).
        :param dry_run: Only report what would be marked.
        :raises StoreError: The store has no usable vector index.
        """
        return consolidate(self, threshold=threshold, fact_ids=fact_ids, dry_run=dry_run)

    def prune(self, policy: PrunePolicy | None = None, *, dry_run: bool = False) -> PruneReport:
        """Move facts over the policy's caps to the archive (never deleting them).

        Over a slot's cap (counted per scope), the unprotected facts with the
        lowest retention go first; see :mod:`ctxslots.stores.prune` for the rule.

        :param policy: Caps and protections (default: :class:`PrunePolicy`).
        :param dry_run: Only report what would move.
        """
        return prune(self, PrunePolicy() if policy is None else policy, dry_run=dry_run)

    def stats(self) -> dict[str, Any]:
        """Counts per slot and scope, archive and history sizes, file facts."""
        now = self.clock()
        by_slot = self._conn.rows(
            f"SELECT slot, scope, count(*) AS n, sum(NOT {_LIVE}) AS expired "
            "FROM facts GROUP BY slot, scope ORDER BY slot, scope",
            (now,),
        )
        path = str(self.path)
        return {
            "path": path,
            "size_bytes": os.path.getsize(path) if os.path.exists(path) else 0,
            "schema_version": schema_version(self._conn),
            "sqlite_version": sqlite_version(),
            "sqlite_vec_version": self._conn.vec_version,
            "facts": sum(int(r["n"]) for r in by_slot),
            "expired": sum(int(r["expired"] or 0) for r in by_slot),
            "archived": int(self._conn.scalar("SELECT count(*) FROM archive")),
            "history": int(self._conn.scalar("SELECT count(*) FROM fact_history")),
            "by_slot": [
                {"slot": r["slot"], "scope": r["scope"] or None, "facts": int(r["n"]),
                 "expired": int(r["expired"] or 0)}
                for r in by_slot
            ],
        }

