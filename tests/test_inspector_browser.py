"""The inspector in headless Chromium: filter, open a fact, edit it, run the prompt lab, ask
why-not; at 400 and 1,280 px, with screenshots (set ``CTXSLOTS_SCREENSHOTS`` to a directory
to keep them: docs/images holds the ones docs/inspector.md shows)."""

from __future__ import annotations

import http.server
import os
import shutil
import threading
import time
import urllib.parse
from pathlib import Path

import pytest

from _chromium import CHROMIUM, Browser
from _inspector import HOSTILE, demo_facts, serving
from ctxslots import AssemblyRequest, FactStore, PromptAssembler

pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="headless Chromium is not installed (Debian: apt-get install -y chromium)",
)

MESSAGE = "How do I deploy shop-api on Friday and rerun the flaky billing tests?"
OWNERS = {"scope": "shop-api", "user": "ada", "agent": "coder"}


@pytest.fixture(name="browser")
def fixture_browser(tmp_path):
    """Headless Chromium driven over the DevTools protocol."""
    browser = Browser(tmp_path / "cdp-profile")
    try:
        yield browser
    finally:
        browser.close()


def shoot(browser: Browser, tmp_path: Path, name: str, width: int) -> None:
    """A screenshot of the whole page, checked, and kept where ``CTXSLOTS_SCREENSHOTS`` says."""
    shot = tmp_path / f"inspector-{name}-{width}.png"
    size = browser.screenshot(shot)
    assert width == size[0] and size[1] > 200
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    keep = os.environ.get("CTXSLOTS_SCREENSHOTS")
    if keep:
        shutil.copy(shot, Path(keep) / shot.name)


def no_script_ran(browser: Browser) -> None:
    assert [] == browser.dialogs()
    assert browser.evaluate("typeof window.ran") == "undefined"
    assert 0 == browser.evaluate("document.querySelectorAll('img, script').length")


def fill(form: str, **values: str) -> str:
    """JavaScript that fills the fields of ``form`` and submits it."""
    sets = "".join(f"f.elements[{name!r}].value = {value!r};" for name, value in values.items())
    return f"(() => {{ const f = document.querySelector({form!r}); {sets} f.requestSubmit(); }})()"


def rows(browser: Browser) -> list[int]:
    return browser.evaluate("[...document.querySelectorAll('tr.fact')].map(r => +r.dataset.id)")


def test_filter_open_edit_lab_and_why_not_at_1280(tmp_path, browser):
    """A person filters the memory, opens a fact, edits it, assembles a prompt in the lab,
    follows an item's "why?" and asks why-not for a fact that is missing."""
    db = str(tmp_path / "m.db")
    with FactStore(db) as store:
        ids = demo_facts(store)
    with serving(db) as address:
        browser.open(address, 1280)
        assert sorted(ids.values()) == sorted(rows(browser))
        no_script_ran(browser)
        shoot(browser, tmp_path, "memory", 1280)

        browser.follow(fill("#filters", q="deploys"))
        assert sorted([ids["deploy"], ids["blog"]]) == sorted(rows(browser))
        browser.follow(fill("#filters", q="", user="ada", slot="user"))
        assert [ids["name"]] == rows(browser)

        browser.follow(f"document.querySelector('tr.fact[data-id=\"{ids['name']}\"] a.open')"
                       ".click()")
        assert browser.evaluate("location.pathname") == f"/fact/{ids['name']}"
        browser.follow(fill("#edit", value="The user is called Ada; short answers, please.",
                            tags="style"))
        assert "Done: saved." == browser.evaluate("document.getElementById('done').textContent")
        assert "The user is called Ada; short answers, please." == browser.evaluate(
            "document.getElementById('value').textContent")
        assert "style" == browser.evaluate("document.getElementById('tags').textContent")
        shoot(browser, tmp_path, "fact", 1280)

        browser.follow("document.querySelector('nav a[href=\"/lab\"]').click()")
        browser.follow(fill("#lab", message=MESSAGE, **OWNERS))
        kept = browser.evaluate("[...document.querySelectorAll('tr.item.kept td.text')]"
                                ".map(td => td.textContent)")
        assert any("short answers, please" in text for text in kept)
        assert any("Deploys of shop-api run every Friday" in text for text in kept)
        assert not any("Bob" in text for text in kept)
        shoot(browser, tmp_path, "lab", 1280)

        browser.follow("document.querySelector('a.why').click()")
        assert "kept" == browser.evaluate("document.getElementById('summary').dataset.outcome")
        browser.follow("document.getElementById('back').click()")
        assert MESSAGE == browser.evaluate("document.querySelector('#lab textarea').value")
        browser.follow(fill("#why-not", fact=str(ids["english"])))
        assert "not_found" == browser.evaluate(
            "document.getElementById('summary').dataset.outcome")
        failing = browser.evaluate("[...document.querySelectorAll('#steps li.fails')]"
                                   ".map(li => li.dataset.step)")
        assert ["words"] == failing
        shoot(browser, tmp_path, "why", 1280)
        no_script_ran(browser)
    with FactStore(db) as store:
        assert ("style",) == store.get(ids["name"]).tags
        assert 0 == store.get(ids["deploy"]).access_count  # the lab showed it to no model


