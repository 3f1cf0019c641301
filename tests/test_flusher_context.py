"""The flusher stores, as each fact's context, the messages the model says it was drawn from.

Every flush goes through the real HTTP client to a scripted chat-completions server, on both
engines.
"""

from __future__ import annotations

import json

import pytest

from ctxslots import FactStore, FlushError, Limits, MemoryFlusher, OpenAIChatClient
from ctxslots.testing import ScriptedChatServer
from secret_catalogue import SECRETS

CONVERSATION = [
    {"role": "user", "content": "Who did you meet at the robotics conference?"},
    {"role": "assistant", "content": "It was Ilse Varga, she builds warehouse robots."},
    {"role": "user", "content": "By the way, my sister Ines moved to Lisbon in May."},
    {"role": "assistant", "content": "Good to know. Is she settling in?"},
]
ILSE = "The user met Ilse Varga, who builds warehouse robots."
INES = "The user's sister Ines moved to Lisbon in May 2027."


def reply(*operations: dict) -> str:
    """A reply text holding these operations."""
    return json.dumps({"operations": list(operations)})


def upsert(key: str, value: str, messages: list[int] | None = None) -> dict:
    """An upsert of a user fact, naming ``messages`` when given (a reply of the older
    form when not)."""
    op = {"op": "upsert", "slot": "user", "key": key, "value": value, "confidence": 0.9,
          "tags": []}
    if messages is not None:
        op["messages"] = messages
    return op


def line(number: int, conversation: list[dict] = CONVERSATION) -> str:
    """Message ``number`` of the conversation as a context holds it."""
    message = conversation[number - 1]
    return f"{message['role']}: {message['content']}"


@pytest.fixture(name="flush")
def fixture_flush(store):
    """Flush ``messages`` of ``store`` (or another store) with a scripted reply; return the
    report and the requests the server received."""
    servers: list[ScriptedChatServer] = []

    def run(script, messages=CONVERSATION, target=None, conversation="c1", **options):
        server = ScriptedChatServer(script)
        servers.append(server)
        client = OpenAIChatClient(server.base_url, "scripted", max_retries=0, timeout=5)
        flusher = MemoryFlusher(target or store, client, **options)
        report = flusher.flush(messages, conversation=conversation, force=True)
        return report, server.requests

    yield run
    for server in servers:
        server.close()


def test_each_fact_gets_the_messages_it_was_drawn_from(store, flush):
    """Two facts of one flush each carry their own messages, not the whole batch."""
    report, _ = flush([reply(upsert("met", ILSE, [1, 2]), upsert("sister", INES, [3]))])
    assert "applied" == report.status and () == report.warnings
    matt = store.get_by_key("user", "met")
    ines = store.get_by_key("user", "sister")
    assert f"{line(1)}\n{line(2)}" == matt.context
    assert line(3) == ines.context
    # a question worded like the conversation finds the fact through its context alone
    assert [matt.id] == [h.fact.id for h in store.search("robotics conference")]


def test_the_prompt_and_schema_ask_for_the_messages(flush):
    """The request asks the model to name each fact's messages, in the prompt and the schema."""
    _, requests = flush([reply()])
    prompt = requests[0]["messages"][-1]["content"]
    assert 'In "messages", list the numbers of the messages each upserted fact was drawn ' \
           "from (usually one or two, from 1 to 4)." in prompt
    schema = requests[0]["response_format"]["json_schema"]["schema"]
    upsert_schema = schema["properties"]["operations"]["items"]["anyOf"][0]
    assert "messages" in upsert_schema["required"]
    assert {"type": "array", "items": {"type": "integer", "minimum": 1}} == \
        upsert_schema["properties"]["messages"]


def test_a_reply_without_messages_writes_facts_without_context(store, flush):
    """A reply in the older form (no "messages") is applied as before, with no context."""
    report, _ = flush([reply(upsert("met", ILSE))])
    assert ("applied", 1) == (report.status, len(report.added))
    assert store.get_by_key("user", "met").context is None


def test_numbers_outside_the_batch_are_left_out_with_a_warning(store, flush):
    """Numbers the model was not shown are left out of the context and named in a warning;
    the fact is still written."""
    report, _ = flush([reply(upsert("met", ILSE, [2, 9, 0]), upsert("sister", INES, [7]))])
    assert 2 == len(report.added)
    assert line(2) == store.get_by_key("user", "met").context
    assert store.get_by_key("user", "sister").context is None
    left_out = "not among the messages 1 to 4 it was shown; those were left out of its context"
    assert [f"operations[0] names messages 9, 0, {left_out}",
            f"operations[1] names messages 7, {left_out}"] == list(report.warnings)


