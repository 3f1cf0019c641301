"""A client for any OpenAI-compatible ``/chat/completions`` endpoint.

Covers OpenAI, Azure-style gateways, Ollama, vLLM, llama.cpp's server and LM
Studio. Nothing touches the network until :meth:`OpenAIChatClient.complete`
(or :meth:`~OpenAIChatClient.acomplete`) is called. Both go through httpx with
pooled connections; retries and ``response_format`` fallbacks are logged on the
``ctxslots.http`` and ``ctxslots.flusher.openai_client`` loggers, never with a key.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from .._checks import one_of
from .._http import (
    DEFAULT_MAX_REPLY_BYTES,
    HTTPJSONError,
    JSONPoster,
    authorization,
    log_retry,
    retry_delay,
    split_credentials,
    url_problem,
)
from .._secrets import safe_url, scrub
from ..errors import InvalidArgumentError, LLMClientError
from ..model import Message
from .llm_client import ChatResult

__all__ = ["MAX_RETRY_AFTER", "MAX_TIMEOUT", "RESPONSE_FORMATS", "OpenAIChatClient"]

#: How a JSON answer is asked for, strictest first.
#: From strongest to weakest; a 400 about ``response_format`` moves one step right.
RESPONSE_FORMATS = ("json_schema", "json_object_schema", "json_object", "none")

#: Longest wait honoured from a ``Retry-After`` header, in seconds.
MAX_RETRY_AFTER = 30.0

#: Longest timeout a client takes, in seconds: a socket refuses a longer one (about 292
#: years; ``inf`` too) with an error that names no timeout, at the first request.
MAX_TIMEOUT = threading.TIMEOUT_MAX

logger = logging.getLogger(__name__)

#: Words in a 400 body that mean the server rejected the ``response_format``.
_FORMAT_WORDS = ("response_format", "json_schema", "json_object", "schema")


def _is_seconds(value: Any) -> bool:
    """``value`` is a number of seconds a request can wait: above 0, at most
    :data:`MAX_TIMEOUT` (so not ``inf`` nor ``nan``)."""
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and 0 < value <= MAX_TIMEOUT)


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _refused(exc: BaseException) -> bool:
    """Whether the failure is a refused connection (nothing listens at the address)."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, ConnectionRefusedError):
            return True
        reason = getattr(cause, "reason", None)  # urllib's URLError holds the OSError there
        cause = reason if isinstance(reason, BaseException) else cause.__cause__ or cause.__context__
    return False


def _text_of(content: Any) -> Any:
    """Content given as a list of parts (Mistral's reasoning models, some gateways) as the
    text of its ``"text"`` parts, the thinking parts left out; anything else as it is."""
    if not isinstance(content, list):
        return content
    texts = [part["text"] for part in content if isinstance(part, dict)
             and part.get("type") == "text" and isinstance(part.get("text"), str)]
    return "".join(texts) if texts else content


def _why_no_text(body: Any) -> str | None:
    """What a reply without text content holds instead, as the end of a sentence: an error
    a gateway sent with status 200, the model's refusal, tool calls, a content filter's
    stop (``None``: none of them)."""
    if not isinstance(body, dict):
        return None
    error = body.get("error")
    if error is not None:
        message = error.get("message", error) if isinstance(error, dict) else error
        return f"no answer but an error: {' '.join(str(message).split())[:300]}"
    choices = body.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices else None
    if not isinstance(choice, dict):
        return None
    message = choice.get("message")
    message = message if isinstance(message, dict) else {}
    if isinstance(message.get("refusal"), str):
        return f"no answer but the model's refusal: {' '.join(message['refusal'].split())[:300]}"
    if message.get("tool_calls"):
        return "tool calls instead of text content; this client asks for text only"
    if choice.get("finish_reason") == "content_filter":
        return "no content: the server's content filter stopped it (finish_reason content_filter)"
    return None


def _retryable(exc: HTTPJSONError) -> bool:
    """429, 408, 5xx, timeouts and dropped connections; never other 4xx, bad JSON, or a
    refused connection (nothing listens there: waiting and asking again only delays the error)."""
    if exc.status is None:
        return not _refused(exc)
    return exc.status in (408, 429) or 500 <= exc.status <= 599


def _check_base_url(url: str) -> str:
    problem = url_problem(url) if isinstance(url, str) else "it is not text"
    if problem is not None:
        shown = safe_url(url) if isinstance(url, str) else url
        raise InvalidArgumentError("base_url must be an http(s) URL such as "
                                   f"http://127.0.0.1:8080/v1, not {shown!r} ({problem})",
                                   field="base_url", value=shown)
    return url.rstrip("/")


