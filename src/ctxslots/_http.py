"""A small JSON-over-HTTP POST helper on the standard library, with retries.

Used by the HTTP embedder and the chat client; kept free of ctxslots' own errors so any client can
translate :class:`HTTPJSONError` into the error its callers expect.
"""

from __future__ import annotations

import email.message
import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["HTTPJSONError", "post_json"]

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
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        body: str | None = None,
        timed_out: bool = False,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.body = body
        self.timed_out = timed_out
        self.retry_after = retry_after


def _retry_after(headers: email.message.Message | None) -> float | None:
    value = headers.get("Retry-After") if headers is not None else None
    if value is None:
        return None
    try:
        return min(max(float(value), 0.0), MAX_RETRY_AFTER)
    except ValueError:  # an HTTP date: not worth parsing for a short wait
        return None


def _post_once(url: str, data: bytes, headers: Mapping[str, str], timeout: float) -> Any:
    request = urllib.request.Request(url, data=data, headers=dict(headers), method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            raw = response.read()
    except urllib.error.HTTPError as exc:
        try:
            body = exc.read().decode("utf-8", "replace")[:_BODY_LIMIT]
        except OSError:
            body = ""
        raise HTTPJSONError(
            f"HTTP {exc.code} from {url}: {body[:200]}",
            status=exc.code,
            body=body,
            retry_after=_retry_after(exc.headers),
        ) from exc
    except TimeoutError as exc:
        raise HTTPJSONError(f"no reply from {url} within {timeout:g} s", timed_out=True) from exc
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, TimeoutError):
            raise HTTPJSONError(f"no reply from {url} within {timeout:g} s", timed_out=True) from exc
        raise HTTPJSONError(f"cannot reach {url}: {exc.reason}") from exc
    except (OSError, ValueError) as exc:  # connection reset, bad URL, truncated reply
        raise HTTPJSONError(f"request to {url} failed: {exc}") from exc
    text = raw.decode("utf-8", "replace")
    try:
        return json.loads(text)
    except ValueError as exc:
        raise HTTPJSONError(
            f"reply from {url} is not valid JSON: {exc}", status=200, body=text[:_BODY_LIMIT]
        ) from exc


def post_json(
    url: str,
    payload: Any,
    *,
    headers: Mapping[str, str] | None = None,
    timeout: float = 30.0,
    max_retries: int = 2,
    backoff: float = 0.5,
    sleep: Callable[[float], None] = time.sleep,
) -> Any:
    """POST ``payload`` as JSON to ``url`` and return the decoded JSON reply.

    Statuses in :data:`RETRY_STATUSES` are tried again up to ``max_retries``
    times, waiting ``backoff * 2**attempt`` seconds or the server's
    ``Retry-After`` (at most :data:`MAX_RETRY_AFTER`). Timeouts and other
    failures are not retried.

    :raises HTTPJSONError: The last failure.
    """
    data = json.dumps(payload, ensure_ascii=False).encode("utf-8")
    all_headers = {"Content-Type": "application/json", "Accept": "application/json"}
    all_headers.update(headers or {})
    attempt = 0
    while True:
        try:
            return _post_once(url, data, all_headers, timeout)
        except HTTPJSONError as exc:
            if exc.status not in RETRY_STATUSES or attempt >= max_retries:
                raise
            sleep(backoff * 2**attempt if exc.retry_after is None else exc.retry_after)
            attempt += 1
