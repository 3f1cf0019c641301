"""ctxslots' own embedders, registered like any plugin's (``register_embedders``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...hookspecs import hookimpl
from .specs import BUILTIN_FACTORIES


@hookimpl(trylast=True)
def register_embedders(register: Callable[[str, Callable[..., Any]], None]) -> None:
    """Register ``hash``, ``sentence-transformers`` (and ``st``) and ``openai``."""
    for name, factory in BUILTIN_FACTORIES.items():
        register(name, factory)
