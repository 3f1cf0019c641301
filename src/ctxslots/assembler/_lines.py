"""The lines of the prompt: a section's header and its items, rendered with the
section's templates (the environment and the templates live in :mod:`ctxslots.prompts`)."""

from __future__ import annotations

import jinja2

from ..model import Item, Section
from ..prompts import render_template
from ._line_memo import memo_for

__all__ = ["SECTION_SEPARATOR", "render_header", "render_item"]

#: Put between two sections in the prompt.
SECTION_SEPARATOR = "\n"


def render_header(env: jinja2.Environment, section: Section) -> str:
    """The heading (and intro) of ``section``."""
    return render_template(env, section.header_template, section=section)


def render_item(env: jinja2.Environment, section: Section, item: Item, rank: int) -> str:
    """One item's line (remembered by text and ``when`` when the template reads
    nothing else)."""
    return memo_for(env).line(
        section.item_template, item.text if item.when is None else (item.text, item.when),
        lambda: render_template(env, section.item_template, section=section, item=item,
                                rank=rank))
