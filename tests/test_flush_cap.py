"""A flush sends at most max_flush_tokens of messages and takes the rest in later flushes,
against a real HTTP server that refuses requests longer than its context, as models do."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import click
import pytest
from click.testing import CliRunner

from ctxslots import FactStore, FlushError, MemoryFlusher, OpenAIChatClient
from ctxslots.cli import cli
from ctxslots.cli.flush import _flush_until_read, read_conversation
from ctxslots.tokens import count_tokens

#: The server's context, in bytes of request body.
CONTEXT_BYTES = 120_000


class ContextLimitedServer:
    """Answers a chat completion with one upsert, or 400 when the request is too long."""

    def __init__(self) -> None:
        self.sizes: list[int] = []
        self.prompts: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers["Content-Length"]))
                outer.sizes.append(len(raw))
                if len(raw) > CONTEXT_BYTES:
                    self._send(400, {"error": {"message": "This model's maximum context "
                                                          "length is exceeded"}})
                    return
                prompt = json.loads(raw)["messages"][0]["content"]
                outer.prompts.append(prompt)
                n = len(outer.prompts)
                reply = {"operations": [{"op": "upsert", "slot": "agent", "key": f"part.{n}",
                                         "value": f"Part {n} of the long session was read.",
                                         "confidence": 0.9, "tags": []}]}
                self._send(200, {"choices": [{"message": {"content": json.dumps(reply)}}]})

            def _send(self, status: int, data: dict[str, Any]) -> None:
                body = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05},
                         daemon=True).start()
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(name="server")
def fixture_server() -> Iterator[ContextLimitedServer]:
    """A server with a 120 KB context."""
    server = ContextLimitedServer()
    yield server
    server.close()


def session(count: int, words: int = 60) -> list[dict[str, str]]:
    """``count`` messages of about ``words`` words each, alternating user and assistant."""
    return [{"role": "user" if n % 2 == 0 else "assistant",
             "content": f"Message {n}: " + " ".join(f"word{(n * 7 + i) % 997}"
                                                    for i in range(words))}
            for n in range(count)]


def client(server: ContextLimitedServer) -> OpenAIChatClient:
    """A client that does not retry (a refusal is final)."""
    return OpenAIChatClient(server.base_url, "limited", max_retries=0)


def test_without_a_cap_a_long_session_never_moves_on(store, server):
    """The whole session in one request is refused, again and again: the read position stays 0."""
    flusher = MemoryFlusher(store, client(server), max_flush_tokens=None)
    messages = session(1500)
    for _ in range(2):
        with pytest.raises(FlushError):
            flusher.flush(messages, force=True)
    assert 0 == flusher.messages_read("default")
    assert all(size > CONTEXT_BYTES for size in server.sizes)


def test_a_capped_flush_reads_a_long_session_in_order(store, server):
    """With a cap each request fits, each flush moves the read position on and reports what is
    left, and the flushes together read every message once."""
    flusher = MemoryFlusher(store, client(server), max_flush_tokens=6000)
    messages = session(1500)
    reports = []
    while not reports or reports[-1].remaining:
        reports.append(flusher.flush(messages, force=True))
    assert all(r.status == "applied" for r in reports)
    assert all(size <= CONTEXT_BYTES for size in server.sizes)
    assert len(messages) == reports[-1].messages_read == flusher.messages_read("default")
    assert [r.first for r in reports[1:]] == [r.last + 1 for r in reports[:-1]]
    assert [r.remaining for r in reports] == [len(messages) - r.last for r in reports]
    assert "left for the next flush" in reports[0].summary()
    for prompt, report in zip(server.prompts, reports):
        sent = [f"Message {n - 1}:" for n in range(report.first, report.last + 1)]
        assert all(line in prompt for line in sent)
        assert f"Message {report.last}:" not in prompt  # the next message waits
    texts = [m["content"] for m in messages[reports[0].first - 1:reports[0].last]]
    assert count_tokens("\n".join(texts)) <= 6000
    assert len(reports) == len(store.facts(slots=["agent"]))


def test_a_message_over_the_cap_is_sent_cut_and_counts_as_read(store, server):
    """A 2 MB message is sent cut to the cap with a warning, and the next flush goes on after it."""
    messages = [{"role": "user", "content": "Start. " + "lorem ipsum dolor " * 120_000},
                {"role": "assistant", "content": "That was long."}]
    flusher = MemoryFlusher(store, client(server), max_flush_tokens=2000)
    first = flusher.flush(messages, force=True)
    assert (1, 1, 1) == (first.last, first.messages_read, first.remaining)
    assert any("message 1 has more than the 2,000 tokens" in w for w in first.warnings)
    assert server.sizes[-1] < 40_000
    assert "too long to read" in server.prompts[-1]
    second = flusher.flush(messages, force=True)
    assert (2, 2, 0) == (second.first, second.last, second.remaining)


def test_new_messages_after_a_partial_flush_are_read_in_turn(store, server):
    """A conversation that grows while flushes catch up is read on from where they stopped."""
    flusher = MemoryFlusher(store, client(server), max_flush_tokens=3000)
    messages = session(200)
    first = flusher.flush(messages, force=True)
    assert first.remaining and not first.restarted
    messages += session(10)
    later = flusher.flush(messages, force=True)
    assert later.first == first.last + 1 and not later.restarted


def test_the_cli_flushes_again_until_the_file_is_read(server, tmp_path):
    """`ctxslots flush --max-tokens` prints one report per request and reads the whole file."""
    conversation = tmp_path / "chat.jsonl"
    conversation.write_text("".join(json.dumps(m) + "\n" for m in session(300)))
    db = tmp_path / "cli.db"
    result = CliRunner().invoke(cli, ["--db", str(db), "flush", str(conversation), "--base-url",
                                      server.base_url, "--model", "m", "--max-tokens", "2500"])
    assert 0 == result.exit_code, result.output
    heads = [line for line in result.output.splitlines() if line.startswith("flush ")]
    assert len(heads) == len(server.prompts) > 3
    assert "300 read in all" in heads[-1]


def test_the_cli_json_of_a_file_read_in_several_requests_is_json_lines(server, tmp_path):
    """`flush --json` prints each request's report as one JSON object per line (they were
    indented objects one after the other, which no JSON reader takes as one document)."""
    conversation = tmp_path / "chat.jsonl"
    conversation.write_text("".join(json.dumps(m) + "\n" for m in session(300)))
    result = CliRunner().invoke(cli, ["--db", str(tmp_path / "cli.db"), "flush", str(conversation),
                                      "--base-url", server.base_url, "--model", "m",
                                      "--max-tokens", "2500", "--json"])
    assert 0 == result.exit_code, result.output
    reports = [json.loads(line) for line in result.output.splitlines()]
    assert len(reports) == len(server.prompts) > 3
    assert [f"part.{n}" for n in range(1, len(reports) + 1)] == [
        c["fact"]["key"] for r in reports for c in r["added"]]
    assert (300, 0) == (reports[-1]["messages_read"], reports[-1]["remaining"])


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_several_files_read_in_several_requests_report_every_request(server, tmp_path, as_json):
    """With several files, each request of a file read in several is reported, so every fact
    written is shown (only each file's last request was, hiding the facts of the others)."""
    chats = tmp_path / "chats"
    chats.mkdir()
    for name in ("a", "b"):
        (chats / f"{name}.jsonl").write_text("".join(json.dumps(m) + "\n" for m in session(150)))
    result = CliRunner().invoke(cli, ["--db", str(tmp_path / "cli.db"), "flush", str(chats),
                                      "--base-url", server.base_url, "--model", "m",
                                      "--max-tokens", "2500", *(["--json"] if as_json else [])])
    assert 0 == result.exit_code, result.output
    written = [f"part.{n}" for n in range(1, len(server.prompts) + 1)]
    assert len(written) > 3
    if as_json:
        reports = json.loads(result.output)
        assert written == [c["fact"]["key"] for r in reports for c in r["added"]]
        assert {"a.jsonl", "b.jsonl"} == {r["file"].rsplit("/", 1)[-1] for r in reports}
    else:
        assert all(f"added agent {key}:" in result.output for key in written)


def test_many_short_messages_fit_the_cap_with_their_headings(store, server):
    """Thousands of one-word messages fill no more than the cap of the prompt: each counts
    with its heading and fences (only their text counted, and a cap of 2,000 sent 2,000
    messages in about 28,000 tokens, more than a small model's context)."""
    flusher = MemoryFlusher(store, client(server), max_flush_tokens=2000)
    messages = [{"role": "user" if n % 2 == 0 else "assistant", "content": "ok"}
                for n in range(5000)]
    report = flusher.flush(messages, force=True)
    sent = server.prompts[0].split("# New messages", 1)[1].split("\n# Reply", 1)[0]
    sent = sent.split("\n", 1)[1]  # the messages, without the section's title
    assert report.last == sent.count("## Message ") > 100
    assert count_tokens(sent) <= 2000 < count_tokens(sent) + 2 * count_tokens(
        "\n\n## Message 999 (assistant)\n```text\nok\n```")


def test_a_message_cut_inside_a_character_is_sent_without_a_replacement_character(store,
                                                                                  server):
    """A cut falling between the tokens of one character (an emoji, a Han character) leaves
    that character out: the text sent is the message's own beginning, with no U+FFFD."""
    text = "\U0001f9d1\U0001f3ff\u200d\U0001f4bb \u6211\u559c\u6b22\u5496\u5561 " * 400
    for cap in range(60, 80):
        flusher = MemoryFlusher(store, client(server), max_flush_tokens=cap)
        flusher.flush([{"role": "user", "content": text}], conversation=f"cap {cap}",
                      force=True)
        sent = server.prompts[-1]
        assert "\ufffd" not in sent, cap
        start = sent.index("\U0001f9d1")
        cut = sent[start:sent.index("\n[the rest of this message was too long to read]")]
        assert text.startswith(cut) and cut, cap


def test_the_cli_stops_when_the_user_is_erased_between_two_requests(server, tmp_path):
    """`ctxslots flush` reads a long file in several requests and the user is erased (by
    another store) between two of them: the command stops with one clear error instead of
    reading the file from its first message again and writing the erased memory back."""
    conversation = tmp_path / "chat.jsonl"
    conversation.write_text("".join(json.dumps(m) + "\n" for m in session(300)))
    db = tmp_path / "cli.db"
    with FactStore(db) as store, FactStore(db) as other:
        flusher = MemoryFlusher(store, client(server), max_flush_tokens=2500)
        erased = []

        def erase_after_the_first_request(report: Any) -> None:
            if not erased:
                erased.append(other.erase(user="grace"))

        with pytest.raises(click.ClickException,
                           match=r"the progress of chat went back after message \d+ was read "
                                 r"\(its user's or agent's memory was erased"):
            _flush_until_read(flusher, read_conversation(conversation), "chat",
                              {"user": "grace"}, True, erase_after_the_first_request,
                              progress=False)
        assert 1 == erased[0].progress
        assert 1 == len(server.prompts)  # message 1 was not sent again
        assert 0 == flusher.messages_read("chat", user="grace")
