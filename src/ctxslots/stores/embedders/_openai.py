"""The OpenAI-compatible ``/v1/embeddings`` HTTP embedder (httpx, pooled, sync and async)."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np

from ..._http import (
    DEFAULT_MAX_REPLY_BYTES,
    RETRY_STATUSES,
    HTTPJSONError,
    JSONPoster,
    authorization,
    log_retry,
    retry_delay,
    split_credentials,
    url_problem,
)
from ..._readable import count
from ..._secrets import safe_url, scrub
from ...errors import EmbedderError
from ._base import EmbedderSpecError, Vectors, as_texts, normalize_rows

__all__ = ["REFUSED_INPUT_STATUSES", "OpenAIEmbedder"]

#: Replies that say the texts sent cannot be embedded (too long, malformed), not that
#: the server is down or misconfigured: the batch is split and the others embedded.
REFUSED_INPUT_STATUSES = frozenset({400, 413, 422})


@attrs.define
class OpenAIEmbedder:
    """A client for an OpenAI-compatible ``POST {base_url}/embeddings`` endpoint.

    Texts are sent ``batch_size`` at a time; replies are put back in input order
    by their ``index`` and checked: one vector per text, all of one length,
    equal to ``dimension`` when given, else to the length of the first reply
    (then enforced). Rows are L2-normalised. HTTP 429 and 5xx are retried
    ``max_retries`` times; a 400, 413 or 422 reply, or a vector of NaN, says the
    texts themselves cannot be embedded (``EmbedderError.refused_input``). Every failure raises :class:`EmbedderError`, and
    ``embed`` returns nothing partial. Nothing touches the network until
    ``embed`` or ``dimension`` is used; reading ``dimension`` before it is known
    embeds the text ``"dimension probe"`` once. Requests share pooled connections
    (httpx); :meth:`aembed` is the same on the event loop. Retries are logged on
    the ``ctxslots.http`` logger (URL and status, never the key). Credentials
    never appear in an error, a log line or the ``repr``: the key, a password in
    the URL and anything credential-shaped a server echoes become ``[redacted]``.

    Attributes:
        model: The model name sent with each request.
        base_url: The API root, such as ``http://127.0.0.1:8080/v1``. A
            ``user:password@`` in it is sent as HTTP Basic credentials (when no
            ``api_key`` is given).
        api_key: Bearer token; ``None``: the URL's credentials if it has any,
            else ``OPENAI_API_KEY`` at each request (and none if that is unset).
        timeout: Seconds to wait for each reply.
        batch_size: Texts per request.
        max_retries: Extra tries after a 429 or 5xx reply.
        retry_backoff: First wait between tries, in seconds, doubled each time.
        max_reply_bytes: Largest reply read, in bytes; a larger one fails
            (:class:`EmbedderError` naming the cap) without being read further.
    """

    model: str = attrs.field(validator=attrs.validators.min_len(1))
    base_url: str = attrs.field(repr=lambda url: repr(safe_url(url)))
    api_key: str | None = attrs.field(default=None, kw_only=True, repr=False)
    timeout: float = attrs.field(default=30.0, kw_only=True, validator=attrs.validators.gt(0))
    batch_size: int = attrs.field(default=64, kw_only=True, validator=attrs.validators.gt(0))
    _dimension: int | None = attrs.field(default=None, kw_only=True, alias="dimension")
    max_retries: int = attrs.field(default=2, kw_only=True, validator=attrs.validators.ge(0))
    retry_backoff: float = attrs.field(default=0.5, kw_only=True, validator=attrs.validators.ge(0))
    max_reply_bytes: int = attrs.field(default=DEFAULT_MAX_REPLY_BYTES, kw_only=True,
                                       validator=attrs.validators.gt(0))
    _poster: JSONPoster | None = attrs.field(default=None, init=False, repr=False, eq=False)

    @base_url.validator
    def _check_base_url(self, attribute: attrs.Attribute[str], value: str) -> None:
        problem = url_problem(value) if isinstance(value, str) else "it is not text"
        if problem is not None:
            shown = safe_url(value) if isinstance(value, str) else repr(value)
            raise EmbedderSpecError(
                f"embeddings base URL must be an http(s) URL such as http://127.0.0.1:8080/v1, "
                f"not {shown!r} ({problem})", spec=shown)

    @property
    def model_id(self) -> str:
        """``openai:`` followed by the model name."""
        return f"openai:{self.model}"

    @property
    def url(self) -> str:
        """The full embeddings URL (without credentials: they travel in a header)."""
        return split_credentials(self.base_url)[0].rstrip("/") + "/embeddings"

    @property
    def known_dimension(self) -> int | None:
        """The vector length if known without a request (given or learned), else ``None``."""
        return self._dimension

    @property
    def dimension(self) -> int:
        """The vector length: as given, as learned, or probed once from the server."""
        if self._dimension is None:
            self._embed_batch(["dimension probe"])
        assert self._dimension is not None
        return self._dimension

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Embed ``texts`` through the endpoint, ``batch_size`` per request."""
        items = as_texts(texts)
        if not items:
            return np.zeros((0, self.dimension), dtype=np.float32)
        batches = [
            self._embed_batch(items[i : i + self.batch_size]) for i in range(0, len(items), self.batch_size)
        ]
        return np.ascontiguousarray(np.concatenate(batches), dtype=np.float32)

    def _fail(self, message: str, *, body: str | None = None, **kwargs: Any) -> EmbedderError:
        secrets = [self.api_key, os.environ.get("OPENAI_API_KEY"),
                   *(split_credentials(self.base_url)[1] or ())]
        # One line, as the chat client's errors: a gateway's error page spans many, kept in
        # ``body``.
        one_line = " ".join(message.split())
        return EmbedderError(scrub(f"{self.model_id} at {self.url}: {one_line}", secrets),
                             model_id=self.model_id,
                             body=None if body is None else scrub(body, secrets), **kwargs)

    async def aembed(self, texts: Sequence[str]) -> Vectors:
        """:meth:`embed` on the event loop; cancelling it abandons the request in flight."""
        items = as_texts(texts)
        if not items:
            if self._dimension is None:
                await self._aembed_batch(["dimension probe"])
            return np.zeros((0, self.dimension), dtype=np.float32)
        batches = [await self._aembed_batch(items[i : i + self.batch_size])
                   for i in range(0, len(items), self.batch_size)]
        return np.ascontiguousarray(np.concatenate(batches), dtype=np.float32)

    def close(self) -> None:
        """Close the pooled connections of :meth:`embed`."""
        if self._poster is not None:
            self._poster.close()

    async def aclose(self) -> None:
        """Close the pooled connections :meth:`aembed` opened on this event loop."""
        if self._poster is not None:
            await self._poster.aclose()

    def _http(self) -> JSONPoster:
        if self._poster is None or (self._poster.timeout, self._poster.max_reply_bytes) != (
                self.timeout, self.max_reply_bytes):
            self._poster = JSONPoster(timeout=self.timeout, max_reply_bytes=self.max_reply_bytes)
        return self._poster

    def _request(self, batch: list[str]) -> tuple[dict[str, Any], dict[str, str]]:
        env_key = os.environ.get("OPENAI_API_KEY") if self.api_key is None else None
        headers = authorization(self.api_key, split_credentials(self.base_url)[1], env_key)
        return {"model": self.model, "input": batch}, headers

    def _retry_or_raise(self, exc: HTTPJSONError, failures: int) -> float:
        """Seconds to wait before another try after a 429 or 5xx; else the error to raise."""
        if exc.status not in RETRY_STATUSES or failures >= self.max_retries:
            raise self._fail(str(exc), status=exc.status, body=exc.body,
                             refused_input=exc.status in REFUSED_INPUT_STATUSES) from exc
        delay = retry_delay(exc, failures, self.retry_backoff, 10.0)
        log_retry(f"embedding with {self.model_id}", self.url, exc, failures + 1,
                  self.max_retries + 1, delay)
        return delay

    def _embed_batch(self, batch: list[str]) -> Vectors:
        payload, headers = self._request(batch)
        failures = 0
        while True:
            try:
                reply = self._http().post(self.url, payload, headers=headers)
            except HTTPJSONError as exc:
                time.sleep(self._retry_or_raise(exc, failures))
                failures += 1
                continue
            return self._parse(reply, len(batch))

    async def _aembed_batch(self, batch: list[str]) -> Vectors:
        payload, headers = self._request(batch)
        failures = 0
        while True:
            try:
                reply = await self._http().apost(self.url, payload, headers=headers)
            except HTTPJSONError as exc:
                await asyncio.sleep(self._retry_or_raise(exc, failures))
                failures += 1
                continue
            return self._parse(reply, len(batch))

    def _parse(self, reply: Any, expected: int) -> Vectors:
        data = reply.get("data") if isinstance(reply, dict) else None
        if not isinstance(data, list):
            raise self._fail(f"reply has no 'data' list: {str(reply)[:200]}")
        if len(data) != expected:
            raise self._fail(f"sent {count(expected, 'text')}, got "
                             f"{count(len(data), 'embedding')} back")
        if not all(isinstance(item, dict) and isinstance(item.get("embedding"), list) for item in data):
            raise self._fail("every item of 'data' needs an 'embedding' list of numbers")
        indexes = [item.get("index", position) for position, item in enumerate(data)]
        if sorted(i for i in indexes if isinstance(i, int)) != list(range(expected)):
            raise self._fail(f"reply indexes {indexes[:20]} are not 0..{expected - 1} once each")
        ordered = [item["embedding"] for _, item in sorted(zip(indexes, data), key=lambda pair: pair[0])]
        lengths = {len(vector) for vector in ordered}
        if len(lengths) != 1:
            raise self._fail(f"vectors of different lengths in one reply: {sorted(lengths)}")
        (length,) = lengths
        if self._dimension is not None and length != self._dimension:
            raise self._fail(f"expected vectors of dimension {self._dimension}, got {length}")
        if length == 0 or any(isinstance(x, bool) for vector in ordered for x in vector):
            raise self._fail("embeddings must be non-empty lists of numbers")
        try:
            matrix = np.asarray(ordered, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise self._fail(f"embeddings must be lists of numbers: {exc}") from exc
        if not np.isfinite(matrix).all():
            raise self._fail("embeddings contain NaN or infinite values", refused_input=True)
        self._dimension = length
        return normalize_rows(matrix)
