"""The flusher's wire format: reading a model's reply and checking each operation."""

from __future__ import annotations

import json
import time

import pytest

from ctxslots import Limits
from ctxslots.flusher.operations import (
    KEY_PATTERN,
    Forget,
    ReplyFormatError,
    Upsert,
    check_operation,
    operations_schema,
    parse_reply,
)

UPSERT = {"op": "upsert", "slot": "user", "key": "editor", "value": "The user edits code in Helix.",
          "confidence": 0.9, "tags": ["tools"]}
FORGET = {"op": "forget", "slot": "project", "key": "deploy.day", "reason": "No longer true."}
GOOD = json.dumps({"operations": [UPSERT, FORGET]})
EXPECTED = (
    Upsert(slot="user", key="editor", value="The user edits code in Helix.", confidence=0.9,
           tags=("tools",)),
    Forget(slot="project", key="deploy.day", reason="No longer true."),
)
SLOTS = ("user", "project", "agent")


def test_plain_object_is_read():
    """A bare JSON object gives its operations in order."""
    assert EXPECTED == parse_reply(GOOD)


@pytest.mark.parametrize(
    "reply",
    [
        f"```json\n{GOOD}\n```",
        f"```\n{GOOD}\n```\n",
        f"Here are the operations:\n\n```json\n{GOOD}\n```\nThat is all.",
        f"Sure! {GOOD}",
        f"{GOOD}\n\nI stored the editor.",
        f"~~~json\n{GOOD}\n~~~",
        f'<think>The user changed editor: {{"op": "upsert", ...}}, and a forget.</think>\n\n{GOOD}',
        f"\n<thinking>Draft:\n```json\n{GOOD}\n```\nFine.</thinking>\n```json\n{GOOD}\n```",
    ],
    ids=["fence", "bare-fence", "prose-around-fence", "prose-before", "prose-after", "tildes",
         "thinking", "thinking-with-a-fence"],
)
def test_fences_and_prose_around_one_object_are_tolerated(reply):
    """One object inside one markdown fence, or with prose around it, is read."""
    assert EXPECTED == parse_reply(reply)


def _parse_seconds(raw: str) -> float:
    """Wall time of one ``parse_reply(raw)`` (which fails)."""
    started = time.perf_counter()
    with pytest.raises(ReplyFormatError):
        parse_reply(raw)
    return time.perf_counter() - started


def test_a_reply_looping_on_an_opening_fence_is_read_in_linear_time():
    """Sixteen times the lines of a model repeating ```json take a small multiple of sixteen
    times as long (they took 256: each opening fence searched the rest of the reply for its
    closing one, and a reply of 128 KB took 40 s). Timed in turns, the fastest of five each,
    so a busy machine slows both alike; the margin allows for the larger reply no longer
    fitting the processor's caches."""
    small, large = "```json\n" * 1_000, "```json\n" * 16_000
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(5):
        times[0].append(_parse_seconds(small))
        times[1].append(_parse_seconds(large))
    per_line = (min(times[0]) / 1_000, min(times[1]) / 16_000)
    assert per_line[1] < 8 * per_line[0], per_line


