"""JSON over HTTP POST with httpx: one pooled connection set per client, sync and async.

Used by the HTTP embedder and the chat client; kept free of ctxslots' own errors so any
client can translate :class:`HTTPJSONError` into the error its callers expect. Retries
are each caller's policy; :func:`retry_delay` and :func:`log_retry` keep their waits and
their log lines alike. Nothing here logs a header, a key or a request body, and every
message and body an error carries passes :func:`ctxslots._secrets.scrub` with the
credentials the request sent (a server may echo them).

A reply is read as it arrives, once, into one buffer: no more than
:attr:`JSONPoster.max_reply_bytes` of it (a larger one is an error naming the cap, and
the rest is never read), and no longer than the request's timeout, counted over the
whole request (a server trickling a byte at a time does not extend it).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import logging
import os
import time
import urllib.parse
import weakref
from collections.abc import AsyncGenerator, Mapping
from typing import Any

import attrs
import httpx

from ._secrets import safe_url, scrub, split_credentials

__all__ = ["DEFAULT_MAX_REPLY_BYTES", "LOOPBACK_DIRECT", "RETRY_STATUSES", "HTTPJSONError",
           "JSONPoster", "authorization", "log_retry", "retry_delay", "split_credentials",
           "url_problem"]

logger = logging.getLogger("ctxslots.http")

#: Loopback hosts reached directly, never through a proxy from the environment
#: (``HTTP_PROXY``, ``ALL_PROXY``): a proxy would reach its own loopback, not this
#: machine's model server. ``None`` is httpx's "no proxy" for a pattern.
LOOPBACK_DIRECT: dict[str, None] = {"all://127.0.0.1": None, "all://localhost": None,
                                    "all://[::1]": None}

#: Statuses worth another try: rate limiting and server-side failures.
RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})

#: Longest wait honoured from a ``Retry-After`` header, in seconds.
MAX_RETRY_AFTER = 10.0

#: Largest reply read, in bytes: a chat reply is a few kilobytes, and 64 embeddings of
#: 8,192 dimensions written as JSON text are about 12 MB.
DEFAULT_MAX_REPLY_BYTES = 16 * 1024 * 1024

_BODY_LIMIT = 2000
#: Of an error reply (status 400 and up), only this much is read: its start is all a
#: message shows.
_ERROR_BODY_BYTES = 8 * _BODY_LIMIT

#: The clients a forked child's posters inherited from the parent: held, never used nor
#: closed here (their connections are the parent's).
_inherited: list[object] = []


class HTTPJSONError(Exception):
    """A POST failed: transport error, timeout, HTTP error status or a body that is not JSON.

    Attributes:
        status: The HTTP status code, when a response arrived.
        body: The response body (cut to 2,000 characters), when there was one.
        timed_out: Whether the request ran past its timeout.
        retry_after: The wait the server asked for (``Retry-After``), in seconds.
        reason: What went wrong on the way, for transport failures.
        too_large: Whether the reply was larger than the poster's ``max_reply_bytes``.
    """

    def __init__(self, message: str, *, status: int | None = None, body: str | None = None,
                 timed_out: bool = False, retry_after: float | None = None,
                 reason: str | None = None, too_large: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.body = body
        self.timed_out = timed_out
        self.retry_after = retry_after
        self.reason = reason
        self.too_large = too_large


def url_problem(url: str) -> str | None:
    """Why ``url`` cannot be requested (not http or https, no host, a broken IPv6 address,
    a port that is not a number up to 65535), or ``None`` when it can."""
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 - reading it checks the port
    except ValueError as exc:
        return str(exc) or "it cannot be parsed"
    if parts.scheme not in ("http", "https"):
        return "it must start with http:// or https://"
    if not parts.hostname:
        return "it names no host"
    return None


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


def _timed_out(url: str, timeout: float) -> HTTPJSONError:
    return HTTPJSONError(f"no reply from {url} within {timeout:.3g} s", timed_out=True,
                         reason="timeout")


@attrs.define
class _Reply:
    """One reply's status, headers and body, read as it arrives within the byte cap and
    the request's time (an error reply only as far as a message shows it)."""

    url: str
    response: httpx.Response
    cap: int
    deadline: float
    timeout: float
    data: bytearray = attrs.field(factory=bytearray)

    def __attrs_post_init__(self) -> None:
        declared = self.response.headers.get("Content-Length", "")
        if self.response.status_code < 400 and declared.isdigit() and int(declared) > self.cap:
            raise self._too_large()

    def add(self, chunk: bytes) -> bool:
        """Add the next chunk; ``False`` once enough of an error reply is read.

        :raises HTTPJSONError: The reply passed the cap, or the request its time.
        """
        self.data += chunk
        if self.response.status_code >= 400:
            return len(self.data) < _ERROR_BODY_BYTES
        if len(self.data) > self.cap:
            raise self._too_large()
        if time.monotonic() > self.deadline:
            raise _timed_out(self.url, self.timeout)
        return True

    def _too_large(self) -> HTTPJSONError:
        return HTTPJSONError(
            f"the reply from {self.url} is larger than {self.cap:,} bytes, the most a reply "
            "may hold (max_reply_bytes); the rest was not read",
            status=self.response.status_code, too_large=True)


