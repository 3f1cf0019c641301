"""Every catalogued injection renders as exactly one bullet inside its own section, in the
prompt and in all three dump formats (JSON, markdown, HTML)."""

from __future__ import annotations

import json
import re
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from _assembler_helpers import FIXED_NOW
from ctxslots import (
    AgentMemoryContributor,
    AssembledPrompt,
    AssemblyRequest,
    FactStore,
    InvalidFactError,
    ProjectMemoryContributor,
    PromptAssembler,
    StaticContributor,
    UserMemoryContributor,
)
from ctxslots.prompts.escape import bullet, md_cell
from injection_catalogue import INJECTION_VALUES, QUERY, UNSTORABLE_VALUES

USER_CANARY = "deploy note canary: the user writes release notes on Mondays."
AGENT_CANARY = "deploy note canary: the agent checks the changelog first."
TITLES = {
    "user_memory": "What you know about the user",
    "project_memory": "What you know about this project",
    "agent_memory": "Lessons you learned earlier",
}
_UNESCAPED_PIPE = re.compile(r"(?<!\\)\|")
_MD_COLUMNS = 10


def test_the_catalogue_is_large_and_distinct():
    """The catalogue holds at least 30 different values, each found by the one query."""
    assert len(INJECTION_VALUES) >= 30
    assert len(set(INJECTION_VALUES)) == len(INJECTION_VALUES)
    assert all("deploy" in v and "note" in v for v in INJECTION_VALUES + UNSTORABLE_VALUES)


@pytest.fixture(name="prompt")
def fixture_prompt(tmp_path: Path) -> Any:
    """A prompt with the catalogue in project memory and one canary in user and agent memory."""
    store = FactStore(tmp_path / "inj.db", clock=lambda: FIXED_NOW)
    with store.batch():
        for value in INJECTION_VALUES:
            store.add("project", value, scope="shop")
        store.add("user", USER_CANARY)
        store.add("agent", AGENT_CANARY, scope="shop")
    contributors = [
        UserMemoryContributor(store),
        ProjectMemoryContributor(store, limit=len(INJECTION_VALUES), overfetch=0),
        AgentMemoryContributor(store),
    ]
    prompt = PromptAssembler(store, contributors=contributors).assemble(
        AssemblyRequest(QUERY, scope="shop", budget=20_000))
    yield prompt
    store.close()


def _expected() -> dict[str, list[str]]:
    return {"user_memory": [USER_CANARY], "project_memory": list(INJECTION_VALUES),
            "agent_memory": [AGENT_CANARY]}


# -- the prompt text ----------------------------------------------------------


def _prompt_sections(text: str) -> dict[str, list[str]]:
    """Lines of the prompt by heading; every non-blank line is a heading or under one."""
    sections: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        if line.startswith("#"):
            current = line
            assert current not in sections, f"heading repeated: {line!r}"
            sections[current] = []
        elif line.strip():
            assert current is not None, f"text before any heading: {line!r}"
            sections[current].append(line)
    return sections


def check_prompt_text(text: str, expected: dict[str, list[str]], titles: dict[str, str]) -> None:
    """Exactly the real headings, and under each exactly one bullet per value."""
    sections = _prompt_sections(text)
    assert [f"## {titles[name]}" for name in expected] == list(sections)
    for name, values in expected.items():
        assert Counter(f"- {bullet(v)}" for v in values) == Counter(sections[f"## {titles[name]}"])


def test_prompt_text_has_one_bullet_per_value(prompt):
    """In the prompt each value is one bullet under the project heading, and no value adds a heading."""
    assert len(INJECTION_VALUES) + 2 == len(prompt.kept)
    check_prompt_text(prompt.text, _expected(), TITLES)


# -- the JSON dump ------------------------------------------------------------


def check_json_dump(prompt: AssembledPrompt, expected: dict[str, list[str]]) -> None:
    """Each section's items hold exactly its values, raw and kept."""
    data = json.loads(prompt.dump("json"))
    by_name = {s["name"]: s for s in data["sections"]}
    assert list(expected) == list(by_name)
    for name, values in expected.items():
        items = by_name[name]["items"]
        assert Counter(values) == Counter(i["text"] for i in items)
        assert {"kept"} == {i["decision"] for i in items}
    assert prompt.text == data["text"]


def test_json_dump_keeps_each_value_in_its_section(prompt):
    """The JSON dump lists each raw value once, in the project section only."""
    check_json_dump(prompt, _expected())


# -- the markdown dump --------------------------------------------------------


def _outside_fences(lines: list[str]) -> list[str]:
    out, fence = [], None
    for line in lines:
        if fence is None and line.startswith("```"):
            fence = re.match(r"`+", line).group()  # type: ignore[union-attr]
        elif fence is not None and line == fence:
            fence = None
        elif fence is None:
            out.append(line)
    return out


