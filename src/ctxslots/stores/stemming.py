"""Words as both engines index them: split, case folded, diacritics removed, Snowball-stemmed.

The stemming happens here and nowhere else. A fact's key, value and tags (and
its context apart) are stored a second time as their stems joined by spaces,
and each engine indexes that text with a plain tokenizer (FTS5 ``unicode61``,
PostgreSQL ``simple``); a query's words go through the same function. So the
same text and query find the same facts on SQLite and PostgreSQL, whatever
tokenizers or server locale each engine has (BENCHMARKS.md, "One stemmer for
both engines").

Words are split as FTS5's ``unicode61`` splits them (runs of letters and
digits; the vowel signs of Indic and Southeast Asian scripts keep a word whole, and
are then left out of its stem, where ``unicode61`` would split it), case folded, their diacritics removed (``café`` and ``cafe`` meet; a kana voicing
mark is not a diacritic), and stemmed by Snowball English (the algorithm of
PostgreSQL's ``english`` dictionary): PyStemmer when installed,
``snowballstemmer``'s pure-Python stemmer otherwise (the same algorithm and stems,
slower). A run of Han, kana or Hangul characters, which no space splits into
words, is indexed as its characters and their overlapping pairs, and a query asks
for its pairs and its Han characters (much as Lucene's CJK bigrams do), so
``東京`` finds ``東京都渋谷区に住む``.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

__all__ = [
    "CJK",
    "MAX_QUERY_STEMS",
    "STEMMED",
    "STEMMER",
    "STEM_COLUMNS",
    "WORD",
    "first_stem",
    "fold",
    "stem_text",
    "stem_words",
    "stemmed_query",
    "stems_of",
    "token_count",
    "unmarked_text",
    "with_stems",
]

#: Blocks of scripts whose combining marks are letters of the word (Indic vowel signs
#: and viramas, Thai, Tibetan, Myanmar and Khmer signs), not diacritics to drop.
_LETTER_MARK_BLOCKS = ((0x0900, 0x0DFF), (0x0E00, 0x0EFF), (0x0F00, 0x0FFF),
                       (0x1000, 0x109F), (0x1780, 0x17FF))
_LETTER_MARKS = "".join(
    chr(c) for low, high in _LETTER_MARK_BLOCKS for c in range(low, high + 1)
    if unicodedata.category(chr(c)).startswith("M"))
#: The marks the fold keeps: those, and the kana voicing marks (``ガ``, gas, is not ``カ``).
_KEPT_MARKS = frozenset(_LETTER_MARKS + "\u3099\u309a")
_MARKS = re.compile(f"[{''.join(sorted(_KEPT_MARKS))}]")
#: A word: letters and digits, with the marks of :data:`_LETTER_MARKS` inside it.
WORD = re.compile(f"[^\\W_](?:[^\\W_]|[{_LETTER_MARKS}])*")
#: Characters of scripts written without spaces between words (Han, kana) and of
#: Hangul, whose words take suffixes: a run of them is indexed as its characters and
#: their overlapping pairs, and a query looks for its pairs and its Han characters
#: (a run of one character, for that character).
CJK = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
                  "\uac00-\ud7a3\U00020000-\U0002fa1f]+")
_HAN = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f]")
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


def fold(text: str) -> str:
    """``text`` as the words of an index compare: case folded, without the combining marks
    that are diacritics (``İstanbul``, ``München`` and ``Naïve`` read ``istanbul``,
    ``munchen`` and ``naive``; an Indic vowel sign or a kana voicing mark stays), composed.

    A compatibility character may decompose to capitals (``𝐇𝐞𝐥𝐥𝐨``, ``ℍ`` and ``㎒``
    read ``Hello``, ``H`` and ``MHz``), so the text is case folded again after it: every
    stem is in lower case, as both engines' tokenizers and the in-memory copy compare it."""
    text = text.casefold()
    return text if text.isascii() else unmarked_text(text).casefold()


