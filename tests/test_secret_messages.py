"""Credentials never show in an error, a log line or a repr; a base URL with credentials works.

A real HTTP server on 127.0.0.1 echoes back every credential it is sent (as some
gateways do in their error bodies), or checks Basic credentials before answering.
"""

from __future__ import annotations

import base64
import json
import logging
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from click.testing import CliRunner

from ctxslots import FactStore, LLMClientError, MemoryFlusher, Message, OpenAIChatClient
from ctxslots.cli import cli
from ctxslots.errors import EmbedderError, FlushError
from ctxslots.stores.embedders import OpenAIEmbedder

KEY = "local-key-not-shaped-1234"       # a key with no recognisable shape
SHAPED = "sk-" + "a1B2c3D4e5F6g7H8i9J0" * 2  # an OpenAI-shaped key
PASSWORD = "s3cret/pass@word"
USER = "ada"


def forbidden(secret: str) -> list[str]:
    """A secret as it may leak: itself, percent-encoded, inside Basic credentials."""
    from urllib.parse import quote

    pair = base64.b64encode(f"{USER}:{secret}".encode()).decode()
    return [secret, quote(secret, safe=""), pair]


class Server:
    """Answers /embeddings and /chat/completions: 500 echoing what it got, or, with
    ``require_basic``, a good reply for the right Basic credentials and 401 otherwise.

    Its 500 replies say ``Retry-After: 0``: clients retry at once (the commands'
    default retries, with their log lines, run without seconds of backoff)."""

    def __init__(self, require_basic: bool = False) -> None:
        self.seen: list[str | None] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                auth = self.headers.get("Authorization")
                outer.seen.append(auth)
                expected = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
                if not require_basic:
                    self._send(500, {"error": f"rejected: you sent {auth} for {self.path} "
                                              f"with {json.dumps(body)}; key={SHAPED}"})
                elif auth != expected:
                    self._send(401, {"error": "wrong credentials"})
                elif self.path.endswith("/embeddings"):
                    self._send(200, {"data": [{"index": i, "embedding": [1.0, 0.5]}
                                              for i in range(len(body["input"]))]})
                else:
                    self._send(200, {"choices": [{"message": {"content": '{"operations": []}'}}]})

            def _send(self, status: int, data: dict[str, Any]) -> None:
                raw = json.dumps(data).encode()
                self.send_response(status)
                if status == 500:
                    self.send_header("Retry-After", "0")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05},
                         daemon=True).start()

    def url(self, with_credentials: bool = True) -> str:
        """The base URL, with ``ada:PASSWORD@`` (percent-encoded) unless told otherwise."""
        from urllib.parse import quote

        port = self.httpd.server_address[1]
        auth = f"{USER}:{quote(PASSWORD, safe='')}@" if with_credentials else ""
        return f"http://{auth}127.0.0.1:{port}/v1"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(name="echo")
def fixture_echo() -> Iterator[Server]:
    """A server that echoes every credential in a 500 error."""
    server = Server()
    yield server
    server.close()


@pytest.fixture(name="guarded")
def fixture_guarded() -> Iterator[Server]:
    """A server that answers only the right Basic credentials."""
    server = Server(require_basic=True)
    yield server
    server.close()


def assert_clean(text: str) -> None:
    """Neither the key, the shaped key nor the URL password, in any form, is in ``text``."""
    for secret in (KEY, SHAPED, PASSWORD):
        for form in forbidden(secret):
            assert form not in text, f"{form!r} leaked into {text!r}"


def test_embedder_errors_logs_and_repr_hold_no_secret(echo, caplog):
    """An embedder whose server echoes the key and the URL's password: message, body,
    retry log lines and repr are clean."""
    caplog.set_level(logging.DEBUG)
    for key in (KEY, None):
        embedder = OpenAIEmbedder("m", echo.url(), api_key=key, max_retries=1, retry_backoff=0)
        with pytest.raises(EmbedderError) as caught:
            embedder.embed(["the staging key is " + SHAPED])
        assert "HTTP 500" in str(caught.value)
        assert_clean(str(caught.value))
        assert_clean(caught.value.body or "")
        assert_clean(repr(embedder))
    assert_clean("\n".join(r.getMessage() for r in caplog.records))
    assert any("try 2 of 2" in r.getMessage() for r in caplog.records)


