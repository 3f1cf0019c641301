"""The exceptions ctxslots raises.

Every error derives from :class:`CtxslotsError`. Errors caused by bad input are
also :class:`ValueError` subclasses, so callers that already catch ``ValueError``
keep working. Each error carries the offending object where there is one.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "BudgetExceededError",
    "CtxslotsError",
    "EmbedderError",
    "FactNotFoundError",
    "FlushError",
    "InvalidFactError",
    "LLMClientError",
    "StoreError",
    "TemplateError",
]


class CtxslotsError(Exception):
    """Base class of every error raised by ctxslots."""


class StoreError(CtxslotsError):
    """The fact store could not be opened or used (driver, extension, schema).

    Attributes:
        path: The database path involved, when known.
    """

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


class InvalidFactError(CtxslotsError, ValueError):
    """A fact (or a query parameter) was rejected before anything was written.

    Attributes:
        field: The name of the offending field (``"slot"``, ``"value"``...).
        value: The offending value (long strings are kept whole; only the
            message is shortened).
    """

    def __init__(self, message: str, *, field: str, value: Any = None) -> None:
        super().__init__(message)
        self.field = field
        self.value = value


class FactNotFoundError(CtxslotsError, LookupError):
    """No live fact has the requested id.

    Attributes:
        fact_id: The id that was asked for.
    """

    def __init__(self, fact_id: int) -> None:
        super().__init__(f"no fact with id {fact_id}")
        self.fact_id = fact_id


class BudgetExceededError(CtxslotsError, ValueError):
    """The sticky sections alone do not fit into the token budget.

    Attributes:
        prompt: The :class:`~ctxslots.model.AssembledPrompt` that was built with
            every non-sticky section dropped, for inspection and dumping.
    """

    def __init__(self, message: str, *, prompt: Any = None) -> None:
        super().__init__(message)
        self.prompt = prompt


class TemplateError(CtxslotsError):
    """A jinja2 template is missing or failed to render.

    Attributes:
        template: The template name.
    """

    def __init__(self, message: str, *, template: str) -> None:
        super().__init__(message)
        self.template = template


class LLMClientError(CtxslotsError):
    """A language-model backend failed (HTTP error, timeout, malformed reply).

    Attributes:
        status: The HTTP status code, when there was one.
        body: The raw response body, when there was one.
    """

    def __init__(self, message: str, *, status: int | None = None, body: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.body = body


class FlushError(CtxslotsError):
    """A flush failed; the store was left unchanged.

    Attributes:
        report: The :class:`~ctxslots.flusher.FlushReport` with the raw model
            output and the reason, for inspection.
    """

    def __init__(self, message: str, *, report: Any = None) -> None:
        super().__init__(message)
        self.report = report


class EmbedderError(CtxslotsError):
    """An embedder could not be loaded, or failed to embed.

    Missing package or model, HTTP error, timeout, malformed reply, wrong
    number of vectors or wrong dimension.

    Attributes:
        model_id: The embedder's model id, when known.
        status: The HTTP status code, when there was one.
        body: The raw response body, when there was one.
    """

    def __init__(
        self,
        message: str,
        *,
        model_id: str | None = None,
        status: int | None = None,
        body: str | None = None,
    ) -> None:
        super().__init__(message)
        self.model_id = model_id
        self.status = status
        self.body = body
