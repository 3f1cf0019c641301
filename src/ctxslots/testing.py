"""Helpers for testing code that uses ctxslots: real parts, running locally.

- :class:`ScriptedChatServer`: a real HTTP server on 127.0.0.1 that speaks the
  OpenAI chat-completions protocol (streamed too) and answers from a script, for
  testing flushers, LLM clients and agent frameworks without a model.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

import attrs

__all__ = ["ScriptedChatServer", "ScriptedReply"]


# -- scripted chat-completions server ------------------------------------------


class _QuietServer(ThreadingHTTPServer):
    """A threading HTTP server that counts a client resetting or breaking its
    connection instead of printing a traceback (``socketserver`` prints one for any
    error of a request's thread)."""

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler],
                 on_gone: Callable[[], None]) -> None:
        super().__init__(address, handler)
        self._on_gone = on_gone

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            self._on_gone()
            return
        super().handle_error(request, client_address)


@attrs.frozen
class ScriptedReply:
    """One scripted answer of :class:`ScriptedChatServer`.

    Attributes:
        content: The assistant message's content (ignored when ``body`` is set).
        status: HTTP status of the answer.
        delay: Seconds to wait before answering (to test timeouts).
        body: A raw body to send instead of a chat completion (e.g. broken JSON).
        headers: Extra response headers (e.g. ``Retry-After``).
        gate: Something with a ``wait()`` method (a :class:`threading.Event`, a
            :class:`threading.Barrier`) the server calls before answering: the
            answer waits for the event a test chooses, not for a clock.
    """

    content: str | None = None
    status: int = 200
    delay: float = 0.0
    body: str | None = None
    # Compared, not hashed (a dict has no hash): equal replies still hash alike.
    headers: Mapping[str, str] = attrs.field(factory=dict, hash=False)
    gate: Any = None


def _completion(content: str, request: Mapping[str, Any]) -> dict[str, Any]:
    prompt_words = sum(len(str(m.get("content", "")).split()) for m in request.get("messages", [])
                       if isinstance(m, Mapping))
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.get("model", "scripted"),
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": prompt_words, "completion_tokens": len(content.split()),
                  "total_tokens": prompt_words + len(content.split())},
    }