def test_every_page_reads_at_400_px_and_shows_markup_as_text(tmp_path, browser):
    """At phone width no page scrolls sideways, each row shows its text first, and a value
    with markup is shown as its text, with no element made and no script run."""
    db = str(tmp_path / "m.db")
    with FactStore(db) as store:
        ids = demo_facts(store)
        # One unbroken word, as a pasted token or hash is: shown in the neighbours' lists.
        long_id = store.add("agent", "Build hash " + "f3a9" * 700 + ".", scope="shop-api").id
    with serving(db) as address:
        base = address.split("/?", 1)[0]
        browser.open(address, 400)  # the token, then the cookie
        lab = "/lab?" + urllib.parse.urlencode({"message": MESSAGE, **OWNERS})
        why = "/why?" + urllib.parse.urlencode({"message": MESSAGE, **OWNERS,
                                                 "fact": ids["english"]})
        for name, path in [("memory", "/"), ("fact", f"/fact/{ids['hostile']}"),
                           ("long", f"/fact/{long_id}"), ("lab", lab), ("why", why),
                           ("health", "/health")]:
            browser.open(base + path, 400)
            assert 400 == browser.evaluate("innerWidth")
            assert browser.evaluate("document.documentElement.scrollWidth") <= 400, name
            no_script_ran(browser)
            shoot(browser, tmp_path, name, 400)
            if name == "memory":
                first_cells = browser.evaluate(
                    "[...document.querySelectorAll('tr.fact')].map(r => "
                    "[...r.children].sort((a, b) => a.getBoundingClientRect().top - "
                    "b.getBoundingClientRect().top)[0].className)")
                assert {"value"} == set(first_cells)
            if name == "fact":
                assert HOSTILE == browser.evaluate("document.getElementById('value').textContent")
            if name == "lab":
                profile_cells(browser)


def profile_cells(browser: Browser) -> None:
    """A profile item (no search trace) shows its text first and no empty value."""
    visible = browser.evaluate(
        "[...document.querySelectorAll('tr.item')].filter(r => r.querySelector('td.decision')"
        ".textContent.includes('(profile)')).map(r => [...r.children].filter(td => "
        "td.getBoundingClientRect().height > 0).sort((a, b) => a.getBoundingClientRect().top"
        " - b.getBoundingClientRect().top).map(td => td.dataset.label || 'text'))")
    assert visible, "no profile item"
    assert all(cells == ["text", "rank", "decision", "tokens"] for cells in visible), visible


def test_the_static_dump_reads_at_400_px(tmp_path, browser):
    """The HTML dump shares the lab's templates: at 400 px a profile item shows its text
    first and none of the six empty values."""
    with FactStore(tmp_path / "d.db") as store:
        demo_facts(store)
        prompt = PromptAssembler(store).assemble(AssemblyRequest(MESSAGE, **OWNERS))
    page = tmp_path / "dump.html"
    page.write_text(prompt.dump("html"), encoding="utf-8")
    browser.open(page.as_uri(), 400)
    assert browser.evaluate("document.documentElement.scrollWidth") <= 400
    profile_cells(browser)
    shoot(browser, tmp_path, "dump", 400)


