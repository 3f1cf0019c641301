"""How the commands print facts and hits for a person, and JSON for a program."""

from __future__ import annotations

import json
from typing import Any

import click

from ..model import Fact, Hit

__all__ = ["echo_json", "fact_line", "hit_line"]


def echo_json(data: Any) -> None:
    """Print ``data`` as indented JSON."""
    click.echo(json.dumps(data, indent=2, ensure_ascii=False))


def fact_line(fact: Fact) -> str:
    """One line for a fact: id, slot@scope, key, value and its state."""
    where = fact.slot + (f"@{fact.scope}" if fact.scope else "")
    key = f" {fact.key}:" if fact.key else ""
    flags = " (archived)" if fact.archived else ""
    if fact.superseded_by is not None:
        flags += f" (superseded by {fact.superseded_by})"
    return f"[id:{fact.id}] {where}{key} {fact.value}{flags}"


def hit_line(hit: Hit) -> str:
    """Two lines for a search hit: the fact, then how it scored."""
    t = hit.trace
    signals = f"bm25 {t.bm25:.3f} (#{t.bm25_rank})" if t.bm25 is not None else "bm25 -"
    if t.cosine is not None:
        signals += f", cosine {t.cosine:.3f} (#{t.vector_rank})"
    return (
        f"{t.rank:>2}. {fact_line(hit.fact)}\n"
        f"    score {t.final:.4g} = {signals}; decay {t.decay:.3f}, "
        f"reinforcement {t.reinforcement:.3f}, confidence {t.confidence:.2f}"
        + (f"; hides {t.hides} near-duplicate(s)" if t.hides else "")
    )
