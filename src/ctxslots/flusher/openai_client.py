"""A client for any OpenAI-compatible ``/chat/completions`` endpoint.

Covers OpenAI, Azure-style gateways, Ollama, vLLM, llama.cpp's server and LM
Studio. Nothing touches the network until :meth:`OpenAIChatClient.complete`
is called.
"""

from __future__ import annotations

import asyncio
import os
import urllib.parse
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from .._http import HTTPJSONError, post_json
from ..errors import LLMClientError
from ..model import Message
from .llm_client import ChatResult

__all__ = ["OpenAIChatClient", "RESPONSE_FORMATS"]

#: How a JSON answer is asked for, strictest first.
RESPONSE_FORMATS = ("json_schema", "json_object", "none")


def _check_base_url(url: str) -> str:
    parsed = urllib.parse.urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise ValueError(f"base_url must be an http(s) URL such as http://127.0.0.1:8080/v1, not {url!r}")
    return url.rstrip("/")


@attrs.define
class OpenAIChatClient:
    """Chat completions over HTTP, with retries and JSON answers.

    Attributes:
        base_url: The API root, e.g. ``http://127.0.0.1:8080/v1``.
        model: The model name sent with each request.
        api_key: The key; ``None`` reads the variable named by ``api_key_env``,
            and with neither no ``Authorization`` header is sent.
        api_key_env: Environment variable holding the key.
        timeout: Seconds to wait for one answer.
        max_retries: Extra tries on 408, 429, 5xx (timeouts are not retried).
        backoff: First wait between tries, doubled each time (a server's
            ``Retry-After`` wins, up to 10 s).
        response_format: ``"json_schema"`` (send the schema), ``"json_object"``
            or ``"none"``. A server that answers 400 about ``response_format`` is
            asked again with the next weaker mode, which is then kept.
        extra_headers: Sent with every request.
    """

    base_url: str = attrs.field(converter=_check_base_url)
    model: str
    api_key: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    timeout: float = 60.0
    max_retries: int = 3
    backoff: float = 0.5
    response_format: str = attrs.field(default="json_schema",
                                       validator=attrs.validators.in_(RESPONSE_FORMATS))
    extra_headers: Mapping[str, str] = attrs.field(factory=dict)

    @property
    def name(self) -> str:
        """``openai:MODEL``."""
        return f"openai:{self.model}"

    def _headers(self) -> dict[str, str]:
        headers = dict(self.extra_headers)
        key = self.api_key or os.environ.get(self.api_key_env)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        return headers

    def _payload(self, messages: Sequence[Message], schema: Mapping[str, Any] | None,
                 temperature: float) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": [m.to_dict() for m in messages],
            "temperature": temperature,
        }
        if schema is not None and self.response_format == "json_schema":
            payload["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "ctxslots_reply", "schema": dict(schema), "strict": True},
            }
        elif schema is not None and self.response_format == "json_object":
            payload["response_format"] = {"type": "json_object"}
        return payload

    def complete(
        self,
        messages: Sequence[Message],
        *,
        json_schema: Mapping[str, Any] | None = None,
        temperature: float = 0.0,
    ) -> ChatResult:
        """Send ``messages``; return the first choice's content.

        :raises LLMClientError: HTTP error after retries, timeout, a body that
            is not JSON, or a reply without ``choices[0].message.content``.
        """
        url = f"{self.base_url}/chat/completions"
        while True:
            payload = self._payload(messages, json_schema, temperature)
            try:
                body = post_json(url, payload, headers=self._headers(), timeout=self.timeout,
                                 max_retries=self.max_retries, backoff=self.backoff)
            except HTTPJSONError as exc:
                if self._weaken_format(exc, payload):
                    continue
                raise LLMClientError(str(exc), status=exc.status, body=exc.body) from exc
            return self._result(url, body)

    def _weaken_format(self, exc: HTTPJSONError, payload: Mapping[str, Any]) -> bool:
        """After a 400 about ``response_format``, fall back to the next weaker mode."""
        if exc.status != 400 or "response_format" not in payload:
            return False
        text = (exc.body or "").lower()
        if "response_format" not in text and "json_schema" not in text and "json" not in text:
            return False
        self.response_format = RESPONSE_FORMATS[RESPONSE_FORMATS.index(self.response_format) + 1]
        return True

    def _result(self, url: str, body: Any) -> ChatResult:
        try:
            content = body["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            raise LLMClientError(f"reply from {url} has no choices[0].message.content",
                                 status=200, body=str(body)[:2000]) from None
        if not isinstance(content, str):
            raise LLMClientError(f"reply from {url} has non-text content", status=200,
                                 body=str(body)[:2000])
        usage = body.get("usage") if isinstance(body, dict) else None
        usage = usage if isinstance(usage, dict) else {}
        return ChatResult(
            text=content,
            model=body.get("model") if isinstance(body.get("model"), str) else None,
            prompt_tokens=usage.get("prompt_tokens") if isinstance(usage.get("prompt_tokens"), int) else None,
            completion_tokens=(usage.get("completion_tokens")
                               if isinstance(usage.get("completion_tokens"), int) else None),
            raw=body,
        )

    async def acomplete(
        self,
        messages: Sequence[Message],
        *,
        json_schema: Mapping[str, Any] | None = None,
        temperature: float = 0.0,
    ) -> ChatResult:
        """:meth:`complete` for async code (runs in a worker thread)."""
        return await asyncio.to_thread(self.complete, messages, json_schema=json_schema,
                                       temperature=temperature)