@attrs.frozen
class _Deadline:
    """When one call must end (``None``: no total), and the time each try gets."""

    at: float | None

    @classmethod
    def start(cls, total: float | None) -> _Deadline:
        return cls(None if total is None else time.monotonic() + total)

    def left(self) -> float:
        """Seconds left (infinite without a total)."""
        return float("inf") if self.at is None else self.at - time.monotonic()

    def budget(self, per_try: float) -> float:
        """The time the next try may take: ``per_try``, or what is left when less
        (never below a millisecond: a try is only started with time left)."""
        return max(min(per_try, self.left()), 0.001)


def _header_names(headers: Mapping[str, str]) -> str:
    """Extra headers in a repr: their names only (a value may be a key)."""
    return "{" + ", ".join(f"{name!r}: '[redacted]'" for name in headers) + "}"


@attrs.define
class OpenAIChatClient:
    """Chat completions over HTTP, with retries and JSON answers.

    Credentials never appear in an error, a log line or the ``repr``: a key the
    client holds, a password in its URL and anything credential-shaped a server
    echoes back are replaced by ``[redacted]``.

    Attributes:
        base_url: The API root, e.g. ``http://127.0.0.1:8080/v1``. A
            ``user:password@`` in it is sent as HTTP Basic credentials (when no
            ``api_key`` is given) and never shown.
        model: The model name sent with each request.
        api_key: The key, sent as a bearer token; ``None``: the URL's
            credentials if it has any, else the variable named by
            ``api_key_env``, and with none of them no ``Authorization`` header.
        api_key_env: Environment variable holding the key.
        timeout: Seconds one try may take in all (connecting, sending, reading
            every byte of the answer).
        total_timeout: Seconds one :meth:`complete` call may take in all: every
            try and every wait between them. A try gets what is left of it (at
            most ``timeout``), and no try starts, nor any wait, that cannot end
            within it. ``None``: no total; a call may then take ``max_retries + 1``
            times ``timeout`` and the waits.
        max_retries: Extra tries after 408, 429, 5xx, timeouts and dropped
            connections (other 4xx and a refused connection fail at once).
        backoff: First wait between tries, doubled each time (a server's
            ``Retry-After`` wins, up to :data:`MAX_RETRY_AFTER`).
        response_format: ``"json_schema"`` (send the schema, OpenAI's way),
            ``"json_object_schema"`` (JSON-object mode with the schema attached,
            ``{"type": "json_object", "schema": ...}``, which llama-cpp-python's
            server turns into a grammar), ``"json_object"`` (any JSON object) or
            ``"none"``. A server that answers 400 about ``response_format`` is
            asked again with the next weaker mode, which is then kept.
        extra_headers: Sent with every request.
        max_tokens: Most tokens the model may write in one answer, sent as
            ``max_tokens`` (``None``: not sent, the server decides). Small local
            models can loop until their context is full without it.
        max_reply_bytes: Largest answer read, in bytes; a larger one fails
            (:class:`~ctxslots.LLMClientError` naming the cap) without being read
            further, and is not asked for again.

    :raises InvalidArgumentError: ``base_url`` is not an http(s) URL with a host
        (and a valid port, and IPv6 address when it names one), ``model`` is empty or
        blank, or ``timeout`` or
        ``total_timeout`` is not a number of seconds above 0 and at most
        :data:`MAX_TIMEOUT`.
    """

    base_url: str = attrs.field(converter=_check_base_url, repr=lambda url: repr(safe_url(url)))
    model: str = attrs.field()
    api_key: str | None = attrs.field(default=None, repr=False)
    api_key_env: str = "OPENAI_API_KEY"
    timeout: float = attrs.field(default=60.0)
    total_timeout: float | None = attrs.field(default=None)
    max_retries: int = 3
    backoff: float = 0.5
    response_format: str = attrs.field(default="json_schema",
                                       validator=one_of(RESPONSE_FORMATS))
    extra_headers: Mapping[str, str] = attrs.field(factory=dict, repr=_header_names)
    max_tokens: int | None = attrs.field(default=None)
    max_reply_bytes: int = attrs.field(default=DEFAULT_MAX_REPLY_BYTES)
    _poster: JSONPoster | None = attrs.field(default=None, init=False, repr=False, eq=False)

    @model.validator
    def _check_model(self, _attribute: Any, value: Any) -> None:
        if not isinstance(value, str) or not value.strip():
            # Sent as it is, a blank name failed only at the server, after the request.
            raise InvalidArgumentError(f"model must be a model name, not {value!r}",
                                       field="model", value=value)

    @timeout.validator
    def _check_timeout(self, _attribute: Any, value: Any) -> None:
        if not _is_seconds(value):
            raise InvalidArgumentError(f"timeout must be a positive number of seconds (at most "
                                       f"{MAX_TIMEOUT:.0f}), not {value!r}", field="timeout",
                                       value=value)

    @total_timeout.validator
    def _check_total_timeout(self, _attribute: Any, value: Any) -> None:
        if value is not None and not _is_seconds(value):
            raise InvalidArgumentError(f"total_timeout must be a positive number of seconds (at "
                                       f"most {MAX_TIMEOUT:.0f}) or None, not {value!r}",
                                       field="total_timeout", value=value)

    @max_reply_bytes.validator
    def _check_max_reply_bytes(self, _attribute: Any, value: Any) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InvalidArgumentError(f"max_reply_bytes must be a positive integer, not "
                                       f"{value!r}", field="max_reply_bytes", value=value)

    @max_tokens.validator
    def _check_max_tokens(self, _attribute: Any, value: Any) -> None:
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise InvalidArgumentError(f"max_tokens must be a positive integer or None, not "
                                       f"{value!r}", field="max_tokens", value=value)

    @property
    def name(self) -> str:
        """``openai:MODEL``."""
        return f"openai:{self.model}"

    def _headers(self) -> dict[str, str]:
        headers = dict(self.extra_headers)
        headers.update(authorization(self.api_key, split_credentials(self.base_url)[1],
                                     os.environ.get(self.api_key_env)))
        return headers

    @property
    def _url(self) -> str:
        """The chat completions URL, without credentials (they travel in a header)."""
        return f"{split_credentials(self.base_url)[0]}/chat/completions"

    def _payload(self, messages: Sequence[Message], schema: Mapping[str, Any] | None,
                 temperature: float) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": [m.to_chat() for m in messages],
            "temperature": temperature,
        }
        if self.max_tokens is not None:
            payload["max_tokens"] = self.max_tokens
        if schema is not None and self.response_format == "json_schema":
            payload["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "ctxslots_reply", "schema": dict(schema), "strict": True},
            }
        elif schema is not None and self.response_format == "json_object_schema":
            payload["response_format"] = {"type": "json_object", "schema": dict(schema)}
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
        url = self._url
        clock = _Deadline.start(self.total_timeout)
        failures = 0
        while True:
            payload = self._payload(messages, json_schema, temperature)
            budget = clock.budget(self.timeout)
            try:
                body = self._http().post(url, payload, headers=self._headers(), timeout=budget)
            except HTTPJSONError as exc:
                delay = self._after_failure(url, exc, payload, failures, clock, budget)
                if delay is not None:
                    time.sleep(delay)
                    failures += 1
                continue
            return self._result(url, body)

    async def acomplete(
        self,
        messages: Sequence[Message],
        *,
        json_schema: Mapping[str, Any] | None = None,
        temperature: float = 0.0,
    ) -> ChatResult:
        """:meth:`complete` on the event loop, with httpx's async client: cancelling
        the task abandons the request at once.

        :raises LLMClientError: As :meth:`complete`.
        """
        url = self._url
        clock = _Deadline.start(self.total_timeout)
        failures = 0
        while True:
            payload = self._payload(messages, json_schema, temperature)
            budget = clock.budget(self.timeout)
            try:
                body = await self._http().apost(url, payload, headers=self._headers(),
                                                timeout=budget)
            except HTTPJSONError as exc:
                delay = self._after_failure(url, exc, payload, failures, clock, budget)
                if delay is not None:
                    await asyncio.sleep(delay)
                    failures += 1
                continue
            return self._result(url, body)

    def close(self) -> None:
        """Close the pooled connections of :meth:`complete` (a later call opens new ones)."""
        if self._poster is not None:
            self._poster.close()

    async def aclose(self) -> None:
        """Close the pooled connections :meth:`acomplete` opened on this event loop."""
        if self._poster is not None:
            await self._poster.aclose()

    def _http(self) -> JSONPoster:
        if self._poster is None or (self._poster.timeout, self._poster.max_reply_bytes) != (
                self.timeout, self.max_reply_bytes):
            self._poster = JSONPoster(timeout=self.timeout, retry_after_limit=MAX_RETRY_AFTER,
                                      max_reply_bytes=self.max_reply_bytes)
        return self._poster

    def _after_failure(self, url: str, exc: HTTPJSONError, payload: Mapping[str, Any],
                       failures: int, clock: _Deadline, budget: float) -> float | None:
        """What to do after a failed try: ``None`` to ask again at once with a weaker
        ``response_format``, else the seconds to wait before the next try.

        :raises LLMClientError: Not worth another try, the tries are used up, or the
            call's total timeout leaves no time for another.
        """
        weaker = None if clock.left() <= 0 else self._weaken_format(exc, payload)
        if weaker is not None:
            logger.warning("chat completion at %s: the server refused response_format %r "
                           "(HTTP 400); asking again with %r", safe_url(url), weaker[0],
                           weaker[1])
            return None
        if not _retryable(exc) or failures >= self.max_retries:
            raise self._error(url, exc, failures + 1, budget) from exc
        delay = retry_delay(exc, failures, self.backoff, MAX_RETRY_AFTER)
        if delay >= clock.left():
            raise self._error(url, exc, failures + 1, budget, out_of_time=True) from exc
        log_retry("chat completion", url, exc, failures + 1, self.max_retries + 1, delay)
        return delay

    def _error(self, url: str, exc: HTTPJSONError, tries: int, budget: float, *,
               out_of_time: bool = False) -> LLMClientError:
        """One-line message naming the URL and what happened, with any key scrubbed."""
        if exc.timed_out:
            what = f"timeout: no reply within {budget:.3g} s"
        elif exc.too_large:
            what = (f"the reply is larger than {self.max_reply_bytes:,} bytes, the most it may "
                    "hold (max_reply_bytes)")
        elif exc.status == 200:
            what = "the reply is not valid JSON"
        elif exc.status is not None:
            what = f"HTTP {exc.status}: {(exc.body or '')[:200]}"
        elif _refused(exc):
            what = "connection refused (is the server running?)"
        else:
            what = f"connection failed: {exc.reason}"
        message = f"chat completion at {url} failed: {what}"
        if tries > 1:
            message += f" (after {tries} tries)"
        if out_of_time or (exc.timed_out and budget < self.timeout - 0.001):
            message += (f"; the call's total timeout of {self.total_timeout:g} s leaves no "
                        "time for another try")
        return LLMClientError(self._scrub(" ".join(message.split())), status=exc.status,
                              body=None if exc.body is None else self._scrub(exc.body))

    def _scrub(self, text: str) -> str:
        # Some gateways echo request headers in their error bodies.
        return scrub(text, [self.api_key, os.environ.get(self.api_key_env),
                            *self.extra_headers.values(),
                            *(split_credentials(self.base_url)[1] or ())])

    def _weaken_format(self, exc: HTTPJSONError, payload: Mapping[str, Any]
                       ) -> tuple[str, str] | None:
        """After a 400 about ``response_format``, move to the next weaker mode (kept for
        later calls); the modes before and after, or ``None`` when this is no such 400."""
        if exc.status != 400 or "response_format" not in payload:
            return None
        text = (exc.body or "").lower()
        if not any(word in text for word in _FORMAT_WORDS):
            return None
        before = self.response_format
        self.response_format = RESPONSE_FORMATS[RESPONSE_FORMATS.index(before) + 1]
        return before, self.response_format

    def _result(self, url: str, body: Any) -> ChatResult:
        try:
            content = body["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            content = None
        content = _text_of(content)
        if not isinstance(content, str):
            what = _why_no_text(body)
            if what is None:
                what = ("no choices[0].message.content" if content is None else
                        f"non-text content ({type(content).__name__})")
            raise LLMClientError(self._scrub(f"reply from {url} has {what}"), status=200,
                                 body=self._scrub(str(body)[:2000]))
        usage = body.get("usage")
        usage = usage if isinstance(usage, dict) else {}
        model = body.get("model")
        finish = body["choices"][0].get("finish_reason")
        return ChatResult(
            text=content,
            model=model if isinstance(model, str) else None,
            finish_reason=finish if isinstance(finish, str) else None,
            prompt_tokens=_count(usage.get("prompt_tokens")),
            completion_tokens=_count(usage.get("completion_tokens")),
            raw=body,
        )
