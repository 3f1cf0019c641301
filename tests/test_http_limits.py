"""The HTTP clients' limits, against real servers on 127.0.0.1: the size of a reply, the time of a
whole call with its retries, and base URLs that cannot be requested.

The servers here misbehave on purpose: one sends a body with no end, one declares a body far over
the cap, one trickles a byte at a time, one holds every answer until the test lets it go.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from click.testing import CliRunner

from ctxslots import EmbedderError, LLMClientError, Message
from ctxslots.cli import cli
from ctxslots.flusher import OpenAIChatClient
from ctxslots.flusher.openai_client import MAX_TIMEOUT
from ctxslots.stores.embedders import OpenAIEmbedder
from ctxslots.testing import ScriptedChatServer, ScriptedReply

HELLO = [Message("user", "Say hello.")]
CAP = 64 * 1024


class MisbehavingServer:
    """A real HTTP server on 127.0.0.1 whose every answer follows ``mode``:

    - ``"endless"``: status 200, no Content-Length, then bytes until the client hangs up;
    - ``"declared"``: status 200 declaring a body of 100 MB, then bytes until the client hangs up;
    - ``"trickle"``: status 200 with a valid length, then one byte of it every 50 ms.

    It counts the requests and the bytes it managed to send, and sets :attr:`hung_up`
    once a client closed the connection on it.
    """

    def __init__(self, mode: str) -> None:
        self.requests = 0
        self.sent = 0
        self.hung_up = threading.Event()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                owner.requests += 1
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                if mode == "declared":
                    self.send_header("Content-Length", str(100 * 1024 * 1024))
                elif mode == "trickle":
                    self.send_header("Content-Length", "4096")
                else:
                    self.send_header("Connection", "close")
                self.end_headers()
                chunk, pause = (b"x", 0.05) if mode == "trickle" else (b"[" * 65536, 0.0)
                stop = threading.Event()
                try:
                    for _ in range(4096):  # 4,096 bytes of a trickle; 256 MB of the others
                        self.wfile.write(chunk)
                        self.wfile.flush()
                        owner.sent += len(chunk)
                        if pause:
                            stop.wait(pause)
                except OSError:
                    owner.hung_up.set()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True).start()

    def close(self) -> None:
        """Stop serving."""
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(name="misbehaving")
def fixture_misbehaving(request):
    """A misbehaving server in the mode the test's parameter names."""
    server = MisbehavingServer(request.param)
    yield server
    server.close()


# -- the size of a reply ---------------------------------------------------------------------


@pytest.mark.parametrize("misbehaving", ["endless", "declared"], indirect=True)
def test_the_chat_client_stops_reading_at_its_cap(misbehaving):
    """A reply with no end (or declared over the cap) fails naming the cap, is not asked for
    again, and the client hangs up instead of reading on."""
    client = OpenAIChatClient(misbehaving.base_url, "m", max_reply_bytes=CAP, backoff=0.0)
    with pytest.raises(LLMClientError, match=r"larger than 65,536 bytes.*max_reply_bytes") as info:
        client.complete(HELLO)
    client.close()
    assert 1 == len(str(info.value).splitlines()) and "tries" not in str(info.value)
    assert 1 == misbehaving.requests
    assert misbehaving.hung_up.wait(60)  # the server saw the client go, not a finished body
    assert misbehaving.sent < 1 << 30


@pytest.mark.parametrize("misbehaving", ["endless"], indirect=True)
def test_the_async_chat_client_stops_reading_at_its_cap(misbehaving):
    """acomplete reads no further than complete does."""
    client = OpenAIChatClient(misbehaving.base_url, "m", max_reply_bytes=CAP)

    async def run() -> None:
        try:
            await client.acomplete(HELLO)
        finally:
            await client.aclose()

    with pytest.raises(LLMClientError, match="max_reply_bytes"):
        asyncio.run(run())
    assert 1 == misbehaving.requests and misbehaving.hung_up.wait(60)


@pytest.mark.parametrize("misbehaving", ["endless", "declared"], indirect=True)
def test_the_embedder_client_stops_reading_at_its_cap(misbehaving):
    """The embeddings client has the same cap: one request, an EmbedderError naming it."""
    embedder = OpenAIEmbedder("m", misbehaving.base_url, max_reply_bytes=CAP, dimension=4)
    with pytest.raises(EmbedderError, match=r"larger than 65,536 bytes.*max_reply_bytes"):
        embedder.embed(["a"])
    embedder.close()
    assert 1 == misbehaving.requests and misbehaving.hung_up.wait(60)


def test_the_default_cap_lets_a_large_valid_reply_through():
    """Under the cap a reply is read whole: 1 MB of content arrives as sent."""
    content = "y" * 1_000_000
    with ScriptedChatServer([content]) as server:
        assert content == OpenAIChatClient(server.base_url, "m").complete(HELLO).text


