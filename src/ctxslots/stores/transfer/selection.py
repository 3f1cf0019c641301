"""Which facts an export covers: its slots and owners, checked."""

from __future__ import annotations

from collections.abc import Sequence

from ..backend import FactFilter
from ..core import StoreCore
from ..owners import ANY, Owners

__all__ = ["export_filter"]


def export_filter(core: StoreCore, slots: Sequence[str] | None, scope: str | None,
                  user: str | None = None, agent: str | None = None) -> FactFilter:
    """The facts of ``slots`` (``None``: all) of exactly the owners named (``scope``:
    that scope, not the global facts; ``user``: that user's own facts; ``None`` or
    :data:`~ctxslots.ANY`: every owner of that kind), expired ones included.

    :raises InvalidFactError: A slot or an owner is malformed.
    """
    lim = core.limits
    checked = None
    if slots is not None:
        checked = core.filter(slots, Owners(ANY, ANY, ANY), live=False).slots
    return FactFilter(scopes=None if scope is None or scope is ANY else (lim.scope(scope),),
                      slots=checked,
                      users=None if user is None or user is ANY else (lim.owner(user, "user"),),
                      agents=None if agent is None or agent is ANY else (
                          lim.owner(agent, "agent"),))
