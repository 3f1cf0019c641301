"""The one interface every language-model backend satisfies.

Anything with a ``complete`` method of this shape works (a ``name`` is optional):
the shipped :class:`~ctxslots.flusher.openai_client.OpenAIChatClient`, a client
registered by a plugin through ``register_llm_clients``, or a local object.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import attrs

from ..model import Message

__all__ = ["ChatResult", "LLMClient"]


@attrs.frozen
class ChatResult:
    """What a model answered.

    Attributes:
        text: The assistant message's content.
        model: The model that answered, as the server named it.
        prompt_tokens: Tokens the server counted in the request, if reported.
        completion_tokens: Tokens in the answer, if reported.
        raw: The decoded response body, for inspection.
        finish_reason: Why the model stopped, as the server said (``"stop"``;
            ``"length"``: cut off at the token limit), if it said.
    """

    text: str
    model: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    # Compared, not hashed (a dict has no hash): equal results still hash alike.
    raw: dict[str, Any] = attrs.field(factory=dict, hash=False)
    finish_reason: str | None = None


@runtime_checkable
class LLMClient(Protocol):
    """A chat model: messages in, text out (JSON when a schema is given).

    A client may also have a ``name``, a short label for reports (for example
    ``"openai:gpt-4o-mini"``), and an ``acomplete`` coroutine taking the same
    arguments, which :meth:`~ctxslots.MemoryFlusher.aflush` then awaits.
    """

    def complete(
        self,
        messages: Sequence[Message],
        *,
        json_schema: Mapping[str, Any] | None = None,
        temperature: float = 0.0,
    ) -> ChatResult:
        """Send ``messages`` and return the answer.

        :param json_schema: When given, ask the backend for one JSON object that
            follows this schema, where it supports that.
        :raises LLMClientError: The backend failed or answered malformed data.
        """
        ...
