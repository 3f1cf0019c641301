"""Prompt dumps: JSON (a stable, versioned schema), markdown and one HTML page.

The dumps are rendered by :mod:`ctxslots.prompts.dump`; this module checks
what it is given and keeps the names it always offered.
"""

from __future__ import annotations

import jinja2

from ..errors import InvalidRequestError
from ..model import AssembledPrompt
from ..prompts.dump import (
    DUMP_FORMATS,
    DUMP_SCHEMA_VERSION,
    prompt_to_dict,
    render_dump,
    trace_signals,
)

__all__ = ["DUMP_FORMATS", "DUMP_SCHEMA_VERSION", "dump_prompt", "prompt_to_dict", "trace_signals"]


def dump_prompt(prompt: AssembledPrompt, format: str = "json", *,
                environment: jinja2.Environment | None = None) -> str:
    """Render ``prompt`` as a ``json``, ``markdown`` or ``html`` dump.

    :raises InvalidRequestError: Unknown format, or ``prompt`` is not an
        :class:`~ctxslots.AssembledPrompt`.
    """
    if not isinstance(prompt, AssembledPrompt):
        raise InvalidRequestError("prompt must be an AssembledPrompt", field="prompt", value=prompt)
    return render_dump(prompt, format, environment=environment)