def test_messages_of_a_later_flush_are_numbered_in_the_whole_conversation(store, flush):
    """A second flush numbers its messages from where the first stopped, and context_before
    reaches back into messages an earlier flush read."""
    flush([reply()], messages=CONVERSATION[:2])
    report, requests = flush([reply(upsert("sister", INES, [4]))], context_before=1)
    assert (3, 4) == (report.first, report.last)
    assert "## Message 3 (user)" in requests[0]["messages"][-1]["content"]
    assert f"{line(3)}\n{line(4)}" == store.get_by_key("user", "sister").context
    again = flush([reply(upsert("met", ILSE, [2]))], messages=CONVERSATION[:2],
                  context_before=5)[0]
    assert "applied" == again.status    # the conversation changed: read again from 1
    assert f"{line(1)}\n{line(2)}" == store.get_by_key("user", "met").context


def test_a_long_context_is_cut_to_the_limit_sharing_it_between_messages(store, flush):
    """Long messages are cut so the context fits Limits.max_context_bytes; a short one stays
    whole and the long ones share the rest."""
    limit = store.limits.max_context_bytes
    conversation = [{"role": "user", "content": "Robots " + "é" * 6000},
                    {"role": "assistant", "content": "Short answer."},
                    {"role": "user", "content": "Warehouse " + "x" * 9000}]
    report, _ = flush([reply(upsert("met", ILSE, [1, 2, 3]))], messages=conversation)
    assert "applied" == report.status
    context = store.get_by_key("user", "met").context
    assert limit - 3 <= len(context.encode("utf-8")) <= limit
    first, second, third = context.split("\n")
    assert first.startswith("user: Robots é") and first.endswith("…")
    assert "assistant: Short answer." == second
    assert third.startswith("user: Warehouse x") and third.endswith("…")
    assert abs(len(first.encode()) - len(third.encode())) <= 3


def test_a_secret_in_a_message_is_redacted_in_the_context(store, flush):
    """The store's secret policy applies to a context the flusher writes."""
    _, secret, text = SECRETS[0]
    conversation = [{"role": "user", "content": text.format(secret)}]
    flush([reply(upsert("bot", "The staging bot has an OpenAI key.", [1]))],
          messages=conversation)
    context = store.get_by_key("user", "bot").context
    assert secret not in context and "[redacted API key]" in context


def test_a_refused_context_leaves_the_fact_without_one(location, clock, flush):
    """Where the store refuses secrets, the fact is written without the context that held
    one, and the report says so."""
    _, secret, text = SECRETS[0]
    with FactStore(location, clock=clock, limits=Limits(secrets="refuse")) as strict:
        report, _ = flush([reply(upsert("bot", "The staging bot has an OpenAI key.", [1]))],
                          messages=[{"role": "user", "content": text.format(secret)}],
                          target=strict)
        assert 1 == len(report.added)
        assert strict.get_by_key("user", "bot").context is None
        assert 1 == len(report.warnings)
        assert report.warnings[0].startswith("operations[0] was written without a context: "
                                             "context holds what looks like")


def test_malformed_messages_get_one_retry(store, flush):
    """A "messages" that is not a list of numbers is a format error: the model is told and
    asked once more; a second bad reply fails the flush and writes nothing."""
    bad = reply(upsert("met", ILSE, ["2"]))  # type: ignore[list-item]
    report, requests = flush([bad, reply(upsert("met", ILSE, [2]))])
    assert line(2) == store.get_by_key("user", "met").context
    assert "operations[0].messages must be an array of message numbers" in \
        requests[1]["messages"][-1]["content"]
    assert "applied" == report.status
    with pytest.raises(FlushError, match="messages must be an array"):
        flush([reply(upsert("sister", INES, "3")), bad],  # type: ignore[arg-type]
              conversation="c2")
    assert store.get_by_key("user", "sister") is None


def test_the_same_fact_again_keeps_its_context(store, flush):
    """Re-extracting a fact unchanged from a restarted conversation changes nothing."""
    flush([reply(upsert("met", ILSE, [1, 2]))])
    report, _ = flush([reply(upsert("met", ILSE, [2]))], messages=CONVERSATION[:3])
    assert 1 == len(report.unchanged)
    assert f"{line(1)}\n{line(2)}" == store.get_by_key("user", "met").context


class _Number(int):
    """A message number that counts how often it is compared for equality."""

    compared = 0

    def __eq__(self, other: object) -> bool:
        _Number.compared += 1
        return int(self) == other

    __hash__ = int.__hash__


def test_a_reply_naming_many_messages_is_read_in_one_pass():
    """An upsert naming a hundred thousand message numbers (a model counting on) is read
    without comparing each number with every message named: the numbers out of the batch
    are left out, the named ones make the context."""
    from ctxslots.flusher._context import fact_context
    from ctxslots.model import Message

    conversation = [Message(role="user", content=f"message {i}") for i in range(1, 2001)]
    numbers = [_Number(n) for n in range(1, 100_001)]
    _Number.compared = 0
    found = fact_context(numbers, conversation, first=1, last=3, max_bytes=4096)
    compared = _Number.compared
    assert "user: message 1\nuser: message 2\nuser: message 3" == found.text
    assert list(range(4, 100_001)) == [int(n) for n in found.ignored]
    assert compared < 10_000, compared
