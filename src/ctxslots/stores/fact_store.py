"""FactStore: the public face of the fact store, over one storage engine.

The facade validates every input, ranks candidates (:mod:`.ranking`), embeds
texts for the vector leg, counts accesses and keeps co-recall links; the
engine behind it (:mod:`.backend`: SQLite for a path, PostgreSQL for a
``postgresql://`` URL) stores rows and gathers candidates. The public
interface speaks of facts, slots, scopes and hits only.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self, TextIO

import attrs
import numpy as np
import platformdirs

from .._secrets import safe_url
from ..errors import (
    CtxslotsError,
    FactNotFoundError,
    InvalidArgumentError,
    InvalidFactError,
    StoreError,
)
from ..model import Fact, Hit
from .backend.types import (
    META_EMBEDDER_DIMENSION,
    META_EMBEDDER_MODEL,
    Backend,
    FactFilter,
    visible_scopes,
)
from .engines import open_backend
from .links import RecentResults, strengthen
from .ranking import MODEL_VECTOR_WEIGHT, RankingPolicy
from .rerank import Boost, Reranker
from .sanitize import DEFAULT_POLICY, QueryPolicy
from .search import SearchRequest, check_limit, query_words, run_search
from .upkeep.consolidate import DEFAULT_THRESHOLD, ConsolidationReport, consolidate
from .upkeep.doctor import DoctorReport, doctor, reindex
from .upkeep.prune import PrunePolicy, PruneReport, prune
from .writes.access_writer import AccessWriter
from .writes.limits import Limits
from .writes.vector_writer import VectorWriter
from .writes.writer import Writer, check_id

if TYPE_CHECKING:
    from .transfer.report import ImportReport

__all__ = ["FactStore", "default_db_path"]

#: Store setting naming the embedder that built the vectors (a spec string).
_META_SPEC = "embedder.spec"


def default_db_path() -> Path:
    """Where the store lives when no location is given: ``$CTXSLOTS_DB``, else the
    user data directory (``~/.local/share/ctxslots/memory.db`` on Linux)."""
    env = os.environ.get("CTXSLOTS_DB")
    if env:
        return Path(env).expanduser()
    return Path(platformdirs.user_data_dir("ctxslots", appauthor=False)) / "memory.db"


def _location(path: str | os.PathLike[str] | None) -> str:
    if path is None:
        env = os.environ.get("CTXSLOTS_DB")
        return env if env and "://" in env else str(default_db_path())
    return os.fspath(path)


def _printable(path: object) -> str:
    """The store's location in a repr: a server URL without its password."""
    return safe_url(path) if isinstance(path, str) and "://" in path else repr(path)


def _check_pool(_store: Any, _attribute: Any, pool: object) -> None:
    if isinstance(pool, bool) or not isinstance(pool, int) or not 1 <= pool <= 10_000:
        raise InvalidArgumentError(f"candidate_pool must be an integer from 1 to 10000, "
                                   f"not {pool!r}", field="candidate_pool", value=pool)


