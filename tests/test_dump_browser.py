"""The HTML dump, rendered by headless Chromium: what is on the page after its script ran."""

from __future__ import annotations

import os
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from _assembler_helpers import HOSTILE_VALUES, make_store
from _chromium import CHROMIUM, Browser
from ctxslots import (
    AssemblyRequest,
    ProjectMemoryContributor,
    PromptAssembler,
    UserMemoryContributor,
)

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


def _chromium(tmp_path, width, height, *args):
    proc = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
         "--no-first-run", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--hide-scrollbars", f"--user-data-dir={tmp_path / 'profile'}",
         f"--window-size={width},{height}", *args],
        check=False, capture_output=True, text=True, timeout=120,
    )
    assert 0 == proc.returncode, proc.stderr[-2000:]
    return proc.stdout


def render(path, tmp_path, width=1200):
    """Run headless Chromium on ``path`` and parse the DOM it dumps after the scripts ran."""
    dom = Dom()
    dom.feed(_chromium(tmp_path, width, 900, "--dump-dom", path.as_uri()))
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


def flagged_dump(tmp_path):
    """A real prompt whose sticky user section keeps a fact matching only a word in most facts
    (near-zero BM25) while project facts matching the rare word are dropped for the budget."""
    facts = [("project", "shop", (f"Deploy freeze {i}: no shop deploy during the freeze window "
              "on Fridays.")) for i in range(4)]
    facts += [("project", "shop", f"Deploy note {i}: the shop deploy runs the checklist step {i}.")
              for i in range(8)]
    facts += [("user", None, "The user likes to deploy small changes.")]
    store = make_store(tmp_path / "f.db", facts)
    assembler = PromptAssembler(store, contributors=[
        UserMemoryContributor(store), ProjectMemoryContributor(store, limit=8)])
    prompt = assembler.assemble(AssemblyRequest("deploy freeze", scope="shop", budget=70))
    store.close()
    page = tmp_path / "flagged.html"
    page.write_text(prompt.dump("html"), encoding="utf-8")
    return prompt, page


@pytest.fixture(name="browser")
def fixture_browser(tmp_path):
    """Headless Chromium driven over the DevTools protocol."""
    browser = Browser(tmp_path / "cdp-profile")
    try:
        yield browser
    finally:
        browser.close()


@pytest.mark.parametrize("width", [400, 1280])
def test_html_dump_fits_a_phone_and_a_desktop(tmp_path, browser, width):
    """At 400 and 1280 px the page needs no sideways scrolling, the prompt text and every item's
    text get most of the width, and the whole page is captured as a screenshot."""
    _prompt, page = flagged_dump(tmp_path)
    browser.open(page.as_uri(), width)
    assert "1" == browser.evaluate("document.body.dataset.ready")
    assert width == browser.evaluate("innerWidth")
    assert browser.evaluate("document.documentElement.scrollWidth") <= width
    assert int(browser.evaluate("document.body.dataset.promptWidth")) >= 0.8 * width - 60
    narrowest = int(browser.evaluate("document.body.dataset.narrowestText"))
    assert narrowest >= (0.8 * width - 80 if width < 720 else 200)
    shot = tmp_path / f"dump-{width}.png"
    size = browser.screenshot(shot)
    assert width == size[0] and size[1] > 300
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    keep = os.environ.get("CTXSLOTS_SCREENSHOTS")  # a directory to keep them in, to look at
    if keep:
        shutil.copy(shot, Path(keep) / shot.name)


def test_html_dump_flags_a_kept_item_with_near_zero_relevance(tmp_path):
    """The near-zero user fact kept while relevant project facts were dropped is flagged at the
    top of the page, linked, and its row is marked; nothing else is."""
    prompt, page = flagged_dump(tmp_path)
    dom = render(page, tmp_path)
    summary = dom.find("p", id="flag-summary")
    assert summary and "1" == summary[0]["data-flagged"]
    flagged = dom.find("tr", **{"data-flagged": "1"})
    assert ["item-1-1"] == [row["id"] for row in flagged]
    assert dom.find("a", href="#item-1-1")
    user = next(s for s in prompt.sections if s.name == "user_memory")
    assert user.items[0].kept and any(not d.kept for d in prompt.dropped)


def test_hide_dropped_items_works_by_keyboard_with_scripts_off(tmp_path, browser):
    """Where the page may run no script (a viewer that blocks it), a person reaches the "hide
    dropped items" switch by keyboard, presses Space, and the dropped items go; pressed
    again, they come back. The same holds with scripts on."""
    prompt, page = flagged_dump(tmp_path)
    assert prompt.dropped
    for scripts in (False, True):
        browser.page("Emulation.setScriptExecutionDisabled", value=not scripts)
        browser.open(page.as_uri(), 1280)
        root = browser.page("DOM.getDocument")["root"]["nodeId"]
        switch = browser.page("DOM.querySelector", nodeId=root, selector="#hide-dropped")
        browser.page("DOM.focus", nodeId=switch["nodeId"])
        shown = []
        for _ in range(2):
            for kind in ("keyDown", "keyUp"):
                browser.page("Input.dispatchKeyEvent", type=kind, key=" ", code="Space",
                              windowsVirtualKeyCode=32)
            browser.page("Emulation.setScriptExecutionDisabled", value=False)  # to read it
            assert ("1" if scripts else None) == browser.evaluate("document.body.dataset.ready")
            shown.append(browser.evaluate(
                "[document.getElementById('hide-dropped').checked, [...document.querySelectorAll"
                "('tr.dropped')].filter(row => row.getClientRects().length).length]"))
            browser.page("Emulation.setScriptExecutionDisabled", value=not scripts)
        assert [[True, 0], [False, len(prompt.dropped)]] == shown, scripts