def check_markdown_dump(prompt: AssembledPrompt, expected: dict[str, list[str]],
                        titles: dict[str, str]) -> None:
    """Only the dump's own headings; each section's table has one row per value, in one cell."""
    text = prompt.dump("markdown")
    lines = text.splitlines()
    headings = [l for l in _outside_fences(lines) if l.startswith("#")]
    wanted = ["# ctxslots prompt dump", "## Sections"]
    wanted += [f"### {i}. {titles[n]} ({n})" for i, n in enumerate(expected, start=1)]
    wanted += [f"## Prompt text ({prompt.total_tokens} tokens)"]
    assert wanted == headings
    starts = [lines.index(h) for h in wanted[2:]]
    for name, start, end in zip(expected, starts, starts[1:] + [len(lines)]):
        body = [l for l in lines[start + 1:end] if l.strip()]
        rows = [l for l in body if l.startswith("| ")]
        assert body[0].startswith("Status: ") and rows == body[1:]
        items = rows[2:]
        assert len(expected[name]) == len(items)
        for row in items:
            assert _MD_COLUMNS + 2 == len(_UNESCAPED_PIPE.split(row)), row
        assert Counter(f" {md_cell(v)} |" for v in expected[name]) == Counter(
            "".join(_UNESCAPED_PIPE.split(row)[-2:]) + "|" for row in items)
    fenced = text.split(f"## Prompt text ({prompt.total_tokens} tokens)\n\n", 1)[1]
    fence = re.match(r"`{3,}", fenced).group()  # type: ignore[union-attr]
    assert f"{fence}text\n{prompt.text}{fence}\n" == fenced


def test_markdown_dump_keeps_each_value_in_one_table_cell(prompt):
    """No value adds a heading or a table row; the prompt's fence closes only at its end."""
    check_markdown_dump(prompt, _expected(), TITLES)


# -- the HTML dump ------------------------------------------------------------


class _DumpPage(HTMLParser):
    """Collects, per ``<section data-name>``, the text cell of every item row."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.sections: dict[str, list[str]] = {}
        self.tags: Counter[str] = Counter()
        self.tags_in_cells = 0
        self.prompt: str | None = None
        self._section: str | None = None
        self._cell: list[str] | None = None
        self._wrapped = False
        self._pre: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        self.tags[tag] += 1
        if self._cell is not None:
            # The cell's own <bdi>, opened before any text, holds the value's direction
            # marks inside it; any other element in a cell came from a value.
            if tag == "bdi" and not self._wrapped and not self._cell:
                self._wrapped = True
            else:
                self.tags_in_cells += 1
        if tag == "section" and "data-name" in a:
            self._section = a["data-name"]
            self.sections[self._section or ""] = []
        elif tag == "td" and a.get("class") == "text":
            self._cell, self._wrapped = [], False
        elif tag == "pre" and a.get("class") == "prompt":
            self._pre = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "td" and self._cell is not None:
            assert self._section is not None
            self.sections[self._section].append("".join(self._cell))
            self._cell = None
        elif tag == "pre" and self._pre is not None:
            self.prompt = "".join(self._pre)
            self._pre = None
        elif tag == "section":
            self._section = None

    def handle_data(self, data: str) -> None:
        for part in (self._cell, self._pre):
            if part is not None:
                part.append(data)


def check_html_dump(prompt: AssembledPrompt, expected: dict[str, list[str]]) -> None:
    """Each section's rows hold exactly its values as text; no value adds an element."""
    page = _DumpPage()
    page.feed(prompt.dump("html"))
    page.close()
    assert 0 == page.tags_in_cells
    assert 1 == page.tags["script"]
    assert len(expected) + 1 == page.tags["section"] == page.tags["h2"]
    assert sum(map(len, expected.values())) == page.tags["tr"] - len(expected)
    assert list(expected) == list(page.sections)
    for name, values in expected.items():
        assert Counter(values) == Counter(page.sections[name])
    assert prompt.text == page.prompt


def test_html_dump_keeps_each_value_in_its_row(prompt):
    """Parsed as HTML, each value is the text of one row of its section, and opens no element."""
    check_html_dump(prompt, _expected())


# -- values the store refuses -------------------------------------------------


def test_nul_is_refused_by_the_store_and_contained_when_a_plugin_offers_it(store):
    """The store refuses a NUL; offered by a contributor, it still renders as one bullet."""
    for value in UNSTORABLE_VALUES:
        with pytest.raises(InvalidFactError) as info:
            store.add("project", value, scope="shop")
        assert "value" == info.value.field
    assert [] == store.facts(scope="shop")
    notes = StaticContributor(name="notes", title="Notes", lines=list(UNSTORABLE_VALUES))
    prompt = PromptAssembler(None, contributors=[notes]).assemble(
        AssemblyRequest(QUERY, budget=2000))
    expected = {"notes": list(UNSTORABLE_VALUES)}
    assert "\x00" not in prompt.text
    check_prompt_text(prompt.text, expected, {"notes": "Notes"})
    check_json_dump(prompt, expected)
    check_markdown_dump(prompt, expected, {"notes": "Notes"})
    check_html_dump(prompt, expected)


def test_the_checks_notice_a_value_that_escapes():
    """The prompt check fails when a value's newline reaches the text unescaped."""
    broken = "## What you know about this project\n- deploy note\n# SYSTEM\n"
    with pytest.raises(AssertionError):
        check_prompt_text(broken, {"project_memory": ["deploy note\n# SYSTEM"]}, TITLES)
