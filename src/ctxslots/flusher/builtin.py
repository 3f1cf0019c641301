"""ctxslots' own LLM client, registered like any plugin's (``register_llm_clients``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import LLMClientError
from ..hookspecs import hookimpl
from .openai_client import OpenAIChatClient


def openai_client(*, base_url: str | None = None, model: str | None = None,
                  timeout: float | None = None, **options: Any) -> OpenAIChatClient:
    """An :class:`OpenAIChatClient`; ``options`` are its other attributes.

    :param timeout: Seconds one call may take in all, its retries and the waits between
        them included (``ctxslots flush --timeout``): the client's ``total_timeout``, and
        the most one try may take.
    :raises LLMClientError: ``base_url`` or ``model`` is missing, empty or blank (as a
        variable set to a space is).
    """
    if not (base_url and base_url.strip()) or not (model and model.strip()):
        named = (("base_url", base_url), ("model", model))
        missing = " and ".join(n for n, v in named if not (v and v.strip()))
        raise LLMClientError(f"the openai client needs {missing} (--base-url, --model, or "
                             "CTXSLOTS_LLM_BASE_URL, CTXSLOTS_LLM_MODEL)")
    if timeout is not None:
        options = {"timeout": timeout, "total_timeout": timeout, **options}
    return OpenAIChatClient(base_url, model, **options)


@hookimpl(trylast=True)
def register_llm_clients(register: Callable[[str, Callable[..., Any]], None]) -> None:
    """Register ``openai``: any OpenAI-compatible ``/chat/completions`` endpoint."""
    register("openai", openai_client)
