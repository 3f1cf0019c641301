"""ctxslots' own LLM client, registered like any plugin's (``register_llm_clients``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import LLMClientError
from ..hookspecs import hookimpl
from .openai_client import OpenAIChatClient


def openai_client(*, base_url: str | None = None, model: str | None = None,
                  **options: Any) -> OpenAIChatClient:
    """An :class:`OpenAIChatClient`; ``options`` are its other attributes (``timeout``...).

    :raises LLMClientError: ``base_url`` or ``model`` is missing.
    """
    if not base_url or not model:
        missing = " and ".join(n for n, v in (("base_url", base_url), ("model", model)) if not v)
        raise LLMClientError(f"the openai client needs {missing} (--base-url, --model, or "
                             "CTXSLOTS_LLM_BASE_URL, CTXSLOTS_LLM_MODEL)")
    return OpenAIChatClient(base_url, model, **options)


@hookimpl(trylast=True)
def register_llm_clients(register: Callable[[str, Callable[..., Any]], None]) -> None:
    """Register ``openai``: any OpenAI-compatible ``/chat/completions`` endpoint."""
    register("openai", openai_client)