@pytest.mark.parametrize("misbehaving", ["endless"], indirect=True)
def test_flush_names_the_cap_in_one_line_and_prints_no_body(misbehaving, tmp_path):
    """ctxslots flush against a server with no end: one error line, and --json holds no body."""
    chat = tmp_path / "chat.jsonl"
    chat.write_text('{"role": "user", "content": "I moved to Lisbon."}\n', encoding="utf-8")
    result = CliRunner().invoke(cli, ["--db", str(tmp_path / "m.db"), "flush", str(chat),
                                      "--base-url", misbehaving.base_url, "--model", "m",
                                      "--json"], catch_exceptions=False)
    assert 1 == result.exit_code
    assert 1 == len(result.stderr.splitlines()) and "max_reply_bytes" in result.stderr
    assert "[[[[" not in result.stdout and len(result.stdout) < 20_000
    assert [] == json.loads(result.stdout)["raw_outputs"]


@pytest.mark.parametrize("misbehaving", ["declared"], indirect=True)
def test_flush_takes_its_own_cap(misbehaving, tmp_path):
    """flush --max-reply-bytes sets the cap the error names."""
    chat = tmp_path / "chat.jsonl"
    chat.write_text('{"role": "user", "content": "Hi."}\n', encoding="utf-8")
    result = CliRunner().invoke(cli, ["--db", str(tmp_path / "m.db"), "flush", str(chat),
                                      "--base-url", misbehaving.base_url, "--model", "m",
                                      "--max-reply-bytes", "1000"], catch_exceptions=False)
    assert 1 == result.exit_code
    assert "larger than 1,000 bytes" in result.output and 1 == len(result.output.splitlines())


# -- the time of a whole call ---------------------------------------------------------------


def test_a_total_timeout_ends_the_call_after_one_held_try():
    """With total_timeout equal to the try's timeout, a held answer uses it all: one try, no
    retry, and the error says the total left no time for another."""
    gate = threading.Event()
    with ScriptedChatServer([ScriptedReply("late", gate=gate)] * 4) as server:
        client = OpenAIChatClient(server.base_url, "m", timeout=1.0, total_timeout=1.0,
                                  max_retries=3, backoff=0.0)
        try:
            with pytest.raises(LLMClientError, match="total timeout of 1 s") as info:
                client.complete(HELLO)
        finally:
            gate.set()
        client.close()
    assert 1 == len(server.requests)
    assert "timeout: no reply within 1 s" in str(info.value)


def test_no_retry_starts_that_cannot_end_within_the_total():
    """A 503 asking for 10 s before the next try, under a total of 3 s: one try, at once."""
    busy = ScriptedReply("busy", status=503, headers={"Retry-After": "10"})
    with ScriptedChatServer([busy, "fine"]) as server:
        client = OpenAIChatClient(server.base_url, "m", total_timeout=3.0, max_retries=3)
        with pytest.raises(LLMClientError, match="HTTP 503.*total timeout of 3 s"):
            client.complete(HELLO)
    assert 1 == len(server.requests)


def test_retries_within_the_total_still_happen():
    """Failures that leave time are retried as before: 503, 503, then the answer."""
    busy = ScriptedReply("busy", status=503)
    with ScriptedChatServer([busy, busy, "fine"]) as server:
        client = OpenAIChatClient(server.base_url, "m", total_timeout=60.0, backoff=0.0)
        assert "fine" == client.complete(HELLO).text
    assert 3 == len(server.requests)


@pytest.mark.parametrize("misbehaving", ["trickle"], indirect=True)
def test_a_trickling_reply_cannot_stretch_a_try_past_its_timeout(misbehaving):
    """A byte every 50 ms keeps every read alive; the try still ends at its timeout, and the
    client hangs up before the 4,096 bytes are through."""
    client = OpenAIChatClient(misbehaving.base_url, "m", timeout=1.0, max_retries=0)
    with pytest.raises(LLMClientError, match="timeout: no reply within 1 s"):
        client.complete(HELLO)
    client.close()
    assert misbehaving.hung_up.wait(60)
    assert misbehaving.sent < 4096


def test_flush_timeout_is_the_total_of_the_call(tmp_path):
    """ctxslots flush --timeout 2 against a server that never answers makes one request, not
    four (it was the time of each try), and says so in one line."""
    chat = tmp_path / "chat.jsonl"
    chat.write_text('{"role": "user", "content": "I moved to Lisbon."}\n', encoding="utf-8")
    gate = threading.Event()
    with ScriptedChatServer([ScriptedReply("late", gate=gate)] * 4) as server:
        try:
            result = CliRunner().invoke(cli, [
                "--db", str(tmp_path / "m.db"), "flush", str(chat), "--base-url", server.base_url,
                "--model", "m", "--timeout", "2"], catch_exceptions=False)
        finally:
            gate.set()
    assert 1 == result.exit_code
    assert 1 == len(server.requests)
    assert "try 2" not in result.output and 1 == len(result.output.splitlines())
    assert "total timeout of 2 s" in result.output


