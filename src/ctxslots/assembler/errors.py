"""The assembler's errors, kept importable from here; they live in :mod:`ctxslots.errors`."""

from __future__ import annotations

from ..errors import EncodingError, InvalidRequestError

__all__ = ["EncodingError", "InvalidRequestError"]
