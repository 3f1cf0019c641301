"""The searching half of FactStore: sanitize, gather both legs, rank, count access."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from ..errors import InvalidArgumentError, StoreError
from ..model import Fact, Hit, from_timestamp
from ._common_terms import CommonTerms
from ._legs import Found, lexical_leg, merge_vector_leg, ranked_candidates
from ._legs import placeholders as _placeholders
from ._loader import CacheSlot
from ._reads import check_id as _check_id
from ._validate import Limits
from .lexical_cache import LexicalCache
from .links import RecentResults, pull_linked
from .migrations import FTS_TOKENIZE
from .ranking import Candidate, RankingPolicy, rank_candidates
from .rerank import Boost, Reranker, apply_boost_and_rerank
from .sanitize import QueryPolicy, query_tokens, to_match
from .vectors import VectorCache, VectorIndex, vector_cache_builder

if TYPE_CHECKING:
    from ._sqlite import Connection

__all__ = ["SearchMixin"]

_MAX_LIMIT = 1000
#: Query vectors kept for repeated searches of the same text (least recently used dropped).
_QUERY_VECTORS_KEPT = 32


def _check_limit(limit: object) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= _MAX_LIMIT:
        raise InvalidArgumentError(
            f"limit must be an integer from 1 to {_MAX_LIMIT}, not {limit!r}", field="limit", value=limit
        )
    return limit


class SearchMixin:
    """Search and access counting of :class:`~ctxslots.stores.fact_store.FactStore`."""

    _conn: Connection
    _index: VectorIndex | None
    _vector_slot: CacheSlot[VectorCache] | None
    _common: CommonTerms | None
    _recent: RecentResults
    _lexical_slot: CacheSlot[LexicalCache]
    path: Any
    _query_vectors: dict[str, np.ndarray]
    lexical_cache: bool
    limits: Limits
    ranking: RankingPolicy
    query_policy: QueryPolicy
    candidate_pool: int
    clock: Callable[[], float]
    embedder: Any
    vector_cache: bool
    rerank: Reranker | None

    if TYPE_CHECKING:  # provided by ReadsMixin
        def _filters(
            self, slots: Sequence[str] | None, scope: str | None, *, now: float | None = None,
            alias: str = "", include_expired: bool = False, include_superseded: bool = True,
        ) -> tuple[str, list[Any]]: ...

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
            raise InvalidArgumentError("query must be a string", field="query", value=query)
        limit = _check_limit(limit)
        now = self.clock()
        where, params = self._filters(slots, scope, now=now, alias="f.",
                                      include_superseded=include_superseded)
        tokens = self._query_tokens(query)
        match = to_match(tokens)
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
                if (table == "facts" and self.lexical_cache
                        and self._lexical_slot.ready(self._conn) is not None):
                    leg = self._cached_lexical_leg(tokens, scope, slots, now, where, params, pool,
                                                   include_superseded)
                else:
                    leg = lexical_leg(self._conn, table, match, where, params, pool)
                for cand, row in leg:
                    by_id[cand.fact_id] = cand
                    found[cand.fact_id] = (row, table == "archive")
        if use_vector:
            self._add_vector_leg(query, scope, slots, pool, where, params, by_id, found)
        adjust = boost is not None or self.rerank is not None
        ranked = rank_candidates(by_id.values(), now=now, policy=self.ranking,
                                 limit=len(by_id) if adjust else limit, fused=use_vector,
                                 depth=self.candidate_pool, query=query)
        hits = [Hit(fact=Fact.from_row(found[c.fact_id][0], archived=found[c.fact_id][1]),
                    trace=trace) for c, trace in ranked]
        if adjust:
            hits = apply_boost_and_rerank(query, hits, boost, self.rerank)[:limit]
        hits = pull_linked(self, hits, where, params, limit, now)  # type: ignore[arg-type]
        hits = self._count_hidden(hits)
        self._recent.add(h.fact.id for h in hits if not h.fact.archived)
        if track_access:
            hits = self._track_access(hits, now)
        return hits

    def load_lexical_cache(self, timeout: float | None = None) -> bool:
        """Load the in-memory lexical copy now instead of in the background.

        With ``lexical_cache=True`` the first search starts loading the copy on
        a background thread and searches use FTS5 until it is ready; call this
        at start-up to have it from the first search on. Returns whether the
        copy is loaded (false only when ``timeout`` seconds passed first).

        :raises StoreError: The store was opened without ``lexical_cache=True``,
            or loading failed (searches then keep using FTS5).
        """
        if not self.lexical_cache:
            raise StoreError("this store was opened without lexical_cache=True", path=self.path)
        return self._lexical_slot.load_now(self._conn, timeout)

    def load_vector_cache(self, timeout: float | None = None) -> bool:
        """Load the in-memory copy of the vectors now instead of in the background.

        With ``vector_cache=True`` (the default) the first search that uses the
        vector leg starts loading the copy on a background thread and searches
        scan ``vec0`` until it is ready. Returns whether the copy is loaded
        (false only when ``timeout`` seconds passed first).

        :raises StoreError: The store was opened with ``vector_cache=False``,
            has no usable vector index, or loading failed (searches then keep
            scanning ``vec0``).
        """
        if not self.vector_cache:
            raise StoreError("this store was opened with vector_cache=False", path=self.path)
        if not self.vector_leg_ready:
            raise StoreError("this store has no usable vector index (no embedder, or a stale "
                             "index: run reindex)", path=self.path)
        return self._vectors().load_now(self._conn, timeout)

    def _vectors(self) -> CacheSlot[VectorCache]:
        assert self._index is not None
        if self._vector_slot is None:
            self._vector_slot = CacheSlot("in-memory vector copy",
                                          vector_cache_builder(self._index.dimension),
                                          load_vec=True)
        return self._vector_slot

    def _cached_lexical_leg(
        self, tokens: list[str], scope: str | None, slots: Sequence[str] | None, now: float,
        where: str, params: list[Any], pool: int, include_superseded: bool,
    ) -> list[tuple[Candidate, dict[str, Any]]]:
        cache = self._lexical_slot.copy
        if cache is None:
            self.load_lexical_cache()
            cache = self._lexical_slot.copy
        assert cache is not None
        cache.sync(self._conn)
        scopes, slot_list = self._visible(scope, slots)
        ranked = cache.search(tokens, scopes=scopes, slots=slot_list, now=now,
                                      include_superseded=include_superseded, pool=pool)
        return ranked_candidates(self._conn, "facts", ranked, where, params)

    def _visible(self, scope: str | None, slots: Sequence[str] | None
                 ) -> tuple[list[str], list[str] | None]:
        """The stored scope values a search in ``scope`` sees, and the checked slots."""
        scopes = list(dict.fromkeys([self.limits.scope(scope), ""]))
        if slots is None:
            return scopes, None
        return scopes, [self.limits.slot(s) for s in ([slots] if isinstance(slots, str) else slots)]

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

    def _query_vector(self, query: str) -> np.ndarray:
        # A prompt assembly searches each memory slot with the same message, so
        # the last few query vectors are kept: a real model embeds it once a turn.
        vectors = self._query_vectors
        vector = vectors.pop(query, None)
        if vector is None:
            vector = np.array(self.embedder.embed([query])[0], dtype=np.float32)
            vector.setflags(write=False)
        vectors[query] = vector
        while len(vectors) > _QUERY_VECTORS_KEPT:
            del vectors[next(iter(vectors))]
        return vector

    @property
    def vector_leg_ready(self) -> bool:
        """Whether searches can use the vector leg (an embedder, and an index it built)."""
        return self._index is not None and not self._index.stale

    def _add_vector_leg(
        self, query: str, scope: str | None, slots: Sequence[str] | None, pool: int,
        where: str, params: list[Any], by_id: dict[int, Candidate], found: Found,
    ) -> None:
        assert self._index is not None
        vector = self._query_vector(query)
        if not np.any(vector):
            return
        scopes, slot_list = self._visible(scope, slots)
        # The in-memory copy once it is loaded (in the background); vec0 until then.
        cache = self._vectors().ready(self._conn) if self.vector_cache else None
        if cache is not None:
            cache.sync(self._conn)
            nearest = cache.knn(vector, scopes, slot_list, pool)
        else:
            nearest = self._index.knn(vector, scopes, slot_list, pool)
        nearest = [(fid, cos) for fid, cos in nearest if cos > self.ranking.min_cosine]
        merge_vector_leg(self._conn, nearest, where, params, by_id, found)
