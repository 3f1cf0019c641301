"""Stored values are data: they stay inside their bullet in the prompt and in every dump."""

from __future__ import annotations

import json
import re
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from _assembler_helpers import make_store
from ctxslots import AssemblyRequest, PromptAssembler
from ctxslots.prompts.escape import _escape, bullet, fence_for, md_cell
from injection_catalogue import INJECTION_VALUES as HOSTILE_VALUES

FORBIDDEN = ("<|im_start|>", "<|im_end|>", "</system>", "<system>", "[INST]", "[/INST]",
             "<<SYS>>", "```", "~~~", "<script", "<\uff5cUser\uff5c>", "\uff5c>",
             "[TOOL_CALLS]", "[/TOOL_RESULTS]", "[SYSTEM_PROMPT]")


def _assert_one_safe_line(text):
    assert "\n" not in text and "\r" not in text
    assert len(text.splitlines()) <= 1
    assert not any(unicodedata.category(ch) in {"Cc", "Cf", "Cs", "Zl", "Zp"} for ch in text)
    assert not re.match(r"[#>\-*+=|_:]|\d+[.)]", text)
    for marker in FORBIDDEN:
        assert marker not in text


@pytest.mark.parametrize("value", HOSTILE_VALUES)
def test_bullet_keeps_each_hostile_value_on_one_safe_line(value):
    """Each crafted value becomes one line with no heading, fence, tag or invisible character."""
    _assert_one_safe_line(bullet(value))
    assert "|" not in md_cell(value).replace("\\|", "")


@given(st.text())
def test_bullet_keeps_any_text_on_one_safe_line(value):
    """Any text at all comes out as one line that cannot open a new section."""
    _assert_one_safe_line(bullet(value))


@given(st.text(alphabet=st.characters(max_codepoint=127)))
def test_plain_ascii_shortcut_agrees_with_the_full_escape(value):
    """The shortcut for plain ASCII gives exactly what the full escaping gives."""
    assert _escape(value) == bullet(value)


def test_bullet_keeps_the_words():
    """Escaping changes markup, not content: the words are all still there."""
    assert "\\# Title ⏎ body text ⏎ - item" == bullet("# Title\n\nbody   text\n- item")
    assert "" == bullet(None) and "42" == bullet(42)
    assert "````" == fence_for("has ``` inside")


@pytest.fixture(name="hostile_prompt")
def fixture_hostile_prompt(tmp_path):
    """A prompt whose project memory holds every hostile value."""
    store = make_store(tmp_path / "h.db", [("project", "shop", v) for v in HOSTILE_VALUES])
    from ctxslots import ProjectMemoryContributor

    contributor = ProjectMemoryContributor(store, limit=len(HOSTILE_VALUES), overfetch=0)
    prompt = PromptAssembler(store, contributors=[contributor]).assemble(
        AssemblyRequest("deploy note", scope="shop", budget=4000))
    yield prompt
    store.close()


def test_hostile_values_stay_inside_their_bullets(hostile_prompt):
    """Every hostile value is kept as exactly one bullet line under the one real header."""
    lines = hostile_prompt.text.splitlines()
    assert len(HOSTILE_VALUES) == len(hostile_prompt.kept)
    assert ["## What you know about this project"] == [l for l in lines if l.startswith("#")]
    assert len(HOSTILE_VALUES) + 1 == len(lines)
    for line in lines[1:]:
        assert line.startswith("- ")
        _assert_one_safe_line(line[2:])


def test_hostile_values_in_the_json_dump_are_exact_data(hostile_prompt):
    """The JSON dump keeps each raw value exactly, as data."""
    data = json.loads(hostile_prompt.dump("json"))
    assert set(HOSTILE_VALUES) == {i["text"] for i in data["sections"][0]["items"]}


def test_hostile_values_stay_in_their_markdown_rows(hostile_prompt):
    """In the markdown dump each value stays in its table row; the prompt fence is never closed early."""
    text = hostile_prompt.dump("markdown")
    body, _, prompt_part = text.partition("## Prompt text")
    body = body.partition("## Sections")[2]
    for line in body.splitlines():
        if "deploy" in line:
            assert line.startswith("| ") and line.endswith(" |")
    assert [] == [l for l in body.splitlines() if l.startswith("#") and "deploy" in l]
    fences = [l for l in prompt_part.splitlines() if l.startswith("```")]
    assert ["```text", "```"] == fences


def test_hostile_values_are_escaped_in_the_html_dump(hostile_prompt):
    """In the HTML dump no value opens a tag: only the page's own script exists."""
    page = hostile_prompt.dump("html")
    assert 1 == page.count("<script")
    assert "<img" not in page and "</system>" not in page and "<|im_start|>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_the_length_estimate_drops_what_the_filter_drops():
    """The cheap text a memory line's tokens are estimated from: runs of spaces one, and
    every format character of this Python's Unicode gone, as the filter shows them."""
    import unicodedata

    from ctxslots.prompts.escape import shown_length_text

    formats = "".join(chr(c) for c in range(0x110000) if unicodedata.category(chr(c)) == "Cf")
    assert "ab" == shown_length_text(f"a{formats}b")
    assert "deploy note 1: ok" == shown_length_text("deploy note 1:" + " " * 300 + "ok")
    assert len(bullet("café  \u200bau\tlait")) == len(shown_length_text("café  \u200bau\tlait"))
