"""A batch one of whose texts the embedder refuses: the other texts still get their vectors.

A server that cannot embed one text (too long for its model, a byte sequence its
tokenizer rejects) answers the whole request with an error. Were that error the
batch's, a background batch, a ``reindex`` or an import would fail on that one
text every time they met it. :func:`embed_what_it_takes` halves a batch the
embedder refused for its input (:attr:`~ctxslots.errors.EmbedderError.refused_input`)
until each refused text stands alone, and embeds the rest: a few requests for each
refused text, none more when nothing is refused, one more when the embedder refuses
everything. Any other failure (the server down,
a wrong dimension) is not one text's and raises as before.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence

import attrs
import numpy as np

from ...errors import EmbedderError
from ._base import Vectors

__all__ = ["CHUNK", "PLAIN_TEXT", "PartialVectors", "embed_what_it_takes", "warn_refused"]

#: What is sent when an embedder refused a batch: refused too, the embedder refuses
#: everything (a wrong model name), and the refusal is raised.
PLAIN_TEXT = "plain text"
#: Texts sent at once after a refusal: the HTTP embedder's own batch, so a request that
#: went through is never sent again for another text's refusal.
CHUNK = 64


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

    On a refusal, :data:`PLAIN_TEXT` is embedded first (refused too, the embedder
    refuses everything and the refusal is raised at once); then the texts are embedded
    :data:`CHUNK` at a time, and a refused chunk halved until each refused text stands
    alone.

    :raises EmbedderError: A failure that is not a refusal of the input, or a refusal
        of :data:`PLAIN_TEXT` as well (a wrong model name, not one text).
    """
    items = list(texts)
    try:
        return PartialVectors(list(range(len(items))), embed(items), {})
    except EmbedderError as exc:
        if not exc.refused_input:
            raise
        refusal = exc
    try:  # an embedder that refuses a plain text too is misconfigured
        plain = embed([PLAIN_TEXT])
    except EmbedderError as failed:
        raise (refusal if failed.refused_input else failed) from None
    if len(items) == 1:
        return PartialVectors([], plain[:0], {0: refusal})
    kept: list[int] = []
    chunks: list[Vectors] = [plain[:0]]
    refused: dict[int, EmbedderError] = {}
    if len(items) <= CHUNK:  # just refused together: halved at once
        _halve(embed, items, 0, kept, chunks, refused, refusal)
    else:
        for start in range(0, len(items), CHUNK):
            _embed_or_halve(embed, items[start:start + CHUNK], start, kept, chunks, refused)
    return PartialVectors(kept, np.ascontiguousarray(np.concatenate(chunks)), refused)


def _embed_or_halve(embed: Callable[[list[str]], Vectors], texts: list[str], offset: int,
                    kept: list[int], chunks: list[Vectors],
                    refused: dict[int, EmbedderError]) -> None:
    try:
        vectors = embed(texts)
    except EmbedderError as exc:
        if not exc.refused_input:
            raise
        _halve(embed, texts, offset, kept, chunks, refused, exc)
        return
    kept.extend(range(offset, offset + len(texts)))
    chunks.append(vectors)


def _halve(embed: Callable[[list[str]], Vectors], texts: list[str], offset: int,
           kept: list[int], chunks: list[Vectors], refused: dict[int, EmbedderError],
           exc: EmbedderError) -> None:
    """``texts``, refused together (``exc``): each half embedded or halved again."""
    if len(texts) == 1:
        refused[offset] = exc
        return
    middle = len(texts) // 2
    _embed_or_halve(embed, texts[:middle], offset, kept, chunks, refused)
    _embed_or_halve(embed, texts[middle:], offset + middle, kept, chunks, refused)


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
