"""The HTML dump, rendered by headless Chromium: what is on the page after its script ran."""

from __future__ import annotations

import shutil
import subprocess
from html.parser import HTMLParser

import pytest
from _assembler_helpers import HOSTILE_VALUES, make_store

from ctxslots import (
    AssemblyRequest,
    ProjectMemoryContributor,
    PromptAssembler,
    UserMemoryContributor,
)

CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))
                 if p), None)

pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="headless Chromium is not installed (Debian: apt-get install -y chromium)",
)


class Dom(HTMLParser):
    """The elements of a dumped DOM with their attributes, and the text of each table cell."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.elements = []
        self.cells = []
        self._cell = None

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        self.elements.append((tag, attributes))
        if tag == "td" and "text" in (attributes.get("class") or "").split():
            self._cell = []

    def handle_endtag(self, tag):
        if tag == "td" and self._cell is not None:
            self.cells.append("".join(self._cell))
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)

    def find(self, tag=None, **attrs):
        return [a for t, a in self.elements
                if (tag is None or t == tag) and all(a.get(k) == v for k, v in attrs.items())]


def render(path, tmp_path):
    """Run headless Chromium on ``path`` and parse the DOM it dumps after the scripts ran."""
    proc = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
         "--no-first-run", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1200,900",
         "--dump-dom", path.as_uri()],
        check=False, capture_output=True, text=True, timeout=120,
    )
    assert 0 == proc.returncode, proc.stderr[-2000:]
    dom = Dom()
    dom.feed(proc.stdout)
    return dom


def test_html_dump_renders_in_chromium(tmp_path):
    """Chromium runs the page: counts, budget bars and every value (hostile ones too) are on it."""
    facts = [("project", "shop", f"Deploy step {i}: run the shop deploy checklist.") for i in range(6)]
    facts += [("project", "shop", v) for v in HOSTILE_VALUES[:6]]
    facts += [("user", None, "The user deploys on Fridays only.")]
    store = make_store(tmp_path / "b.db", facts)
    assembler = PromptAssembler(store, contributors=[
        UserMemoryContributor(store), ProjectMemoryContributor(store, limit=8, overfetch=4)])
    prompt = assembler.assemble(AssemblyRequest("deploy shop note", scope="shop", budget=110))
    store.close()
    page = tmp_path / "dump.html"
    page.write_text(prompt.dump("html"), encoding="utf-8")

    dom = render(page, tmp_path)

    assert dom.find("body", **{"data-ready": "1"}), "the page's script did not run"
    kept, dropped = len(prompt.kept), len(prompt.dropped)
    assert kept and dropped
    assert dom.find("span", id="counts", **{"data-counted": f"{kept}/{dropped}"})
    assert kept == len(dom.find("tr", **{"data-decision": "kept"}))
    assert {"budget", "slot_limit"} <= {a["data-reason"] for a in dom.find("tr")
                                        if a.get("data-decision") == "dropped"}
    total_width = int(dom.find(id="budget-bar")[0]["data-rendered-width"])
    segments = dom.find("div", **{"class": "seg"})
    assert [s.name for s in prompt.sections if s.status == "kept"] == \
        [s["data-section"] for s in segments]
    widths = [int(s["data-rendered-width"]) for s in segments]
    assert all(w > 0 for w in widths) and sum(widths) <= total_width
    inner = total_width - 2  # the bar's 1px border on each side
    for section, width in zip((s for s in prompt.sections if s.status == "kept"), widths):
        assert abs(width - inner * section.tokens / prompt.available) <= 1.5
    section_fills = [int(a["data-rendered-width"]) for a in dom.find("div", **{"class": "fill"})]
    assert [w > 0 for w in section_fills] == [s.status == "kept" for s in prompt.sections]
    shown = {d.item.text for d in prompt.kept + prompt.dropped}
    assert shown == set(dom.cells)
    assert 1 == len(dom.find("script")) and not dom.find("img")
