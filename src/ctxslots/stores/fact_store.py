"""FactStore: the public face of the fact store, over one storage engine.

The facade checks what callers give it and hands the work to the store's
rooms, each taking the :class:`~.core.StoreCore` it owns: writes
(:mod:`.writes`), reads (:mod:`.reads`), search (:mod:`.query`,
:mod:`.search`), upkeep (:mod:`.upkeep`) and transfer (:mod:`.transfer`). The
engine behind it (:mod:`.backend`: SQLite for a path, PostgreSQL for a
``postgresql://`` URL) stores rows and gathers candidates. The public interface
speaks of facts, slots, scopes and hits only.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Self

import attrs
import platformdirs

from .._secrets import safe_url
from ..errors import InvalidArgumentError, StoreError
from ..model import RELAXED_FILL, Hit
from . import _forks
from .async_face import AsyncMethods
from .backend import CacheStatus
from .core import StoreCore, StoreOptions, open_core
from .embedders.binding import EmbedderSetting
from .explain import ExplainMethods
from .narrowing import Narrowing
from .owners import Owners
from .ranking import RankingPolicy
from .reads import ReadMethods
from .rerank import Boost, Reranker
from .sanitize import DEFAULT_POLICY, QueryPolicy
from .search import RankedSearch, SearchRequest, check_limit, start_search
from .transfer.methods import TransferMethods
from .upkeep.methods import UpkeepMethods
from .writes.erasure import ErasureMethods
from .writes.limits import Limits, check_conversation
from .writes.methods import WriteMethods

__all__ = ["FactStore", "default_db_path"]


def default_db_path() -> Path:
    """Where the store lives when no location is given: ``$CTXSLOTS_DB``, else the
    user data directory (``~/.local/share/ctxslots/memory.db`` on Linux).

    :raises StoreError: ``$CTXSLOTS_DB`` is set but empty or blank (as an unset
        ``${STORE}`` expands in a unit file or an env file: read as unset, it would put
        the facts in the default store; read as a path, in a file named by spaces in the
        working directory), or neither is set and there is no home directory to find (no
        ``HOME`` and a user with no account entry, as in a container run as an
        arbitrary user id).
    """
    env = os.environ.get("CTXSLOTS_DB")
    if env is not None and not env.strip():
        raise StoreError("$CTXSLOTS_DB is set but empty: set it to a SQLite file or a "
                         "postgresql:// URL, or unset it for the default store")
    if env is not None:
        return Path(env).expanduser()
    try:
        folder = Path(platformdirs.user_data_dir("ctxslots", appauthor=False))
    except RuntimeError:  # platformdirs found no home directory
        folder = Path()
    if not folder.is_absolute():
        raise StoreError("no home directory to keep the default store in (HOME is not set, "
                         "and this user has no account entry): set CTXSLOTS_DB or give the "
                         "store's path")
    return folder / "memory.db"


def _location(path: str | os.PathLike[str] | None) -> str:
    if path is None:
        env = os.environ.get("CTXSLOTS_DB")
        return env if env and "://" in env else str(default_db_path())
    location = os.fspath(path) if isinstance(path, (str, os.PathLike)) else None
    if not isinstance(location, str):
        raise InvalidArgumentError(f"path must be a file path (str or Path) or a PostgreSQL "
                                   f"URL, not {path!r}", field="path", value=path)
    if not location.strip():
        # As ``--db ""``: an unset variable (``FactStore(os.environ.get("STORE", ""))``)
        # would otherwise open a file named by spaces in the working directory.
        raise InvalidArgumentError(f"path is empty ({location!r}): name a SQLite file or a "
                                   "postgresql:// URL, or pass None for the default store",
                                   field="path", value=path)
    return location


def _printable(path: object) -> str:
    """The store's location in a repr: a server URL without its password."""
    return safe_url(path) if isinstance(path, str) and "://" in path else repr(path)


