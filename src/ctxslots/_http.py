"""JSON over HTTP POST with httpx: one pooled connection set per client, sync and async.

Used by the HTTP embedder and the chat client; kept free of ctxslots' own errors so any
client can translate :class:`HTTPJSONError` into the error its callers expect. Retries
are each caller's policy; :func:`retry_delay` and :func:`log_retry` keep their waits and
their log lines alike. Nothing here logs a header, a key or a request body, and every
message and body an error carries passes :func:`ctxslots._secrets.scrub` with the
credentials the request sent (a server may echo them).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import logging
from collections.abc import Mapping
from typing import Any

import attrs
import httpx

from ._secrets import safe_url, scrub, split_credentials

__all__ = ["RETRY_STATUSES", "HTTPJSONError", "JSONPoster", "authorization", "log_retry",
           "retry_delay", "split_credentials"]

logger = logging.getLogger("ctxslots.http")

#: Statuses worth another try: rate limiting and server-side failures.
RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})

#: Longest wait honoured from a ``Retry-After`` header, in seconds.
MAX_RETRY_AFTER = 10.0

_BODY_LIMIT = 2000


class HTTPJSONError(Exception):
    """A POST failed: transport error, timeout, HTTP error status or a body that is not JSON.

    Attributes:
        status: The HTTP status code, when a response arrived.
        body: The response body (cut to 2,000 characters), when there was one.
        timed_out: Whether the request ran past its timeout.
        retry_after: The wait the server asked for (``Retry-After``), in seconds.
        reason: What went wrong on the way, for transport failures.
    """

    def __init__(self, message: str, *, status: int | None = None, body: str | None = None,
                 timed_out: bool = False, retry_after: float | None = None,
                 reason: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.body = body
        self.timed_out = timed_out
        self.retry_after = retry_after
        self.reason = reason


def authorization(api_key: str | None, credentials: tuple[str, str] | None,
                  env_key: str | None = None) -> dict[str, str]:
    """The ``Authorization`` header of a request: a key given to the client as a bearer
    token, else the ``user:password`` taken out of its base URL as Basic credentials,
    else a key from the environment as a bearer token (none with neither)."""
    if api_key:
        return {"Authorization": f"Bearer {api_key}"}
    if credentials is not None:
        pair = base64.b64encode(":".join(credentials).encode("utf-8")).decode("ascii")
        return {"Authorization": f"Basic {pair}"}
    return {"Authorization": f"Bearer {env_key}"} if env_key else {}


def _sent_secrets(headers: Mapping[str, str]) -> list[str]:
    """The credentials a request carries in its headers, as they may be echoed back."""
    out: list[str] = []
    for name, value in headers.items():
        if name.lower() not in ("authorization", "proxy-authorization", "x-api-key", "api-key"):
            continue
        scheme, _, token = value.partition(" ")
        token = token.strip() if token else scheme
        out.append(token)
        if scheme.lower() == "basic":
            try:
                pair = base64.b64decode(token, validate=True).decode("utf-8")
            except (binascii.Error, UnicodeDecodeError):
                continue
            out += [pair, *pair.split(":", 1)]
    return out


def _retry_after(headers: httpx.Headers, limit: float) -> float | None:
    value = headers.get("Retry-After")
    if value is None:
        return None
    try:
        return min(max(float(value), 0.0), limit)
    except ValueError:  # an HTTP date: not worth parsing for a short wait
        return None


def retry_delay(exc: HTTPJSONError, failures: int, backoff: float, limit: float) -> float:
    """Seconds to wait before the next try: the server's ``Retry-After``, else
    ``backoff * 2**failures``, never more than ``limit``."""
    delay = backoff * 2**failures if exc.retry_after is None else exc.retry_after
    return min(max(delay, 0.0), limit)


def log_retry(what: str, url: str, exc: HTTPJSONError, attempt: int, tries: int,
              delay: float) -> None:
    """One warning line for a retry: what failed at which URL, and when the next try runs."""
    if exc.timed_out:
        cause = "timeout"
    elif exc.status is not None:
        cause = f"HTTP {exc.status}"
    else:
        cause = f"connection failed ({exc.reason})"
    logger.warning("%s at %s: %s; try %d of %d in %.2f s", scrub(what), safe_url(url),
                   scrub(cause), attempt + 1, tries, delay)


def _decode(url: str, response: httpx.Response, retry_limit: float, secrets: list[str]) -> Any:
    if response.status_code >= 400:
        body = scrub(response.text[:_BODY_LIMIT], secrets)
        raise HTTPJSONError(f"HTTP {response.status_code} from {url}: {body[:200]}",
                            status=response.status_code, body=body,
                            retry_after=_retry_after(response.headers, retry_limit))
    text = response.text
    try:
        return json.loads(text)
    except ValueError as exc:
        raise HTTPJSONError(f"reply from {url} is not valid JSON: {scrub(str(exc), secrets)}",
                            status=200, body=scrub(text[:_BODY_LIMIT], secrets)) from exc


def _transport_error(url: str, exc: httpx.HTTPError, timeout: float,
                     secrets: list[str]) -> HTTPJSONError:
    if isinstance(exc, httpx.TimeoutException):
        return HTTPJSONError(f"no reply from {url} within {timeout:g} s", timed_out=True,
                             reason="timeout")
    reason = scrub(str(exc) or type(exc).__name__, secrets)
    if isinstance(exc, httpx.ConnectError):
        return HTTPJSONError(f"cannot reach {url}: {reason}", reason=reason)
    return HTTPJSONError(f"request to {url} failed: {reason}", reason=reason)


@attrs.define
class JSONPoster:
    """POSTs JSON and decodes JSON replies over pooled connections (kept alive between calls).

    The sync client is made on first use; an async client is made per event loop
    (an httpx async client cannot move between loops). :meth:`close` and
    :meth:`aclose` release them; an unclosed poster's connections close when it is
    garbage-collected.

    Attributes:
        timeout: Seconds to wait for each reply.
        retry_after_limit: Longest ``Retry-After`` honoured, in seconds.
    """

    timeout: float = 30.0
    retry_after_limit: float = MAX_RETRY_AFTER
    _sync: httpx.Client | None = attrs.field(default=None, init=False, repr=False)
    _async: dict[int, httpx.AsyncClient] = attrs.field(factory=dict, init=False, repr=False)

    def _headers(self, headers: Mapping[str, str] | None) -> dict[str, str]:
        out = {"Content-Type": "application/json", "Accept": "application/json"}
        out.update(headers or {})
        return out

    @staticmethod
    def _target(url: str, headers: Mapping[str, str] | None) -> tuple[str, list[str]]:
        """The URL to request (credentials in it are the caller's to send as a header;
        httpx would otherwise replace any ``Authorization`` with them) and the secrets
        to keep out of errors."""
        clean, credentials = split_credentials(url)
        sent = _sent_secrets(headers or {})
        if credentials is not None:
            sent += [":".join(credentials), *credentials]
        return clean, sent

    @staticmethod
    def _body(payload: Any) -> bytes:
        return json.dumps(payload, ensure_ascii=False).encode("utf-8")

    def post(self, url: str, payload: Any, *, headers: Mapping[str, str] | None = None) -> Any:
        """POST once and return the decoded reply.

        :raises HTTPJSONError: Transport error, timeout, status >= 400 or a reply that is not JSON.
        """
        if self._sync is None:
            self._sync = httpx.Client(timeout=self.timeout)
        url, sent = self._target(url, headers)
        try:
            response = self._sync.post(url, content=self._body(payload),
                                       headers=self._headers(headers))
        except httpx.HTTPError as exc:
            raise _transport_error(safe_url(url), exc, self.timeout, sent) from exc
        return _decode(safe_url(url), response, self.retry_after_limit, sent)

    async def apost(self, url: str, payload: Any, *,
                    headers: Mapping[str, str] | None = None) -> Any:
        """:meth:`post` on the running event loop; cancelling it abandons the request.

        :raises HTTPJSONError: As :meth:`post`.
        """
        loop = id(asyncio.get_running_loop())
        client = self._async.get(loop)
        if client is None or client.is_closed:
            self._async = {loop: httpx.AsyncClient(timeout=self.timeout)}
            client = self._async[loop]
        url, sent = self._target(url, headers)
        try:
            response = await client.post(url, content=self._body(payload),
                                         headers=self._headers(headers))
        except httpx.HTTPError as exc:
            raise _transport_error(safe_url(url), exc, self.timeout, sent) from exc
        return _decode(safe_url(url), response, self.retry_after_limit, sent)

    def close(self) -> None:
        """Close the sync client's connections (the async ones close with :meth:`aclose`)."""
        if self._sync is not None:
            self._sync.close()
            self._sync = None

    async def aclose(self) -> None:
        """Close the async client of the running loop."""
        client = self._async.pop(id(asyncio.get_running_loop()), None)
        if client is not None:
            await client.aclose()
