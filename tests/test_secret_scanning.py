"""Memory is no secret store: every credential of the catalogue is redacted on every way in
(add, upsert, update, the tools, a flush, JSONL and Markdown imports), and the write says so;
look-alikes are stored as they are; the refuse and allow policies do what they say."""

from __future__ import annotations

import io
import json
import logging
import time

import pytest
from click.testing import CliRunner

from _sql import stored_rows
from ctxslots import (
    AssemblyRequest,
    FactStore,
    InvalidFactError,
    Limits,
    MemoryFlusher,
    OpenAIChatClient,
    PromptAssembler,
)
from ctxslots.cli import cli
from ctxslots.contributors import AgentMemoryContributor, UserMemoryContributor
from ctxslots.errors import InvalidImportError
from ctxslots.testing import ScriptedChatServer
from ctxslots.tools import MemoryTools
from secret_catalogue import LOOK_ALIKES, SECRETS

HEADER = json.dumps({"format": "ctxslots-facts", "version": 1})
TEXTS = [(kind, secret, text.format(secret)) for kind, secret, text in SECRETS]


def every_stored_text(store: FactStore) -> str:
    """Every value the store holds, live, archived and historical, as one text."""
    return "\n".join(str(cell) for row in stored_rows(store) for cell in row)


def assert_no_secret(store: FactStore) -> None:
    """No secret of the catalogue is anywhere in the store."""
    text = every_stored_text(store)
    for kind, secret, _ in TEXTS:
        assert secret not in text, f"{kind} stored: {secret!r}"


def test_the_catalogue_is_large_and_every_kind_is_caught():
    """22 secrets of 15 kinds; each is redacted in its text and named by its kind."""
    from ctxslots._secrets import redact

    assert len(TEXTS) >= 20 and len({k for k, _, _ in TEXTS}) >= 15
    for kind, secret, text in TEXTS:
        stored, kinds = redact(text)
        assert secret not in stored and f"[redacted {kind}]" in stored and kind in kinds
        assert (stored, ()) == redact(stored)  # redacting twice changes nothing


def test_add_upsert_and_update_redact_and_warn(store, caplog):
    """The API stores each value with [redacted KIND] and logs one warning per write."""
    caplog.set_level(logging.WARNING, logger="ctxslots.secrets")
    for n, (kind, _, text) in enumerate(TEXTS):
        added = store.add("agent", text)
        keyed = store.upsert("user", f"k{n}", text)
        plain = store.add("project", f"Plain note {n}.")
        updated = store.update(plain.id, value=text)
        for fact in (added, keyed, updated):
            assert f"[redacted {kind}]" in fact.value
    assert_no_secret(store)
    assert 3 * len(TEXTS) == sum(r.name == "ctxslots.secrets" for r in caplog.records)


def test_look_alikes_are_stored_as_they_are(store):
    """Text that only resembles a credential is not touched."""
    for text in LOOK_ALIKES:
        assert text == store.add("agent", text).value


def test_the_tools_redact_and_say_so(store):
    """memory_store, memory_update and memory_forget (its reason) store the text redacted and
    the answer says what was."""
    tools = MemoryTools(store)
    for kind, _, text in TEXTS:
        answer = tools.dispatch("memory_store", {"slot": "agent", "value": text})
        assert answer.startswith("Stored") and f"held {kind}" in answer
        fact_id = int(answer.split("[id:")[1].split("]")[0])
        answer = tools.dispatch("memory_update", {"id": fact_id, "value": text + " Again."})
        assert answer.startswith("Updated") and f"held {kind}" in answer
        if len(text) <= 500:  # the tool's longest reason
            answer = tools.dispatch("memory_forget", {"id": fact_id, "reason": text})
            assert answer.startswith("Forgot") and f"the reason held {kind}" in answer
    assert_no_secret(store)