def test_async_calls_keep_the_total_too():
    """acomplete stops at the total as complete does."""
    gate = threading.Event()
    with ScriptedChatServer([ScriptedReply("late", gate=gate)] * 4) as server:
        client = OpenAIChatClient(server.base_url, "m", timeout=1.0, total_timeout=1.0)

        async def run() -> None:
            try:
                await client.acomplete(HELLO)
            finally:
                await client.aclose()

        try:
            with pytest.raises(LLMClientError, match="total timeout of 1 s"):
                asyncio.run(run())
        finally:
            gate.set()
    assert 1 == len(server.requests)


@pytest.mark.parametrize("value", [0, -1.0, "3", True, float("inf"), float("nan"), 1e10])
def test_a_bad_total_timeout_is_refused(value):
    """total_timeout must be a positive number or None."""
    with pytest.raises(ValueError, match="total_timeout"):
        OpenAIChatClient("http://127.0.0.1:1/v1", "m", total_timeout=value)


@pytest.mark.parametrize("value", [0, -1.0, "3", None, float("inf"), float("nan"), 1e10])
def test_a_bad_timeout_is_refused_when_the_client_is_made(value):
    """A timeout no socket takes (inf, or over about 292 years) was taken, and every call
    then failed with 'timestamp out of range for platform time_t', naming no timeout."""
    with pytest.raises(ValueError, match="timeout must be a positive number of seconds"):
        OpenAIChatClient("http://127.0.0.1:1/v1", "m", timeout=value)


def test_the_longest_timeout_taken_works():
    """The longest timeout a client takes reaches the server and reads its answer."""
    with ScriptedChatServer([ScriptedReply("hello")]) as server:
        client = OpenAIChatClient(server.base_url, "m", timeout=MAX_TIMEOUT,
                                  total_timeout=MAX_TIMEOUT)
        assert "hello" == client.complete(HELLO).text
    assert 1 == len(server.requests)


@pytest.mark.parametrize("value", ["inf", "1e308", "nan"])
def test_flush_refuses_a_timeout_no_request_can_have(tmp_path, value):
    """``flush --timeout inf`` was taken and failed at the model call, with words about
    time_t; it is a usage error naming --timeout, and the server is never asked."""
    chat = tmp_path / "chat.jsonl"
    chat.write_text('{"role": "user", "content": "I moved to Lisbon."}\n', encoding="utf-8")
    with ScriptedChatServer([ScriptedReply("{}")]) as server:
        result = CliRunner().invoke(cli, [
            "--db", str(tmp_path / "m.db"), "flush", str(chat), "--base-url", server.base_url,
            "--model", "m", "--timeout", value], catch_exceptions=False)
    assert 2 == result.exit_code, result.output
    assert "Invalid value for '--timeout'" in result.output
    assert "time_t" not in result.output and 1 == len(result.output.splitlines())
    assert [] == server.requests
    assert not (tmp_path / "m.db").exists()


# -- base URLs that cannot be requested ------------------------------------------------------

BAD_URLS = ["http://[::1/v1", "http://[fe80::zz]/v1", "http://127.0.0.1:99999/v1",
            "http://127.0.0.1:port/v1", "http:///v1", "http://user:pw@[::1/v1"]


@pytest.mark.parametrize("url", BAD_URLS)
def test_a_chat_client_refuses_a_url_it_cannot_request(url):
    """A broken IPv6 address, a port out of range or not a number, no host: a ValueError
    (InvalidArgumentError) naming base_url and why, built before any request."""
    from ctxslots.errors import InvalidArgumentError

    with pytest.raises(InvalidArgumentError, match="base_url must be an http") as info:
        OpenAIChatClient(url, "m")
    assert "pw" not in str(info.value) and 1 == len(str(info.value).splitlines())


@pytest.mark.parametrize("url", BAD_URLS)
def test_an_embedder_refuses_a_url_it_cannot_request(url):
    """The embeddings client refuses the same URLs when it is built."""
    with pytest.raises(EmbedderError, match="base URL must be an http") as info:
        OpenAIEmbedder("m", url)
    assert "pw" not in str(info.value)


@pytest.mark.parametrize("url", BAD_URLS)
def test_the_command_says_so_in_one_line(url, tmp_path):
    """flush --base-url and --embed-base-url with such a URL: one error line, no traceback."""
    chat = tmp_path / "chat.jsonl"
    chat.write_text('{"role": "user", "content": "hi"}\n', encoding="utf-8")
    db = str(tmp_path / "m.db")
    runner = CliRunner()
    flushed = runner.invoke(cli, ["--db", db, "flush", str(chat), "--base-url", url,
                                  "--model", "m"])
    searched = runner.invoke(cli, ["--db", db, "--embedder", "openai:m", "--embed-base-url", url,
                                   "remember", "agent", "hello"])
    for result in (flushed, searched):
        assert 1 == result.exit_code, result.output
        assert result.exception is None or isinstance(result.exception, SystemExit)
        assert 1 == len(result.output.splitlines()) and result.output.startswith("Error: ")
        assert "pw" not in result.output


def test_a_closed_port_is_still_a_connection_error():
    """A valid URL where nothing listens stays what it was: a refused connection."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(LLMClientError, match="connection refused"):
        OpenAIChatClient(f"http://127.0.0.1:{port}/v1", "m").complete(HELLO)