def unmarked_text(text: str) -> str:
    """``text`` without the combining marks :func:`fold` drops, composed, its case kept.

    Words are found in this form, never in the text as written: a combining mark is no
    letter, so a word written decomposed (``Mu\u0308nchen``, as macOS and some keyboards
    write it) or with vowel points (``كَتَبَ``, ``שָׁלוֹם``) would otherwise split into
    pieces at each mark, too short to search, where the same word composed or unpointed
    stays whole."""
    if text.isascii():
        return text
    decomposed = unicodedata.normalize("NFKD", text)
    kept = "".join(c for c in decomposed if not unicodedata.combining(c) or c in _KEPT_MARKS)
    return unicodedata.normalize("NFC", kept)


def _unmarked(word: str) -> str:
    """``word`` without the marks it kept to stay one word (Indic vowel signs, a kana
    voicing mark NFC could not compose): FTS5's ``unicode61`` would split the stems there,
    PostgreSQL's parser not, so a stem holds none."""
    return word if word.isascii() else _MARKS.sub("", word)


def _pieces(word: str, query: bool) -> list[str]:
    """``word``, or for a run of :data:`CJK` characters in it, those characters and
    their overlapping pairs (a query: the pairs and the Han characters, or the one
    character)."""
    if word.isascii() or not CJK.search(word):
        return [word]
    out: list[str] = []
    at = 0
    for run in CJK.finditer(word):
        if run.start() > at:
            out.append(word[at:run.start()])
        chars = run.group()
        pairs = [chars[i:i + 2] for i in range(len(chars) - 1)]
        if not query or not pairs:
            out += [*chars, *pairs]
        else:  # a Han character is a word by itself; a kana or Hangul one seldom is
            out += [*pairs, *(c for c in chars if _HAN.match(c))]
        at = run.end()
    if at < len(word):
        out.append(word[at:])
    return out


def stem_words(words: Iterable[str], *, query: bool = False) -> list[str]:
    """The stem of each word (or run of words) of ``words``, in order; a word the
    split breaks apart gives each of its parts, and a run of Han, kana or Hangul its
    characters and their pairs (``query``: its pairs and Han characters, see
    :func:`_pieces`)."""
    folded = [piece for word in words for part in WORD.findall(fold(word))
              for piece in _pieces(_unmarked(part), query)]
    # A run of digits is its own stem: numbers skip the stemmer, whose cache would
    # otherwise fill with every number a store holds (ids, times, versions).
    lettered = [word for word in folded if not word.isdigit()]
    if len(lettered) == len(folded):
        return _stem_many(folded) if folded else []
    stems = iter(_stem_many(lettered) if lettered else [])
    return [word if word.isdigit() else next(stems) for word in folded]


def token_count(token: str, counts: Iterable[int]) -> int:
    """The facts a query token is counted as found in, from the counts of its stems
    (:func:`stemmed_query` of it): a word the split breaks apart (``deploy-day``) its
    commonest part's, a run of Han, kana or Hangul (a phrase) its rarest piece's."""
    found = list(counts)
    if not found:
        return 0
    return min(found) if CJK.search(token) else max(found)


def stem_text(*texts: str | None) -> str:
    """The stems of the words of ``texts`` (``None`` for none), joined by spaces:
    the text an engine indexes in place of the fact's own."""
    return " ".join(stem_words(t for t in texts if t))


#: Most stems a query looks for: a long run of Han or kana gives a stem a character,
#: and a search of thousands is too deep a query for SQLite and slow on PostgreSQL.
MAX_QUERY_STEMS = 64


def stemmed_query(words: Iterable[str]) -> list[str]:
    """The distinct stems of a query's ``words``, in the order first found (at most
    :data:`MAX_QUERY_STEMS`)."""
    return list(dict.fromkeys(stem_words(words, query=True)))[:MAX_QUERY_STEMS]


def first_stem(text: str) -> str | None:
    """The stem of ``text``'s first word (``None`` when it has no word): the subject
    of most sentences a memory holds ("Otto likes...", a turn's "Rosaline: ...")."""
    word = WORD.search(text)
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