def test_a_flush_redacts_reports_and_is_stable(store):
    """A flush whose model extracted every secret writes them redacted, reports each, and a
    second flush of the same reply finds them unchanged; later prompts carry none."""
    ops = [{"op": "upsert", "slot": "user", "key": f"secret.{n}", "value": text,
            "confidence": 0.9, "tags": []} for n, (_, _, text) in enumerate(TEXTS)]
    reply = json.dumps({"operations": ops})
    messages = [{"role": "user", "content": "Here are my keys: "
                 + " ".join(secret for _, secret, _ in TEXTS)}]
    with ScriptedChatServer([reply, reply]) as server:
        flusher = MemoryFlusher(store, OpenAIChatClient(server.base_url, "scripted"))
        report = flusher.flush(messages, force=True)
        again = flusher.flush([*messages, {"role": "user", "content": "again"}], force=True)
    assert len(TEXTS) == len(report.added) == len(report.redacted)
    assert [(kind,) for kind, _, _ in TEXTS] == [c.redacted for c in report.redacted]
    assert "redacted from the value: GitHub token" in report.summary()
    assert len(TEXTS) == len(again.unchanged) and not again.updated
    assert_no_secret(store)
    prompt = PromptAssembler(store, contributors=[UserMemoryContributor(store),
                                                  AgentMemoryContributor(store)]).assemble(
        AssemblyRequest("keys token password", budget=50_000))
    assert "[redacted" in prompt.text
    for _, secret, _ in TEXTS:
        assert secret not in prompt.text


def test_a_reason_for_forgetting_is_screened_like_a_value(store, caplog):
    """The reason a fact is forgotten with is kept in the archive and exported: forget and a
    flush's forget store it redacted, and the flush report says what was redacted."""
    caplog.set_level(logging.WARNING, logger="ctxslots.secrets")
    facts = [store.upsert("user", f"fact.{n}", f"Fact {n}.") for n in range(len(TEXTS) + 1)]
    for fact, (_, _, text) in zip(facts, TEXTS, strict=False):
        store.forget(fact.id, reason=text)
    out = io.StringIO()
    store.export_jsonl(out)
    reasons = {r["key"]: r["reason"] for r in map(json.loads, out.getvalue().splitlines()[1:])}
    for n, (kind, _, _) in enumerate(TEXTS):
        assert f"[redacted {kind}]" in reasons[f"fact.{n}"]
    assert len(TEXTS) == sum(r.name == "ctxslots.secrets" for r in caplog.records)
    kind, _, text = TEXTS[0]
    reply = json.dumps({"operations": [
        {"op": "forget", "slot": "user", "key": f"fact.{len(TEXTS)}", "reason": text}]})
    with ScriptedChatServer([reply]) as server:
        report = MemoryFlusher(store, OpenAIChatClient(server.base_url, "s")).flush(
            [{"role": "user", "content": "forget it"}], force=True)
    assert [(kind,)] == [c.redacted for c in report.forgotten] == \
        [c.redacted for c in report.redacted]
    assert f"redacted from the reason: {kind}" in report.summary()
    assert_no_secret(store)


def test_a_flush_rejects_a_key_or_tag_that_holds_a_secret(store):
    """A key or tag is shown with its fact on every later turn and cannot be redacted in
    place: a flush rejects the operation that names a secret there, and says so."""
    from ctxslots._secrets import redact

    # The secrets that are credential-shaped alone (a password needs its "password=").
    labels = [(kind, secret) for kind, secret, _ in TEXTS
              if len(secret) <= 64 and "\n" not in secret and redact(secret)[1]]
    assert len(labels) >= 8
    ops = [{"op": "upsert", "slot": "user", "key": f"tagged.{n}", "value": "A fact.",
            "confidence": 0.9, "tags": ["tools", secret]} for n, (_, secret) in enumerate(labels)]
    ops += [{"op": "upsert", "slot": "user", "key": secret, "value": "A fact.",
             "confidence": 0.9, "tags": []} for _, secret in labels]
    ops.append({"op": "upsert", "slot": "user", "key": "editor", "value": "The user uses Helix.",
                "confidence": 0.9, "tags": ["tools"]})
    with ScriptedChatServer([json.dumps({"operations": ops})]) as server:
        report = MemoryFlusher(store, OpenAIChatClient(server.base_url, "s")).flush(
            [{"role": "user", "content": "I use Helix."}], force=True)
    assert ["editor"] == [c.fact.key for c in report.added]
    assert list(range(2 * len(labels))) == [r.index for r in report.rejected]
    for rejection, (kind, secret) in zip(report.rejected, labels * 2, strict=True):
        field = "a tag" if rejection.index < len(labels) else "key"
        assert f"{field} holds what looks like" in rejection.reason and kind in rejection.reason
        assert secret not in rejection.reason
    assert_no_secret(store)


