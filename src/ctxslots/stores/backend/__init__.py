"""The storage seam: what a storage engine does for :class:`~ctxslots.FactStore`."""

from __future__ import annotations

from .types import *
from .types import __all__ as __all__
