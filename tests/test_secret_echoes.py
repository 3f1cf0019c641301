"""A credential a model echoes out of shape is still taken out: in part, split by a newline,
wrapped, JSON-escaped; and ``ctxslots flush`` (``--json`` too, on success and on failure) never
prints the model's reply with the key in it."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from ctxslots._secrets import scrub
from ctxslots.cli import cli
from ctxslots.testing import ScriptedChatServer
from secret_catalogue import ECHOES, LOOK_ALIKES, SECRETS, leaked_pieces

KEYS = {
    "unshaped": "local-key-not-shaped-1234567890",
    "openai-shaped": "sk-proj-" + "a1B2c3D4e5F6g7H8i9J0" * 2,
}


@pytest.mark.parametrize(("name", "form", "_held_only"), ECHOES, ids=[e[0] for e in ECHOES])
@pytest.mark.parametrize(("kind", "secret", "around"), SECRETS, ids=[s[0] for s in SECRETS])
def test_a_held_secret_is_taken_out_however_it_is_echoed(kind, secret, around, name, form,
                                                         _held_only):
    """scrub(text, [secret]) leaves no 12-character piece of a secret it holds, in any form."""
    text = around.format(form(secret))
    assert [] == leaked_pieces(scrub(text, [secret]), secret), (kind, name)


SHAPED_ECHOES = [(name, form) for name, form, held_only in ECHOES if not held_only]


@pytest.mark.parametrize(("name", "form"), SHAPED_ECHOES, ids=[e[0] for e in SHAPED_ECHOES])
@pytest.mark.parametrize(("kind", "secret", "around"), SECRETS, ids=[s[0] for s in SECRETS])
def test_a_credential_shape_is_taken_out_when_split_or_escaped(kind, secret, around, name, form):
    """Without holding it, scrub still finds each shape of the catalogue split by a newline,
    wrapped or escaped (cut short, a credential has no shape left: only a held one is found,
    as the test above shows)."""
    text = around.format(form(secret))
    assert [] == leaked_pieces(scrub(text), secret), (kind, name)


def test_look_alikes_are_left_alone_one_per_line_and_escaped():
    """Ordinary text is not redacted, on its own lines, JSON-escaped, or with the key of
    another text held."""
    text = "\n".join(LOOK_ALIKES)
    assert text == scrub(text)
    escaped = json.dumps(text)
    assert escaped == scrub(escaped)
    assert text == scrub(text, [KEYS["unshaped"]])


def _flush(tmp_path, monkeypatch, key: str, replies: list[str], *extra: str):
    monkeypatch.setenv("OPENAI_API_KEY", key)
    chat = tmp_path / "chat.jsonl"
    chat.write_text('{"role": "user", "content": "What is the key again?"}\n', encoding="utf-8")
    with ScriptedChatServer(replies) as server:
        result = CliRunner().invoke(cli, ["--db", str(tmp_path / "m.db"), "flush", str(chat),
                                          "--base-url", server.base_url, "--model", "m", *extra])
    assert f"Bearer {key}" == server.request_headers[0]["Authorization"]
    return result


def _echoes(key: str) -> str:
    return " | ".join(form(key) for _name, form, _held in ECHOES)


@pytest.mark.parametrize("key", list(KEYS.values()), ids=list(KEYS))
@pytest.mark.parametrize("extra", [["--json"], []], ids=["json", "text"])
def test_a_successful_flush_prints_no_echoed_key(tmp_path, monkeypatch, key, extra):
    """The reply echoes the key in every form, in its prose and in a value: the report (raw
    replies included) shows none of it."""
    reply = (f"Here is what you sent me: {_echoes(key)}\n"
             + json.dumps({"operations": [{"op": "upsert", "slot": "agent", "key": "note",
                                           "value": f"The key is {key[8:]} or {key}.",
                                           "confidence": 0.9, "tags": []}]}))
    result = _flush(tmp_path, monkeypatch, key, [reply], *extra)
    assert 0 == result.exit_code, result.output
    assert [] == leaked_pieces(result.stdout + result.stderr, key)
    if extra:
        report = json.loads(result.stdout)
        assert "applied" == report["status"] and "[redacted]" in report["raw_outputs"][0]


@pytest.mark.parametrize("key", list(KEYS.values()), ids=list(KEYS))
@pytest.mark.parametrize("extra", [["--json"], []], ids=["json", "text"])
def test_a_failed_flush_prints_no_echoed_key(tmp_path, monkeypatch, key, extra):
    """Two unreadable replies echoing the key: the failed report and the error line hold none
    of it."""
    result = _flush(tmp_path, monkeypatch, key, [f"no JSON, just {_echoes(key)}"] * 2, *extra)
    assert 1 == result.exit_code
    assert [] == leaked_pieces(result.stdout + result.stderr, key)
    if extra:
        report = json.loads(result.stdout)
        assert "failed" == report["status"] and 2 == len(report["raw_outputs"])


def test_flush_json_cuts_a_long_raw_reply(tmp_path, monkeypatch):
    """A megabyte reply is shown to its first 4,000 characters, with its length."""
    reply = '{"operations": []}' + " " * 1_000_000
    result = _flush(tmp_path, monkeypatch, KEYS["unshaped"], [reply], "--json")
    assert 0 == result.exit_code, result.output
    raw = json.loads(result.stdout)["raw_outputs"][0]
    assert raw.endswith("... (1,000,018 characters in all)") and len(raw) < 4100
