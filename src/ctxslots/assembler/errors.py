"""Errors raised while assembling a prompt, on top of :mod:`ctxslots.errors`.

Both are ``ValueError`` subclasses: they report bad input. A budget that the
sticky sections alone exceed raises :class:`ctxslots.errors.BudgetExceededError`.
"""

from __future__ import annotations

from typing import Any

from ..errors import CtxslotsError

__all__ = ["EncodingError", "InvalidRequestError"]


class InvalidRequestError(CtxslotsError, ValueError):
    """An assembly request, or an argument of the assembler, a contributor or a
    dump, is malformed.

    Attributes:
        field: The name of the offending argument or field.
        value: The offending value.
    """

    def __init__(self, message: str, *, field: str, value: Any = None) -> None:
        super().__init__(message)
        self.field = field
        self.value = value


class EncodingError(CtxslotsError, ValueError):
    """A tiktoken encoding is unknown, or its bundled vocabulary failed its checksum.

    Attributes:
        encoding: The encoding name that was asked for.
    """

    def __init__(self, message: str, *, encoding: Any) -> None:
        super().__init__(message)
        self.encoding = encoding
