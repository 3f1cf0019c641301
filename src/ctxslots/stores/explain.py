"""Where one fact stands in a search, whether or not the search returns it.

A search's hits carry their traces (:class:`~ctxslots.model.HitTrace`); a fact
that is not among them has none. To answer "why is this fact not found?" the
store reports what each step said of that one fact, in its own terms:

- :func:`match_words`: which words of the query the search looks for (and which
  it left out, as stop words or as common to much of the store), and which of
  them the fact holds, as the index stems them (:meth:`Backend.terms`);
- :func:`locate`: its place in each leg (words rank and BM25, vector rank and
  cosine), read deeper than a search reads; why ranking left it out, when a leg
  found it (:func:`~.ranking.left_out`); its hit with its trace when ranked;
- :func:`vector_status`: whether the fact has a vector, and whose.

Nothing here ranks: the ranking is the search's own (``hits``), and the legs are
the engine's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import attrs
import numpy as np

from ..errors import FactNotFoundError, InvalidArgumentError
from ..model import Hit
from .backend import FactFilter, QueryPlan
from .backend.unit_vectors import COSINE_DIGITS, settled_nearest
from .core import StoreCore
from .ranking import Candidate, left_out
from .sanitize import query_tokens
from .writes.writer import check_id

__all__ = ["ExplainMethods", "Located", "VectorStatus", "WordMatch", "locate", "match_words",
           "vector_status"]


@attrs.frozen
class WordMatch:
    """How the words of a query meet one fact's words.

    Attributes:
        words: The words a search of the query looks for.
        stop_words: Words of the query left out as stop words.
        common: Words left out for being common to much of the store
            (:attr:`~ctxslots.stores.sanitize.QueryPolicy.max_doc_share`).
        stems: Each word's terms as the index stems it (the three lists above).
        shared: Words of ``words`` whose terms the fact's key, value or tags hold.
        in_context: Words of ``words`` only its context holds (they count half).
        left_out_shared: Stop words and common words the fact holds (they would
            have matched, had the search kept them).
    """

    words: tuple[str, ...]
    stop_words: tuple[str, ...]
    common: tuple[str, ...]
    # Compared, not hashed (a dict has no hash): equal matches still hash alike.
    stems: dict[str, tuple[str, ...]] = attrs.field(hash=False)
    shared: tuple[str, ...]
    in_context: tuple[str, ...]
    left_out_shared: tuple[str, ...]

    def to_dict(self) -> dict[str, object]:
        """JSON-ready data."""
        out = attrs.asdict(self)
        out["stems"] = {word: list(terms) for word, terms in self.stems.items()}
        return {k: list(v) if isinstance(v, tuple) else v for k, v in out.items()}


def match_words(core: StoreCore, fact_id: int, query: str) -> WordMatch:
    """Which words of ``query`` the fact ``fact_id`` (live, archived or expired) holds.

    :raises FactNotFoundError: No fact has this id.
    """
    backend = core.backend
    row = backend.get(check_id(fact_id)) or backend.get_archived(fact_id)
    if row is None:
        raise FactNotFoundError(fact_id)
    policy = core.planner.policy
    everything = query_tokens(query, attrs.evolve(policy, stop_words=frozenset()))
    stop = tuple(t for t in everything if t in policy.stop_words)
    kept = query_tokens(query, policy)
    words = tuple(core.planner.words(query))
    common = tuple(t for t in kept if t not in words)
    asked = [*words, *stop, *common]
    own_text = " ".join([row["key"] or "", row["value"], row["tags"].replace("\n", " ")])
    found = backend.terms([*asked, own_text, row.get("context") or ""])
    stems = {word: tuple(terms) for word, terms in zip(asked, found, strict=False)}
    own, context = set(found[-2]), set(found[-1])

    def holds(word: str, terms: set[str]) -> bool:
        return bool(stems[word]) and any(term in terms for term in stems[word])

    return WordMatch(
        words=words, stop_words=stop, common=common, stems=stems,
        shared=tuple(w for w in words if holds(w, own)),
        in_context=tuple(w for w in words if not holds(w, own) and holds(w, context)),
        left_out_shared=tuple(w for w in (*stop, *common) if holds(w, own | context)))


@attrs.frozen
class Located:
    """Where one fact stands in one search.

    Attributes:
        fact_id: The fact.
        depth: How deep each leg was read (and how many hits were ranked).
        pool: How deep fusion looks (the store's candidate pool): a fact found
            deeper by every leg that found it comes after those within it.
        words_searched: Whether the lexical leg ran (the query kept a word).
        vector_searched: Whether the vector leg ran.
        words_rank: Its 1-based place in the lexical leg, or ``None`` (not within ``depth``).
        bm25: Its BM25 value there (more negative is better).
        vector_rank: Its place in the vector leg, or ``None``.
        cosine: Its cosine to the query: from the vector leg, else from its
            stored vector (``None``: no vector leg, or no vector).
        left_out: Why ranking never ranks it though a leg found it
            (:func:`~.ranking.left_out`), or ``None``.
        hit: Its hit, with its trace, as the search ranks it (``None``: not
            among the first ``depth``).
        best: The highest final score of the search's hits (the first one's, unless a
            reranker moved another up), or ``None`` (no hits).
        hits: How many hits the search ranked (at most ``depth``).
    """

    fact_id: int
    depth: int
    pool: int
    words_searched: bool
    vector_searched: bool
    words_rank: int | None = None
    bm25: float | None = None
    vector_rank: int | None = None
    cosine: float | None = None
    left_out: str | None = None
    hit: Hit | None = None
    best: float | None = None
    hits: int = 0

    def to_dict(self) -> dict[str, object]:
        """JSON-ready data (the hit as its trace)."""
        out = attrs.asdict(self, recurse=False)
        out["hit"] = None if self.hit is None else self.hit.trace.to_dict()
        return out


def _cosine(core: StoreCore, fact_id: int, vector: np.ndarray) -> float | None:
    stored = core.backend.vectors_of([fact_id]).get(fact_id)
    if stored is None:
        return None
    norms = float(np.linalg.norm(stored) * np.linalg.norm(vector))
    return None if norms == 0 else round(float(np.dot(stored, vector) / norms), COSINE_DIGITS)


def locate(core: StoreCore, plan: QueryPlan, flt: FactFilter, hits: Callable[[int], list[Hit]],
           fact_id: int, depth: int) -> Located:
    """Where ``fact_id`` stands in the search of ``plan`` among the facts ``flt`` passes,
    ranked by ``hits(limit)`` (the search's own ranking), each leg read ``depth`` deep."""
    backend = core.backend
    vector = plan.vector if plan.vector is not None and np.any(plan.vector) else None
    found: dict[str, object] = {}
    for position, cand in enumerate(backend.lexical(plan, flt, depth) if plan.words else [], 1):
        if int(cand.row["id"]) == fact_id:
            found.update(words_rank=position, bm25=cand.score)
            break
    if vector is not None:
        nearest: Sequence[tuple[int, float]] = settled_nearest(
            lambda n: backend.vector_knn(vector, flt, n), depth)
        for position, (fid, cosine) in enumerate(nearest, 1):
            if fid == fact_id:
                found.update(vector_rank=position, cosine=cosine)
                break
        else:
            found["cosine"] = _cosine(core, fact_id, vector)
    ranked = hits(depth)
    hit = next((h for h in ranked if h.fact.id == fact_id), None)
    reason = None
    if hit is None and found.get("vector_rank") is not None:
        probe = Candidate(fact_id=fact_id, slot="", updated_at=0.0, score=0.0, confidence=1.0,
                          bm25=found.get("bm25"),  # type: ignore[arg-type]
                          cosine=found.get("cosine"))  # type: ignore[arg-type]
        reason = left_out(probe, core.ranking, fused=vector is not None)
    return Located(fact_id=fact_id, depth=depth, pool=core.candidate_pool,
                   words_searched=bool(plan.words), vector_searched=vector is not None,
                   left_out=reason, hit=hit, best=max((h.trace.final for h in ranked), default=None),
                   hits=len(ranked), **found)  # type: ignore[arg-type]


@attrs.frozen
class VectorStatus:
    """Whether a fact has a vector for the vector leg.

    Attributes:
        kept: The store keeps vectors (an embedder whose vectors searches read).
        present: The fact has a stored vector.
        model_id: The embedder that built the store's vectors, or ``None``.
        current: The vectors are the open embedder's own (not stale).
    """

    kept: bool
    present: bool
    model_id: str | None
    current: bool

    def describe(self) -> str:
        """One line for a person."""
        if not self.kept:
            return "no vector: this store searches by words only"
        if not self.current:
            return f"stale: the vectors were built by {self.model_id}; run reindex"
        if not self.present:
            return "missing: no vector yet (written in the background, or run reindex)"
        return f"indexed by {self.model_id}"


def vector_status(core: StoreCore, fact_id: int) -> VectorStatus:
    """Whether the fact ``fact_id`` has a vector, and whose."""
    core.check_open()
    fact_id = check_id(fact_id)
    kept = core.keeps_vectors or (core.embedder is not None and bool(core.ranking.vector_weight))
    if not kept:
        return VectorStatus(False, False, None, False)
    core.wait_for_vectors()
    state = core.backend.vector_state()
    present = bool(core.backend.vectors_of([fact_id]))
    return VectorStatus(True, present, state.model_id, core.vector_leg_ready)


class ExplainMethods:
    """The explaining methods of :class:`~ctxslots.FactStore`."""

    _core: StoreCore

    def match_words(self, fact_id: int, query: str) -> WordMatch:
        """Which words of ``query`` a search looks for, and which of them the fact
        ``fact_id`` holds as the index stems them (see :mod:`ctxslots.stores.explain`).

        :raises FactNotFoundError: No live, archived or expired fact has this id.
        :raises InvalidFactError: ``fact_id`` is not an id or ``query`` not a string.
        """
        if not isinstance(query, str):
            raise InvalidArgumentError("query must be a string", field="query", value=query)
        return match_words(self._core, fact_id, query)

    def vector_status(self, fact_id: int) -> VectorStatus:
        """Whether the fact ``fact_id`` has a vector for the vector leg, and whose.

        :raises InvalidFactError: ``fact_id`` is not an id.
        """
        return vector_status(self._core, fact_id)
