"""The lines of the prompt: a section's header and its items, rendered with the
section's templates (the environment and the templates live in :mod:`ctxslots.prompts`)."""

from __future__ import annotations

import attrs
import jinja2

from ..model import Item, Section
from ..prompts import render_template
from ._line_memo import memo_for

__all__ = ["SECTION_SEPARATOR", "render_group", "render_header", "render_item"]

#: Put between two sections in the prompt.
SECTION_SEPARATOR = "\n"


def render_header(env: jinja2.Environment, section: Section) -> str:
    """The heading (and intro) of ``section``."""
    return render_template(env, section.header_template, section=section)


def render_group(env: jinja2.Environment, section: Section, when: str) -> str:
    """The heading of ``section``'s items said at ``when`` (its ``group_template``;
    remembered by ``when`` when the template reads nothing else)."""
    name = section.group_template
    assert name is not None
    return memo_for(env).heading(
        name, when, lambda: render_template(env, name, section=section, when=when))


def render_item(env: jinja2.Environment, section: Section, item: Item, rank: int, *,
                dated: bool = True) -> str:
    """One item's line (remembered by text and ``when`` when the template reads
    nothing else); ``dated=False`` renders it as if it had no ``when`` (a group
    heading says it)."""
    when = item.when if dated else None
    return memo_for(env).line(
        section.item_template, item.text if when is None else (item.text, when),
        lambda: render_template(env, section.item_template, section=section, rank=rank,
                                item=item if when == item.when else attrs.evolve(item, when=None)))