def test_empty_operations_is_valid():
    """An empty list says there is nothing to remember."""
    assert () == parse_reply('{"operations": []}')


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        ("", "the reply is empty;"),
        ("I found nothing worth remembering.", "no JSON object"),
        (json.dumps([UPSERT]), "not an object"),
        ('{"operations": [{"op": "upsert", "slot": "user", "key": "edi', "cut off"),
        ('{"operations": [' + json.dumps(UPSERT) + ', ', "cut off"),
        (f"```json\n{GOOD}\n```\n```json\n{GOOD}\n```", "2 code blocks"),
        (f"{GOOD}\n{GOOD}", "after the JSON object"),
        ('{"ops": []}', "unknown fields ops"),
        ("{}", 'lacks "operations"'),
        ('{"operations": {"op": "upsert"}}', "not an array"),
        ('{"operations": ["remember the editor"]}', "operations[0] is string"),
        ('{"operations": [{"op": "delete", "slot": "user", "key": "x"}]}', '"upsert" or "forget"'),
        ('{"operations": [{"op": "forget", "slot": "user", "key": "x"}]}', "lacks reason"),
        (json.dumps({"operations": [{**UPSERT, "id": 3}]}), "unknown fields id"),
        (json.dumps({"operations": [{**UPSERT, "confidence": "high"}]}), "not a number"),
        (json.dumps({"operations": [{**UPSERT, "confidence": True}]}), "not a number"),
        (json.dumps({"operations": [{**UPSERT, "tags": "tools"}]}), "array of strings"),
        (json.dumps({"operations": [{**UPSERT, "tags": [1]}]}), "array of strings"),
        (json.dumps({"operations": [{**UPSERT, "value": 42}]}), "value is number"),
        (json.dumps({"operations": [{**UPSERT, "key": None}]}), "key is null"),
        (json.dumps({"operations": [{**UPSERT, "value": {"text": "x"}}]}), "value is object"),
        ("not json {at all", "not valid JSON"),
        (f"<think>Unfinished {{ thought {GOOD}", "not valid JSON"),
        ('{"operations": [], "operations": [' + json.dumps(UPSERT) + "]}",
         "names 'operations' twice"),
        (('{"operations": [{"op": "upsert", "slot": "user", "key": "city", "value": "Paris.", '
          '"value": "Lisbon.", "confidence": 0.9, "tags": []}]}'), "names 'value' twice"),
    ],
)
def test_anything_else_is_a_format_error(reply, message):
    """Every reply that is not one object of the schema raises, saying what is wrong."""
    with pytest.raises(ReplyFormatError, match=None) as info:
        parse_reply(reply)
    assert message in str(info.value)
    assert reply == info.value.raw
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    ("op", "reason"),
    [
        (Upsert("secrets", "x", "A value.", 1.0), "slot 'secrets' is not one of this flush's"),
        (Forget("secrets", "x", "gone"), "slot 'secrets' is not one of this flush's"),
        (Upsert("user", "line\nbreak", "A value.", 1.0), "one line without control characters"),
        (Upsert("user", "tab\there", "A value.", 1.0), "one line without control characters"),
        (Upsert("user", "  ", "A value.", 1.0), "key must be a non-empty string"),
        (Upsert("user", "k" * 201, "A value.", 1.0), "at most 200 characters"),
        (Upsert("user", "editor", "x" * 5000, 1.0), "over the limit of 4096"),
        (Upsert("user", "editor", "   ", 1.0), "non-empty"),
        (Upsert("user", "editor", "A value.", 1.5), "from 0 to 1"),
        (Upsert("user", "editor", "A value.", -0.1), "from 0 to 1"),
        (Upsert("user", "editor", "A value.", float("nan")), "from 0 to 1"),
        (Upsert("user", "editor", "A value.", 1.0, tuple(f"t{i}" for i in range(40))), "over the limit of 32"),
        (Upsert("user", "editor", "A value.", 1.0, ("",)), "non-empty"),
        (Forget("user", "editor", "r" * 501), "over the limit of 500"),
        (Forget("user", "editor", "Gone \ud800."), "reason is not valid Unicode text"),
        (Forget("user", "editor", "Gone\x00."), "reason must not contain NUL characters"),
    ],
)
def test_content_checks_give_reasons(op, reason):
    """An operation with an unknown slot, bad key, oversize value or bad confidence is rejected."""
    found = check_operation(op, slots=SLOTS, limits=Limits())
    assert found is not None
    assert reason in found


def test_valid_operations_pass_content_checks():
    """Operations within every limit have no rejection reason."""
    for op in EXPECTED + (Upsert("agent", "ci.cache-1", "Cold on Mondays.", 0.0, ()),):
        assert check_operation(op, slots=SLOTS, limits=Limits()) is None


def test_schema_describes_both_operations():
    """The schema sent as response_format lists exactly the fields of each operation."""
    schema = operations_schema(SLOTS)
    upsert, forget = schema["properties"]["operations"]["items"]["anyOf"]

    assert ["operations"] == schema["required"]
    assert ["op", "slot", "key", "value", "confidence", "tags", "messages"] == \
        upsert["required"]
    assert ["op", "slot", "key", "reason"] == forget["required"]
    assert list(SLOTS) == upsert["properties"]["slot"]["enum"]
    assert KEY_PATTERN == forget["properties"]["key"]["pattern"]
    assert all(s["additionalProperties"] is False for s in (schema, upsert, forget))


def test_operations_round_trip_through_their_wire_form():
    """to_dict gives the wire form parse_reply reads back."""
    assert EXPECTED == parse_reply(json.dumps({"operations": [op.to_dict() for op in EXPECTED]}))