def test_imports_redact_and_count(store):
    """JSONL (values and earlier values) and Markdown imports store secrets redacted and count them."""
    records = [{"slot": "agent", "value": text, "history": [
        {"value": f"Before: {text}", "valid_from": 1_700_000_000, "valid_to": 1_700_000_001}]}
        for _, _, text in TEXTS]
    report = store.import_jsonl(io.StringIO("\n".join(
        [HEADER, *(json.dumps(r) for r in records)]) + "\n"))
    assert len(TEXTS) == report.added == report.redacted
    markdown = "# project\n\n" + "\n".join(
        "- " + text.replace("\n", "\n  ") for _, _, text in TEXTS) + "\n"
    report = store.import_markdown(markdown, slot="project")
    assert len(TEXTS) == report.added == report.redacted
    assert "written with secrets redacted" in report.summary()
    assert_no_secret(store)


def test_the_refuse_policy_writes_nothing_with_a_secret(location, clock):
    """Limits(secrets='refuse'): add raises naming the value, the tool answers an error, an
    import fails naming the line, a flush rejects only that operation."""
    kind, secret, text = TEXTS[4]
    with FactStore(location, clock=clock, limits=Limits(secrets="refuse")) as store:
        with pytest.raises(InvalidFactError) as caught:
            store.add("agent", text)
        assert "value" == caught.value.field and kind in str(caught.value)
        assert secret not in str(caught.value) and secret not in str(caught.value.value)
        assert MemoryTools(store).dispatch(
            "memory_store", {"slot": "agent", "value": text}).startswith("Error: ")
        with pytest.raises(InvalidImportError) as failed:
            store.import_jsonl(io.StringIO(f"{HEADER}\n" + json.dumps(
                {"slot": "agent", "value": text}) + "\n"))
        assert 2 == failed.value.line
        assert [] == stored_rows(store)
        reply = json.dumps({"operations": [
            {"op": "upsert", "slot": "user", "key": "token", "value": text, "confidence": 1.0,
             "tags": []},
            {"op": "upsert", "slot": "user", "key": "editor", "value": "The user uses Helix.",
             "confidence": 1.0, "tags": []}]})
        with ScriptedChatServer([reply]) as server:
            report = MemoryFlusher(store, OpenAIChatClient(server.base_url, "s")).flush(
                [{"role": "user", "content": "hi"}], force=True)
        assert [0] == [r.index for r in report.rejected] and 1 == len(report.added)
        editor = report.added[0].fact
        with pytest.raises(InvalidFactError) as caught:
            store.forget(editor.id, reason=text)
        assert "reason" == caught.value.field and secret not in str(caught.value)
        reply = json.dumps({"operations": [
            {"op": "forget", "slot": "user", "key": "editor", "reason": text}]})
        with ScriptedChatServer([reply]) as server:
            report = MemoryFlusher(store, OpenAIChatClient(server.base_url, "s")).flush(
                [{"role": "user", "content": "hi"}, {"role": "user", "content": "forget"}],
                force=True)
        assert [0] == [r.index for r in report.rejected] and not report.forgotten
        assert "reason holds what looks like" in report.rejected[0].reason
        assert kind in report.rejected[0].reason
        assert "The user uses Helix." == store.get(editor.id).value  # still live
        assert_no_secret(store)


def test_the_allow_policy_stores_as_given(db_path):
    """Limits(secrets='allow') keeps the value whole (a store that is meant to hold them)."""
    _, secret, text = TEXTS[0]
    with FactStore(db_path, limits=Limits(secrets="allow")) as store:
        assert text == store.add("agent", text).value


