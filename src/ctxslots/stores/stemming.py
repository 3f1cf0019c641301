"""Words as both engines index them: split, case folded, diacritics removed, Snowball-stemmed.

The stemming happens here and nowhere else. A fact's key, value and tags (and
its context apart) are stored a second time as their stems joined by spaces,
and each engine indexes that text with a plain tokenizer (FTS5 ``unicode61``,
PostgreSQL ``simple``); a query's words go through the same function. So the
same text and query find the same facts on SQLite and PostgreSQL, whatever
tokenizers or server locale each engine has (BENCHMARKS.md, "One stemmer for
both engines").

Words are split as FTS5's ``unicode61`` splits them (runs of letters and
digits), case folded, their diacritics removed (``café`` and ``cafe`` meet),
and stemmed by Snowball English (the algorithm of PostgreSQL's ``english``
dictionary): PyStemmer when installed, ``snowballstemmer``'s pure-Python
stemmer otherwise (the same algorithm and stems, slower).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

__all__ = ["STEMMED", "STEMMER", "STEM_COLUMNS", "first_stem", "stem_text", "stem_words",
           "stemmed_query", "stems_of", "with_stems"]

_WORD = re.compile(r"[^\W_]+")
#: The fact columns whose words are indexed: a change to any of them changes the stems.
STEMMED = ("key", "value", "tags", "context")
#: The stored columns both engines index, made from :data:`STEMMED` by :func:`stems_of`.
STEM_COLUMNS = ("stems", "context_stems")


def _load() -> tuple[str, Callable[[list[str]], list[str]]]:
    try:
        import Stemmer  # type: ignore[import-not-found,unused-ignore]

        fast = Stemmer.Stemmer("english")
        return "PyStemmer", fast.stemWords
    except ImportError:
        import snowballstemmer  # type: ignore[import-untyped,unused-ignore]

        slow = snowballstemmer.stemmer("english")
        return "snowballstemmer", slow.stemWords


#: Which implementation stems (``"PyStemmer"`` or ``"snowballstemmer"``).
STEMMER, _stem_many = _load()


def _fold(word: str) -> str:
    """``word`` case folded, without combining marks (``Naïve`` -> ``naive``)."""
    word = word.casefold()
    if word.isascii():
        return word
    decomposed = unicodedata.normalize("NFKD", word)
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def stem_words(words: Iterable[str]) -> list[str]:
    """The stem of each word (or run of words) of ``words``, in order; a word the
    split breaks apart gives each of its parts."""
    folded = [part for word in words for part in _WORD.findall(_fold(word))]
    # A run of digits is its own stem: numbers skip the stemmer, whose cache would
    # otherwise fill with every number a store holds (ids, times, versions).
    lettered = [word for word in folded if not word.isdigit()]
    if len(lettered) == len(folded):
        return _stem_many(folded) if folded else []
    stems = iter(_stem_many(lettered) if lettered else [])
    return [word if word.isdigit() else next(stems) for word in folded]


def stem_text(*texts: str | None) -> str:
    """The stems of the words of ``texts`` (``None`` for none), joined by spaces:
    the text an engine indexes in place of the fact's own."""
    return " ".join(stem_words(t for t in texts if t))


def stemmed_query(words: Iterable[str]) -> list[str]:
    """The distinct stems of a query's ``words``, in the order first found."""
    return list(dict.fromkeys(stem_words(words)))


def first_stem(text: str) -> str | None:
    """The stem of ``text``'s first word (``None`` when it has no word): the subject
    of most sentences a memory holds ("Nate likes...", a turn's "Caroline: ...")."""
    word = _WORD.search(text)
    stems = stem_words([word.group()]) if word is not None else []
    return stems[0] if stems else None


def stems_of(key: str | None, value: str, tags: str, context: str | None
             ) -> tuple[str, str | None]:
    """The ``stems`` and ``context_stems`` columns of a fact with these texts."""
    return stem_text(key, value, tags), None if context is None else stem_text(context)


def with_stems(fields: Mapping[str, Any], stored: Callable[[], Sequence[Any] | None]
               ) -> Mapping[str, Any]:
    """An update's ``fields`` with the stems they change: made from the fields' texts,
    the ones they leave out taken from ``stored()`` (the row's :data:`STEMMED`
    columns, ``None`` when it has no row: the fields are then returned as they are).
    Fields that change no text of :data:`STEMMED` are returned as they are."""
    if not fields.keys() & STEMMED:
        return fields
    texts: Mapping[str, Any] = fields
    if not fields.keys() >= set(STEMMED):
        found = stored()
        if found is None:
            return fields
        texts = {**dict(zip(STEMMED, found, strict=True)), **fields}
    return {**fields, **dict(zip(STEM_COLUMNS, stems_of(
        texts["key"], texts["value"], texts["tags"], texts["context"]), strict=True))}
