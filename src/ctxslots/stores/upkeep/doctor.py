"""Index health: find what is wrong with a store's derived indexes, and rebuild them.

The facts table is the source of truth. The FTS5 indexes and the vector index
are derived from it, so :func:`reindex` can always rebuild them.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import attrs

from ..._readable import count
from ...errors import EmbedderError, StoreDamagedError
from ..backend import BadValue, FactFilter, VectorRow
from ..core import StoreCore
from ..embedders.partial import embed_what_it_takes, warn_refused
from .consistency import consistency_problems, repair_consistency

__all__ = ["DoctorReport", "IndexState", "doctor", "reindex"]

Progress = Callable[[int, int], None]


@attrs.frozen
class IndexState:
    """What the vector index holds compared with the embedder in use.

    Attributes:
        model_id: The embedder that built the index, or ``None`` if none yet.
        dimension: Its dimension, or ``None``.
        current_model_id: The embedder the store was opened with.
        current_dimension: Its dimension.
        stale: The index was built by another embedder (or dimension).
        vectors: How many vectors the index holds.
        missing: Live facts without a vector.
        orphans: Vectors whose fact is gone.
        unusable: Vectors no search can use (no direction, not of unit length, or
            of another dimension): the vector leg skips them.
    """

    model_id: str | None
    dimension: int | None
    current_model_id: str
    current_dimension: int
    stale: bool
    vectors: int
    missing: int
    orphans: int
    unusable: int = 0


@attrs.frozen
class DoctorReport:
    """What :func:`doctor` found.

    Attributes:
        integrity: The engine's integrity check (``"ok"`` when sound).
        fts_in_sync: Whether the full-text index matches the facts and the archive.
        vectors: The vector index compared with the embedder, or ``None`` when
            the store has no vector leg.
        problems: One line per problem; empty when all is well.
        facts_readable: Whether the facts could be read (a damaged file or a missing
            table: when not, the checks that read them were not run, ``fts_in_sync``
            among them, and nothing can be rebuilt from them).
    """

    integrity: str
    fts_in_sync: bool
    vectors: IndexState | None
    problems: tuple[str, ...]
    facts_readable: bool = True

    @property
    def ok(self) -> bool:
        """Whether no problem was found."""
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data."""
        return {
            "ok": self.ok,
            "integrity": self.integrity,
            "fts_in_sync": self.fts_in_sync,
            "vectors": attrs.asdict(self.vectors) if self.vectors else None,
            "problems": list(self.problems),
            "facts_readable": self.facts_readable,
        }


def _vector_problems(state: IndexState) -> list[str]:
    if state.stale:
        return [(f"vectors were built by {state.model_id} ({state.dimension} dimensions), not by "
                 f"{state.current_model_id} ({state.current_dimension}): reopen the store with "
                 f"that embedder, or run `ctxslots --embedder SPEC reindex` to rebuild them "
                 "with another one")]
    problems = []
    if state.missing:
        one = state.missing == 1
        them = "it (only it)" if one else "them (only them)"
        problems.append(f"{count(state.missing, 'fact')} {'has' if one else 'have'} no vector: "
                        f"run `ctxslots reindex` to embed {them}")
    if state.orphans:
        problems.append(f"{count(state.orphans, 'vector')} "
                        f"{'belongs' if state.orphans == 1 else 'belong'} to no fact: run "
                        "`ctxslots reindex`")
    if state.unusable:
        one = state.unusable == 1
        problems.append(
            f"{count(state.unusable, 'vector')} {'has' if one else 'have'} no direction or "
            f"{'is' if one else 'are'} not of unit length (all zeros, values too large, too "
            "small or not finite, or another dimension): searches skip "
            f"{'it' if one else 'them'}; "
            f"run `ctxslots reindex` to embed {'its fact' if one else 'their facts'} again (an "
            "embedder that gives such a vector again cannot embed that text)")
    return problems


#: Most values out of range a doctor report names.
SHOWN_BAD_VALUES = 5
_LOOKED_AT = 100


def _value_problems(bad: list[BadValue]) -> list[str]:
    if not bad:
        return []
    shown = "; ".join(b.describe() for b in bad[:SHOWN_BAD_VALUES])
    more = ""
    if len(bad) > SHOWN_BAD_VALUES:
        more = f" and {'at least ' if len(bad) == _LOOKED_AT else ''}" \
               f"{len(bad) - SHOWN_BAD_VALUES} more"
    return [(f"stored values no read can use (a time outside 1970 to 9999, a count or score "
             f"out of range, text that is not UTF-8 or holds a NUL): {shown}{more}; run "
             "`ctxslots reindex` to reset them (times to now, expiry and last access cleared, "
             "scores and counts to 0, confidence to 1, the bytes of a text that are not "
             "UTF-8 and its NULs to U+FFFD)")]


