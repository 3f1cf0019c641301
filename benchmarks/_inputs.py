"""What a benchmark is given, checked before anything is built or timed.

    parser.add_argument("--sizes", type=positive_ints, default="10000,100000")  # [10000, 100000]
    parser.add_argument("--queries", type=positive_int, default=200)
    parser.add_argument("--model", type=model_name)  # a sentence-transformers model, found now
    samples = read_conversations(args.dev_set)    # the LoCoMo layout, or one line and exit

A size, a query count or a number of rounds of 0 or less would build an empty
store and print ratios of nothing, or fail deep inside a statistic; a model or
embedder spec that names nothing would fail with a traceback once the run is
under way. argparse reports these types' refusals as one ``error: argument
--sizes: ...`` line; the model and spec types give the option back as typed. A
conversation file that is missing, not JSON or not in the LoCoMo layout (that of
``locomo10.json``: a list of ``{"sample_id", "conversation", "qa"}`` whose
``conversation`` holds ``session_N`` lists of turns with ``speaker``,
``dia_id`` and ``text``) ends the run with one line naming the file.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["embedder_spec", "model_name", "model_or_spec", "or_none", "positive_int",
           "positive_ints", "positive_ints_or_none", "read_conversations", "shares",
           "whole_number", "whole_numbers"]

_SESSION = re.compile(r"session_\d+")


def _number(text: str, least: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < least:
        raise argparse.ArgumentTypeError(f"{text!r}: must be at least {least}")
    return value


def positive_int(text: str) -> int:
    """A whole number of at least 1 (facts, queries, repeats, rounds)."""
    return _number(text, 1)


def whole_number(text: str) -> int:
    """A whole number of at least 0 (where 0 turns a part off)."""
    return _number(text, 0)


def positive_ints(text: str) -> list[int]:
    """Comma-separated whole numbers of at least 1 (``"10000,100000"``)."""
    return [positive_int(part) for part in text.split(",")]


def whole_numbers(text: str) -> list[int]:
    """Comma-separated whole numbers of at least 0."""
    return [whole_number(part) for part in text.split(",")]


def embedder_spec(text: str) -> str:
    """An embedder spec (``hash:384``, ``sentence-transformers:PATH``), built to check it (a
    model is found, not loaded)."""
    from ctxslots.errors import EmbedderError
    from ctxslots.stores.embedders import embedder_from_spec

    try:
        embedder_from_spec(text)
    except EmbedderError as error:
        raise argparse.ArgumentTypeError(str(error).split(". ")[0]) from None
    return text


def model_name(text: str) -> str:
    """A sentence-transformers model: a folder, or an installed package that ships one."""
    embedder_spec(f"sentence-transformers:{text}")
    return text


def model_or_spec(text: str) -> str:
    """An embedder spec when ``text`` has a colon (``hash:384``), else a :func:`model_name`."""
    return embedder_spec(text) if ":" in text else model_name(text)


def or_none(check: Callable[[str], str]) -> Callable[[str], str]:
    """``check``, letting ``"none"`` through as is (a script's words-only choice)."""
    def checked(text: str) -> str:
        return text if text == "none" else check(text)

    checked.__name__ = check.__name__
    return checked


def shares(text: str) -> list[float]:
    """Comma-separated shares, each above 0 and at most 1 (``"1,0.2,0.1"``)."""
    values = []
    for part in text.split(","):
        try:
            value = float(part)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{part!r} is not a number") from None
        if not 0 < value <= 1:
            raise argparse.ArgumentTypeError(f"{part!r}: must be above 0 and at most 1")
        values.append(value)
    return values


def positive_ints_or_none(text: str) -> list[int]:
    """Comma-separated token budgets of at least 1; none for an empty ``text``."""
    return positive_ints(text) if text.strip() else []


def _layout_error(sample: Any) -> str | None:
    """What keeps one sample from the LoCoMo layout, or ``None``."""
    if not isinstance(sample, dict):
        return f"a sample is {type(sample).__name__}, not an object"
    missing = [key for key in ("sample_id", "conversation", "qa") if key not in sample]
    if missing:
        return f"a sample has no {', '.join(missing)}"
    conversation, qa = sample["conversation"], sample["qa"]
    if not isinstance(conversation, dict) or not isinstance(qa, list):
        return f"sample {sample['sample_id']!r}: conversation must be an object and qa a list"
    for key, turns in conversation.items():
        if _SESSION.fullmatch(key) and not (isinstance(turns, list) and all(
                isinstance(t, dict) and {"speaker", "dia_id", "text"} <= t.keys() for t in turns)):
            return (f"sample {sample['sample_id']!r}: {key} is not a list of turns with "
                    f"speaker, dia_id and text")
    return None


def read_conversations(path: str | Path) -> list[dict[str, Any]]:
    """The samples of a conversation file in the LoCoMo layout.

    :raises SystemExit: The file is missing or unreadable, is not JSON, or is not a
        non-empty list of samples in the layout (one line naming the file and why).
    """
    try:
        samples = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as error:
        raise SystemExit(f"{path}: cannot read the conversation file: "
                         f"{error.strerror or error}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise SystemExit(f"{path}: not a JSON conversation file ({error})") from None
    if not isinstance(samples, list) or not samples:
        raise SystemExit(f"{path}: not the LoCoMo layout: expected a non-empty list of "
                         f"conversations")
    for sample in samples:
        problem = _layout_error(sample)
        if problem:
            raise SystemExit(f"{path}: not the LoCoMo layout: {problem}")
    return samples
