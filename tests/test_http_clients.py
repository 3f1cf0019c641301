"""The HTTP clients on httpx: pooled connections, real async calls, cancellation that writes
nothing, and retries and fallbacks logged without secrets; against real servers on 127.0.0.1."""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import os
import socket
import struct
import threading
from pathlib import Path

import httpx
import numpy as np
import pytest

from ctxslots import MemoryFlusher, OpenAIChatClient
from ctxslots.stores.embedders import OpenAIEmbedder
from ctxslots.testing import ScriptedChatServer, ScriptedReply

MESSAGES = [{"role": "user", "content": "I moved from Helix to Neovim."},
            {"role": "assistant", "content": "Noted."}]
REPLY = json.dumps({"operations": [{"op": "upsert", "slot": "user", "key": "editor",
                                    "value": "The user edits code in Neovim.",
                                    "confidence": 0.9, "tags": []}]})


def test_sync_calls_reuse_one_connection():
    """Three completions from one client travel over one kept-alive connection."""
    with ScriptedChatServer(["a", "b", "c"]) as server:
        client = OpenAIChatClient(server.base_url, "scripted")
        texts = [client.complete([]).text for _ in range(3)]
        client.close()
    assert ["a", "b", "c"] == texts
    assert 1 == len({port for _, port in server.peers})


def test_async_calls_run_on_the_loop_and_reuse_one_connection():
    """acomplete runs concurrently on the event loop (no thread per call) over pooled
    connections: each of two answers waits until both requests are at the server, which
    only calls in flight together can do."""
    both_in = threading.Barrier(2, timeout=60)
    script = [ScriptedReply("slow", gate=both_in), ScriptedReply("slow", gate=both_in), "fast"]
    with ScriptedChatServer(script) as server:
        client = OpenAIChatClient(server.base_url, "scripted", max_retries=0)

        async def run() -> list[str]:
            texts = await asyncio.gather(client.acomplete([]), client.acomplete([]))
            third = await client.acomplete([])
            await client.aclose()
            return [*[t.text for t in texts], third.text]

        texts = asyncio.run(run())
    assert ["slow", "slow", "fast"] == texts          # the two slow calls overlapped
    assert not both_in.broken
    assert 2 == len({port for _, port in server.peers})  # the third reused a connection