def test_cli_remember_warns_and_redacts(tmp_path):
    """`ctxslots remember` with a token prints one warning line and stores it redacted."""
    db = tmp_path / "cli.db"
    kind, secret, text = TEXTS[4]
    result = CliRunner().invoke(cli, ["--db", str(db), "remember", "agent", text])
    assert 0 == result.exit_code
    assert secret not in result.output and f"held {kind}" in result.output
    with FactStore(db) as store:
        assert_no_secret(store)


SECRET_AT_END = " password=abcdefgh12"  # [redacted password] is longer than the secret


def test_a_value_its_redaction_takes_over_the_limit_is_refused(store):
    """A value within max_value_bytes that its [redacted KIND] takes over them is refused,
    nothing written: stored, its export would not import."""
    value = "a" * (store.limits.max_value_bytes - len(SECRET_AT_END)) + SECRET_AT_END
    assert len(value.encode()) == store.limits.max_value_bytes
    with pytest.raises(InvalidFactError, match="once redacted .password., over the limit of 4096") \
            as caught:
        store.upsert("project", "deploy", value)
    assert caught.value.field == "value" and "abcdefgh12" not in str(caught.value)
    assert store.get_by_key("project", "deploy") is None
    fits = "a" * (store.limits.max_value_bytes - 40) + SECRET_AT_END
    store.upsert("project", "deploy", fits)
    out = io.StringIO()
    store.export_jsonl(out)
    copy = FactStore(":memory:")
    report = copy.import_jsonl(io.StringIO(out.getvalue()))
    assert report.added == 1
    assert copy.get_by_key("project", "deploy").value == store.get_by_key("project", "deploy").value


def test_a_context_its_redaction_takes_over_the_limit_is_cut_to_it(store):
    """A context of max_context_bytes holding a secret is stored within them, and its
    export imports with the same context."""
    limit = store.limits.max_context_bytes
    context = "é" * ((limit - len(SECRET_AT_END)) // 2) + SECRET_AT_END
    assert len(context.encode()) == limit
    store.upsert("project", "deploy", "The shop deploys on Fridays.", context=context)
    stored = store.get_by_key("project", "deploy").context
    assert "abcdefgh12" not in stored and len(stored.encode()) <= limit
    assert stored.endswith("…") and stored.startswith("é" * 2000)
    out = io.StringIO()
    store.export_jsonl(out)
    copy = FactStore(":memory:")
    assert copy.import_jsonl(io.StringIO(out.getvalue())).added == 1
    assert copy.get_by_key("project", "deploy").context == stored


def _import_error_cpu_seconds(tmp_path, runs: int) -> tuple[float, str]:
    """CPU time of `ctxslots import` refusing a Markdown file whose line (a title of another
    slot, which the error quotes) holds ``runs`` times "sk-" and a password in a URL."""
    path = tmp_path / f"agent-{runs}.md"
    path.write_text("# agent\n\n- A fact.\n# user (scope: " + "sk-" * runs
                    + " a.b.c https://ada:pw-0123456789@example.com)\n")
    started = time.process_time()
    result = CliRunner().invoke(cli, ["--db", str(tmp_path / "m.db"), "import", str(path),
                                      "--slot", "agent"])
    return time.process_time() - started, result.output


def test_an_error_quoting_a_long_run_is_screened_for_secrets_in_linear_time(tmp_path):
    """Four times the "sk-" in a line an error quotes cost well under sixteen times the CPU
    time (they cost sixteen: a 120 KB line took 40 s to screen, as a run of "a.b.c..." did,
    each place a key or a URL scheme may start read the rest of the run again), and the
    password in the line is still redacted."""
    small, _ = _import_error_cpu_seconds(tmp_path, 10_000)
    large, output = _import_error_cpu_seconds(tmp_path, 40_000)
    assert large < 9 * max(small, 0.05), (small, large)
    assert output.startswith("Error: ") and "is the title of the user slot" in output
    assert "pw-0123456789" not in output and "https://ada:[redacted]@example.com" in output
