"""Which facts an export covers: its slots and its scope, checked."""

from __future__ import annotations

from collections.abc import Sequence

from ..backend import FactFilter
from ..core import StoreCore

__all__ = ["export_filter"]


def export_filter(core: StoreCore, slots: Sequence[str] | None, scope: str | None
                  ) -> FactFilter:
    """The facts of ``slots`` (``None``: all) in ``scope`` (``None``: every scope; a
    name: that scope only, not the global facts), expired ones included.

    :raises InvalidFactError: A slot or scope name is malformed.
    """
    checked = None
    if slots is not None:
        checked = core.filter(slots, None, live=False).slots
    return FactFilter(scopes=None if scope is None else (core.limits.scope(scope),),
                      slots=checked)
