"""The assembly request, kept importable from here; it lives in :mod:`ctxslots.request`."""

from __future__ import annotations

from ..request import DEFAULT_BUDGET, AssemblyRequest, ContextBlock

__all__ = ["DEFAULT_BUDGET", "AssemblyRequest", "ContextBlock"]
