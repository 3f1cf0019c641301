"""Near-duplicate consolidation: a newer fact hides the older ones that say the same thing.

A fact is *superseded* when a newer live fact of the same slot and owners has a
vector whose cosine similarity to its own is above the threshold (0.95 by
default). Superseded facts stay live and are never deleted: search leaves them
out unless asked (``include_superseded=True``), the survivor's trace counts
them (``HitTrace.hides``), and pruning moves them to the archive first.

"Newer" means the value was written later (``updated_at``, then id). The pass
runs newest first, so in a chain of three near-duplicates the newest survives
and hides both others. A survivor that is itself superseded later hands the
facts it hid to its successor, so a count always sits on a visible fact. A survivor
takes the highest reinforcement score among the facts it hides when that is above its
own: a lesson reinforced, then said again in nearly the same words, keeps what it earned.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import attrs
import numpy as np

from ...errors import InvalidFactError, StoreError
from ..backend import FactFilter, Row
from ..core import StoreCore
from ..writes.writer import check_ids

__all__ = ["DEFAULT_THRESHOLD", "ConsolidationReport", "Superseded", "consolidate"]

#: Cosine similarity above which a newer fact supersedes an older one.
DEFAULT_THRESHOLD = 0.95

_BLOCK = 256


@attrs.frozen
class Superseded:
    """One fact that a consolidation pass marked superseded."""

    fact_id: int
    by: int
    cosine: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data."""
        return attrs.asdict(self)


@attrs.frozen
class ConsolidationReport:
    """What a consolidation pass found.

    Attributes:
        superseded: The facts marked, in the order they were found.
        checked: How many facts were compared as the newer side.
        threshold: The cosine threshold used.
        dry_run: Whether nothing was written.
    """

    superseded: tuple[Superseded, ...]
    checked: int
    threshold: float
    dry_run: bool = False

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data."""
        return {"superseded": [s.to_dict() for s in self.superseded], "checked": self.checked,
                "threshold": self.threshold, "dry_run": self.dry_run}


def _check_threshold(threshold: object) -> float:
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) \
            or not 0.0 < float(threshold) < 1.0:
        raise InvalidFactError(f"threshold must be a number between 0 and 1, not {threshold!r}",
                               field="threshold", value=threshold)
    return float(threshold)


def _group(row: Row) -> tuple[str, str, str, str]:
    return row["slot"], row["scope"], row["user_id"], row["agent_id"]


def _groups(core: StoreCore, flt: FactFilter, fact_ids: Sequence[int] | None
            ) -> dict[tuple[str, str, str, str], list[Row]]:
    """The live, unsuperseded facts by slot and owners, oldest value first; with
    ``fact_ids``, only the groups those facts are in."""
    rows = list(core.backend.select(flt))
    if fact_ids is not None:
        wanted = set(fact_ids)
        keys = {_group(r) for r in rows if int(r["id"]) in wanted}
        rows = [r for r in rows if _group(r) in keys]
    groups: dict[tuple[str, str, str, str], list[Row]] = {}
    for row in sorted(rows, key=lambda r: (r["updated_at"], r["id"])):
        groups.setdefault(_group(row), []).append(row)
    return dict(sorted(groups.items()))


def _pass_over_group(
    ids: list[int], mat: np.ndarray, newer_side: np.ndarray, threshold: float
) -> tuple[list[Superseded], int]:
    """Greedy, newest first, over one group ordered oldest to newest."""
    alive = np.ones(len(ids), bool)
    found: list[Superseded] = []
    checked = 0
    order = np.flatnonzero(newer_side)[::-1]
    for start in range(0, len(order), _BLOCK):
        rows = order[start:start + _BLOCK]
        top = int(rows[0])                       # the newest of this block
        sims = mat[rows] @ mat[:top].T if top else np.zeros((len(rows), 0), np.float32)
        for r, j in enumerate(rows.tolist()):
            if not alive[j]:
                continue
            checked += 1
            dup = np.flatnonzero((sims[r, :j] > threshold) & alive[:j])
            for i in dup.tolist():
                alive[i] = False
                found.append(Superseded(ids[i], ids[j], float(sims[r, i])))
    return found, checked


def _best_hidden_scores(found: Sequence[Superseded], scores: dict[int, float]
                        ) -> dict[int, float]:
    """Survivor id -> the highest score among the facts it now hides."""
    best: dict[int, float] = {}
    for item in found:
        best[item.by] = max(best.get(item.by, scores[item.fact_id]), scores[item.fact_id])
    return best


def consolidate(
    core: StoreCore,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    fact_ids: Iterable[int] | None = None,
    dry_run: bool = False,
) -> ConsolidationReport:
    """Mark older near-duplicates superseded; see the module docstring.

    :param fact_ids: Only compare these facts with the facts older than them
        (after a flush: the facts it wrote); ``None`` checks every live fact.
    :raises StoreError: The store has no usable vector index (no embedder, or
        one other than the embedder that built it: run ``reindex``).
    :raises InvalidFactError: ``threshold`` is not between 0 and 1, or ``fact_ids`` is
        not a list of integer ids.
    """
    threshold = _check_threshold(threshold)
    if not core.vector_leg_ready:
        raise StoreError("consolidation compares vectors; this store has no embedder, or its "
                         "vectors were built by another one: run `ctxslots reindex`")
    wanted = None if fact_ids is None else sorted(check_ids(fact_ids))
    found: list[Superseded] = []
    checked = 0
    backend = core.backend
    scores: dict[int, float] = {}
    with backend.transaction():
        now = core.clock()
        flt = FactFilter(live_at=now, include_superseded=False)
        for group in _groups(core, flt, wanted).values():
            vectors = backend.vectors_of([int(r["id"]) for r in group])
            missing = [r for r in group if int(r["id"]) not in vectors]
            if missing and not core.keeps_vectors:  # cheap embedders: vectors made here
                made = core.embed([r["value"] for r in missing])
                vectors.update((int(r["id"]), made[i]) for i, r in enumerate(missing))
            ids = [int(r["id"]) for r in group if int(r["id"]) in vectors]
            if len(ids) < 2:
                continue
            scores.update((int(r["id"]), float(r["score"])) for r in group)
            mat = np.stack([vectors[i] for i in ids])
            newer = np.ones(len(ids), bool) if wanted is None else np.isin(ids, wanted)
            group_found, group_checked = _pass_over_group(ids, mat, newer, threshold)
            found += group_found
            checked += group_checked
        if not dry_run:
            for item in found:
                backend.set_superseded([(item.fact_id, item.by)])
                backend.hand_over_superseded(item.fact_id, item.by)
            for survivor, best in _best_hidden_scores(found, scores).items():
                if best > scores[survivor]:
                    backend.adjust_score(survivor, best - scores[survivor], live_at=now)
    return ConsolidationReport(tuple(found), checked, threshold, dry_run)