def _stream(completion: Mapping[str, Any], request: Mapping[str, Any]) -> str:
    """A completion as the server-sent events of a streamed answer: the whole message in
    one delta, the finish reason, the usage when asked for, then ``[DONE]``."""
    head = {k: completion.get(k) for k in ("id", "created", "model")}
    head["object"] = "chat.completion.chunk"
    choice = (completion.get("choices") or [{}])[0]
    message = dict(choice.get("message") or {})
    delta: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
    if message.get("tool_calls"):
        delta["tool_calls"] = [{"index": i, **call}
                               for i, call in enumerate(message["tool_calls"])]
    chunks = [{**head, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
              {**head, "choices": [{"index": 0, "delta": {},
                                    "finish_reason": choice.get("finish_reason", "stop")}]}]
    options = request.get("stream_options")
    if isinstance(options, Mapping) and options.get("include_usage"):
        chunks.append({**head, "choices": [], "usage": completion.get("usage")})
    return "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"


class ScriptedChatServer:
    """A chat-completions server on 127.0.0.1 answering from a script, one step per request.

    A step is a string (the assistant's content, with status 200) or a
    :class:`ScriptedReply`. Once the script is used up every request gets a
    500 saying so. Use it as a context manager::

        with ScriptedChatServer(['{"operations": []}']) as server:
            client = OpenAIChatClient(server.base_url, "scripted")

    It speaks HTTP/1.1 with keep-alive, so a pooling client reuses its
    connection. A request with ``"stream": true`` gets its step's completion
    (content, or a ``body`` that is a completion with tool calls) as server-sent
    events.

    Attributes:
        requests: The decoded JSON body of every request received, in order.
        request_headers: The headers of every request, in order.
        peers: The client address (host, port) of every request, in order: one
            port for many requests means one reused connection.
        answered: How many answers the server has finished sending (or failed to
            send to a client that went away); :meth:`wait_answered` waits for it.
        gone: How many clients reset or broke their connection while the server
            read from it (a killed process, a client that gave up waiting): they are
            counted, and nothing is printed for them; :meth:`wait_gone` waits for it.
    """

    def __init__(self, script: Iterable[str | ScriptedReply]) -> None:
        self._script = [s if isinstance(s, ScriptedReply) else ScriptedReply(content=s) for s in script]
        self._lock = threading.Lock()
        self.requests: list[Any] = []
        self.request_headers: list[dict[str, str]] = []
        self.peers: list[tuple[str, int]] = []
        self.answered = 0
        self.gone = 0
        self._answers = threading.Condition(self._lock)
        self._server = _QuietServer(("127.0.0.1", 0), self._handler(), self._client_gone)
        self._server.daemon_threads = True
        # A short poll interval keeps close() (shutdown) fast.
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,),
                                        daemon=True)
        self._thread.start()

    @property
    def base_url(self) -> str:
        """The API root to give a client, e.g. ``http://127.0.0.1:PORT/v1``."""
        port = self._server.server_address[1]
        return f"http://127.0.0.1:{port}/v1"

    def close(self) -> None:
        """Stop serving (idempotent)."""
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def wait_answered(self, count: int, timeout: float = 60.0) -> bool:
        """Wait until ``count`` answers have been sent; whether they were within ``timeout``
        seconds (a bound for a broken test, not a measurement)."""
        return self._wait_for(lambda: self.answered >= count, timeout)

    def wait_gone(self, count: int, timeout: float = 60.0) -> bool:
        """Wait until ``count`` clients have gone away mid-connection (see ``gone``);
        whether they had within ``timeout`` seconds (a bound for a broken test)."""
        return self._wait_for(lambda: self.gone >= count, timeout)

    def _wait_for(self, done: Callable[[], bool], timeout: float) -> bool:
        with self._answers:
            return self._answers.wait_for(done, timeout)

    def _client_gone(self) -> None:
        with self._answers:
            self.gone += 1
            self._answers.notify_all()

    def _answer_sent(self) -> None:
        with self._answers:
            self.answered += 1
            self._answers.notify_all()

    def next_reply(self, body: Any, headers: dict[str, str],
                   peer: tuple[str, int]) -> ScriptedReply | None:
        """Record a request and return the next scripted reply (``None`` when used up)."""
        with self._lock:
            self.requests.append(body)
            self.request_headers.append(headers)
            self.peers.append(peer)
            return self._script.pop(0) if self._script else None

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive: every reply carries Content-Length

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def _send(self, status: int, text: str, headers: Mapping[str, str] = {},
                      content_type: str = "application/json") -> None:
                data = text.encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up
                    pass
                finally:
                    server._answer_sent()

            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/models"):
                    self._send(200, json.dumps({"object": "list", "data": [
                        {"id": "scripted", "object": "model", "owned_by": "ctxslots"}]}))
                else:
                    self._send(404, json.dumps({"error": {"message": f"no route {self.path}"}}))

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length).decode("utf-8", "replace")
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, json.dumps({"error": {"message": f"no route {self.path}"}}))
                    return
                try:
                    body: Any = json.loads(raw)
                except ValueError:
                    body = raw
                step = server.next_reply(body, dict(self.headers.items()), self.client_address[:2])
                if step is None:
                    self._send(500, json.dumps({"error": {"message": "the script is used up"}}))
                    return
                if step.gate is not None:
                    step.gate.wait()
                if step.delay:
                    time.sleep(step.delay)
                request = body if isinstance(body, dict) else {}
                if step.body is not None:
                    text = step.body
                elif step.status != 200:
                    text = json.dumps({"error": {"message": step.content or f"scripted {step.status}"}})
                else:
                    text = json.dumps(_completion(step.content or "", request))
                if step.status == 200 and request.get("stream") is True:
                    try:
                        completion = json.loads(text)
                    except ValueError:  # a broken body is sent as it is
                        completion = None
                    if isinstance(completion, dict):
                        self._send(200, _stream(completion, request), step.headers,
                                   content_type="text/event-stream")
                        return
                self._send(step.status, text, step.headers)

        return Handler
