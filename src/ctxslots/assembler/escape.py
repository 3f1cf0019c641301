"""The escaping filters, kept importable from here; they live in :mod:`ctxslots.prompts.escape`."""

from __future__ import annotations

from ..prompts.escape import bullet, fence_for, md_cell

__all__ = ["bullet", "fence_for", "md_cell"]
