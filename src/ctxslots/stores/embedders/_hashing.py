"""The deterministic feature-hashing embedder."""

from __future__ import annotations

import functools
import hashlib
import math
import re
from collections.abc import Sequence

import attrs
import numpy as np

from .._stopwords import ENGLISH_STOP_WORDS
from ._base import Vectors, as_texts, normalize_rows

__all__ = ["HashingEmbedder"]

_TOKEN = re.compile(r"\w+")
_EMPTY_FEATURE = "\x00empty"
_SIGN_BIT = 1 << 63
# n-grams of longer tokens (hashes, base64) add cost and no meaning.
_MAX_NGRAM_WORD = 64


def _feature_hash(feature: str, dimension: int) -> tuple[int, float]:
    """Bucket and sign of one feature, from blake2b (stable across processes)."""
    h = int.from_bytes(hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest(), "little")
    return (h & (_SIGN_BIT - 1)) % dimension, (-1.0 if h & _SIGN_BIT else 1.0)


@functools.lru_cache(maxsize=1 << 16)
def _word_features(
    word: str, dimension: int, char_ngram: int, ngram_weight: float
) -> tuple[tuple[int, ...], tuple[float, ...]]:
    """Buckets and signed weights of one word: the word itself plus its char n-grams."""
    index, sign = _feature_hash("w\x00" + word, dimension)
    buckets, weights = [index], [sign]
    if char_ngram and ngram_weight:
        marked = f"<{word[:_MAX_NGRAM_WORD]}>"
        grams = [marked[i : i + char_ngram] for i in range(max(len(marked) - char_ngram + 1, 1))]
        # Each word's n-grams together weigh ngram_weight, so long words don't dominate.
        per_gram = ngram_weight / math.sqrt(len(grams))
        for gram in grams:
            index, sign = _feature_hash("c\x00" + gram, dimension)
            buckets.append(index)
            weights.append(sign * per_gram)
    return tuple(buckets), tuple(weights)


@attrs.frozen
class HashingEmbedder:
    """Deterministic feature-hashing embedder: no model, no network, numpy only.

    Each text is lower-cased and split into word tokens; English stop words are
    left out (unless nothing else is left). Every word adds a signed hashed
    feature for itself and for its character n-grams with ``<``/``>`` boundary
    marks, so "deploy" and "deployment" share features. Buckets and signs come
    from blake2b, so the same text gives the same bytes in every process and on
    every platform. Repeated words count ``1 + log(tf)`` when ``sublinear_tf``.
    A text with no word at all maps to one fixed feature, so every row has unit
    norm.

    It captures shared words and word parts, not meaning: "ship" and "deploy"
    are unrelated to it.

    Attributes:
        dimension: Number of hash buckets (vector length).
        char_ngram: Character n-gram length; 0 turns n-grams off.
        ngram_weight: Total weight of one word's n-grams against 1 for the word.
        sublinear_tf: Weight repeated words by ``1 + log(count)``, not ``count``.
        drop_stop_words: Leave out English stop words.
    """

    dimension: int = attrs.field(default=384, validator=attrs.validators.ge(2))
    char_ngram: int = attrs.field(default=3, validator=attrs.validators.ge(0), kw_only=True)
    ngram_weight: float = attrs.field(default=1.0, validator=attrs.validators.ge(0.0), kw_only=True)
    sublinear_tf: bool = attrs.field(default=True, kw_only=True)
    drop_stop_words: bool = attrs.field(default=True, kw_only=True)

    @property
    def model_id(self) -> str:
        """``hash-v1-DIM``, plus a suffix for each setting that differs from the default."""
        parts = [f"hash-v1-{self.dimension}"]
        if self.char_ngram != 3:
            parts.append(f"n{self.char_ngram}")
        if self.ngram_weight != 1.0:
            parts.append(f"w{self.ngram_weight:g}")
        if not self.sublinear_tf:
            parts.append("rawtf")
        if not self.drop_stop_words:
            parts.append("stopwords")
        return "-".join(parts)

    def _tokens(self, text: str) -> list[str]:
        tokens = _TOKEN.findall(text.lower())
        if self.drop_stop_words:
            kept = [t for t in tokens if t not in ENGLISH_STOP_WORDS]
            return kept or tokens
        return tokens

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Embed ``texts``; see the class docstring for the features."""
        items = as_texts(texts)
        dim = self.dimension
        flat: list[int] = []
        weights: list[float] = []
        for row, text in enumerate(items):
            counts: dict[str, int] = {}
            for token in self._tokens(text):
                counts[token] = counts.get(token, 0) + 1
            if not counts:
                index, sign = _feature_hash(_EMPTY_FEATURE, dim)
                flat.append(row * dim + index)
                weights.append(sign)
                continue
            offset = row * dim
            for word, count in counts.items():
                tf = 1.0 + math.log(count) if self.sublinear_tf else float(count)
                buckets, signed = _word_features(word, dim, self.char_ngram, self.ngram_weight)
                flat.extend(offset + b for b in buckets)
                weights.extend(tf * w for w in signed)
        matrix = np.bincount(
            np.asarray(flat, dtype=np.int64),
            weights=np.asarray(weights, dtype=np.float64),
            minlength=len(items) * dim,
        ).reshape(len(items), dim)
        return normalize_rows(matrix)
