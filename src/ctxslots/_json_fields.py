"""JSON read strictly: an object that names one field twice is an error, not its last value.

Python's decoder keeps the last of two equal names silently, and other readers keep the
first: a text whose meaning depends on the reader is refused wherever ctxslots reads JSON
a model or another program wrote (flush replies, imports).
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["DECODER", "DuplicateFieldError"]


class DuplicateFieldError(ValueError):
    """A JSON object names the field ``args[0]`` twice."""


def _unique_fields(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for name, value in pairs:
        if name in obj:
            raise DuplicateFieldError(name)
        obj[name] = value
    return obj


#: A decoder that raises :class:`DuplicateFieldError` for a field named twice in an object.
DECODER = json.JSONDecoder(object_pairs_hook=_unique_fields)
