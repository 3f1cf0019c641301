"""Prompt dumps: JSON (a stable, versioned schema), markdown and one HTML page.

They render a prompt's dump data (:func:`ctxslots.model.dump_data.prompt_to_dict`,
whose schema ``docs/assembler.md`` documents), never the prompt's classes:
:meth:`AssembledPrompt.dump <ctxslots.model.AssembledPrompt.dump>` calls
:func:`render_dump`, so the data model renders its dumps without depending on
jinja2 or on the assembler. The markdown and HTML dumps show what a person
reads: the relevance as a share of the best in the prompt with the words rank
(the raw BM25 on hover in HTML), the cosine with its rank, the age in words;
fused values such as RRF scores are never shown raw.
"""

from __future__ import annotations

import json
from typing import Any

import jinja2

from .._readable import lifts, share
from ..errors import InvalidRequestError
from . import default_environment, render_template
from .ages import days_in_words

__all__ = ["DUMP_FORMATS", "html_helpers", "render_dump"]

#: The formats :func:`render_dump` writes.
DUMP_FORMATS = ("json", "markdown", "html")

_TEMPLATES = {"markdown": "dump.md.j2", "html": "dump.html.j2"}


def _fmt(value: Any, digits: int = 3) -> str:
    """A signal for display: ``–`` for none, floats to ``digits`` significant digits."""
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return str(value)


def _days(value: float | None) -> str:
    """An age in days as the HTML dump's hover shows it: "3.25", "1,500" (to the hundredth
    of a day, never in exponent notation); ``–`` for none."""
    if value is None:
        return "–"
    return f"{value:,.2f}".rstrip("0").rstrip(".")


def _lifts(trace: dict[str, Any]) -> str:
    """The ranking multipliers of a dumped trace beyond decay, reinforcement and
    confidence ("episode ×1.30, boost ×2.00"); empty when it has none."""
    return lifts(trace.get("extra"))


def _percent(part: int, whole: int) -> float:
    return 0.0 if whole <= 0 else min(100.0, 100.0 * part / whole)


def html_helpers() -> dict[str, Any]:
    """What the HTML dump's templates call besides ``d``, for a page that includes
    ``dump_sections.html.j2`` (the inspector's prompt lab)."""
    return {"fmt": _fmt, "percent": _percent, "age": days_in_words, "days": _days,
            "lifts": _lifts, "share": share}


def render_dump(data: dict[str, Any], format: str = "json", *,
                environment: jinja2.Environment | None = None) -> str:
    """Render a prompt's dump ``data`` as a ``json``, ``markdown`` or ``html`` dump.

    :raises InvalidRequestError: Unknown format.
    """
    if format not in DUMP_FORMATS:
        raise InvalidRequestError(
            f"unknown dump format {format!r} (use {', '.join(DUMP_FORMATS)})",
            field="format", value=format,
        )
    if format == "json":
        return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    if environment is None:
        environment = default_environment()
    items = [item for section in data["sections"] for item in section["items"]]
    kept = sum(1 for item in items if item["decision"] == "kept")
    return render_template(
        environment, _TEMPLATES[format], d=data, kept_count=kept,
        dropped_count=len(items) - kept, why_url=None, **html_helpers(),
    )
