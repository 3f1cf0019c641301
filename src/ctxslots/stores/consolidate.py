"""Near-duplicate consolidation: a newer fact hides the older ones that say the same thing.

A fact is *superseded* when a newer live fact of the same slot and scope has a
vector whose cosine similarity to its own is above the threshold (0.95 by
default). Superseded facts stay live and are never deleted: search leaves them
out unless asked (``include_superseded=True``), the survivor's trace counts
them (``HitTrace.hides``), and pruning moves them to the archive first.

"Newer" means the value was written later (``updated_at``, then id). The pass
runs newest first, so in a chain of three near-duplicates the newest survives
and hides both others. A survivor that is itself superseded later hands the
facts it hid to its successor, so a count always sits on a visible fact.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from ..errors import InvalidFactError, StoreError
from ._legs import placeholders
from .vectors import TABLE

if TYPE_CHECKING:
    from .fact_store import FactStore

__all__ = ["DEFAULT_THRESHOLD", "ConsolidationReport", "Superseded", "consolidate"]

#: Cosine similarity above which a newer fact supersedes an older one.
DEFAULT_THRESHOLD = 0.95

_BLOCK = 256
_LIVE = "superseded_by IS NULL AND (expires_at IS NULL OR expires_at > ?)"


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


def _vectors(store: FactStore, ids: Sequence[int]) -> dict[int, np.ndarray]:
    out: dict[int, np.ndarray] = {}
    for start in range(0, len(ids), 500):
        chunk = ids[start:start + 500]
        for fid, blob in store._conn.execute(
            f"SELECT fact_id, embedding FROM {TABLE} WHERE fact_id IN ({placeholders(len(chunk))})",
            list(chunk),
        ).fetchall():
            out[int(fid)] = np.frombuffer(blob, np.float32)
    return out


def _groups(store: FactStore, now: float, fact_ids: Sequence[int] | None
            ) -> list[tuple[str, str]]:
    if fact_ids is None:
        rows = store._conn.execute(
            f"SELECT DISTINCT slot, scope FROM facts WHERE {_LIVE} ORDER BY slot, scope", (now,)
        ).fetchall()
    else:
        rows = []
        for start in range(0, len(fact_ids), 500):
            chunk = list(fact_ids[start:start + 500])
            rows += store._conn.execute(
                f"SELECT DISTINCT slot, scope FROM facts WHERE id IN ({placeholders(len(chunk))}) "
                f"AND {_LIVE}", (*chunk, now),
            ).fetchall()
    return sorted({(r[0], r[1]) for r in rows})


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


def consolidate(
    store: FactStore,
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
    :raises InvalidFactError: ``threshold`` is not between 0 and 1.
    """
    threshold = _check_threshold(threshold)
    if store.embedder is False or store._index is None:
        raise StoreError("consolidation compares vectors; this store has no embedder")
    if store._index.stale:
        raise StoreError("the vector index was built by another embedder; run `ctxslots reindex`")
    wanted = None if fact_ids is None else sorted({int(i) for i in fact_ids})
    found: list[Superseded] = []
    checked = 0
    with store._conn.write():
        now = store.clock()
        for slot, scope in _groups(store, now, wanted):
            rows = store._conn.execute(
                f"SELECT id FROM facts WHERE slot = ? AND scope = ? AND {_LIVE} "
                "ORDER BY updated_at, id", (slot, scope, now),
            ).fetchall()
            vectors = _vectors(store, [int(r[0]) for r in rows])
            ids = [int(r[0]) for r in rows if int(r[0]) in vectors]
            if len(ids) < 2:
                continue
            mat = np.stack([vectors[i] for i in ids])
            newer = np.ones(len(ids), bool) if wanted is None else np.isin(ids, wanted)
            group_found, group_checked = _pass_over_group(ids, mat, newer, threshold)
            found += group_found
            checked += group_checked
        if not dry_run:
            for item in found:
                store._conn.execute("UPDATE facts SET superseded_by = ? WHERE id = ?",
                                    (item.by, item.fact_id))
                store._conn.execute("UPDATE facts SET superseded_by = ? WHERE superseded_by = ?",
                                    (item.by, item.fact_id))
    return ConsolidationReport(tuple(found), checked, threshold, dry_run)
