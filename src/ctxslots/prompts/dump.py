"""Prompt dumps: JSON (a stable, versioned schema), markdown and one HTML page.

The JSON schema is documented in ``docs/assembler.md``; it keeps each raw
retrieval signal (BM25 value and rank, vector rank and cosine when present,
decay, age in days, reinforcement, confidence) and the final rank. The markdown
and HTML dumps show what a person reads: the relevance as a share of the best in
the prompt with the words rank (the raw BM25 on hover in HTML), the cosine with
its rank, the age in words; fused values such as RRF scores are never shown raw.

It knows the prompt's classes only as types: :meth:`AssembledPrompt.dump
<ctxslots.model.AssembledPrompt.dump>` calls :func:`render_dump`, so the data
model renders its dumps without depending on jinja2 or on the assembler.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import jinja2

from ..errors import InvalidRequestError
from . import default_environment, render_template
from .ages import days_in_words
from .readable import share

if TYPE_CHECKING:
    from ..model import AssembledPrompt, HitTrace, ItemDecision, SectionReport

__all__ = ["DUMP_FORMATS", "DUMP_SCHEMA_VERSION", "NEAR_ZERO_RELEVANCE", "prompt_to_dict",
           "render_dump", "trace_signals"]

#: Version of the JSON layout; bumped when a field changes meaning or goes away.
DUMP_SCHEMA_VERSION = 1

#: The formats :func:`dump_prompt` writes.
DUMP_FORMATS = ("json", "markdown", "html")

_TEMPLATES = {"markdown": "dump.md.j2", "html": "dump.html.j2"}

#: A kept item whose relevance is under this share of the best relevance in the
#: prompt counts as near zero (and is flagged when a more relevant item was dropped).
NEAR_ZERO_RELEVANCE = 0.05

#: Drops that do not make a kept item suspicious: the dropped item is shown elsewhere.
_NOT_A_LOSS = {"duplicate"}


def trace_signals(trace: HitTrace) -> dict[str, Any]:
    """The per-signal values of a retrieval trace, and its final rank."""
    out: dict[str, Any] = {
        "rank": trace.rank,
        "bm25": trace.bm25,
        "bm25_rank": trace.bm25_rank,
        "vector_rank": trace.vector_rank,
        "cosine": trace.cosine,
        "decay": trace.decay,
        "age_days": trace.age_days,
        "reinforcement": trace.reinforcement,
        "confidence": trace.confidence,
    }
    if trace.extra:
        out["extra"] = {k: trace.extra[k] for k in sorted(trace.extra)}
    return out


def _item(decision: ItemDecision) -> dict[str, Any]:
    item, fact = decision.item, decision.item.fact
    return {
        "rank": decision.rank,
        "decision": "kept" if decision.kept else "dropped",
        "reason": None if decision.reason is None else decision.reason.value,
        "detail": decision.detail,
        "tokens": decision.tokens,
        "text": item.text,
        "key": item.key,
        "profile": item.profile,
        "fact": None if fact is None else {
            "id": fact.id, "slot": fact.slot, "scope": fact.scope, "key": fact.key,
            "tags": list(fact.tags), "source": fact.source,
        },
        "trace": None if item.trace is None else trace_signals(item.trace),
    }


def _section(report: SectionReport) -> dict[str, Any]:
    return {
        "name": report.name,
        "title": report.title,
        "priority": report.priority,
        "sticky": report.sticky,
        "status": report.status,
        "reason": None if report.reason is None else report.reason.value,
        "error": report.error,
        "header_tokens": report.header_tokens,
        "tokens": report.tokens,
        "stopped": report.stopped,
        "items": [_item(d) for d in report.items],
    }


def prompt_to_dict(prompt: AssembledPrompt) -> dict[str, Any]:
    """The JSON dump's data, schema version :data:`DUMP_SCHEMA_VERSION`."""
    sections = [_section(s) for s in prompt.sections]
    _flag_low_relevance(prompt, sections)
    return {
        "schema_version": DUMP_SCHEMA_VERSION,
        "budget": prompt.budget,
        "safety_margin": prompt.safety_margin,
        "answer_reserve": prompt.answer_reserve,
        "available": prompt.available,
        "total_tokens": prompt.total_tokens,
        "encoding": prompt.encoding,
        "sticky_overflow": prompt.sticky_overflow,
        "message": prompt.message,
        "scope": prompt.scope,
        "flagged": sum(1 for s in sections for i in s["items"] if i["warning"]),
        "sections": sections,
        "text": prompt.text,
    }


def _flag_low_relevance(prompt: AssembledPrompt, sections: list[dict[str, Any]]) -> None:
    """Give each item its ``relevance_share`` and a ``warning`` when it was kept with
    near-zero relevance while a more relevant item was dropped (the first thing a
    person asks of a prompt that went wrong).

    The share is the item's trace relevance over the best relevance of any traced
    item in the prompt, kept or dropped. With fused legs the relevance is a fused
    rank value, which keeps shares well above zero: the flag then rarely fires.
    """
    relevances = [decision.item.trace.relevance if decision.item.trace else None
                  for report in prompt.sections for decision in report.items]
    best = max((r for r in relevances if r is not None), default=0.0)
    rows = [(section, item) for section in sections for item in section["items"]]
    for relevance, (_, item) in zip(relevances, rows, strict=True):
        item["relevance_share"] = None if relevance is None or best <= 0 else relevance / best
        item["warning"] = None
    lost = [(section, item) for section, item in rows if item["decision"] == "dropped"
            and item["reason"] not in _NOT_A_LOSS and item["relevance_share"] is not None]
    for _, item in rows:
        share = item["relevance_share"]
        if item["decision"] != "kept" or share is None or share >= NEAR_ZERO_RELEVANCE:
            continue
        better = [(s, i) for s, i in lost if i["relevance_share"] > share]
        if not better:
            continue
        section, dropped = max(better, key=lambda pair: pair[1]["relevance_share"])
        item["warning"] = (
            f"kept with {_share(share)} of the best relevance while a more relevant item "
            f"({_share(dropped['relevance_share'])}, {section['name']} rank {dropped['rank']}) "
            f"was dropped ({dropped['reason']})")


def _share(value: float) -> str:
    return share(value)


def _fmt(value: Any, digits: int = 3) -> str:
    """A signal for display: ``–`` for none, floats to ``digits`` significant digits."""
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return str(value)


def _percent(part: int, whole: int) -> float:
    return 0.0 if whole <= 0 else min(100.0, 100.0 * part / whole)


def render_dump(prompt: AssembledPrompt, format: str = "json", *,
                environment: jinja2.Environment | None = None) -> str:
    """Render ``prompt`` as a ``json``, ``markdown`` or ``html`` dump.

    :raises InvalidRequestError: Unknown format.
    """
    if format not in DUMP_FORMATS:
        raise InvalidRequestError(
            f"unknown dump format {format!r} (use {', '.join(DUMP_FORMATS)})",
            field="format", value=format,
        )
    data = prompt_to_dict(prompt)
    if format == "json":
        return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    if environment is None:
        environment = default_environment()
    kept = sum(1 for d in prompt.kept)
    return render_template(
        environment, _TEMPLATES[format], d=data, fmt=_fmt, percent=_percent,
        age=days_in_words, share=share, kept_count=kept, dropped_count=len(prompt.dropped),
    )