def test_the_async_client_is_made_off_the_event_loop(monkeypatch):
    """The first acomplete on a loop makes its httpx client in a worker thread: making one
    loads the certificate store, which held a server's event loop still for 40 to 200 ms
    at its first model call. Calls racing to make it all answer."""
    made_on: list[int] = []
    make = httpx.AsyncClient.__init__

    def recording(self: httpx.AsyncClient, *args: object, **kwargs: object) -> None:
        made_on.append(threading.get_ident())
        make(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(httpx.AsyncClient, "__init__", recording)
    with ScriptedChatServer(["a", "b", "c", "d"]) as server:
        client = OpenAIChatClient(server.base_url, "scripted", max_retries=0)

        async def run() -> tuple[int, list[str]]:
            loop_thread = threading.get_ident()
            texts = await asyncio.gather(*(client.acomplete([]) for _ in range(3)))
            again = await client.acomplete([])
            await client.aclose()
            return loop_thread, sorted([*(t.text for t in texts), again.text])

        loop_thread, texts = asyncio.run(run())
    assert ["a", "b", "c", "d"] == texts
    assert made_on and loop_thread not in made_on
    assert server.wait_answered(4)


def test_calls_racing_to_the_first_use_share_one_async_client(monkeypatch):
    """Calls at once on a fresh loop (a burst of requests at a server's start) wait for the
    one client the first makes: each made its own, loading the certificate store once per
    call in the worker threads the store's own async calls need, and all but one were
    thrown away."""
    made: list[httpx.AsyncClient] = []
    make = httpx.AsyncClient.__init__

    def recording(self: httpx.AsyncClient, *args: object, **kwargs: object) -> None:
        made.append(self)
        make(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(httpx.AsyncClient, "__init__", recording)
    with ScriptedChatServer([str(n) for n in range(6)]) as server:
        client = OpenAIChatClient(server.base_url, "scripted", max_retries=0)

        async def run() -> list[str]:
            texts = await asyncio.gather(*(client.acomplete([]) for _ in range(6)))
            await client.aclose()
            return sorted(t.text for t in texts)

        assert [str(n) for n in range(6)] == asyncio.run(run())
    assert 1 == len(made)
    assert made[0].is_closed


def _connections_to(port: int) -> int:
    """Sockets this process holds open to ``port`` on 127.0.0.1 (Linux's /proc)."""
    held = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            held.add(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:  # closed meanwhile (the listing's own)
            continue
    rows = Path("/proc/net/tcp").read_text().splitlines()[1:]
    return sum(1 for row in rows if int(row.split()[2].split(":")[1], 16) == port
               and f"socket:[{row.split()[9]}]" in held)


def test_a_loop_per_call_leaves_no_connection_open():
    """acomplete under asyncio.run on every turn (a new event loop each time): each loop's
    connections are closed as that loop ends, without close(), aclose() or the garbage
    collector, so none stays open to the server turn after turn."""
    if not Path("/proc/net/tcp").exists():
        pytest.skip("counts connections through Linux's /proc")
    with ScriptedChatServer(["a"] * 20) as server:
        port = int(server.base_url.rsplit(":", 1)[1].split("/")[0])
        client = OpenAIChatClient(server.base_url, "scripted", max_retries=0)
        texts, still_open = [], []
        gc.disable()  # a collected client closes its sockets: count what the loop's end did
        try:
            for _ in range(20):
                texts.append(asyncio.run(client.acomplete([])).text)
                still_open.append(_connections_to(port))
        finally:
            gc.enable()
    assert ["a"] * 20 == texts
    assert [0] * 20 == still_open
    assert server.wait_answered(20)


class Hold:
    """A gate for a scripted answer: notes that the request arrived, then holds the answer
    until released."""

    def __init__(self) -> None:
        self.arrived = threading.Event()
        self.release = threading.Event()

    def wait(self) -> None:
        self.arrived.set()
        self.release.wait(120)


def test_a_loop_in_another_thread_leaves_this_loops_request_alone():
    """One client used by two threads, each with its event loop running at once (a sync
    server running asyncio.run per request): the second loop's call made a client of its
    own and let the first loop's go, which closed it on the first loop under the request
    in flight there (``connection failed: ReadError``)."""
    hold = Hold()
    with ScriptedChatServer([ScriptedReply("first", gate=hold), "second"]) as server:
        client = OpenAIChatClient(server.base_url, "scripted", max_retries=0)
        answers: dict[str, object] = {}
        first_loop: list[asyncio.AbstractEventLoop] = []
        answered = threading.Event()
        done = threading.Event()

        async def first() -> None:
            first_loop.append(asyncio.get_running_loop())
            try:
                answers["first"] = (await client.acomplete([])).text
            except Exception as exc:  # the failure is what the test shows
                answers["first"] = repr(exc)
            answered.set()
            await asyncio.to_thread(done.wait, 60)  # the loop runs on until the test ends

        waiting = threading.Thread(target=asyncio.run, args=(first(),))
        waiting.start()
        assert hold.arrived.wait(60)                   # the first request is in flight
        answers["second"] = asyncio.run(client.acomplete([])).text

        async def turns() -> None:  # whatever the second call set off on it has run
            for _ in range(20):
                await asyncio.sleep(0)

        asyncio.run_coroutine_threadsafe(turns(), first_loop[0]).result(60)
        hold.release.set()
        assert answered.wait(60)
        done.set()
        waiting.join(60)
    assert {"first": "first", "second": "second"} == answers


def test_cancelling_aflush_during_the_model_call_writes_nothing(store):
    """Cancelling aflush while the model is answering (as asyncio.wait_for does when its time
    runs out) stops the flush: nothing is written, then or later (once the server has sent the
    abandoned answer), and the messages stay unread."""
    hold = Hold()
    with ScriptedChatServer([ScriptedReply(REPLY, gate=hold), REPLY]) as server:
        flusher = MemoryFlusher(store, OpenAIChatClient(server.base_url, "scripted"))

        async def run() -> None:
            task = asyncio.ensure_future(flusher.aflush(MESSAGES, force=True))
            assert await asyncio.to_thread(hold.arrived.wait, 120)  # the model is answering
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            hold.release.set()                         # the answer goes out to no one
            assert await asyncio.to_thread(server.wait_answered, 1)

        asyncio.run(run())
        assert [] == list(store.facts())
        assert 0 == flusher.messages_read("default")
        report = flusher.flush(MESSAGES, force=True)    # the next flush does the work
    assert "applied" == report.status and 1 == len(report.added)


def test_cancelling_aflush_while_applying_rolls_back(store):
    """A cancel that arrives while the operations are applied rolls their transaction back."""
    applying = threading.Event()
    cancel_sent = threading.Event()

    def slow_operation(_index, _op) -> None:
        applying.set()
        assert cancel_sent.wait(60)  # the apply goes on once the flush has seen its cancel

    with ScriptedChatServer([REPLY]) as server:
        flusher = MemoryFlusher(store, OpenAIChatClient(server.base_url, "scripted"),
                                on_operation=slow_operation)

        async def run() -> None:
            task = asyncio.ensure_future(flusher.aflush(MESSAGES, force=True))
            while not applying.is_set():
                await asyncio.sleep(0.01)
            task.cancel()
            await asyncio.sleep(0)  # the task runs first (callbacks run in order): it sees
            cancel_sent.set()       # the cancel before the apply may end
            with pytest.raises(asyncio.CancelledError):
                await task

        asyncio.run(run())
    assert [] == list(store.facts())
    assert 0 == flusher.messages_read("default")


def test_aflush_inside_a_batch_is_part_of_it(store):
    """aflush awaited inside a batch the loop's thread has open reads and writes on that
    thread, as flush does: in worker threads it waited for the batch for ever (SQLite),
    or wrote outside it, its facts kept when the batch rolled back (PostgreSQL)."""

    class Undo(Exception):
        pass

    with ScriptedChatServer([REPLY, REPLY]) as server:
        flusher = MemoryFlusher(store, OpenAIChatClient(server.base_url, "scripted"))

        async def run(keep: bool) -> str:
            with store.batch():
                report = await asyncio.wait_for(flusher.aflush(MESSAGES, force=True), 60)
                if not keep:
                    raise Undo
            return report.status

        with pytest.raises(Undo):
            asyncio.run(run(keep=False))
        assert ([], 0) == (store.facts(), flusher.messages_read("default"))
        assert "applied" == asyncio.run(run(keep=True))
    assert ["The user edits code in Neovim."] == [f.value for f in store.facts()]
    assert 2 == flusher.messages_read("default")


def test_aflush_applies_like_flush(store):
    """Uncancelled, aflush asks the model on the loop and applies the operations."""
    with ScriptedChatServer([REPLY]) as server:
        flusher = MemoryFlusher(store, OpenAIChatClient(server.base_url, "scripted"))
        report = asyncio.run(flusher.aflush(MESSAGES, force=True))
    assert "applied" == report.status
    assert ["The user edits code in Neovim."] == [f.value for f in store.facts()]


def test_retries_and_fallbacks_are_logged_without_the_key(caplog):
    """A 500 retry and a response_format fallback each leave one warning naming the URL, and no
    log line carries the API key."""
    script = [ScriptedReply("overloaded", status=500),
              ScriptedReply("response_format json_schema is not supported", status=400),
              "{}"]
    with ScriptedChatServer(script) as server, caplog.at_level(logging.WARNING):
        client = OpenAIChatClient(server.base_url, "scripted", api_key="sk-secret-123",
                                  backoff=0.01)
        assert "{}" == client.complete([], json_schema={"type": "object"}).text
    lines = [r.getMessage() for r in caplog.records]
    assert any("HTTP 500; try 2 of 4" in line and server.base_url in line for line in lines)
    assert any("refused response_format 'json_schema'" in line and "'json_object_schema'" in line
               for line in lines)
    assert not any("sk-secret-123" in line for line in lines)
    assert "json_object_schema" == client.response_format


class EmbeddingServer(ScriptedChatServer):
    """The scripted server, answering ``/embeddings`` posts too (a vector per input text)."""

    def _handler(self):
        base = super()._handler()
        outer = self

        class Handler(base):  # type: ignore[misc, valid-type]
            def do_POST(self) -> None:
                if not self.path.endswith("/embeddings"):
                    return super().do_POST()
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.next_reply(body, dict(self.headers.items()), self.client_address[:2])
                data = [{"index": i, "embedding": [1.0, float(len(t)), 0.0]}
                        for i, t in enumerate(body["input"])]
                self._send(200, json.dumps({"data": data}))

        return Handler


def test_embedder_sync_and_async_share_the_parsing_and_pool_connections():
    """embed and aembed give the same vectors; batches reuse one connection per client."""
    with EmbeddingServer([]) as server:
        embedder = OpenAIEmbedder("m", server.base_url, batch_size=2)
        texts = ["a", "bb", "ccc", "dddd", "eeeee"]
        sync = embedder.embed(texts)

        async def run():
            vectors = await embedder.aembed(texts)
            await embedder.aclose()
            return vectors

        async_ = asyncio.run(run())
        embedder.close()
    np.testing.assert_allclose(sync, async_)
    assert (5, 3) == sync.shape
    ports = [port for _, port in server.peers]
    assert 6 == len(ports) and 2 == len(set(ports))     # 3 batches each way, 1 connection each


def _reset_after_one_answer(url: str) -> bytes:
    """Send one request on a raw socket, read its answer, then reset the connection
    while the server waits for the next request (as a killed client does)."""
    host, port = url.split("//")[1].split("/")[0].split(":")
    body = json.dumps({"model": "scripted", "messages": []}).encode()
    with socket.create_connection((host, int(port))) as conn:
        conn.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                     b"Content-Type: application/json\r\n"
                     b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        answer = b""
        while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
            chunk = conn.recv(65536)
            if not chunk:
                break
            answer += chunk
        # SO_LINGER with a zero timeout: close() sends a reset instead of a FIN.
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    return answer


def test_a_client_that_resets_its_connection_is_counted_not_printed(capfd):
    """The scripted server answers, the client resets while the server reads its next
    request: the server counts it as gone and prints no traceback."""
    with ScriptedChatServer(['{"operations": []}']) as server:
        answer = _reset_after_one_answer(server.base_url)
        assert answer.startswith(b"HTTP/1.1 200")
        assert server.wait_gone(1)
        assert 1 == server.gone
        assert 1 == server.answered
    assert "Traceback" not in capfd.readouterr().err
