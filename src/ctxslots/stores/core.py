"""StoreCore: what the store's helpers share, and how a store is opened.

:class:`~ctxslots.FactStore` is the public face; it owns one :class:`StoreCore`
and hands it to its helpers (search, links, upkeep, transfer). A helper takes
the core, never the facade, so no helper imports :mod:`.fact_store`.
"""

from __future__ import annotations

import inspect
import os
import time
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from .._checks import names
from ..errors import InvalidArgumentError, InvalidFactError, StoreClosedError
from .backend import Backend, FactFilter, visible_scopes, visible_to
from .embedders import Embedder, Vectors
from .embedders.binding import (
    EmbedderBinding,
    EmbedderChoice,
    EmbedderSetting,
    bind_embedder,
    given_embedder,
)
from .engines import open_backend
from .links import RecentResults
from .narrowing import Narrowing
from .owners import ANY, DEFAULT_AGENT, DEFAULT_USER, Owners
from .query import QueryPlanner
from .ranking import MODEL_VECTOR_WEIGHT, RankingPolicy
from .sanitize import QueryPolicy
from .writes.access_writer import AccessWriter
from .writes.background import BackgroundWriter
from .writes.limits import Limits
from .writes.vector_writer import VectorWriter
from .writes.vectors import VectorSink
from .writes.writer import Writer

__all__ = ["StoreCore", "StoreOptions", "open_core"]

_WRITE_MODES = ("auto", "inline", "background")


def _check_mode(_options: object, attribute: attrs.Attribute[str], value: object) -> None:
    if value not in _WRITE_MODES:
        raise InvalidFactError(f"{attribute.name} must be 'auto', 'inline' or 'background', "
                               f"not {value!r}", field=attribute.name, value=value)


def _check_pool(_options: object, _attribute: object, pool: object) -> None:
    if isinstance(pool, bool) or not isinstance(pool, int) or not 1 <= pool <= 10_000:
        raise InvalidArgumentError(f"candidate_pool must be an integer from 1 to 10000, "
                                   f"not {pool!r}", field="candidate_pool", value=pool)


