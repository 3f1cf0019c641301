"""The embedder protocol and helpers shared by the built-in embedders."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from ...errors import EmbedderError, EmbedderSpecError

__all__ = ["Embedder", "EmbedderSpecError", "Vectors", "as_texts", "embed_checked",
           "normalize_rows"]

#: What every embedder returns: float32, one unit-length row per text.
Vectors = npt.NDArray[np.float32]


@runtime_checkable
class Embedder(Protocol):
    """What the fact store needs from an embedder.

    ``embed`` returns a float32 array of shape ``(len(texts), dimension)`` whose
    rows have unit L2 norm; an empty input gives shape ``(0, dimension)``. The store
    also takes any array-like of that shape (a list of lists of floats), converted
    to float32 (see :func:`embed_checked`).
    ``model_id`` names the model and its settings: the store records it with
    the dimension, so vectors built by another embedder are detected.

    On Python before 3.12, ``isinstance(obj, Embedder)`` reads ``dimension``,
    which may load a model or ask a server (see each embedder).
    """

    @property
    def model_id(self) -> str:
        """A stable name for the model and any setting that changes its vectors."""
        ...

    @property
    def dimension(self) -> int:
        """The length of every vector."""
        ...

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Embed ``texts``, one unit-length float32 row per text, in order."""
        ...


def as_texts(texts: Sequence[str]) -> list[str]:
    """The texts as a list, refusing a bare string or non-string items."""
    if isinstance(texts, (str, bytes)):
        raise TypeError("embed() takes a sequence of texts, not a single string")
    items = list(texts)
    for item in items:
        if not isinstance(item, str):
            raise TypeError(f"embed() takes strings, got {type(item).__name__}")
    return items


def normalize_rows(matrix: npt.NDArray[Any]) -> Vectors:
    """Rows scaled to unit L2 norm (all-zero rows stay zero), as contiguous float32."""
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0.0] = 1.0
    return np.ascontiguousarray(matrix / norms, dtype=np.float32)


def embed_checked(embedder: Embedder, texts: Sequence[str]) -> Vectors:
    """``embedder.embed(texts)`` as a contiguous float32 array, one row per text.

    The embedder may return any array-like of shape ``(len(texts), dimension)``:
    an array of another float type, or a list of lists of numbers.

    :raises EmbedderError: It returned no array of numbers, or one of another
        shape; names the embedder.
    """
    made = embedder.embed(texts)
    model, dimension = embedder.model_id, embedder.dimension
    try:
        vectors = np.asarray(made, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise EmbedderError(
            f"embedder {model} returned {type(made).__name__} that is no array of numbers "
            f"({exc}); embed(texts) returns one row of {dimension} floats per text",
            model_id=model) from exc
    if not texts and vectors.size == 0:
        return np.zeros((0, dimension), dtype=np.float32)
    if vectors.shape != (len(texts), dimension):
        raise EmbedderError(
            f"embedder {model} returned vectors of shape {vectors.shape} for {len(texts)} "
            f"text(s); embed(texts) returns one row of {dimension} floats per text",
            model_id=model)
    return np.ascontiguousarray(vectors)