@attrs.define
class FactStore(WriteMethods, ErasureMethods, ReadMethods, UpkeepMethods, TransferMethods,
                AsyncMethods, ExplainMethods):
    """Facts and memories of every slot, in one SQLite file or a PostgreSQL database.

    Use it as a context manager, or call :meth:`close` when done::

        with FactStore("memory.db") as store:
            store.upsert("user", "editor", "The user edits code in Helix.")
            hits = store.search("which editor?")

    Attributes:
        path: Where the store lives: a file path (SQLite), a
            ``postgresql://user@host/db`` URL (PostgreSQL, with the
            ``ctxslots[postgres]`` extra), or ``None`` for ``$CTXSLOTS_DB``,
            else :func:`default_db_path`. An empty or blank one is refused
            (:class:`~ctxslots.errors.InvalidArgumentError`), as is a blank
            ``$CTXSLOTS_DB`` (:class:`~ctxslots.errors.StoreError`).
        limits: Size limits and slot rules applied to every write.
        ranking: Decay constants per slot, reinforcement and fusion weights
            (after construction, with the vector weight resolved).
        query_policy: How query text becomes a lexical query (stop words,
            minimum token length).
        candidate_pool: How many candidates each retrieval leg contributes, and
            how deep fusion looks (1 to 10,000): the first hits never depend on
            ``limit``.
        clock: Returns the current time in Unix seconds (tests pass their own). Each
            reading is kept in whole microseconds, as every time given to the store
            is; one outside 1970 to 9999 (a clock in milliseconds, NaN) raises
            ``InvalidFactError`` before anything is written.
        embedder: What turns text into vectors for the vector leg: an object
            with ``model_id``, ``dimension`` and ``embed(texts)``, a spec string
            (``"hash"``, ``"sentence-transformers:PATH"``, ``"openai:MODEL"``),
            an :class:`~ctxslots.stores.embedders.EmbedderChoice` (a spec with
            plugins' factories), ``None`` for the default (``$CTXSLOTS_EMBEDDER``,
            else the embedder that built the store, as it records it, else the
            hashing embedder), or ``False`` for no vector leg at all. The store
            records the spec of the embedder that builds its vectors; when the
            recorded one cannot be made here, the store opens without a vector leg
            and warns (one line; :meth:`doctor` reports it too). After
            construction: the embedder (``False`` for none).
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
            searches wait for the queue; see :meth:`wait_for_vectors`;
            :meth:`close` and a normal interpreter exit write what is queued);
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
            long-running agent), inline otherwise.
        user: The store's default user: whom a read or a write that names no
            user is for (``None``: ``"default"``, the one user of a single-user
            store). See :mod:`ctxslots.stores.owners`. After construction: the
            name.
        agent: The store's default agent, as ``user``.
        pool_size: PostgreSQL only: the most connections the store's pool opens
            (``None``: ``$CTXSLOTS_POOL_SIZE``, else 4; a web service answering on N
            threads wants about N, see docs/postgres.md). A SQLite store has one
            connection and ignores it.
    """

    # Given as a path, a URL or None; kept as the location it names (a str).
    path: str = attrs.field(default=None, converter=_location, repr=_printable)
    limits: Limits = attrs.field(factory=Limits)
    ranking: RankingPolicy = attrs.field(factory=RankingPolicy)
    query_policy: QueryPolicy = DEFAULT_POLICY
    candidate_pool: int = 100
    clock: Callable[[], float] = time.time
    embedder: EmbedderSetting | Any = None
    vector_cache: bool = True
    rerank: Reranker | None = None
    lexical_cache: bool = False
    create: bool = True
    vector_writes: str = "auto"
    access_writes: str = "auto"
    user: str | None = None
    agent: str | None = None
    pool_size: int | None = None
    _opened: StoreCore = attrs.field(init=False, repr=False)
    _options: StoreOptions = attrs.field(init=False, repr=False)
    _generation: int = attrs.field(init=False, repr=False)

    def __attrs_post_init__(self) -> None:
        options = StoreOptions(
            limits=self.limits, ranking=self.ranking, query_policy=self.query_policy,
            candidate_pool=self.candidate_pool, clock=self.clock, embedder=self.embedder,
            vector_cache=self.vector_cache, lexical_cache=self.lexical_cache, create=self.create,
            vector_writes=self.vector_writes, access_writes=self.access_writes,
            user=self.user, agent=self.agent, pool_size=self.pool_size)
        self._options = options
        self._open()

    def _open(self) -> None:
        core = open_core(str(self.path), self._options)
        self._opened, self._generation = core, _forks.generation()
        self.ranking = core.ranking
        self.user, self.agent = core.writer.default_user, core.writer.default_agent
        embedder = core.embedder
        self.embedder = False if embedder is None else embedder

    @property  # the mixins declare it as an attribute; only the store sets it
    def _core(self) -> StoreCore:  # type: ignore[override]
        if self._generation != _forks.generation():
            self._reopen_after_fork()
        return self._opened

    def _reopen_after_fork(self) -> None:
        """This process is a fork of the one that opened the store: open the engine again
        (a ``":memory:"`` store, the child's own copy, and a closed one stay as they are)."""
        with _forks.reopening():
            if self._generation == _forks.generation():
                return  # another thread of this process opened it meanwhile
            inherited = self._opened
            _forks.keep(inherited)
            if inherited.closed or self.path == ":memory:":
                self._generation = _forks.generation()
                return
            self._open()

    # -- lifecycle ---------------------------------------------------------

    @property
    def engine(self) -> str:
        """``"sqlite"`` or ``"postgresql"``."""
        return self._core.backend.engine

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called: every call then raises
        :class:`~ctxslots.errors.StoreClosedError`."""
        return self._core.closed

    def close(self) -> None:
        """Close the store (idempotent): every queued vector and access count is
        written first, background loads are stopped."""
        self._core.close()

    def __enter__(self) -> Self:
        """The store itself, closed when the block ends.

        :raises StoreClosedError: The store was closed (by an earlier ``with`` block).
        """
        self._core.check_open()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __reduce__(self) -> tuple[Any, ...]:
        """Refused: a store's connections belong to the process that opened them.

        :raises TypeError: Always, saying what to do instead (a process pool's
            worker given a store, ``copy.deepcopy``).
        """
        raise TypeError(f"a FactStore cannot be pickled or copied (its connections belong to "
                        f"this process): open FactStore({_printable(self.path)}) in the other "
                        "process, or fork it after the store opened (the child opens the store "
                        "again by itself)")

    @contextlib.contextmanager
    def batch(self, *, savepoints: bool = True) -> Iterator[FactStore]:
        """Group writes in one transaction: all of them land, or none.

        ::

            with store.batch():
                store.upsert("user", "name", "The user is called Ada.")
                store.add("agent", "The CI cache is cold on Mondays.")

        Each write inside takes a savepoint, so a write that raises is undone alone
        and the batch goes on if the caller catches the error. With
        ``savepoints=False`` the writes take none, nor do batches nested in it (each
        saves a round trip on PostgreSQL): for a batch that fails whole on any error,
        as :class:`~ctxslots.MemoryFlusher`'s does. A write that raises then fails the
        batch: nothing of it is written, a write started after the failure raises at
        once, and the batch raises :class:`~ctxslots.errors.StoreError` at its end
        even if the error was caught.
        """
        with self._core.writer.writing(savepoints=savepoints):
            yield self

    @property
    def in_batch(self) -> bool:
        """Whether the calling thread has a :meth:`batch` of this store open, opened by
        the calling code (this thread's, or this asyncio task's). Its reads and writes
        then belong on this thread: a worker thread's would wait for the batch to end (on
        SQLite the batch holds the one connection), or, on PostgreSQL, land outside it.
        The async methods, ``MemoryFlusher.aflush``, the assembler and the integrations'
        async calls (``Memory.adispatch``, LangGraph's async store methods) work on this
        thread then. Another task of the same event loop, run while the batch's task
        awaits, is not in the batch: its calls work in worker threads, and its writes
        are not rolled back with the batch."""
        return self._core.writer.opened_here

    @property
    def keeps_vectors(self) -> bool:
        """Whether written facts get vectors: an embedder that built this store's
        vectors, and a search that reads them (a vector weight above 0)."""
        return self._core.keeps_vectors

    @property
    def vector_leg_ready(self) -> bool:
        """Whether searches can use the vector leg (an embedder, and vectors it built)."""
        return self._core.vector_leg_ready

    def wait_for_vectors(self, timeout: float | None = None) -> bool:
        """Wait until every fact written through this store has its vector.

        Only needed with background vector writes (``vector_writes``); searches
        and consolidation of this store wait by themselves. Returns whether the
        queue emptied within ``timeout`` seconds.
        """
        return self._core.wait_for_vectors(timeout)

    def wait_for_writes(self, timeout: float | None = None) -> bool:
        """Wait until everything this store writes in the background has landed:
        vectors (``vector_writes``) and access counts (``access_writes``).

        Returns whether it did within ``timeout`` seconds (each queue gets the
        whole timeout). Inside :meth:`batch` nothing is waited for: the
        background writers wait for the batch's transaction.
        """
        core = self._core
        if core.backend.in_transaction:
            return False
        counted = True if core.access_writer is None else core.access_writer.wait(timeout)
        return core.wait_for_vectors(timeout) and counted

    # -- search ------------------------------------------------------------

    def search(self, query: str, *, slots: Sequence[str] | None = None,
               scope: str | None = None, user: str | None = None, agent: str | None = None,
               limit: int = 10, include_archive: bool = False, track_access: bool = True,
               boost: Boost | None = None, include_superseded: bool = False,
               now: dt.datetime | float | None = None,
               tags: Iterable[str] | str = (), source: str | None = None,
               said_after: dt.datetime | float | None = None,
               said_before: dt.datetime | float | None = None,
               relaxed: bool = False) -> list[Hit]:
        """Find the facts that best match ``query``, best first.

        Any string is accepted: it is sanitized into a safe lexical query, and a
        query with no usable words returns ``[]``. The facts its owners see are
        searched: facts of ``scope`` and global facts (scope ``None``), never
        another scope's; the user's own facts and those of no user, never
        another user's; the same for the agent. Expired facts never come back.
        Every returned live fact counts as accessed (``access_count + 1``,
        ``last_accessed = now``) unless ``track_access`` is false.

        :param query: Free text, usually the user's message.
        :param slots: Only these slots (default: all).
        :param scope: The workspace; ``None`` searches global facts only.
        :param user: The user asking (``None``: the store's default user).
        :param agent: The agent asking (``None``: the store's default agent).
        :param limit: Most hits to return, 1 to 1000. The first hits do not
            depend on it: every search gathers the same candidates.
        :param include_archive: Also search forgotten facts (marked ``archived``, with
            the reason they moved as ``archive_reason``).
        :param track_access: Count the returned facts as shown to a model.
        :param boost: ``boost(fact) -> factor`` multiplying each candidate's final
            score before the limit (recorded as ``trace.extra["boost"]``).
        :param include_superseded: Also return facts that a newer near-duplicate
            hides (see :meth:`consolidate`).
        :param now: The moment to rank from (a datetime or Unix seconds;
            default: the clock), so a replayed history ranks as it would have
            then: decay and ages count to it, and facts expired by then or said
            (observed) after it are left out.
        :param tags: Only facts with every one of these tags.
        :param source: Only facts with this source.
        :param said_after: Only memories said (observed) at or after this moment.
        :param said_before: Only memories said before this moment.
        :param relaxed: Also look for the words a search leaves out for being
            common to much of the store (``QueryPolicy.max_doc_share`` and
            ``max_query_share``): weaker matches, slower on a large store; the
            memory sections use it to fill a prompt once the matches run out.
            A search whose other words find nothing looks for them anyway, and
            says so in each hit's ``trace.fill`` (``"relaxed"``).
        :raises InvalidFactError: ``query``, ``slots``, an owner, ``limit``, ``now``
            or a filter is malformed, or ``boost`` returned a negative or
            non-finite factor.
        """
        check_limit(limit)
        options: dict[str, Any] = {
            "slots": slots, "scope": scope, "user": user, "agent": agent,
            "include_archive": include_archive, "boost": boost,
            "include_superseded": include_superseded, "now": now, "tags": tags,
            "source": source, "said_after": said_after, "said_before": said_before}
        ranked = self.search_ranked(query, relaxed=relaxed, **options)
        hits = self._search(ranked, limit, track_access)
        if hits or relaxed or list(ranked.plan.words) == self.query_words(query, relaxed=True):
            return hits
        # The words left once the common ones went out found nothing: the common ones
        # are all the query has to go on (a word common among other owners' facts too).
        hits = self._search(self.search_ranked(query, relaxed=True, **options), limit,
                            track_access)
        return [attrs.evolve(h, trace=attrs.evolve(h.trace, fill=RELAXED_FILL)) for h in hits]

    def _search(self, ranked: RankedSearch, limit: int, track_access: bool) -> list[Hit]:
        """The first ``limit`` hits of a planned search, counted as accessed if asked."""
        # Planned first: the plan may wait for the background vector writer, which needs a
        # connection of the pool, so no connection is held for the search until then.
        if not ranked.runs:  # no word and no vector to look for: nothing to read
            return []
        # Its reads and its access count in one go (on PostgreSQL, on one connection,
        # whose statements that ask keep their plans).
        with self._core.backend.reading():
            hits = ranked.hits(limit)
            if track_access:
                hits = self._core.writer.track_access(hits, self._core.clock())
        return hits

    def search_ranked(self, query: str, *, slots: Sequence[str] | None = None,
                      scope: str | None = None, user: str | None = None,
                      agent: str | None = None, include_archive: bool = False,
                      boost: Boost | None = None, include_superseded: bool = False,
                      now: dt.datetime | float | None = None, tags: Iterable[str] | str = (),
                      source: str | None = None, said_after: dt.datetime | float | None = None,
                      said_before: dt.datetime | float | None = None,
                      relaxed: bool = False) -> RankedSearch:
        """A search whose ranked list is read as far as asked: ``hits(limit)``.

        Takes :meth:`search`'s arguments but ``limit`` and ``track_access``;
        ``hits(limit)`` returns what ``search(..., limit=limit,
        track_access=False)`` returns. The query's words and vector are made
        once, and asking for a longer list reads the candidates again only when
        there may be more: for a caller that fills a room it learns as it goes
        (the memory contributors).

        :raises InvalidFactError: An argument is malformed (see :meth:`search`).
        """
        if not isinstance(query, str):
            raise InvalidArgumentError("query must be a string", field="query", value=query)
        if boost is not None and not callable(boost):
            raise InvalidArgumentError(f"boost must be a function of a fact, not {boost!r}",
                                       field="boost", value=boost)
        core = self._core
        core.check_open()
        moment = core.clock() if now is None else core.limits.moment(now, "now")
        # A moment given is a replay: what was said after it is not known yet.
        narrow = Narrowing(tags, source, said_after, said_before,
                           until=None if now is None else moment)
        flt = core.filter(slots, Owners(user, agent, scope), include_superseded=include_superseded,
                          now=moment, narrow=narrow)
        return start_search(core, SearchRequest(query=query, flt=flt,
                                                include_archive=include_archive, boost=boost,
                                                rerank=self.rerank, now=moment,
                                                relaxed=relaxed))

    def query_words(self, query: str, *, relaxed: bool = False) -> list[str]:
        """The words a search of ``query`` looks for: sanitized, stop words and
        (unless ``relaxed``) words common to much of the store left out (for
        debugging a search)."""
        if not isinstance(query, str):
            raise InvalidArgumentError("query must be a string", field="query", value=query)
        self._core.check_open()
        return self._core.planner.words(query, relaxed=relaxed)

    def cache_status(self) -> CacheStatus:
        """Which in-memory copies of the indexes are loaded or loading (SQLite). It answers
        on a closed store too (none, since closing stops every load), as ``closed`` does."""
        return self._core.backend.cache_status()

    def load_lexical_cache(self, timeout: float | None = None) -> bool:
        """Load the in-memory lexical copy now instead of in the background (SQLite).

        Returns whether the copy is loaded (false only when ``timeout`` seconds
        passed first).

        :raises StoreError: The store was opened without ``lexical_cache=True``,
            its engine has no such copy, or loading failed.
        """
        self._core.check_open()
        return self._core.backend.load_lexical_cache(timeout)

    def load_vector_cache(self, timeout: float | None = None) -> bool:
        """Load the in-memory copy of the vectors now instead of in the background (SQLite).

        :raises StoreError: The store was opened with ``vector_cache=False``,
            has no usable vectors, its engine keeps no such copy, or loading failed.
        """
        self._core.check_open()
        if not self.vector_leg_ready:
            raise StoreError("this store has no usable vector index (no embedder, or vectors "
                             "built by another one: run reindex)", path=str(self.path))
        return self._core.backend.load_vector_cache(timeout)

    # -- flush progress ----------------------------------------------------

    def flush_progress(self, conversation: str, *, user: str | None = None,
                       agent: str | None = None) -> tuple[int, str] | None:
        """``(messages_read, fingerprint)`` recorded for a user's and agent's
        conversation, or ``None``. Kept for :class:`~ctxslots.MemoryFlusher`.

        :raises InvalidFactError: ``conversation`` (InvalidArgumentError), ``user`` or
            ``agent`` is malformed.
        """
        user_id, agent_id = self._talkers(user, agent)
        return self._core.backend.read_progress(check_conversation(conversation), user_id=user_id,
                                                agent_id=agent_id)

    def record_flush_progress(self, conversation: str, messages_read: int, fingerprint: str,
                              *, user: str | None = None, agent: str | None = None) -> None:
        """Record how far a conversation was read, inside the current :meth:`batch`.

        :raises StoreError: Called outside a :meth:`batch`.
        :raises InvalidFactError: An argument is malformed (``conversation``,
            ``messages_read`` or ``fingerprint``: InvalidArgumentError).
        """
        self._core.check_open()
        if not self._core.backend.in_transaction:
            raise StoreError("flush progress is recorded inside store.batch(), with the facts",
                             path=str(self.path))
        user_id, agent_id = self._talkers(user, agent)
        if isinstance(messages_read, bool) or not isinstance(messages_read, int) \
                or not 0 <= messages_read < 2**63:
            raise InvalidArgumentError(f"messages_read must be an integer >= 0, not "
                                       f"{messages_read!r}", field="messages_read",
                                       value=messages_read)
        if not isinstance(fingerprint, str) or not fingerprint.isascii() \
                or not fingerprint.isprintable() or len(fingerprint) > 200:
            raise InvalidArgumentError("fingerprint must be printable ASCII text of at most "
                                       "200 characters", field="fingerprint",
                                       value=fingerprint)
        self._core.backend.write_progress(check_conversation(conversation), messages_read,
                                          fingerprint, self._core.clock(), user_id=user_id,
                                          agent_id=agent_id)

    def _talkers(self, user: str | None, agent: str | None) -> tuple[str, str]:
        writer, limits = self._core.writer, self._core.limits
        return (writer.default_user if user is None else limits.owner(user, "user"),
                writer.default_agent if agent is None else limits.owner(agent, "agent"))