def doctor(core: StoreCore) -> DoctorReport:
    """Check the store's integrity, its full-text index, its stored values and its vectors.

    A damaged page of the file is reported as a problem, not raised: the checks that
    need the rows it holds are skipped.
    """
    health = core.backend.check()
    problems = list(health.problems)
    readable = health.facts_readable
    if readable:
        try:
            problems += _value_problems(core.backend.bad_values(limit=_LOOKED_AT))
            problems += consistency_problems(core.backend)
        except StoreDamagedError as exc:  # reported: the rest of the checks need the rows
            recover = f" with `sqlite3 {exc.path} .recover`" if exc.path else ""
            problems.append("the facts could not all be read, a page of the file is damaged: "
                            "restore it from a backup, or copy what is readable into a new "
                            f"file{recover} and open that")
            readable = False
    state = None
    if core.embedding.missing is not None:  # opened without the embedder its vectors need
        problems.append(core.embedding.missing)
    # A store whose searches read no vectors keeps none: nothing to check.
    embedder = core.embedder
    if embedder is not None and core.ranking.vector_weight and readable:
        vs = core.backend.vector_state()
        state = IndexState(
            model_id=vs.model_id, dimension=vs.dimension,
            current_model_id=embedder.model_id, current_dimension=embedder.dimension,
            stale=not core.vector_leg_ready, vectors=vs.vectors, missing=vs.missing,
            orphans=vs.orphans, unusable=vs.unusable)
        problems += _vector_problems(state)
    return DoctorReport(health.integrity, health.lexical_in_sync, state, tuple(problems),
                        facts_readable=health.facts_readable)


def reindex(core: StoreCore, *, progress: Progress | None = None, batch_size: int = 256,
            full: bool = False) -> int:
    """Rebuild every derived index from the facts, then the vectors searches read.

    Stored times and numbers that no read can use (see :func:`doctor`) are
    reset first: a time to now (an expiry or last access cleared), a score or
    count to 0, a confidence to 1; a later time before its earlier one is set
    to it, and the facts of a ``superseded_by`` loop are shown again
    (:mod:`.consistency`).

    Vectors (kept when searches read them, or when the store holds vectors the
    embedder built, which another process may read): when the stored ones are the
    embedder's own, only what is wrong is repaired: vectors no search can use and those of no fact are removed, and
    the facts without a vector (those, and any whose vector was never written)
    are embedded. With vectors another embedder built, or ``full``, every fact
    is embedded again, once the embedder has answered one text (one that fails then
    fails the reindex before any vector is dropped). A value the embedder refuses
    (:attr:`~ctxslots.errors.EmbedderError.refused_input`) is left without a vector,
    with a warning naming it, and the rest go on. Vectors are written in batches,
    each in its own transaction, so other processes keep working meanwhile and an
    interrupted run can simply be run again. Returns the number of facts embedded.

    :param progress: Called as ``progress(done, total)`` after each batch.
    :param full: Embed every fact again, even with vectors the embedder built.
    :raises StoreError: The facts themselves are gone (nothing to rebuild from).
    """
    backend = core.backend
    backend.rebuild()
    with backend.transaction():
        backend.repair_values(core.clock())
        repair_consistency(backend)
    # Vectors this embedder built are kept even when this process's searches read none:
    # another process (an app opened with a vector weight) may read them.
    keep = core.embedder is not None and (bool(core.ranking.vector_weight) or (
        core.vector_leg_ready and backend.vector_state().vectors > 0))
    if core.embedder is not None:
        if full or not keep or not core.vector_leg_ready:
            if keep:  # an embedder that fails now fails before any vector is dropped
                core.embed(["reindex"])
            core.embedding.reset_vectors(backend)
        else:
            with backend.transaction():
                backend.drop_unusable_vectors()
    total = backend.vector_state().missing if keep else backend.counts()["facts"]
    if progress:
        progress(0, total)
    if not keep:  # searches read no vectors: the full-text rebuild was all there was to do
        if progress:
            progress(total, total)
        return 0
    done = seen = after = held_elsewhere = 0
    refused: dict[int, EmbedderError] = {}
    while True:
        rows = backend.without_vectors(limit=batch_size, after=after)
        if not rows:
            break
        after = int(rows[-1]["id"])
        made = embed_what_it_takes(core.embed, [r["value"] for r in rows])
        with backend.transaction():
            # Only the facts still there, held till the vectors are in (see VectorWriter).
            there = {int(r["id"]) for r in backend.rows_by_ids(
                [int(rows[i]["id"]) for i in made.kept], FactFilter(), held=True)}
            still = [n for n, i in enumerate(made.kept) if int(rows[i]["id"]) in there]
            backend.put_vectors([VectorRow.of(rows[made.kept[n]]["id"], rows[made.kept[n]])
                                 for n in still], made.vectors[still])
        refused.update((int(rows[i]["id"]), exc) for i, exc in made.refused.items())
        held_elsewhere += len(made.kept) - len(still)
        done += len(still)
        seen += len(rows)
        if progress:
            progress(min(seen, total), total)
    warn_refused(refused)
    if held_elsewhere:
        warnings.warn(f"{held_elsewhere} fact{'s were' if held_elsewhere != 1 else ' was'} "
                      "being written by another process and kept no vector: run `ctxslots "
                      "reindex` again to embed them", RuntimeWarning, stacklevel=2)
    return done