def _an(kind: type) -> Callable[[object, attrs.Attribute[Any], object], None]:
    def check(_options: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if not isinstance(value, kind):
            raise InvalidArgumentError(f"{attribute.name} must be a {kind.__name__}, not "
                                       f"{value!r}", field=attribute.name, value=value)
    return check


def _check_clock(_options: object, _attribute: object, clock: object) -> None:
    if not callable(clock):
        raise InvalidArgumentError(f"clock must be a function returning Unix seconds, not "
                                   f"{clock!r}", field="clock", value=clock)


#: What :func:`inspect.getattr_static` answers for an attribute an object lacks.
_ABSENT = object()


def _check_embedder(_options: object, _attribute: object, setting: object) -> None:
    # Only the method is called for: reading ``dimension`` may load a model, so the
    # attributes are looked up without running a property.
    if setting is None or setting is False or isinstance(setting, (str, EmbedderChoice)):
        return
    if setting is True or not callable(getattr(setting, "embed", None)):
        raise InvalidArgumentError(f"embedder must be a spec such as 'hash', an embedder "
                                   f"object, None or False, not {setting!r}",
                                   field="embedder", value=setting)
    # A wrapper that hands attributes on through __getattr__ is taken at its word.
    lacking = [] if hasattr(type(setting), "__getattr__") else [
        name for name in ("model_id", "dimension")
        if inspect.getattr_static(setting, name, _ABSENT) is _ABSENT]
    if lacking:
        raise InvalidArgumentError(
            f"embedder {type(setting).__name__} has embed() but no {' or '.join(lacking)}: an "
            "embedder object has model_id (a name kept with its vectors), dimension and "
            "embed(texts)", field="embedder", value=setting)


@attrs.frozen
class StoreOptions:
    """How a store is opened (the settings of :class:`~ctxslots.FactStore`, checked).

    Attributes are those of :class:`~ctxslots.FactStore` of the same names.
    """

    limits: Limits = attrs.field(factory=Limits, validator=_an(Limits))
    ranking: RankingPolicy = attrs.field(factory=RankingPolicy, validator=_an(RankingPolicy))
    query_policy: QueryPolicy = attrs.field(factory=QueryPolicy, validator=_an(QueryPolicy))
    candidate_pool: int = attrs.field(default=100, validator=_check_pool)
    clock: Callable[[], float] = attrs.field(default=time.time, validator=_check_clock)
    embedder: EmbedderSetting = attrs.field(default=None, validator=_check_embedder)
    vector_cache: bool = True
    lexical_cache: bool = False
    create: bool = True
    vector_writes: str = attrs.field(default="auto", validator=_check_mode)
    access_writes: str = attrs.field(default="auto", validator=_check_mode)
    user: str | None = None
    agent: str | None = None
    pool_size: int | None = None


@attrs.define
class StoreCore:
    """The engine and the settings every part of a store works with.

    Attributes:
        location: Where the store lives (a file path or a server URL).
        backend: The storage engine.
        limits: The checks every write passes.
        ranking: Decay, reinforcement and fusion settings (vector weight resolved).
        query_policy: How text becomes a lexical query.
        candidate_pool: Candidates each retrieval leg contributes.
        clock: The current time in Unix seconds.
        embedding: The embedder and whether the stored vectors are its own.
        writer: The write path.
        planner: Turns a query text into its words and vector, once per search.
        recent: The last searches' results (for co-recall links).
        vector_writer: Writes vectors in the background (``None``: inline).
        access_writer: Writes access counts in the background (``None``: inline).
    """

    location: str
    backend: Backend
    limits: Limits
    ranking: RankingPolicy
    query_policy: QueryPolicy
    candidate_pool: int
    clock: Callable[[], float]
    embedding: EmbedderBinding
    writer: Writer
    planner: QueryPlanner
    recent: RecentResults = attrs.Factory(RecentResults)
    vector_writer: VectorWriter | None = None
    access_writer: AccessWriter | None = None
    _closed: bool = False

    def __attrs_post_init__(self) -> None:
        writers: list[BackgroundWriter] = [
            w for w in (self.vector_writer, self.access_writer) if w is not None]
        if writers:
            # Dropped unclosed, the store would leave each writer's thread waiting for work
            # for good, holding a connection of its own.
            weakref.finalize(self, _stop_writers, writers, os.getpid()).atexit = False

    @property
    def embedder(self) -> Embedder | None:
        """The embedder, or ``None`` for a store with no vector leg."""
        return self.embedding.embedder

    def embed(self, texts: Sequence[str]) -> Vectors:
        """The embedder's vectors of ``texts`` (only called where a store keeps vectors)."""
        return self.embedding.embed(texts)

    @property
    def vector_leg_ready(self) -> bool:
        """Whether searches can use the vector leg (an embedder, and vectors it built)."""
        return self.embedding.usable

    @property
    def keeps_vectors(self) -> bool:
        """Whether written facts get vectors: an embedder that built the store's
        vectors, and searches that read them (a vector weight above 0)."""
        return self.writer.vectors.keeps

    def filter(self, slots: Sequence[str] | str | None, owners: Owners, *,
               live: bool = True, include_superseded: bool = True, now: float | None = None,
               narrow: Narrowing | None = None) -> FactFilter:
        """The checked filter for the facts of ``slots`` that ``owners`` see: theirs and
        the shared ones (an owner given as :data:`~.owners.ANY`: every one).

        :raises InvalidFactError: A slot, an owner or a narrowing is malformed, or
            ``slots`` is empty.
        """
        checked = None
        if slots is not None:
            checked = tuple(self.limits.slot(s) for s in names(slots, "slots"))
            if not checked:
                raise InvalidFactError("slots must name at least one slot", field="slots",
                                       value=slots)
        live_at = (self.clock() if now is None else now) if live else None
        users, agents, scopes = self.sees(owners)
        flt = FactFilter(scopes=scopes, slots=checked, live_at=live_at,
                         include_superseded=include_superseded, users=users, agents=agents)
        return flt if narrow is None else narrow.apply(flt, self.limits)

    def sees(self, owners: Owners) -> tuple[tuple[str, ...] | None, ...]:
        """The stored ``(users, agents, scopes)`` a request of ``owners`` sees."""
        lim = self.limits
        user, agent, scope = owners.user, owners.agent, owners.scope
        return (None if user is ANY else visible_to(
                    self.writer.default_user if user is None else lim.owner(user, "user")),
                None if agent is ANY else visible_to(
                    self.writer.default_agent if agent is None else lim.owner(agent, "agent")),
                None if scope is ANY else visible_scopes(lim.scope(scope)))

    def owner_check(self, owners: Owners) -> FactFilter | None:
        """For a fact found by id: ``None`` when no owner is named (any fact), else the
        filter of what the named owners see (the others: any)."""
        if owners == Owners():
            return None
        return self.filter(None, Owners(ANY if owners.user is None else owners.user,
                                        ANY if owners.agent is None else owners.agent,
                                        ANY if owners.scope is None else owners.scope),
                           live=False)

    def wait_for_vectors(self, timeout: float | None = None) -> bool:
        """Wait until every fact written through this store has its vector; false when
        the time ran out, or when the background writer failed and left live facts
        without one (until they get it: ``reindex`` embeds them)."""
        writer = self.vector_writer
        if writer is None:
            return True
        waited = writer.wait(timeout)
        dropped = writer.dropped
        if not dropped or self.backend.in_transaction:
            return waited and not dropped
        live = {int(r["id"]) for r in self.backend.rows_by_ids(sorted(dropped), FactFilter())}
        embedded = set(self.backend.vectors_of(sorted(live)))
        writer.forget_dropped(dropped - (live - embedded))
        return waited and live <= embedded

    def settle_access(self) -> None:
        """Wait for queued access counts before work that reads them (pruning, exports)."""
        if self.access_writer is not None and not self.backend.in_transaction:
            self.access_writer.wait()

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def check_open(self) -> None:
        """Raise :class:`~ctxslots.errors.StoreClosedError` once the store is closed (for
        the calls that may answer without asking the engine, which raises it itself)."""
        if self._closed:
            raise StoreClosedError(f"the store at {self.backend.location} is closed",
                                   path=self.backend.location)

    def close(self) -> None:
        """Write what the background writers queued, then close the engine (idempotent)."""
        self._closed = True
        self.writer.write_owed_counts()
        if self.access_writer is not None:
            self.access_writer.close()
        if self.vector_writer is not None:
            self.vector_writer.close()
        self.backend.close()


def _stop_writers(writers: list[BackgroundWriter], opener: int) -> None:
    """A store was dropped unclosed: its writers write what is queued and end (in the
    process that opened it; a forked child has none of their threads)."""
    if os.getpid() == opener:
        for writer in writers:
            writer.stop()


def checked_clock(clock: Callable[[], float], limits: Limits) -> Callable[[], float]:
    """``clock`` with each reading checked as a time a store can keep (Unix seconds from
    1970 up to the year 9999: a clock in milliseconds, NaN or before 1970 raises
    :class:`~ctxslots.errors.InvalidFactError` naming ``clock``) and rounded to whole
    microseconds, as every time given to a store is."""
    def now() -> float:
        return limits.moment(clock(), "clock")
    return now


def _background_access(location: str, options: StoreOptions) -> bool:
    if location == ":memory:" or options.access_writes == "inline":
        return False
    return options.access_writes == "background" or options.lexical_cache


def _background_vectors(location: str, options: StoreOptions, binding: EmbedderBinding) -> bool:
    if binding.embedder is None or location == ":memory:" or options.vector_writes == "inline":
        return False
    return options.vector_writes == "background" or binding.is_model


def open_core(location: str, options: StoreOptions) -> StoreCore:
    """Open the engine ``location`` names, bind its embedder and start its writers.

    :raises StoreError: The store cannot be opened.
    :raises EmbedderError: The embedder cannot be loaded (nothing stays open).
    :raises InvalidFactError: The default user or agent is malformed (nothing is opened).
    """
    lim = options.limits
    clock = checked_clock(options.clock, lim)
    user = DEFAULT_USER if options.user is None else lim.owner(options.user, "user")
    agent = DEFAULT_AGENT if options.agent is None else lim.owner(options.agent, "agent")
    given = given_embedder(options.embedder)  # a bad spec leaves no new store file behind
    backend = open_backend(location, create=options.create, lexical_cache=options.lexical_cache,
                           vector_cache=options.vector_cache, pool=options.pool_size)
    try:
        binding = bind_embedder(options.embedder, backend, given=given, searched=bool(
            MODEL_VECTOR_WEIGHT if options.ranking.vector_weight is None
            else options.ranking.vector_weight))
    except BaseException:
        backend.close()
        raise
    ranking = options.ranking
    if ranking.vector_weight is None:
        ranking = attrs.evolve(ranking, vector_weight=MODEL_VECTOR_WEIGHT if binding.is_model
                               else 0.0)
    vector_writer = None
    if _background_vectors(location, options, binding):
        vector_writer = VectorWriter(
            lambda: open_backend(location, create=False, vector_cache=False),
            binding.embed)
    access_writer = None
    if _background_access(location, options):
        access_writer = AccessWriter(
            lambda: open_backend(location, create=False, vector_cache=False))
    vectors = VectorSink(backend, binding, ranking.vector_weight or 0.0, vector_writer)
    writer = Writer(backend, lim, clock, vectors, access=access_writer,
                    default_user=user, default_agent=agent)
    planner = QueryPlanner(backend, options.query_policy, binding)
    return StoreCore(location=location, backend=backend, limits=options.limits,
                     ranking=ranking, query_policy=options.query_policy,
                     candidate_pool=options.candidate_pool, clock=clock,
                     embedding=binding, writer=writer, planner=planner,
                     vector_writer=vector_writer, access_writer=access_writer)
