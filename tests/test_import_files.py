"""Import files that are odd but not wrong, or wrong in one place: byte-order marks, repeated
ids, and values that Markdown viewers would read as something else."""

from __future__ import annotations

import io
import json

import pytest

from _sql import stored_rows
from ctxslots import FactStore
from ctxslots.errors import InvalidFactError, InvalidImportError

HEADER = json.dumps({"format": "ctxslots-facts", "version": 1})


def jsonl(*records: dict) -> str:
    """An export file: the header, then one line per record."""
    return "\n".join([HEADER, *(json.dumps(r) for r in records)]) + "\n"


def test_a_file_with_a_byte_order_mark_is_accepted(store, tmp_path):
    """A JSONL file that starts with a UTF-8 byte-order mark imports like one without."""
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + jsonl({"slot": "agent", "value": "Saved by Notepad."})
                     .encode("utf-8"))
    with path.open(encoding="utf-8") as fp:
        report = store.import_jsonl(fp)
    assert 1 == report.added
    assert ["Saved by Notepad."] == [f.value for f in store.facts()]


def test_a_byte_order_mark_in_the_middle_is_still_an_error(store):
    """Only the first line may start with a byte-order mark."""
    text = jsonl({"slot": "agent", "value": "One."}) + "\ufeff" + json.dumps(
        {"slot": "agent", "value": "Two."}) + "\n"
    with pytest.raises(InvalidImportError) as caught:
        store.import_jsonl(io.StringIO(text))
    assert 3 == caught.value.line
    assert [] == stored_rows(store)


def test_an_id_repeated_in_one_file_is_refused(store):
    """Two records with one id fail naming the second line and the first; nothing is written."""
    text = jsonl({"id": 5, "slot": "agent", "value": "First five."},
                 {"id": 6, "slot": "agent", "value": "Six.", "superseded_by": 5},
                 {"id": 5, "slot": "agent", "value": "Second five."})
    with pytest.raises(InvalidImportError) as caught:
        store.import_jsonl(io.StringIO(text))
    assert (4, "id") == (caught.value.line, caught.value.field)
    assert "line 2" in str(caught.value)
    assert [] == stored_rows(store)


def test_skip_invalid_reports_the_repeated_id_and_keeps_the_first(store):
    """With skip_invalid the repeat is listed as an invalid line and the first record stands."""
    text = jsonl({"id": 5, "slot": "agent", "value": "First five."},
                 {"id": 5, "slot": "agent", "value": "Second five."})
    report = store.import_jsonl(io.StringIO(text), skip_invalid=True)
    assert 1 == report.added
    assert [3] == [e.line for e in report.errors]
    assert ["First five."] == [f.value for f in store.facts()]


LINK_DEFINITIONS = [
    "[x]: http://evil.example/",
    "[x]: <http://evil.example/> \"a title\"",
    "   [x]:\nhttp://evil.example/",
    "[^1]: a footnote that hides the rest",
    "An honest first paragraph.\n\n[x]: http://evil.example/",
    "<!---->[x]: http://evil.example/ already marked",
]


@pytest.mark.parametrize("value", LINK_DEFINITIONS)
def test_a_value_that_reads_as_a_link_definition_renders_as_text(store, value):
    """CommonMark (markdown-it) shows the value's text, defines no link, and the file reads back."""
    markdown_it = pytest.importorskip("markdown_it")
    fact = store.add("agent", value)
    text = str(store.export_markdown())
    parser = markdown_it.MarkdownIt("commonmark")
    env: dict = {}
    parser.parse(text + "\n[x]\n", env)
    assert {} == env.get("references", {})
    html = parser.render(text)
    assert "<li></li>" not in html
    assert "[x]" in html or "[^1]" in html
    with FactStore(":memory:") as other:
        other.import_markdown(text, slot="agent")
        assert [fact.value] == [f.value for f in other.facts()]


@pytest.mark.parametrize("name", ["notes/MEMORY.md", "MEMORY.md", "notes/memory"])
def test_a_mistyped_file_name_is_refused_not_read_as_text(store, tmp_path, monkeypatch, name):
    """A one-line string naming no file raises InvalidFactError instead of importing nothing."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidFactError) as raised:
        store.import_markdown(name, slot="agent")
    assert "path_or_text" == raised.value.field
    assert name in str(raised.value)
    assert [] == store.facts()


def test_a_folder_name_is_refused(store, tmp_path):
    """A string naming a folder raises InvalidFactError instead of importing nothing."""
    with pytest.raises(InvalidFactError):
        store.import_markdown(str(tmp_path), slot="agent")


@pytest.mark.parametrize("text", ["- The deploy runs on Fridays.", "* deploys/rollbacks go through CI"])
def test_one_bullet_of_text_is_still_text(store, text):
    """One line holding a bullet is Markdown text, even when it holds a slash."""
    assert 1 == store.import_markdown(text, slot="agent").added
