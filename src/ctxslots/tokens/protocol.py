"""What a token counter is, and how one is chosen by name."""

from __future__ import annotations

import operator
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import attrs

from ..errors import EncodingError, InvalidRequestError
from ._tiktoken import ENCODINGS, TokenCounter
from .huggingface import HuggingFaceCounter

__all__ = ["TokenCounterProtocol", "check_counter", "checked_counts", "counter_from_spec",
           "counter_name",
           "exact_count", "joined_count"]


@runtime_checkable
class TokenCounterProtocol(Protocol):
    """Counts the tokens of a text the way the model that reads the prompt will.

    The assembler calls ``count`` on every rendered piece and on the final
    prompt, so it should be fast on short strings (cache if encoding is slow).
    A counter may also offer ``count_exact(text)`` (used for the final prompt
    instead of ``count``, for counters whose ``count`` is approximate or cached)
    and a ``name`` that prompts and dumps report (default: the class name).
    """

    def count(self, text: str) -> int:
        """The number of tokens of ``text``: a whole number >= 0."""
        ...


def check_counter(counter: Any) -> TokenCounterProtocol:
    """``counter`` if it has a callable ``count``.

    :raises InvalidRequestError: It has none, or it is text (``str.count`` counts a
        substring: an encoding's name given as the counter counted every piece as 0
        tokens, and no budget held).
    """
    if isinstance(counter, (str, bytes, bytearray)):
        hint = (f": for an encoding or a tokenizer.json file, pass "
                f"ctxslots.tokens.counter_from_spec({counter!r})" if isinstance(counter, str)
                else "")
        raise InvalidRequestError(f"counter must be a token counter, not the text "
                                  f"{counter!r}{hint}", field="counter", value=counter)
    if not callable(getattr(counter, "count", None)):
        raise InvalidRequestError(
            f"counter must have a count(text) -> int method, not {type(counter).__name__}",
            field="counter", value=counter)
    return counter  # type: ignore[no-any-return]


def _whole(value: Any, counter: str, method: str) -> int:
    """``value`` a counter returned, as an ``int``.

    :raises InvalidRequestError: It is not a whole number >= 0.
    """
    try:
        number = None if isinstance(value, bool) else operator.index(value)
    except TypeError:
        number = None
    if number is None or number < 0:
        raise InvalidRequestError(
            f"the token counter {counter} returned {value!r} from {method}(): a count of "
            "tokens must be a whole number >= 0 (round an estimate up with math.ceil)",
            field="counter", value=value)
    return number


@attrs.frozen
class _Checked:
    """A counter of one's own, each of its counts checked to be a whole number >= 0."""

    counter: TokenCounterProtocol
    name: str

    def count(self, text: str) -> int:
        return _whole(self.counter.count(text), self.name, "count")

    def count_exact(self, text: str) -> int:
        method = "count_exact" if callable(getattr(self.counter, "count_exact", None)) \
            else "count"
        return _whole(exact_count(self.counter)(text), self.name, method)

    def count_joined(self, parts: Sequence[str]) -> int:
        method = "count_joined" if callable(getattr(self.counter, "count_joined", None)) \
            else "count_exact"
        return _whole(joined_count(self.counter)(parts), self.name, method)


def checked_counts(counter: TokenCounterProtocol) -> TokenCounterProtocol:
    """``counter`` as the assembler counts with it: the built-in counters as they are,
    any other wrapped so that a count that is not a whole number >= 0 (a float
    estimate, ``None``, a negative number) is an :class:`InvalidRequestError` naming
    the counter, not a ``TypeError`` deep in the fitting or a prompt of
    fractional tokens."""
    if type(counter) in (TokenCounter, HuggingFaceCounter):
        return counter
    return _Checked(counter, counter_name(counter))


def counter_name(counter: TokenCounterProtocol) -> str:
    """The name a prompt reports for ``counter``: its ``name``, else its class name."""
    name = getattr(counter, "name", None)
    return name if isinstance(name, str) and name else type(counter).__name__


def exact_count(counter: TokenCounterProtocol) -> Callable[[str], int]:
    """The counter's ``count_exact`` when it has one, else its ``count``."""
    exact = getattr(counter, "count_exact", None)
    return exact if callable(exact) else counter.count


def joined_count(counter: TokenCounterProtocol) -> Callable[[Sequence[str]], int]:
    """``count(parts)``: the exact tokens of ``"".join(parts)``, through the counter's
    ``count_joined`` when it has one (it may add up remembered counts of the
    parts), else its exact count of the joined text."""
    joined = getattr(counter, "count_joined", None)
    if callable(joined):
        return joined  # type: ignore[no-any-return]
    exact = exact_count(counter)
    return lambda parts: exact("".join(parts))


def counter_from_spec(spec: str) -> TokenCounterProtocol:
    """A counter from a name: a tiktoken encoding (``o200k_base``, ``cl100k_base``) or the
    path of a HuggingFace ``tokenizer.json`` file (read locally, never downloaded).

    :raises EncodingError: Neither a known encoding nor a readable tokenizer file.
    """
    if spec in ENCODINGS:
        return TokenCounter(spec)
    path = Path(spec).expanduser()
    if path.is_file():
        return HuggingFaceCounter(path)
    if path.suffix == ".json" or path.is_absolute() or path.is_dir() \
            or spec.startswith(("./", "../", "~", f".{os.sep}")):
        # A path meant: say what is wrong with it, not that the name is unknown.
        what = "is a folder" if path.is_dir() else "does not exist"
        raise EncodingError(f"tokenizer file {spec!r} {what}: give the path of a "
                            f"tokenizer.json file, or {' or '.join(sorted(ENCODINGS))}",
                            encoding=spec)
    raise EncodingError(
        f"unknown tokenizer {spec!r}: give {' or '.join(sorted(ENCODINGS))}, or the path of a "
        "tokenizer.json file", encoding=spec)