def _decode(reply: _Reply, retry_limit: float, secrets: list[str]) -> Any:
    url, status, data = reply.url, reply.response.status_code, bytes(reply.data)
    if status >= 400:
        body = scrub(data.decode("utf-8", "replace")[:_BODY_LIMIT], secrets)
        raise HTTPJSONError(f"HTTP {status} from {url}: {body[:200]}", status=status, body=body,
                            retry_after=_retry_after(reply.response.headers, retry_limit))
    try:
        return json.loads(data)
    except ValueError as exc:
        text = data[:4 * _BODY_LIMIT].decode("utf-8", "replace")[:_BODY_LIMIT]
        raise HTTPJSONError(f"reply from {url} is not valid JSON: {scrub(str(exc)[:200], secrets)}",
                            status=status, body=scrub(text, secrets)) from exc


def _transport_error(url: str, exc: httpx.HTTPError, timeout: float,
                     secrets: list[str]) -> HTTPJSONError:
    if isinstance(exc, httpx.TimeoutException):
        return _timed_out(url, timeout)
    reason = scrub(str(exc) or type(exc).__name__, secrets)
    if isinstance(exc, httpx.ConnectError):
        return HTTPJSONError(f"cannot reach {url}: {reason}", reason=reason)
    return HTTPJSONError(f"request to {url} failed: {reason}", reason=reason)


def _invalid_url(url: str, exc: Exception, secrets: list[str]) -> HTTPJSONError:
    reason = scrub(str(exc) or type(exc).__name__, secrets)
    return HTTPJSONError(f"cannot request {url}: {reason}", reason=reason)


