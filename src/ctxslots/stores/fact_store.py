"""FactStore: facts in one SQLite file, searched by BM25 and ranked with decay.

The public interface speaks of facts, slots, scopes and hits only: no
connections, rowids or FTS5 syntax, so another backend can sit behind it.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self, TextIO

import attrs
import platformdirs

from ..errors import FactNotFoundError, InvalidFactError
from ..model import Fact
from ._common_terms import CommonTerms
from ._legs import COLUMNS as _COLUMNS
from ._loader import CacheSlot
from ._reads import ReadsMixin
from ._reads import check_id as _check_id
from ._search import SearchMixin
from ._sqlite import Connection, open_connection, sqlite_version
from ._validate import Limits
from .consolidate import DEFAULT_THRESHOLD, ConsolidationReport, consolidate
from .lexical_cache import LexicalCache, build_lexical_cache, trim_fact_log
from .links import RecentResults, strengthen
from .maintenance import DoctorReport, doctor, reindex
from .migrations import schema_version
from .prune import PrunePolicy, PruneReport, prune
from .ranking import MODEL_VECTOR_WEIGHT, RankingPolicy
from .rerank import Reranker
from .sanitize import DEFAULT_POLICY, QueryPolicy
from .vectors import VectorCache, VectorIndex

if TYPE_CHECKING:
    import numpy as np

    from ._transfer_report import ImportReport

__all__ = ["FactStore", "default_db_path"]

_LIVE = "(expires_at IS NULL OR expires_at > ?)"


def default_db_path() -> Path:
    """Where the store lives when no path is given: ``$CTXSLOTS_DB``, else the
    user data directory (``~/.local/share/ctxslots/memory.db`` on Linux)."""
    env = os.environ.get("CTXSLOTS_DB")
    if env:
        return Path(env).expanduser()
    return Path(platformdirs.user_data_dir("ctxslots", appauthor=False)) / "memory.db"


@attrs.define
class FactStore(ReadsMixin, SearchMixin):
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
        candidate_pool: How many candidates each retrieval leg contributes, and
            how deep fusion looks: the first hits never depend on ``limit``.
        clock: Returns the current time in Unix seconds (tests pass their own).
        embedder: What turns text into vectors for the vector leg: an object
            with ``model_id``, ``dimension`` and ``embed(texts)``, a spec string
            (``"hash"``, ``"sentence-transformers:PATH"``, ``"openai:MODEL"``),
            ``None`` for the default (``$CTXSLOTS_EMBEDDER``, else the hashing
            embedder), or ``False`` for no vector leg at all.
        vector_cache: Search an in-memory copy of the vectors, kept consistent
            with the file, instead of scanning ``vec0`` on every search. The
            first vector search starts loading it on a background thread and
            scans ``vec0`` until it is ready (:meth:`load_vector_cache` loads
            it up front).
        rerank: ``rerank(query, hits) -> hits | None``, given every fused
            candidate before the limit (see :mod:`ctxslots.stores.rerank`).
        lexical_cache: Score the lexical leg from an in-memory copy of the
            index (see :mod:`ctxslots.stores.lexical_cache`) instead of an FTS5
            query: about 7x to 10x faster per search, for memory for the
            postings and a load (about 2 s per 100,000 facts) that the first
            search starts on a background thread; searches use FTS5 until it is
            ready (:meth:`load_lexical_cache` loads it up front). For
            long-running agents; one-shot commands are better off without it.
    """

    path: str | os.PathLike[str] | None = None
    limits: Limits = attrs.field(factory=Limits)
    ranking: RankingPolicy = attrs.field(factory=RankingPolicy)
    query_policy: QueryPolicy = DEFAULT_POLICY
    candidate_pool: int = 100
    clock: Callable[[], float] = time.time
    embedder: Any = None
    vector_cache: bool = True
    rerank: Reranker | None = None
    lexical_cache: bool = False
    _conn: Connection = attrs.field(init=False, repr=False)
    _index: VectorIndex | None = attrs.field(init=False, default=None, repr=False)
    _vector_slot: CacheSlot[VectorCache] | None = attrs.field(init=False, default=None, repr=False)
    _pending: dict[int, tuple[str, str, str]] | None = attrs.field(init=False, default=None, repr=False)
    _common: CommonTerms | None = attrs.field(init=False, default=None, repr=False)
    _written: int = attrs.field(init=False, default=0, repr=False)
    _recent: RecentResults = attrs.field(init=False, factory=RecentResults, repr=False)
    _lexical_slot: CacheSlot[LexicalCache] = attrs.field(
        init=False, repr=False,
        factory=lambda: CacheSlot("in-memory lexical index", build_lexical_cache, load_vec=False))
    _query_vectors: dict[str, np.ndarray] = attrs.field(init=False, factory=dict, repr=False)

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
        """Close the database (idempotent); a background load of the lexical copy is stopped."""
        self._lexical_slot.stop()
        if self._vector_slot is not None:
            self._vector_slot.stop()
        self._conn.close()

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
                if outer:
                    trim_fact_log(self._conn)
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

        The facts this store's recent searches returned together with it get a
        stronger co-recall link to it (see :mod:`ctxslots.stores.links`).

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
            if delta > 0:
                strengthen(self, fact_id, self._recent.partners(fact_id), self.clock())
            return self._fetch(fact_id)

    # -- inspection --------------------------------------------------------

    def doctor(self) -> DoctorReport:
        """Check file integrity, the full-text index and the vector index."""
        return doctor(self)

    def reindex(self, *, progress: Callable[[int, int], None] | None = None) -> int:
        """Rebuild the full-text and vector indexes from the facts; return facts embedded."""
        if self._vector_slot is not None:  # its copy is of the vectors about to be replaced
            self._vector_slot.stop()
            self._vector_slot = None
        return reindex(self, progress=progress)

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

    # -- export and import ---------------------------------------------------

    def export_jsonl(self, fp: TextIO, **options: Any) -> int:
        """Write facts, archive, history and links as JSON lines; return the facts written.

        See :func:`ctxslots.stores.transfer.export_jsonl` for the options.
        """
        from .transfer import export_jsonl

        return export_jsonl(self, fp, **options)

    def import_jsonl(self, fp: TextIO, **options: Any) -> ImportReport:
        """Read what :meth:`export_jsonl` wrote, in one transaction.

        See :func:`ctxslots.stores.transfer.import_jsonl` for the options.

        :raises InvalidImportError: A line is malformed; nothing is written.
        """
        from .transfer import import_jsonl

        return import_jsonl(self, fp, **options)

    def export_markdown(self, directory: str | os.PathLike[str] | None = None,
                        **options: Any) -> str | list[Path]:
        """Write the live facts as Markdown bullets (a text, or one file per slot).

        See :func:`ctxslots.stores.transfer.export_markdown`.
        """
        from .transfer import export_markdown

        return export_markdown(self, directory, **options)

    def import_markdown(self, path_or_text: str | os.PathLike[str], *, slot: str,
                        **options: Any) -> ImportReport:
        """Read ``MEMORY.md``-style bullets into ``slot``, skipping duplicates.

        See :func:`ctxslots.stores.transfer.import_markdown`.

        :raises InvalidImportError: A bullet is refused; nothing is written.
        """
        from .transfer import import_markdown

        return import_markdown(self, path_or_text, slot=slot, **options)

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

