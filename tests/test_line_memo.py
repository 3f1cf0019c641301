"""Item lines remembered by text: only for templates whose line depends on the text alone."""

from __future__ import annotations

from ctxslots import AssemblyRequest, PromptAssembler, Section
from ctxslots.assembler._line_memo import LineMemo, reads_only_item_text, reads_only_when
from ctxslots.model import Item
from ctxslots.prompts import make_environment


class Given:
    """A contributor offering fixed lines."""

    name, priority, sticky = "notes", 50, False

    def __init__(self, texts):
        self.texts = texts

    def contribute(self, request):
        return Section(title="Notes", name="notes", priority=50,
                       items=tuple(Item(text=t) for t in self.texts))


def test_the_builtin_item_template_reads_only_the_text():
    """The built-in item template qualifies; templates reading anything else do not."""
    env = make_environment(templates={
        "rank.j2": "{{ rank }}. {{ item.text }}\n",
        "section.j2": "- {{ item.text }} ({{ section.title }})\n",
        "key.j2": "- {{ item.key }}\n",
        "random.j2": "- {{ item.text | random }}\n",
        "call.j2": "- {{ item.text.upper() }}\n",
        "include.j2": "{% include 'item.md.j2' %}",
        "getitem.j2": "- {{ item['text'] }}\n",
        "upper.j2": "* {{ item.text | bullet | upper }}\n",
    })
    assert reads_only_item_text(env, "item.md.j2")
    assert reads_only_item_text(env, "upper.j2")
    for name in ("rank.j2", "section.j2", "key.j2", "random.j2", "call.j2", "include.j2",
                 "getitem.j2", "missing.j2"):
        assert not reads_only_item_text(env, name), name


def _recorder():
    """``(calls, render)``: ``render(line)`` makes a renderer that notes ``line`` in
    ``calls`` and returns it."""
    calls = []

    def render(line):
        return lambda: calls.append(line) or line
    return calls, render


def test_a_qualifying_line_is_rendered_once_per_text():
    """LineMemo renders a text's line once for a qualifying template, every time otherwise."""
    env = make_environment(templates={"rank.j2": "{{ rank }}. {{ item.text }}\n"})
    memo = LineMemo(env)
    calls, render = _recorder()
    assert "- a\n" == memo.line("item.md.j2", "a", render("- a\n"))
    assert "- a\n" == memo.line("item.md.j2", "a", render("- other\n"))
    assert ["- a\n"] == calls
    memo.line("rank.j2", "a", render("1. a\n"))
    memo.line("rank.j2", "a", render("2. a\n"))
    assert ["- a\n", "1. a\n", "2. a\n"] == calls


def test_a_group_heading_is_rendered_once_per_time_when_it_reads_only_that():
    """The built-in group heading reads only ``when`` and is rendered once per value; one
    that reads the section renders every time; an item line of the same template and
    text is not taken for a heading."""
    env = make_environment(templates={"titled.j2": "{{ section.title }}, {{ when }}:\n"})
    assert reads_only_when(env, "group_header.md.j2")
    assert not reads_only_when(env, "titled.j2")
    assert not reads_only_when(env, "item.md.j2")
    memo = LineMemo(env)
    calls, render = _recorder()
    assert "8 May:\n" == memo.heading("group_header.md.j2", "8 May", render("8 May:\n"))
    assert "8 May:\n" == memo.heading("group_header.md.j2", "8 May", render("other\n"))
    assert "- 8 May\n" == memo.line("group_header.md.j2", "8 May", render("- 8 May\n"))
    memo.heading("titled.j2", "8 May", render("A, 8 May:\n"))
    memo.heading("titled.j2", "8 May", render("B, 8 May:\n"))
    assert ["8 May:\n", "- 8 May\n", "A, 8 May:\n", "B, 8 May:\n"] == calls


def test_prompts_are_the_same_with_remembered_lines():
    """Assembling twice, and with a template that reads the rank, gives the lines each
    template renders, in order."""
    texts = ["Alpha line.", "Beta\nline with # heading", "Alpha line again."]
    request = AssemblyRequest("anything", budget=500)
    plain = PromptAssembler(None, contributors=[Given(texts)])
    first = plain.assemble(request).text
    assert first == plain.assemble(request).text
    assert "- Alpha line.\n" in first
    ranked = PromptAssembler(None, contributors=[Given(texts)],
                             templates={"item.md.j2": "{{ rank }}. {{ item.text | bullet }}\n"})
    shuffled = PromptAssembler(None, contributors=[Given(list(reversed(texts)))],
                               templates={"item.md.j2": "{{ rank }}. {{ item.text | bullet }}\n"})
    assert "1. Alpha line.\n" in ranked.assemble(request).text
    assert "3. Alpha line.\n" in shuffled.assemble(request).text
