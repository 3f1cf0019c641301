"""The one form a stored vector takes: unit length, or all zeros for a vector with no direction.

Every vector an engine stores passes :func:`unit_rows` first, whoever made it
(an embedder, a plugin, an import carrying its own vectors): its length is
measured in float64, so a huge (``3e38``) or denormal (``1e-40``) vector, whose
float32 length overflows or vanishes, still comes out as its unit direction.
A vector with no direction (all zeros, or a value that is not finite) is
stored as all zeros: the fact keeps its words, every search's vector leg
skips it, and ``doctor`` counts it among the vectors no search can use.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

__all__ = ["COSINE_DIGITS", "TIE_READS", "TIE_READ_GROWTH", "UNIT_TOLERANCE", "settled_cosines",
           "settled_nearest", "unit_rows"]

#: How far from 1 a stored vector's length may be and still count as unit length
#: (float32 rounding leaves a few millionths).
UNIT_TOLERANCE = 1e-3
#: Decimals a vector leg's cosines are kept to: float32 holds about seven, and the
#: engines' vector searches (SQLite's, pgvector's) differ in the last of them, so equal
#: similarities would rank by rounding noise, differently on each engine.
COSINE_DIGITS = 6


def unit_rows(vectors: npt.ArrayLike) -> npt.NDArray[np.float32]:
    """``vectors`` (one per row) scaled to unit length, as contiguous float32; a row with
    no direction (all zeros, NaN or infinite values) becomes all zeros."""
    matrix = np.array(vectors, dtype=np.float64, ndmin=2)
    finite = np.isfinite(matrix).all(axis=1)
    matrix[~finite] = 0.0
    # Scaled by the largest component first, so neither 3e38 squared nor 1e-40 squared
    # leaves float64's range.
    scale = np.abs(matrix).max(axis=1, initial=0.0, keepdims=True)
    scale[scale == 0.0] = 1.0
    matrix /= scale
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0.0] = 1.0
    return np.ascontiguousarray(matrix / norms, dtype=np.float32)


def settled_cosines(nearest: Sequence[tuple[int, float]]) -> list[tuple[int, float]]:
    """A vector leg's ``(fact_id, cosine)`` with each cosine to :data:`COSINE_DIGITS`
    decimals, best first, and by id among equals: the same on every engine."""
    settled = [(fid, round(float(cosine), COSINE_DIGITS)) for fid, cosine in nearest]
    settled.sort(key=lambda pair: (-pair[1], pair[0]))
    return settled


#: How much deeper each further read of a vector leg tied at its cut goes, and how many
#: reads there are at most: a tie of up to 16 times the pool (plus one) is settled by id,
#: in at most three scans; a larger one (thousands of facts of one text) keeps the
#: engine's order beyond that depth rather than scan the store again and again.
TIE_READ_GROWTH = 4
TIE_READS = 3


def settled_nearest(knn: Callable[[int], Sequence[tuple[int, float]]], k: int
                    ) -> list[tuple[int, float]]:
    """The ``k`` nearest as :func:`settled_cosines` ranks them. ``knn(n)`` gives the ``n``
    nearest by the engine's own cosines, best first; it is read deeper (see
    :data:`TIE_READS`) while the last it gives settles level with the ``k``-th, so the
    facts tied at the cut are those of the lowest ids, as among the ``k``, and not those
    the engine's last digits favoured."""
    want = k + 1
    for _ in range(TIE_READS - 1):
        found = knn(want)
        settled = settled_cosines(found)
        if len(found) < want or settled[-1][1] < settled[k - 1][1]:
            return settled[:k]
        want *= TIE_READ_GROWTH
    return settled_cosines(knn(want))[:k]