def test_a_page_on_another_port_cannot_edit_or_delete_through_the_cookie(tmp_path, browser):
    """The person opened the inspector (its cookie is set); a page served on another port of
    127.0.0.1 then submits a delete and an edit form at it. Chromium sends the cookie along
    (cookies ignore ports); the inspector refuses both and the facts are untouched."""
    db = str(tmp_path / "m.db")
    with FactStore(db) as store:
        kept = store.add("project", "Deploys run on Fridays.", scope="shop-api")
        edited = store.upsert("user", "drink", "The user prefers tea.", user="ada")
    with serving(db) as address:
        base = address.split("/?", 1)[0]
        page = (f"<!doctype html><body><iframe name=a></iframe><iframe name=b></iframe>"
                f"<form id=f1 target=a method=post action='{base}/fact/{kept.id}/delete'>"
                f"<input name=confirm value=yes></form>"
                f"<form id=f2 target=b method=post action='{base}/fact/{edited.id}/edit'>"
                f"<input name=value value='Changed by another page.'></form><script>"
                f"window.loaded = 0; for (const f of document.querySelectorAll('iframe'))"
                f" f.onload = () => window.loaded++;"
                f"f1.submit(); f2.submit();</script></body>").encode()

        class Page(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("content-type", "text/html")
                self.send_header("content-length", str(len(page)))
                self.end_headers()
                self.wfile.write(page)

            def log_message(self, *_args: object) -> None:
                pass

        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            browser.open(address, 1280)
            browser.open(f"http://127.0.0.1:{server.server_address[1]}/", 1280)
            answered = threading.Event()
            while not answered.wait(0.05):  # both answers loaded in their frames
                if browser.evaluate("window.loaded") == 2:
                    answered.set()
        finally:
            server.shutdown()
            server.server_close()
    with FactStore(db) as store:
        assert store.get(kept.id) is not None
        assert "The user prefers tea." == store.get(edited.id).value


def test_save_with_nothing_changed_writes_nothing_whatever_the_fact_holds(tmp_path, browser):
    """Chromium sends the untouched edit form of facts with line breaks (LF and CR LF), a
    context beginning with a line break, tags with a comma or spaces at either end and an
    odd confidence: nothing is written, no history entry; a real edit's CR LF is stored LF."""
    db = str(tmp_path / "m.db")
    with FactStore(db) as store:
        facts = [store.add("project", "Deploy steps:\n1. build\n2. ship",
                           context="said in\nthe standup", tags=["release,2024", "ops"]),
                 store.add("project", "a\r\nb\rc", tags=[" lead", "trail "]),
                 store.add("project", "x", context="\nbegins with a line break",
                           confidence=0.123456789)]
    with serving(db) as address:
        base = address.split("/?", 1)[0]
        browser.open(address, 1280)
        for fact in facts:
            browser.open(f"{base}/fact/{fact.id}", 1280)
            browser.follow("document.querySelector('#edit').requestSubmit()")
            assert "Done: nothing changed." == browser.evaluate(
                "document.getElementById('done').textContent")
        browser.open(f"{base}/fact/{facts[0].id}", 1280)
        browser.follow(fill("#edit", value="Deploy steps:\n1. test\n2. ship",
                            tags="release,2024\n ops"))
        assert "Done: saved." == browser.evaluate("document.getElementById('done').textContent")
    with FactStore(db) as store:
        for fact in facts[1:]:
            assert fact == store.get(fact.id)
            assert [] == store.history(fact.id)
        edited = store.get(facts[0].id)
        assert ("Deploy steps:\n1. test\n2. ship", ("release,2024", " ops")) == (
            edited.value, edited.tags)
        assert "said in\nthe standup" == edited.context
        assert [facts[0].value] == [h.value for h in store.history(facts[0].id)]


def test_a_change_made_elsewhere_while_the_page_is_open_is_not_written_over(tmp_path,
                                                                           browser):
    """The fact's page is open in Chromium when another writer changes its value, context
    and tags: Save untouched writes nothing, a new confidence alone writes only it, and a
    new value is refused (409) with what was typed kept, then saved when sent again."""
    db = str(tmp_path / "m.db")
    with FactStore(db) as store:
        fact = store.add("project", "Deploy steps:\r\n1. build", context="\nfrom the standup",
                         tags=[" lead", "ops"])
    with serving(db) as address, FactStore(db) as other:
        base = address.split("/?", 1)[0]
        browser.open(address, 1280)
        browser.open(f"{base}/fact/{fact.id}", 1280)
        other.update(fact.id, value="Deploy steps moved to the wiki.", context="in the retro",
                     tags=["moved"])
        browser.follow("document.querySelector('#edit').requestSubmit()")
        assert "Done: nothing changed." == browser.evaluate(
            "document.getElementById('done').textContent")
        kept = other.get(fact.id)
        assert ("Deploy steps moved to the wiki.", "in the retro", ("moved",), 1.0) == (
            kept.value, kept.context, kept.tags, kept.confidence)
        other.update(fact.id, value="Deploy steps are in the runbook.")
        browser.follow(fill("#edit", confidence="0.6"))
        assert "Done: saved." == browser.evaluate("document.getElementById('done').textContent")
        now = other.get(fact.id)
        assert ("Deploy steps are in the runbook.", 0.6) == (now.value, now.confidence)
        other.update(fact.id, value="Deploy steps: ask Ada.")
        browser.follow(fill("#edit", value="Deploy steps: see the runbook."))
        error = browser.evaluate("document.getElementById('error').textContent")
        assert error.startswith("nothing was saved: the value of fact") and "changed since" in error
        assert "Deploy steps: ask Ada." == other.get(fact.id).value
        assert "Deploy steps: see the runbook." == browser.evaluate(
            "document.querySelector('#edit textarea[name=value]').value")
        assert "0.6" == browser.evaluate("document.querySelector('#edit [name=confidence]').value")
        browser.follow("document.querySelector('#edit').requestSubmit()")
        assert "Done: saved." == browser.evaluate("document.getElementById('done').textContent")
        assert "Deploy steps: see the runbook." == other.get(fact.id).value


def test_long_names_and_unbroken_words_wrap_at_360_and_1280_px(tmp_path, browser):
    """Names as long as the store allows (a 200-character key, scope, user and agent, a
    64-character tag) and a 300-character word in a fact and in a message wrap where they
    stand: no page scrolls sideways at 360 or 1,280 px, and every field of a form is on
    the screen."""
    db = str(tmp_path / "m.db")
    word = "w" * 300
    with FactStore(db) as store:
        keyed = store.upsert("project", "k" * 200, "Deploys run on Friday.", scope="s" * 200).id
        store.add("agent", "Deploy with care.", agent="a" * 200, tags=["t" * 64])
        store.add("user", "The user deploys.", user="u" * 200)
        long_word = store.add("project", f"Deploy hash {word}.").id
    with serving(db) as address:
        base = address.split("/?", 1)[0]
        browser.open(address, 360)
        why = {"message": f"deploy {word}", "scope": "s" * 200, "user": "u" * 200}
        paths = ["/", "/timeline", "/health", f"/fact/{keyed}", "/lab",
                 "/why?" + urllib.parse.urlencode({**why, "fact": long_word}),
                 "/why?" + urllib.parse.urlencode({**why, "fact": keyed})]
        for width in (360, 1280):
            for path in paths:
                browser.open(base + path, width)
                # A phone widens its layout viewport to a page that does not fit.
                laid_out = browser.evaluate("[innerWidth, document.documentElement.scrollWidth]")
                assert max(laid_out) <= width, (path, "wider than the screen", laid_out)
                outside = browser.evaluate(
                    "[...document.querySelectorAll('form input:not([type=hidden]), form "
                    "textarea, form button')].filter(e => e.getBoundingClientRect().right > "
                    "innerWidth).map(e => e.name || e.textContent)")
                assert [] == outside, (width, path)


#: Where each of ``words`` is drawn (left, top, bottom), in the first element ``selector``
#: names that holds them all, in the order the page writes them.
DRAWN = """((selector, words) => {
  for (const el of document.querySelectorAll(selector)) {
    const text = el.textContent; let from = 0; const lefts = [];
    for (const word of words) {
      const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT); let node, seen = 0, hit = null;
      while (!hit && (node = walker.nextNode())) {
        const i = node.data.indexOf(word, Math.max(0, from - seen));
        if (i >= 0 && seen + i >= from) hit = [node, i]; else seen += node.data.length;
      }
      if (!hit) break;
      from = seen + hit[1] + word.length;
      const range = document.createRange(); range.setStart(hit[0], hit[1]);
      range.setEnd(hit[0], hit[1] + word.length);
      const box = range.getBoundingClientRect(); lefts.push([box.left, box.top, box.bottom]);
    }
    if (lefts.length === words.length) return lefts;
  }
  return null; })"""


def in_reading_order(browser: Browser, selector: str, *words: str) -> None:
    """``words``, written in this order in an element ``selector`` names, are drawn in
    this order: each right of the one before on its line, or on a line below it."""
    boxes = browser.evaluate(f"{DRAWN}({selector!r}, {list(words)!r})")
    assert boxes is not None, (selector, words)
    for (word, (left, top, bottom)), (after, (left2, top2, _)) in zip(
            zip(words, boxes), zip(words[1:], boxes[1:])):
        same_line = top2 < bottom
        assert left2 > left if same_line else top2 >= bottom - 1, \
            (selector, f"{after!r} is drawn before {word!r}", boxes)


def test_a_right_to_left_override_stays_inside_its_value(tmp_path, browser):
    """A fact, a tag, an owner and a message holding U+202E (right-to-left override) show
    it inside their own text only: the page's words after them ("user", "budget", the
    item's "why?" link, the next owner or tag) stay in reading order, left to right."""
    db = str(tmp_path / "m.db")
    rlo = "\u202e"
    with FactStore(db) as store:
        fact = store.add("agent", f"Deploy {rlo}with care", agent=f"{rlo}coder",
                         scope="shop-api", tags=[f"{rlo}one", "two"]).id
        store.add("agent", f"Take {rlo}care on deploys", agent=f"{rlo}coder", scope="shop-api",
                  observed_at=time.time() - 3 * 86400)  # a dump shows the day it was said
    with serving(db) as address:
        base = address.split("/?", 1)[0]
        browser.open(address, 1280)
        why = {"message": f"deploy {rlo}care", "agent": f"{rlo}coder", "scope": "shop-api",
               "fact": fact}
        browser.open(f"{base}/why?{urllib.parse.urlencode(why)}", 1280)
        assert "kept" == browser.evaluate("document.getElementById('summary').dataset.outcome")
        in_reading_order(browser, "p.meta", "Message:", "user", "agent", "scope", "budget")

        browser.follow("document.getElementById('back').click()")
        in_reading_order(browser, "tr.item td.text", "with care", "why?")

        browser.open(base + "/", 1280)
        in_reading_order(browser, "td[data-label=owners]", "coder", "/", "shop-api")
        in_reading_order(browser, "td[data-label=tags]", "one", ",", "two")
        browser.open(f"{base}/fact/{fact}", 1280)
        in_reading_order(browser, "#fields dd", "agent", "coder", "scope", "shop-api")
        in_reading_order(browser, "#tags", "one", ",", "two")
    with FactStore(db) as store:
        prompt = PromptAssembler(store).assemble(AssemblyRequest(
            "deploy care", agent=f"{rlo}coder", scope="shop-api"), record_shown=False)
    page = tmp_path / "dump.html"
    page.write_text(prompt.dump("html"), encoding="utf-8")
    browser.open(page.as_uri(), 1280)
    in_reading_order(browser, "tr.item td.text", "deploys", "(")  # the day it was said


def test_the_navigation_tells_a_screen_reader_where_it_is(tmp_path, browser):
    """The navigation link of the page open (Memory for a fact's page, Prompt lab for a why
    page) is marked current for assistive technology (``aria-current``), not by its look
    alone."""
    db = str(tmp_path / "m.db")
    with FactStore(db) as store:
        fact = store.add("project", "Deploys run on Fridays.").id
    with serving(db) as address:
        base = address.split("/?", 1)[0]
        browser.open(address, 1280)
        for path, here in [("/", "Memory"), ("/timeline", "Timeline"), (f"/fact/{fact}", "Memory"),
                           ("/lab", "Prompt lab"), (f"/why?fact={fact}&message=deploy",
                                                    "Prompt lab"), ("/health", "Health")]:
            browser.open(base + path, 1280)
            current = browser.evaluate("[...document.querySelectorAll('nav a')].filter(a => "
                                       "['page', 'true'].includes(a.getAttribute('aria-current')))"
                                       ".map(a => a.textContent)")
            assert [here] == current, path
