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

import numpy as np
import numpy.typing as npt

__all__ = ["UNIT_TOLERANCE", "unit_rows"]

#: How far from 1 a stored vector's length may be and still count as unit length
#: (float32 rounding leaves a few millionths).
UNIT_TOLERANCE = 1e-3


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
