"""A batch one of whose texts the embedder refuses: the other texts still get their vectors.

A server that cannot embed one text (too long for its model, a byte sequence its
tokenizer rejects) answers the whole request with an error. Were that error the
batch's, a background batch, a ``reindex`` or an import would fail on that one
text every time they met it. :func:`embed_what_it_takes` halves a batch the
embedder refused for its input (:attr:`~ctxslots.errors.EmbedderError.refused_input`)
until each refused text stands alone, and embeds the rest: a few requests for each
refused text, none more when nothing is refused. Any other failure (the server down,
a wrong dimension) is not one text's and raises as before.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence

import attrs
import numpy as np

from ...errors import EmbedderError
from ._base import Vectors

__all__ = ["PLAIN_TEXT", "PartialVectors", "embed_what_it_takes", "warn_refused"]

#: What is sent when an embedder refused every text it was given: refused too, the
#: embedder refuses everything (a wrong model name), and the first refusal is raised.
PLAIN_TEXT = "plain text"


@attrs.frozen
class PartialVectors:
    """The vectors of the texts an embedder took, and the texts it refused.

    Attributes:
        kept: The positions (in the texts given) of the texts embedded, ascending.
        vectors: Their vectors, row ``i`` for ``kept[i]``.
        refused: The position of each text refused alone, with its error.
    """

    kept: list[int]
    vectors: Vectors
    refused: dict[int, EmbedderError]


def embed_what_it_takes(embed: Callable[[list[str]], Vectors], texts: Sequence[str]
                        ) -> PartialVectors:
    """Embed ``texts``, leaving out each text the embedder refuses on its own.

    :raises EmbedderError: A failure that is not a refusal of the input, or a refusal
        of every text given and of :data:`PLAIN_TEXT` as well (the embedder refuses
        everything: a wrong model name, not one text).
    """
    items = list(texts)
    kept: list[int] = []
    chunks: list[Vectors] = []
    refused: dict[int, EmbedderError] = {}
    try:
        whole = embed(items)
    except EmbedderError as exc:
        if not exc.refused_input:
            raise
        if len(items) == 1:
            refused[0] = exc
        else:
            _halves(embed, items, 0, kept, chunks, refused)
        if not kept:
            try:  # an embedder that refuses every text, a plain one too, is misconfigured
                plain = embed([PLAIN_TEXT])
            except EmbedderError:
                raise exc from None
            return PartialVectors([], plain[:0], refused)
        return PartialVectors(kept, np.ascontiguousarray(np.concatenate(chunks)), refused)
    return PartialVectors(list(range(len(items))), whole, {})


def _halves(embed: Callable[[list[str]], Vectors], texts: list[str], offset: int,
            kept: list[int], chunks: list[Vectors], refused: dict[int, EmbedderError]) -> None:
    middle = len(texts) // 2
    for start, part in ((0, texts[:middle]), (middle, texts[middle:])):
        try:
            vectors = embed(part)
        except EmbedderError as exc:
            if not exc.refused_input:
                raise
            if len(part) == 1:
                refused[offset + start] = exc
            else:
                _halves(embed, part, offset + start, kept, chunks, refused)
            continue
        kept.extend(range(offset + start, offset + start + len(part)))
        chunks.append(vectors)


def warn_refused(refused: dict[int, EmbedderError], *, stacklevel: int = 2) -> None:
    """Warn that the facts of these ids (with the embedder's error for each) were kept
    without a vector."""
    if not refused:
        return
    ids = sorted(refused)
    shown = ", ".join(map(str, ids[:5])) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")
    count = len(ids)
    warnings.warn(
        f"the embedder refused the value of {count} fact{'s' if count != 1 else ''} "
        f"(id {shown}: {refused[ids[0]]}); kept without a vector, found by "
        f"{'their' if count != 1 else 'its'} words only", RuntimeWarning, stacklevel=stacklevel + 1)