def test_chat_client_errors_logs_and_repr_hold_no_secret(echo, caplog, monkeypatch):
    """The chat client, with a key given, in the environment, or in extra headers: clean."""
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("OPENAI_API_KEY", SHAPED)
    clients = [OpenAIChatClient(echo.url(), "m", api_key=KEY, max_retries=1, backoff=0),
               OpenAIChatClient(echo.url(False), "m", max_retries=0),
               OpenAIChatClient(echo.url(), "m", max_retries=0, extra_headers={"X-Api-Key": KEY})]
    for client in clients:
        with pytest.raises(LLMClientError) as caught:
            client.complete([Message(role="user", content="hi")])
        assert_clean(str(caught.value))
        assert_clean(caught.value.body or "")
        assert_clean(repr(client))
    assert_clean("\n".join(r.getMessage() for r in caplog.records))


def test_a_failed_flush_holds_no_secret(echo, db_path):
    """The FlushError and its report from a server that echoes credentials are clean."""
    with FactStore(db_path) as store:
        client = OpenAIChatClient(echo.url(), "m", api_key=KEY, max_retries=0)
        with pytest.raises(FlushError) as caught:
            MemoryFlusher(store, client).flush([{"role": "user", "content": "hello"}],
                                               force=True)
    assert_clean(str(caught.value))
    assert_clean(json.dumps(caught.value.report.to_dict()))
    assert_clean(repr(MemoryFlusher(FactStore(":memory:"), client)))


def test_cli_flush_search_and_doctor_show_no_secret(echo, tmp_path, monkeypatch):
    """flush, search and doctor against a server that echoes credentials print none of them."""
    db = tmp_path / "cli.db"
    conversation = tmp_path / "chat.jsonl"
    conversation.write_text(json.dumps({"role": "user", "content": "my key is " + SHAPED}) + "\n")
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    runner = CliRunner()
    result = runner.invoke(cli, ["--db", str(db), "flush", str(conversation), "--base-url",
                                 echo.url(), "--model", "m", "--timeout", "5"])
    assert 1 == result.exit_code and "HTTP 500" in result.output
    assert_clean(result.output)
    runner.invoke(cli, ["--db", str(db), "remember", "agent", "A plain fact."])
    embedded = ["--db", str(db), "--embedder", "openai:m", "--embed-base-url", echo.url()]
    outputs = [runner.invoke(cli, [*embedded, *command]).output
               for command in (["search", "plain fact"], ["doctor"], ["reindex"])]
    for output in outputs:
        assert "Traceback" not in output
        assert_clean(output)
    assert all("HTTP 500" in output for output in outputs)


def test_a_base_url_with_credentials_works(guarded, monkeypatch):
    """user:password in the base URL is sent as Basic credentials (not in the URL), also
    when OPENAI_API_KEY is set; a key given to the client is sent as a bearer token instead."""
    monkeypatch.setenv("OPENAI_API_KEY", SHAPED)
    embedder = OpenAIEmbedder("m", guarded.url(), dimension=2)
    assert (1, 2) == embedder.embed(["x"]).shape
    client = OpenAIChatClient(guarded.url(), "m")
    assert '{"operations": []}' == client.complete([]).text
    with pytest.raises(LLMClientError) as caught:
        OpenAIChatClient(guarded.url(), "m", api_key=KEY, max_retries=0).complete([])
    assert "HTTP 401" in str(caught.value)
    assert guarded.seen[-1] == f"Bearer {KEY}"
    assert 2 == sum(1 for s in guarded.seen if s and s.startswith("Basic "))


def test_a_store_url_with_a_password_is_never_shown(db_path):
    """FactStore's repr and the error for an unreachable server name the user, not the password."""
    pytest.importorskip("psycopg")
    url = f"postgresql://{USER}:{PASSWORD.replace('/', '%2F').replace('@', '%40')}@127.0.0.1:1/db"
    with pytest.raises(Exception) as caught:
        FactStore(url)
    assert_clean(str(caught.value))
    with FactStore(db_path) as store:
        assert str(db_path) in repr(store)