@attrs.define
class FactStore:
    """Facts and memories of every slot, in one SQLite file or a PostgreSQL database.

    Use it as a context manager, or call :meth:`close` when done::

        with FactStore("memory.db") as store:
            store.upsert("user", "editor", "The user edits code in Helix.")
            hits = store.search("which editor?")

    Attributes:
        path: Where the store lives: a file path (SQLite), a
            ``postgresql://user@host/db`` URL (PostgreSQL, with the
            ``ctxslots[postgres]`` extra), or ``None`` for ``$CTXSLOTS_DB``,
            else :func:`default_db_path`.
        limits: Size limits and slot rules applied to every write.
        ranking: Decay constants per slot, reinforcement and fusion weights
            (after construction, with the vector weight resolved).
        query_policy: How query text becomes a lexical query (stop words,
            minimum token length).
        candidate_pool: How many candidates each retrieval leg contributes, and
            how deep fusion looks (1 to 10,000): the first hits never depend on
            ``limit``.
        clock: Returns the current time in Unix seconds (tests pass their own).
        embedder: What turns text into vectors for the vector leg: an object
            with ``model_id``, ``dimension`` and ``embed(texts)``, a spec string
            (``"hash"``, ``"sentence-transformers:PATH"``, ``"openai:MODEL"``),
            ``None`` for the default (``$CTXSLOTS_EMBEDDER``, else the hashing
            embedder), or ``False`` for no vector leg at all.
        vector_cache: Search an in-memory copy of the vectors, kept consistent
            with the store, instead of reading them on every search (SQLite).
            The first vector search starts loading it in the background
            (:meth:`load_vector_cache` loads it up front).
        rerank: ``rerank(query, hits) -> hits | None``, given every fused
            candidate before the limit (see :mod:`ctxslots.stores.rerank`).
        lexical_cache: Score the lexical leg from an in-memory copy of the
            index (SQLite; see :mod:`ctxslots.stores.sqlite.lexical_cache`):
            about 7x to 10x faster per search, for memory and a background load
            (about 2 s per 100,000 facts). For long-running agents.
        create: Create the store when it does not exist (the default); when
            false, a missing store is a :class:`~ctxslots.errors.StoreError` and
            nothing is created (read-only commands).
        vector_writes: When a written fact gets its vector: ``"inline"``, in
            the same transaction (``add`` returns after embedding);
            ``"background"``, just after it commits, on a thread that embeds
            everything queued since its last batch together (``add`` returns
            once the fact is durable and findable by words; this store's
            searches wait for the queue; see :meth:`wait_for_vectors`);
            ``"auto"`` (default): background for a real model on a file or a
            server, inline otherwise. Vectors are kept only when searches read
            them: not with the default hashing embedder and words-only search.
        access_writes: When a fact counted as shown (by a search, or by an
            assembly that put it in a prompt) gets its ``access_count`` and
            ``last_accessed`` written: ``"inline"``, before the call returns;
            ``"background"``, just after, on a thread that writes every count
            queued since its last transaction in one (a read in between shows
            the count before; :meth:`wait_for_writes` waits; :meth:`close` and
            a normal interpreter exit write what is queued, a crash loses it;
            inside :meth:`batch` counts join the batch); ``"auto"`` (default):
            background for a store opened with ``lexical_cache=True`` (a
            long-running agent, where the write is a third of a warm
            assembly), inline otherwise.
    """

    path: str | os.PathLike[str] | None = attrs.field(default=None, repr=_printable)
    limits: Limits = attrs.field(factory=Limits)
    ranking: RankingPolicy = attrs.field(factory=RankingPolicy)
    query_policy: QueryPolicy = DEFAULT_POLICY
    candidate_pool: int = attrs.field(default=100, validator=_check_pool)
    clock: Callable[[], float] = time.time
    embedder: Any = None
    vector_cache: bool = True
    rerank: Reranker | None = None
    lexical_cache: bool = False
    create: bool = True
    vector_writes: str = "auto"
    access_writes: str = "auto"
    _backend: Backend = attrs.field(init=False, repr=False)
    _writer: Writer = attrs.field(init=False, repr=False)
    _vectors_usable: bool = attrs.field(init=False, default=False, repr=False)
    _spec: str | None = attrs.field(init=False, default=None, repr=False)
    _vector_writer: VectorWriter | None = attrs.field(init=False, default=None, repr=False)
    _access_writer: AccessWriter | None = attrs.field(init=False, default=None, repr=False)
    _recent: RecentResults = attrs.field(init=False, factory=RecentResults, repr=False)
    _query_vectors: dict[str, np.ndarray] = attrs.field(init=False, factory=dict, repr=False)

    def __attrs_post_init__(self) -> None:
        self.path = _location(self.path)
        background_access = self._background_access()
        self._backend = open_backend(self.path, create=self.create,
                                     lexical_cache=self.lexical_cache,
                                     vector_cache=self.vector_cache)
        try:
            self._spec = self._resolve_embedder()
            if self.ranking.vector_weight is None:
                self.ranking = attrs.evolve(self.ranking, vector_weight=self._auto_vector_weight())
            self._vectors_usable = self._bind_embedder()
        except BaseException:
            self._backend.close()
            raise
        self._writer = Writer(self._backend, self.limits, self.clock, self._embed_pending,
                              self._committed)
        if self._background_vectors():
            self._vector_writer = VectorWriter(
                lambda: open_backend(str(self.path), create=False, vector_cache=False),
                self.embedder.embed)
        if background_access:
            self._access_writer = self._writer.access = AccessWriter(
                lambda: open_backend(str(self.path), create=False, vector_cache=False))

    def _background_access(self) -> bool:
        if self.access_writes not in ("auto", "inline", "background"):
            raise InvalidFactError("access_writes must be 'auto', 'inline' or 'background', not "
                                   f"{self.access_writes!r}", field="access_writes",
                                   value=self.access_writes)
        if str(self.path) == ":memory:" or self.access_writes == "inline":
            return False
        return self.access_writes == "background" or bool(self.lexical_cache)

    def _background_vectors(self) -> bool:
        if self.vector_writes not in ("auto", "inline", "background"):
            raise InvalidFactError("vector_writes must be 'auto', 'inline' or 'background', not "
                                   f"{self.vector_writes!r}", field="vector_writes",
                                   value=self.vector_writes)
        from .embedders import HashingEmbedder

        if self.embedder is False or str(self.path) == ":memory:" \
                or self.vector_writes == "inline":
            return False
        return self.vector_writes == "background" or not isinstance(self.embedder,
                                                                     HashingEmbedder)

    def _resolve_embedder(self) -> str | None:
        """Turn the ``embedder`` setting into an embedder; return its spec when known.

        With no embedder given (and no ``$CTXSLOTS_EMBEDDER``), a store reopens
        with the embedder that built its vectors, as recorded in the store.
        """
        from .embedders import EMBEDDER_ENV, embedder_from_spec

        if self.embedder is not None and not isinstance(self.embedder, str):
            return None
        spec = self.embedder or os.environ.get(EMBEDDER_ENV, "").strip() or None
        if spec is None:
            spec = self._backend.get_meta(_META_SPEC) or "hash"
            try:
                self.embedder = embedder_from_spec(spec)
            except CtxslotsError as exc:
                warnings.warn(f"the embedder that built this store's vectors ({spec}) cannot be "
                              f"loaded ({exc}); searching by words only", RuntimeWarning,
                              stacklevel=4)
                self.embedder = embedder_from_spec("hash")
                return "hash"
            return spec
        self.embedder = embedder_from_spec(spec)
        return spec

    def _auto_vector_weight(self) -> float:
        from .embedders import HashingEmbedder

        if self.embedder is False or isinstance(self.embedder, HashingEmbedder):
            return 0.0
        return MODEL_VECTOR_WEIGHT

    def _bind_embedder(self) -> bool:
        """Bind a store without vectors to the embedder; whether its vectors are usable."""
        if self.embedder is False:
            return False
        backend = self._backend
        model = backend.get_meta(META_EMBEDDER_MODEL)
        if model is None:
            with backend.transaction():  # several processes opening a new store bind it once
                model = backend.get_meta(META_EMBEDDER_MODEL)
                if model is None:
                    self._reset_vectors()
                    return True
        dimension = backend.get_meta(META_EMBEDDER_DIMENSION)
        usable = (model, dimension) == (self.embedder.model_id, str(self.embedder.dimension))
        if not usable and backend.vector_state().vectors == 0:
            # Nothing built by the old embedder to lose (a store that kept no
            # vectors): bind it to this one; `reindex` embeds the facts it has.
            self._reset_vectors()
            return True
        if not usable and self.ranking.vector_weight:
            warnings.warn(
                f"this store's vectors were built by {model}, not by "
                f"{self.embedder.model_id}: searches use words only and new facts get no "
                "vector until `reindex` rebuilds them with this embedder", RuntimeWarning,
                stacklevel=4)
        return usable

    def _reset_vectors(self) -> None:
        """Drop every vector and bind the store to this embedder, recording its spec."""
        with self._backend.transaction():
            self._backend.reset_vectors(self.embedder.model_id, self.embedder.dimension)
            if self._spec is not None:
                self._backend.set_meta(_META_SPEC, self._spec)

    # -- lifecycle ---------------------------------------------------------

    @property
    def backend(self) -> Backend:
        """The storage engine (for the store's own maintenance modules and engine tests)."""
        return self._backend

    @property
    def writer(self) -> Writer:
        """The write path (for the store's own import code: batches, queued vectors)."""
        return self._writer

    @property
    def engine(self) -> str:
        """``"sqlite"`` or ``"postgresql"``."""
        return self._backend.engine

    def close(self) -> None:
        """Close the store (idempotent): every queued vector is written first,
        background loads are stopped."""
        if self._access_writer is not None:
            self._access_writer.close()
        if self._vector_writer is not None:
            self._vector_writer.close()
        self._backend.close()

    def __enter__(self) -> Self:
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
        with self._writer.writing():
            yield self

    @property
    def keeps_vectors(self) -> bool:
        """Whether written facts get vectors: an embedder that built this store's
        vectors, and a search that reads them (a vector weight above 0)."""
        return self._vectors_usable and bool(self.ranking.vector_weight)

    def _embed_pending(self, pending: dict[int, tuple[str, str, str]]) -> None:
        """Embed the values written in a transaction and store their vectors before it commits."""
        if not self.keeps_vectors or not pending or self._vector_writer is not None:
            return
        ids = list(pending)
        vectors = self.embedder.embed([pending[i][2] for i in ids])
        self._backend.put_vectors([(i, pending[i][0], pending[i][1]) for i in ids], vectors)

    def _committed(self, pending: dict[int, tuple[str, str, str]]) -> None:
        """Queue the vectors of what a committed transaction wrote (background writes)."""
        if self._vector_writer is not None and self.keeps_vectors and pending:
            self._vector_writer.put(pending)

    def wait_for_vectors(self, timeout: float | None = None) -> bool:
        """Wait until every fact written through this store has its vector.

        Only needed with background vector writes (``vector_writes``); searches
        and consolidation of this store wait by themselves. Returns whether the
        queue emptied within ``timeout`` seconds.
        """
        return True if self._vector_writer is None else self._vector_writer.wait(timeout)

    def wait_for_writes(self, timeout: float | None = None) -> bool:
        """Wait until everything this store writes in the background has landed:
        vectors (``vector_writes``) and access counts (``access_writes``).

        Returns whether it did within ``timeout`` seconds (each queue gets the
        whole timeout). Inside :meth:`batch` nothing is waited for: the
        background writers wait for the batch's transaction.
        """
        if self._backend.in_transaction:
            return False
        counted = True if self._access_writer is None else self._access_writer.wait(timeout)
        return self.wait_for_vectors(timeout) and counted

    def _settle_access(self) -> None:
        """Wait for queued access counts before work that reads them (pruning, exports)."""
        if self._access_writer is not None and not self._backend.in_transaction:
            self._access_writer.wait()

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
        observed_at: Any = None,
        context: str | None = None,
    ) -> Fact:
        """Write a keyed fact; a fact with the same slot, scope and key is replaced.

        The replaced value is kept in history (see :meth:`history`). Writing the
        same value again refreshes its metadata and ``updated_at`` without a
        history entry. Reinforcement score and access counts carry over.

        :param observed_at: When the fact was said or observed (a datetime or
            Unix seconds; default: now). Decay and ages count from it.
        :param context: Words that make the fact findable without being part of
            it (see :meth:`add`). Without one, a fact written again with the same
            value keeps its context; a new value drops it.
        :raises InvalidFactError: A field is malformed or over its limit; nothing
            is written.
        """
        return self._writer.upsert(slot, key, value, scope=scope, tags=tags,
                                   confidence=confidence, source=source,
                                   expires_at=expires_at, observed_at=observed_at,
                                   context=context)

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
        observed_at: Any = None,
        context: str | None = None,
    ) -> Fact:
        """Write a free-form memory (a fact without a key).

        An identical live memory of the same slot and scope is returned instead
        of writing a copy (:meth:`find_memory` tells beforehand).

        :param observed_at: When the memory was said or observed (a datetime or
            Unix seconds; default: now).
        :param context: Words that make the memory findable without being part
            of it: the message it answers, the turns before it ("It was Matt
            Patterson" is found by "Who did the user meet?" when its context is
            that question). Searched by words at half the weight of the memory's
            own (:data:`~ctxslots.stores.backend.types.CONTEXT_WEIGHT`), never
            embedded and never shown in a prompt; exported and imported with the
            memory. At most ``limits.max_context_bytes``; blank is none.
        :raises InvalidFactError: A field is malformed or over its limit; nothing
            is written.
        """
        return self._writer.add(slot, value, scope=scope, tags=tags, confidence=confidence,
                                source=source, expires_at=expires_at, observed_at=observed_at,
                                context=context)

    def update(
        self,
        fact_id: int,
        *,
        value: str | None = None,
        tags: Iterable[str] | None = None,
        confidence: float | None = None,
        source: str | None = None,
        context: str | None = None,
    ) -> Fact:
        """Change some fields of a live fact by id; ``None`` keeps a field as it is
        (``context=""`` removes the context).

        Works for keyed facts and free memories alike. A changed value or tag
        list keeps the old one in :meth:`history`, as :meth:`upsert` does.

        :raises FactNotFoundError: No live fact has this id.
        :raises InvalidFactError: A field is malformed or over its limit; nothing
            is written.
        """
        return self._writer.update(fact_id, value=value, tags=tags, confidence=confidence,
                                   source=source, context=context)

    def forget(self, fact_id: int, *, reason: str | None = None) -> Fact:
        """Move a fact to the archive, where ``search(include_archive=True)`` finds it.

        :raises FactNotFoundError: No live fact has this id.
        """
        return self._writer.forget(fact_id, reason=reason)

    def reinforce(self, fact_id: int, amount: float = 3.0) -> Fact:
        """Add ``amount`` (default 3) to a fact's reinforcement score.

        The facts this store's recent searches returned together with it get a
        stronger co-recall link to it (see :mod:`ctxslots.stores.links`).

        :raises FactNotFoundError: No live fact has this id.
        :raises InvalidFactError: ``amount`` is not a number from 0 to 1,000.
        """
        return self._adjust_score(fact_id, self.limits.score_step(amount))

    def demote(self, fact_id: int, amount: float = 1.0) -> Fact:
        """Take ``amount`` (default 1) from a fact's reinforcement score.

        :raises FactNotFoundError: No live fact has this id.
        :raises InvalidFactError: ``amount`` is not a number from 0 to 1,000.
        """
        return self._adjust_score(fact_id, -self.limits.score_step(amount))

    def _adjust_score(self, fact_id: int, delta: float) -> Fact:
        fact_id = check_id(fact_id)
        now = self.clock()
        with self._backend.transaction():
            if not self._backend.adjust_score(fact_id, delta, live_at=now):
                raise FactNotFoundError(fact_id)
            if delta > 0:
                strengthen(self._backend, fact_id, self._recent.partners(fact_id), now)
            row = self._backend.get(fact_id)
        assert row is not None
        return Fact.from_row(row)

    # -- reads -------------------------------------------------------------

    def get(self, fact_id: int, *, include_archive: bool = False) -> Fact | None:
        """Return the live fact with this id, or ``None`` (expired facts are not live).

        Reading by id is not shown to a model by itself, so it does not count as
        an access.
        """
        fact_id = check_id(fact_id)
        row = self._backend.get(fact_id, live_at=self.clock())
        if row is not None:
            return Fact.from_row(row)
        if include_archive:
            row = self._backend.get_archived(fact_id)
            if row is not None:
                return Fact.from_row(row, archived=True)
        return None

    def get_by_key(self, slot: str, key: str, *, scope: str | None = None) -> Fact | None:
        """Return the live fact with this slot, scope and key, or ``None``."""
        row = self._backend.get_by_key(self.limits.slot(slot), self.limits.scope(scope),
                                       self.limits.key(key), live_at=self.clock())
        return Fact.from_row(row) if row else None

    def find_memory(self, slot: str, value: str, *, scope: str | None = None) -> Fact | None:
        """The live free memory of ``slot`` and ``scope`` whose value is exactly ``value``
        (as it would be stored), or ``None``: what :meth:`add` returns instead of
        writing a copy.

        :raises InvalidFactError: ``slot``, ``value`` or ``scope`` is malformed.
        """
        stored, _ = self.limits.screen(value)
        now = self.clock()
        found = self._backend.find_same(self.limits.slot(slot), self.limits.scope(scope), None,
                                        stored, live_at=now)
        row = None if found is None else self._backend.get(found, live_at=now)
        return None if row is None else Fact.from_row(row)

    def history(self, fact_id: int) -> list[Fact]:
        """Earlier values of a keyed fact, oldest first, as facts with the same id.

        Each returned fact's ``updated_at`` is when that value was written.
        """
        return [Fact.from_row({
            "id": e.fact_id, "slot": e.slot, "scope": e.scope, "key": e.key, "value": e.value,
            "tags": e.tags, "source": e.source, "confidence": e.confidence, "score": 0.0,
            "created_at": e.valid_from, "updated_at": e.valid_from, "observed_at": e.valid_from,
            "last_accessed": None, "access_count": 0, "expires_at": e.valid_to,
            "superseded_by": None,
        }) for e in self._backend.history(check_id(fact_id))]

    def timeline(
        self, fact_id: int, *, before: int = 5, after: int = 5, scope: str | None = None
    ) -> list[Fact]:
        """A live fact and the live facts observed just before and after it, oldest first.

        Only facts visible from ``scope`` (that scope and global facts) are
        considered, so a timeline never shows another scope's facts.

        :param before: How many earlier facts (0 to 100).
        :param after: How many later facts (0 to 100).
        :raises FactNotFoundError: No live fact with this id is visible from ``scope``.
        :raises InvalidFactError: ``before`` or ``after`` is out of range.
        """
        fact_id = check_id(fact_id)
        for name, count in (("before", before), ("after", after)):
            if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= 100:
                raise InvalidFactError(f"{name} must be an integer from 0 to 100, not {count!r}",
                                       field=name, value=count)
        flt = self.filter(None, scope)
        anchor = self._backend.rows_by_ids([fact_id], flt)
        if not anchor:
            raise FactNotFoundError(fact_id)
        earlier, later = self._backend.neighbours(anchor[0], flt, before=before, after=after)
        return [Fact.from_row(r) for r in [*reversed(earlier), anchor[0], *later]]

    def facts(
        self, *, slots: Sequence[str] | None = None, scope: str | None = None,
        include_expired: bool = False,
    ) -> list[Fact]:
        """Every live fact of the given slots in ``scope`` (and global ones), by id."""
        flt = self.filter(slots, scope, live=not include_expired)
        return [Fact.from_row(r) for r in self._backend.select(flt)]

    def important(self, slot: str, *, scope: str | None = None, limit: int = 5) -> list[Fact]:
        """The most important live facts of ``slot`` visible from ``scope``, best first.

        A fact counts when it is keyed or reinforced (score above 0); the order
        is reinforcement score, access count and confidence (highest first),
        keyed facts before free memories, most recently updated, then id. The
        user section's profile shows them. Reading them is not an access.

        :raises InvalidFactError: ``slot`` or ``scope`` is malformed, or
            ``limit`` is not from 1 to 1000.
        """
        limit = check_limit(limit)
        rows = self._backend.important(self.filter([slot], scope), limit)
        return [Fact.from_row(r) for r in rows]

    def filter(self, slots: Sequence[str] | str | None, scope: str | None, *,
               live: bool = True, include_superseded: bool = True, now: float | None = None
               ) -> FactFilter:
        """The checked filter for facts of ``slots`` visible from ``scope``.

        :raises InvalidFactError: A slot or the scope is malformed, or ``slots``
            is empty.
        """
        checked = None
        if slots is not None:
            names = [slots] if isinstance(slots, str) else list(slots)
            checked = tuple(self.limits.slot(s) for s in names)
            if not checked:
                raise InvalidFactError("slots must name at least one slot", field="slots",
                                       value=slots)
        live_at = (self.clock() if now is None else now) if live else None
        return FactFilter(scopes=visible_scopes(self.limits.scope(scope)), slots=checked,
                          live_at=live_at, include_superseded=include_superseded)

    # -- search ------------------------------------------------------------

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
        now: Any = None,
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
        :param limit: Most hits to return, 1 to 1000. The first hits do not
            depend on it: every search gathers the same candidates.
        :param include_archive: Also search forgotten facts (marked ``archived``).
        :param track_access: Count the returned facts as shown to a model.
        :param boost: ``boost(fact) -> factor`` multiplying each candidate's final
            score before the limit (recorded as ``trace.extra["boost"]``).
        :param include_superseded: Also return facts that a newer near-duplicate
            hides (see :meth:`consolidate`).
        :param now: The moment to rank from (a datetime or Unix seconds;
            default: the clock), so a replayed history ranks as it would have
            then: decay and ages count to it, and facts expired by then are left out.
        :raises InvalidFactError: ``query``, ``slots``, ``scope``, ``limit`` or
            ``now`` is malformed, or ``boost`` returned a negative or non-finite
            factor.
        """
        if not isinstance(query, str):
            raise InvalidArgumentError("query must be a string", field="query", value=query)
        moment = self.clock() if now is None else self.limits.moment(now, "now")
        if self._vector_writer is not None and self.vector_leg_ready:
            self._vector_writer.wait()
        request = SearchRequest(
            query=query, flt=self.filter(slots, scope, include_superseded=include_superseded,
                                         now=moment),
            limit=limit, include_archive=include_archive, boost=boost, now=moment)
        hits = run_search(self._backend, request, ranking=self.ranking,
                          query_policy=self.query_policy, pool=self.candidate_pool,
                          query_vector=self._query_vector if self.vector_leg_ready else None,
                          rerank=self.rerank)
        self._recent.add(h.fact.id for h in hits if not h.fact.archived)
        if track_access:
            hits = self._writer.track_access(hits, self.clock())
        return hits

    # -- async face ----------------------------------------------------------

    async def asearch(self, query: str, **options: Any) -> list[Hit]:
        """:meth:`search` for async agent loops: runs in a worker thread, so the
        event loop keeps serving while the engine and the embedder work."""
        return await asyncio.to_thread(functools.partial(self.search, query, **options))

    async def aadd(self, slot: str, value: str, **options: Any) -> Fact:
        """:meth:`add` in a worker thread."""
        return await asyncio.to_thread(functools.partial(self.add, slot, value, **options))

    async def aupsert(self, slot: str, key: str, value: str, **options: Any) -> Fact:
        """:meth:`upsert` in a worker thread."""
        return await asyncio.to_thread(functools.partial(self.upsert, slot, key, value, **options))

    async def aupdate(self, fact_id: int, **options: Any) -> Fact:
        """:meth:`update` in a worker thread."""
        return await asyncio.to_thread(functools.partial(self.update, fact_id, **options))

    async def aforget(self, fact_id: int, *, reason: str | None = None) -> Fact:
        """:meth:`forget` in a worker thread."""
        return await asyncio.to_thread(functools.partial(self.forget, fact_id, reason=reason))

    def query_words(self, query: str) -> list[str]:
        """The words a search of ``query`` looks for: sanitized, stop words and
        words common to much of the store left out (for debugging a search)."""
        if not isinstance(query, str):
            raise InvalidArgumentError("query must be a string", field="query", value=query)
        return query_words(self._backend, query, self.query_policy)

    def touch(self, fact_ids: Iterable[int]) -> int:
        """Count these facts as shown to a model: ``access_count + 1``, ``last_accessed = now``.

        For callers that search with ``track_access=False`` and show only some
        hits (the prompt assembler counts the facts that made it into the
        prompt). Ids of missing or archived facts are ignored; returns how many
        facts were counted, or, when counts are written in the background
        (``access_writes``), how many distinct ids were queued.

        :raises InvalidFactError: An id is not an integer.
        """
        ids = list(dict.fromkeys(check_id(i) for i in fact_ids))
        return self._writer.touch(ids, self.clock()) if ids else 0

    #: Query vectors kept for repeated searches of the same text.
    QUERY_VECTORS_KEPT = 32

    def _query_vector(self, query: str) -> np.ndarray:
        # A prompt assembly searches each memory slot with the same message, so
        # the last few query vectors are kept: a real model embeds it once a turn.
        vectors = self._query_vectors
        vector = vectors.pop(query, None)
        if vector is None:
            vector = np.array(self.embedder.embed([query])[0], dtype=np.float32)
            vector.setflags(write=False)
        vectors[query] = vector
        while len(vectors) > self.QUERY_VECTORS_KEPT:
            del vectors[next(iter(vectors))]
        return vector

    @property
    def vector_leg_ready(self) -> bool:
        """Whether searches can use the vector leg (an embedder, and vectors it built)."""
        return self._vectors_usable

    def load_lexical_cache(self, timeout: float | None = None) -> bool:
        """Load the in-memory lexical copy now instead of in the background (SQLite).

        Returns whether the copy is loaded (false only when ``timeout`` seconds
        passed first).

        :raises StoreError: The store was opened without ``lexical_cache=True``,
            its engine has no such copy, or loading failed.
        """
        load = getattr(self._backend, "load_lexical_cache", None)
        if load is None:
            raise StoreError(f"the {self.engine} engine keeps no in-memory lexical copy",
                             path=str(self.path))
        return bool(load(timeout))

    def load_vector_cache(self, timeout: float | None = None) -> bool:
        """Load the in-memory copy of the vectors now instead of in the background (SQLite).

        :raises StoreError: The store was opened with ``vector_cache=False``,
            has no usable vectors, its engine keeps no such copy, or loading failed.
        """
        if not self.vector_leg_ready:
            raise StoreError("this store has no usable vector index (no embedder, or vectors "
                             "built by another one: run reindex)", path=str(self.path))
        load = getattr(self._backend, "load_vector_cache", None)
        if load is None:
            raise StoreError(f"the {self.engine} engine keeps no in-memory vector copy",
                             path=str(self.path))
        return bool(load(timeout))

    # -- maintenance -------------------------------------------------------

    def doctor(self) -> DoctorReport:
        """Check the store's integrity, its full-text index and its vectors."""
        return doctor(self)

    def reindex(self, *, progress: Callable[[int, int], None] | None = None) -> int:
        """Rebuild every derived index and every vector from the facts; return facts embedded."""
        self.wait_for_vectors()
        count = reindex(self, reset_vectors=self._reset_vectors, progress=progress)
        self._vectors_usable = self.embedder is not False
        return count

    def consolidate(
        self, *, threshold: float = DEFAULT_THRESHOLD, fact_ids: Iterable[int] | None = None,
        dry_run: bool = False,
    ) -> ConsolidationReport:
        """Mark older near-duplicates superseded by the newer fact of the same slot and scope.

        Superseded facts are never deleted: search hides them unless
        ``include_superseded=True``, the survivor's ``trace.hides`` counts them,
        and pruning archives them first. See :mod:`ctxslots.stores.upkeep.consolidate`.

        :param threshold: Cosine similarity above which two facts are duplicates.
        :param fact_ids: Only check these facts against older ones (``None``: all).
        :param dry_run: Only report what would be marked.
        :raises StoreError: The store has no usable vector index.
        """
        self.wait_for_vectors()
        return consolidate(self, threshold=threshold, fact_ids=fact_ids, dry_run=dry_run)

    def prune(self, policy: PrunePolicy | None = None, *, dry_run: bool = False) -> PruneReport:
        """Move facts over the policy's caps to the archive (never deleting them).

        Over a slot's cap (counted per scope), the unprotected facts with the
        lowest retention go first; see :mod:`ctxslots.stores.upkeep.prune` for the rule.

        :param policy: Caps and protections (default: :class:`PrunePolicy`).
        :param dry_run: Only report what would move.
        """
        self._settle_access()
        return prune(self, PrunePolicy() if policy is None else policy, dry_run=dry_run)

    # -- flush progress ----------------------------------------------------

    def flush_progress(self, conversation: str) -> tuple[int, str] | None:
        """``(messages_read, fingerprint)`` recorded for a conversation, or ``None``.

        Kept for :class:`~ctxslots.MemoryFlusher`.
        """
        return self._backend.read_progress(conversation)

    def record_flush_progress(self, conversation: str, messages_read: int,
                              fingerprint: str) -> None:
        """Record how far a conversation was read, inside the current :meth:`batch`.

        :raises StoreError: Called outside a :meth:`batch`.
        """
        if not self._backend.in_transaction:
            raise StoreError("flush progress is recorded inside store.batch(), with the facts",
                             path=str(self.path))
        self._backend.write_progress(conversation, messages_read, fingerprint, self.clock())

    # -- export and import ---------------------------------------------------

    def export_jsonl(self, fp: TextIO, **options: Any) -> int:
        """Write facts, archive, history and links as JSON lines; return the facts written.

        See :func:`ctxslots.stores.transfer.formats.export_jsonl` for the options.
        """
        self._settle_access()
        from .transfer.formats import export_jsonl

        return export_jsonl(self, fp, **options)

    def import_jsonl(self, fp: TextIO, **options: Any) -> ImportReport:
        """Read what :meth:`export_jsonl` wrote, in one transaction.

        See :func:`ctxslots.stores.transfer.formats.import_jsonl` for the options.

        :raises InvalidImportError: A line is malformed; nothing is written.
        """
        from .transfer.formats import import_jsonl

        return import_jsonl(self, fp, **options)

    def export_markdown(self, directory: str | os.PathLike[str] | None = None,
                        **options: Any) -> str | list[Path]:
        """Write the live facts as Markdown bullets (a text, or one file per slot).

        See :func:`ctxslots.stores.transfer.formats.export_markdown`.
        """
        from .transfer.formats import export_markdown

        return export_markdown(self, directory, **options)

    def import_markdown(self, path_or_text: str | os.PathLike[str], *, slot: str,
                        **options: Any) -> ImportReport:
        """Read ``MEMORY.md``-style bullets into ``slot``, skipping duplicates.

        See :func:`ctxslots.stores.transfer.formats.import_markdown`.

        :raises InvalidImportError: A bullet is refused; nothing is written.
        """
        from .transfer.formats import import_markdown

        return import_markdown(self, path_or_text, slot=slot, **options)

    def stats(self) -> dict[str, Any]:
        """Counts per slot and scope, archive and history sizes, engine facts."""
        groups = self._backend.group_counts(live_at=self.clock())
        counts = self._backend.counts()
        info = self._backend.info()
        return {
            **info,
            "path": str(self.path) if self.engine == "sqlite" else info["location"],
            "facts": sum(g[2] for g in groups),
            "expired": sum(g[3] for g in groups),
            "archived": counts["archived"],
            "history": counts["history"],
            "by_slot": [{"slot": slot, "scope": scope or None, "facts": n, "expired": expired}
                        for slot, scope, n, expired in groups],
        }
