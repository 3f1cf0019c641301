"""Turn any text into a safe FTS5 query.

Whatever the input (any unicode, any length, FTS5 syntax, quotes, SQL, code),
:func:`sanitize_query` returns either a valid FTS5 expression made of quoted
tokens joined by ``OR``, or the empty string, which means "search nothing".
It never raises on a string.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import attrs

from .._checks import number, whole, word_set
from ..errors import InvalidArgumentError
from ._stopwords import ENGLISH_STOP_WORDS
from .stemming import CJK, WORD, unmarked_text

__all__ = ["MAX_QUERY_SHARE", "MAX_SCHEME_CHARS", "QueryPolicy", "keep_words", "query_tokens",
           "sanitize_query", "to_match"]

#: Default :attr:`QueryPolicy.max_query_share`: bounds the share of the store one
#: search scores, which keeps the slowest searches near the median
#: (BENCHMARKS.md, "The search tail").
MAX_QUERY_SHARE = 0.15

#: Longest URL scheme taken as one (``https``, ``git+ssh``, ``vscode-insiders``...): a
#: longer run of letters, ``+``, ``.`` and ``-`` before ``://`` is words, and bounding
#: it keeps stripping linear (unbounded, each word boundary of a long run such as
#: ``ab+ab+ab+...`` was scanned to the run's end: minutes for a 200 KB message).
MAX_SCHEME_CHARS = 64
_URL = re.compile(rf"(?:\b[a-z][a-z0-9+.\-]{{0,{MAX_SCHEME_CHARS - 1}}}://|\bwww\.)\S*",
                  re.IGNORECASE)
# Letters and digits only (with the vowel signs of scripts that write them as marks),
# as the stemmer splits words: hyphens, underscores, dots, slashes, quotes and every
# operator character split tokens.
_TOKEN = WORD


@attrs.frozen
class QueryPolicy:
    """How free text becomes a lexical query.

    Attributes:
        min_token_length: Tokens shorter than this (in characters) are dropped,
            but for a character of Han, kana or Hangul (one is a word there).
        stop_words: Lower-case words left out of the query; an empty set keeps
            every word.
        max_tokens: At most this many distinct tokens are kept (the first ones),
            so a pasted log cannot make one search scan the whole index.
        max_doc_share: Words found in more than this share of the facts are
            left out of the query (the rarest word is kept if all are that
            common); 1.0 keeps them all. They weigh almost nothing in BM25 but
            make FTS5 score a large part of the table.
        common_min_facts: Stores with fewer facts keep every word.
        max_query_share: The words kept are found in at most this share of the
            facts together (their document counts summed); over it, the most
            common kept words are left out too (the rarest word is always
            kept); 1.0 sets no bound. FTS5 scores every fact holding any query
            word, so a long question of several words each just under
            ``max_doc_share`` would otherwise score a fifth of the table: this
            bounds what one search costs.
    """

    min_token_length: int = attrs.field(default=2, validator=whole(1))
    stop_words: frozenset[str] = attrs.field(default=ENGLISH_STOP_WORDS, validator=word_set)
    max_tokens: int = attrs.field(default=32, validator=whole(1))
    max_doc_share: float = attrs.field(default=0.1, validator=number(0.0, 1.0, above=True))
    common_min_facts: int = attrs.field(default=2000, validator=whole(0))
    max_query_share: float = attrs.field(default=MAX_QUERY_SHARE,
                                         validator=number(0.0, 1.0, above=True))


DEFAULT_POLICY = QueryPolicy()


def keep_words(tokens: list[str], docs: Mapping[str, int], rows: int, *, share: float,
               total_share: float = 1.0) -> list[str]:
    """``tokens`` (in order) without those found in more than ``share`` of ``rows``
    facts, then without the most common ones until the rest are found in at most
    ``total_share`` of them together (counts summed; 1.0: no such bound); the
    rarest token is always kept.

    :param docs: Facts holding each token (missing: none).
    """
    if not tokens:
        return tokens
    count = {t: int(docs.get(t, 0)) for t in tokens}
    kept = [t for t in tokens if count[t] <= share * rows]
    if not kept:
        return [min(tokens, key=lambda t: (count[t], t))]
    bound = total_share * rows if total_share < 1.0 else float("inf")
    while len(kept) > 1 and sum(count[t] for t in kept) > bound:
        kept.remove(max(kept, key=lambda t: (count[t], t)))
    return kept


def query_tokens(text: str, policy: QueryPolicy = DEFAULT_POLICY) -> list[str]:
    """The distinct lower-case tokens of ``text`` that a query would use, in order."""
    if not isinstance(text, str):
        raise InvalidArgumentError(f"query must be a string, not {type(text).__name__}",
                                   field="query", value=text)
    # Words are read as the index reads a fact's (see stemming.unmarked_text): a word
    # written decomposed or with vowel points is one word, not pieces at each mark.
    text = unmarked_text(_URL.sub(" ", text))
    seen: dict[str, None] = {}
    for match in _TOKEN.finditer(text):
        token = match.group().casefold()
        if (len(token) < policy.min_token_length and not CJK.search(token)) \
                or token in policy.stop_words:
            continue
        seen.setdefault(token, None)
        if len(seen) >= policy.max_tokens:
            break
    return list(seen)


def to_match(tokens: list[str]) -> str:
    """Quote and OR-join tokens made by :func:`query_tokens`."""
    return " OR ".join(f'"{token}"' for token in tokens)


def sanitize_query(text: str, policy: QueryPolicy = DEFAULT_POLICY) -> str:
    """Return ``text`` as an FTS5 OR-query of quoted tokens, or ``""`` for none.

    >>> sanitize_query('deploy-day? see https://x.io/a "NEAR(" OR src/api.py')
    '"deploy" OR "day" OR "see" OR "near" OR "src" OR "api" OR "py"'

    :raises InvalidArgumentError: ``text`` is not a string, or ``policy`` not a
        :class:`QueryPolicy`.
    """
    if not isinstance(policy, QueryPolicy):
        raise InvalidArgumentError(f"policy must be a QueryPolicy, not {policy!r}",
                                   field="policy", value=policy)
    return to_match(query_tokens(text, policy))