@attrs.define
class JSONPoster:
    """POSTs JSON and decodes JSON replies over pooled connections (kept alive between calls).

    The sync client is made on first use; an async client is made per event loop
    (an httpx async client cannot move between loops) and closed on that loop when it
    shuts down (``asyncio.run`` does as it ends), so a loop per call leaves no connection
    behind. :meth:`close` and :meth:`aclose` release them; an unclosed poster's
    connections close when it is garbage-collected. A proxy named in the environment
    (``HTTPS_PROXY``...) carries every request but those to this machine
    (:data:`LOOPBACK_DIRECT`).

    A poster used before the process forks opens connections of its own in the child:
    two processes writing to one kept-alive connection read each other's replies, or
    none. A pickled poster carries its settings only (connections do not pickle).

    Attributes:
        timeout: Seconds each request may take in all, unless the call gives its own.
        retry_after_limit: Longest ``Retry-After`` honoured, in seconds.
        max_reply_bytes: Largest reply read; a larger one fails without being read
            further (:attr:`HTTPJSONError.too_large`).
    """

    timeout: float = 30.0
    retry_after_limit: float = MAX_RETRY_AFTER
    max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES
    _sync: httpx.Client | None = attrs.field(default=None, init=False, repr=False)
    #: Each loop's client, with what closes it when that loop shuts down (by the loop's id,
    #: the loop itself held weakly: an id is reused once its loop is gone).
    _async: dict[int, tuple[weakref.ref[asyncio.AbstractEventLoop], httpx.AsyncClient,
                            AsyncGenerator[None, None]]] = attrs.field(
        factory=dict, init=False, repr=False)
    #: Each loop whose client is being made, and the lock calls racing to make it wait on.
    _making: dict[int, tuple[weakref.ref[asyncio.AbstractEventLoop], asyncio.Lock]] = \
        attrs.field(factory=dict, init=False, repr=False)
    #: The process the clients were made in.
    _pid: int = attrs.field(factory=os.getpid, init=False, repr=False)

    def __reduce__(self) -> tuple[Any, ...]:
        return JSONPoster, (self.timeout, self.retry_after_limit, self.max_reply_bytes)

    def _forget_parent(self) -> None:
        """In a forked child, let go of the clients made in the parent (kept, unused)."""
        if self._pid != os.getpid():
            _inherited.extend([self._sync, self._async])
            self._sync, self._async, self._pid = None, {}, os.getpid()
            self._making = {}

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

    def post(self, url: str, payload: Any, *, headers: Mapping[str, str] | None = None,
             timeout: float | None = None) -> Any:
        """POST once and return the decoded reply.

        :param timeout: Seconds this request may take in all (default :attr:`timeout`).
        :raises HTTPJSONError: Transport error, timeout, status >= 400, a reply over
            :attr:`max_reply_bytes` or one that is not JSON.
        """
        limit = self.timeout if timeout is None else timeout
        self._forget_parent()
        if self._sync is None:
            self._sync = httpx.Client(timeout=self.timeout, mounts=LOOPBACK_DIRECT)
        url, sent = self._target(url, headers)
        shown, started = safe_url(url), time.monotonic()
        try:
            with self._sync.stream("POST", url, content=self._body(payload),
                                   headers=self._headers(headers), timeout=limit) as response:
                reply = _Reply(shown, response, self.max_reply_bytes, started + limit, limit)
                for chunk in response.iter_bytes():
                    if not reply.add(chunk):
                        break
        except httpx.HTTPError as exc:
            raise _transport_error(shown, exc, limit, sent) from exc
        except httpx.InvalidURL as exc:
            raise _invalid_url(shown, exc, sent) from exc
        return _decode(reply, self.retry_after_limit, sent)

    async def apost(self, url: str, payload: Any, *, headers: Mapping[str, str] | None = None,
                    timeout: float | None = None) -> Any:
        """:meth:`post` on the running event loop; cancelling it abandons the request.

        :raises HTTPJSONError: As :meth:`post`.
        """
        limit = self.timeout if timeout is None else timeout
        client = await self._async_client()
        url, sent = self._target(url, headers)
        shown, started = safe_url(url), time.monotonic()
        try:
            async with client.stream("POST", url, content=self._body(payload),
                                     headers=self._headers(headers), timeout=limit) as response:
                reply = _Reply(shown, response, self.max_reply_bytes, started + limit, limit)
                async for chunk in response.aiter_bytes():
                    if not reply.add(chunk):
                        break
        except httpx.HTTPError as exc:
            raise _transport_error(shown, exc, limit, sent) from exc
        except httpx.InvalidURL as exc:
            raise _invalid_url(shown, exc, sent) from exc
        return _decode(reply, self.retry_after_limit, sent)

    def close(self) -> None:
        """Close the sync client's connections (the async ones close with :meth:`aclose`)."""
        self._forget_parent()
        if self._sync is not None:
            self._sync.close()
            self._sync = None

    async def aclose(self) -> None:
        """Close the async client of the running loop."""
        self._forget_parent()
        running = asyncio.get_running_loop()
        held = self._async.get(id(running))
        if held is not None and held[0]() is running:
            del self._async[id(running)]
            await held[1].aclose()

    async def _async_client(self) -> httpx.AsyncClient:
        """The running loop's client, made on first use there. Each loop keeps its own
        while it runs: another thread's loop using this poster at the same time makes
        one of its own and leaves this one alone (letting it go closed it on its loop,
        under the requests in flight there). Those of loops that have closed are let go
        (the loop closed each as it shut down).

        It is made in a worker thread: making one loads the certificate store, which
        held the event loop still for 40 to 200 ms at a server's first model call. Calls
        racing to the first use wait for that one client, rather than each making one
        (a burst of requests at a server's start loaded the store once per request)."""
        self._forget_parent()
        running = asyncio.get_running_loop()
        loop = id(running)
        held = self._own_client(running)
        if held is not None:
            return held
        making = self._making.get(loop)
        if making is None or making[0]() is not running:
            making = self._making[loop] = (weakref.ref(running), asyncio.Lock())
        async with making[1]:
            held = self._own_client(running)
            if held is not None:  # another call made it meanwhile
                return held
            client = await asyncio.to_thread(httpx.AsyncClient, timeout=self.timeout,
                                             mounts=LOOPBACK_DIRECT)
            closer = _closed_with_loop(client)
            await anext(closer)  # the loop now holds it, and closes it as it shuts down
            self._let_ended_loops_go()
            self._async[loop] = (weakref.ref(running), client, closer)
            return client

    def _own_client(self, running: asyncio.AbstractEventLoop) -> httpx.AsyncClient | None:
        """``running``'s open client, if it has one."""
        held = self._async.get(id(running))
        if held is None or held[0]() is not running or held[1].is_closed:
            return None
        return held[1]

    def _let_ended_loops_go(self) -> None:
        """Drop the clients and locks of loops that are closed or gone."""
        def ended(loop: weakref.ref[asyncio.AbstractEventLoop]) -> bool:
            held = loop()
            return held is None or held.is_closed()

        # In place, one entry at a time: another thread's loop may be adding its own.
        for key, client in list(self._async.items()):
            if ended(client[0]) and self._async.get(key) is client:
                del self._async[key]
        for key, making in list(self._making.items()):
            if ended(making[0]) and self._making.get(key) is making:
                del self._making[key]


async def _closed_with_loop(client: httpx.AsyncClient) -> AsyncGenerator[None, None]:
    """Waits, once started, until its event loop shuts its async generators down (or it
    is closed or dropped), then closes ``client`` on that loop."""
    try:
        yield
    finally:
        await client.aclose()
