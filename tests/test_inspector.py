"""The inspector over real HTTP: a real ``ctxslots ui`` process on 127.0.0.1, on each engine,
spoken to by httpx (the browser's own tests are in test_inspector_browser.py)."""

from __future__ import annotations

import concurrent.futures
import contextlib
import datetime as dt
import html
import re
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import Iterator

import anyio
import apsw
import attrs
import httpx
import pytest
from click.testing import CliRunner

from _assembler_helpers import HOSTILE_VALUES
from _damage import damage_the_facts_table
from _inspector import HOSTILE, TOKEN, demo_facts, serving
from _lock_holders import SQLiteHolder, inside_a_sqlite_write
from _sql import rows_read
from ctxslots import (
    AssemblyRequest,
    BudgetExceededError,
    FactStore,
    InvalidArgumentError,
    PromptAssembler,
)
from ctxslots.cli import cli
from ctxslots.inspector import explain
from ctxslots.inspector.app import bind, create_app, serve

MESSAGE = "How do I deploy shop-api on Friday and rerun the flaky billing tests?"


def base_of(address: str) -> str:
    return address.split("/?", 1)[0]


@contextlib.contextmanager
def served_here(store: FactStore) -> Iterator[str]:
    """The inspector of ``store`` served by uvicorn on a thread of this process (where a
    test can watch the store's reads and threads); yields its address, once it answers."""
    import uvicorn

    sock = bind("127.0.0.1", 0)
    server = uvicorn.Server(uvicorn.Config(create_app(store, token=TOKEN),
                                           log_level="warning", lifespan="off"))
    serving_thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]})
    serving_thread.start()
    try:
        while not server.started and serving_thread.is_alive():
            time.sleep(0.01)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        serving_thread.join(60)


@pytest.fixture(name="served")
def fixture_served(location):
    """The demo's facts in a store of each engine, and a client logged in to its inspector."""
    with FactStore(location) as store:
        ids = demo_facts(store)
    with serving(location) as address, httpx.Client(timeout=60) as client:
        first = client.get(address)
        assert 200 == first.status_code
        yield client, base_of(address), ids, location


@attrs.frozen
class _OneFact:
    """A served store holding one project fact, and a client that has no cookie yet."""

    db: str
    fact: int
    address: str
    base: str
    port: int
    client: httpx.Client


@pytest.fixture(name="one_fact")
def fixture_one_fact(tmp_path):
    """The inspector of a store holding one project fact, and a fresh client."""
    db = str(tmp_path / "m.db")
    with FactStore(db) as store:
        fact = store.add("project", "Deploy on Fridays.").id
    with serving(db) as address, httpx.Client(timeout=60) as client:
        base = base_of(address)
        yield _OneFact(db, fact, address, base, int(urllib.parse.urlsplit(base).port or 0),
                       client)


def test_no_token_a_foreign_origin_or_host_gets_403(one_fact):
    """Without the token, with a wrong one, from another site's page (Origin) or through a
    name another site controls (Host, DNS rebinding), every page and action is refused."""
    db, fact, address, base, port = (one_fact.db, one_fact.fact, one_fact.address,
                                     one_fact.base, one_fact.port)
    client = one_fact.client
    for path in ("/", f"/fact/{fact}", "/lab?message=deploy", "/health", "/timeline"):
        assert 403 == client.get(base + path).status_code, path
        assert 403 == client.get(base + path + ("&" if "?" in path else "?")
                                 + "token=wrong-token-0123456789").status_code
    assert 403 == client.post(f"{base}/fact/{fact}/delete").status_code
    good = client.get(address)
    assert 200 == good.status_code
    assert "HttpOnly" in good.headers["set-cookie"]
    assert "SameSite=Strict" in good.headers["set-cookie"]
    assert 200 == client.get(base + "/health").status_code  # the cookie now
    evil = client.post(f"{base}/fact/{fact}/delete", headers={"origin": "http://evil.test"})
    assert 403 == evil.status_code and "Origin" in evil.text
    rebound = client.get(address, headers={"host": f"evil.test:{port}"})
    assert 403 == rebound.status_code and "Host" in rebound.text
    assert 403 == client.get(address, headers={"origin": "null"}).status_code
    same = client.post(f"{base}/fact/{fact}/reinforce", headers={"origin": base})
    assert 303 == same.status_code
    with FactStore(db) as store:
        assert store.get(fact) is not None and 3 == store.get(fact).score


def test_stored_markup_is_shown_as_text_and_no_script_may_run(tmp_path):
    """Values with markup (every hostile value of the dump's tests) appear escaped on the
    memory list, the fact page, the prompt lab and the why page; every page forbids scripts."""
    db = str(tmp_path / "m.db")
    with FactStore(db) as store:
        ids = [store.add("project", v, scope="s").id for v in (HOSTILE, *HOSTILE_VALUES)]
        store.upsert("user", "name", HOSTILE)
    with serving(db) as address, httpx.Client(timeout=60) as client:
        base = base_of(address)
        pages = [client.get(address), client.get(f"{base}/fact/{ids[0]}"),
                 client.get(f"{base}/lab", params={"message": "deploy note ada", "scope": "s",
                                                   "budget": 4000}),
                 client.get(f"{base}/why", params={"fact": ids[0], "message": "ada note",
                                                   "scope": "s"}),
                 client.get(f"{base}/?q=%3Cscript%3E"), client.get(f"{base}/timeline")]
        for page in pages:
            assert 200 == page.status_code, page.url
            csp = page.headers["content-security-policy"]
            assert "default-src 'none'" in csp and "script" not in csp
            assert "<script" not in page.text.lower(), page.url
            assert "<img" not in page.text.lower(), page.url  # the pages have no image
        shown = re.search(r'id="value">(.*?)</dd>', pages[1].text, re.DOTALL).group(1)
        assert "<" not in shown and HOSTILE == html.unescape(shown)
        assert "&lt;script&gt;" in pages[2].text and "&lt;script&gt;" in pages[4].text


def test_filters_select_by_owner_scope_slot_tag_and_text(served):
    """Each filter narrows the memory list; blank owners mean every user and agent."""
    client, base, ids, _ = served

    def listed(**params):
        page = client.get(base + "/", params=params)
        assert 200 == page.status_code
        return {int(i) for i in re.findall(r'<tr class="fact" data-id="(\d+)"', page.text)}

    assert set(ids.values()) == listed()
    assert {ids["name"]} == listed(slot="user", user="ada")
    assert {ids["bob"]} == listed(slot="user", user="bob")
    assert {ids["flaky"], ids["english"]} == listed(slot="agent", agent="coder")
    assert {ids["deploy"]} == listed(tag="release")
    assert {ids["deploy"], ids["blog"]} == listed(q="DEPLOYS")
    assert {ids["blog"]} == listed(scope="blog", slot="project")
    bad = client.get(base + "/", params={"slot": "no such slot!"})
    assert 400 == bad.status_code and 'id="error"' in bad.text


def test_the_text_filter_folds_case_and_accents_as_search_does(tmp_path):
    """``q=istanbul`` finds İstanbul and ``q=munchen`` München, as a search would."""
    location = str(tmp_path / "m.db")
    with FactStore(location) as store:
        trip = store.add("user", "Ada flies from İstanbul to München.").id
        store.add("user", "Ada stays home.")
    with serving(location) as address, httpx.Client(timeout=60) as client:
        assert 200 == client.get(address).status_code
        for needle in ("istanbul", "MUNCHEN", "İstanbul"):
            page = client.get(base_of(address) + "/", params={"q": needle})
            assert [trip] == [int(i) for i in re.findall(
                r'<tr class="fact" data-id="(\d+)"', page.text)], needle


def test_edit_forget_reinforce_demote_delete_with_the_library_checks(served):
    """Each action goes through the store: a malformed value is refused with the store's
    error, the typed values kept and the fact unchanged; the others change it."""
    client, base, ids, location = served
    fact = ids["deploy"]
    edit = f"{base}/fact/{fact}/edit"
    for form, said in [({"value": "", "tags": "", "confidence": "1"}, "value"),
                       ({"value": "x" * 200_000, "tags": "", "confidence": "1"}, "value"),
                       ({"value": "Deploys on Mondays.", "tags": "", "confidence": "lots"},
                        "confidence"),
                       ({"value": "Deploys on Mondays.", "tags": "", "confidence": "7"},
                        "confidence")]:
        page = client.post(edit, data=form)
        assert 400 == page.status_code, form
        error = re.search(r'id="error">([^<]*)<', page.text).group(1)
        assert said in error
        if len(form["value"]) < 100:
            assert html.escape(form["value"]) in page.text  # what was typed is kept
    with FactStore(location) as store:
        assert store.get(fact).value.startswith("Deploys of shop-api")
    done = client.post(edit, data={"value": "Deploys of shop-api run on Mondays.",
                                   "tags": "release\r\nweekly", "confidence": "0.8",
                                   "context": "said in the retro"}, follow_redirects=True)
    assert 200 == done.status_code and "Done: saved" in done.text
    assert 'id="value">Deploys of shop-api run on Mondays.<' in done.text
    assert "Deploys of shop-api run every Friday" in done.text  # now in its history
    assert 303 == client.post(f"{base}/fact/{fact}/reinforce", data={"amount": "2"}).status_code
    assert 303 == client.post(f"{base}/fact/{fact}/demote", data={"amount": "0.5"}).status_code
    refused = client.post(f"{base}/fact/{fact}/reinforce", data={"amount": "-4"})
    assert 400 == refused.status_code
    with FactStore(location) as store:
        now = store.get(fact)
        assert ("release", "weekly") == now.tags and 0.8 == now.confidence
        assert 1.5 == now.score and "said in the retro" == now.context
    assert 303 == client.post(f"{base}/fact/{ids['blog']}/forget",
                              data={"reason": "moved"}).status_code
    unsure = client.post(f"{base}/fact/{ids['tests']}/delete")
    assert 400 == unsure.status_code and "nothing was deleted" in unsure.text
    assert 303 == client.post(f"{base}/fact/{ids['tests']}/delete",
                              data={"confirm": "yes"}).status_code
    assert 404 == client.post(f"{base}/fact/{ids['tests']}/reinforce").status_code
    assert 404 == client.post(f"{base}/fact/{fact}/explode").status_code
    assert 404 == client.get(f"{base}/fact/999999").status_code
    assert 404 == client.get(f"{base}/fact/abc").status_code
    with FactStore(location) as store:
        assert store.get(ids["blog"]) is None
        assert store.get(ids["blog"], include_archive=True).archived
        assert store.get(ids["tests"], include_archive=True) is None


def test_a_form_sent_as_shown_keeps_what_another_writer_stored_since(served):
    """The edit form as the page showed it, sent after another writer changed the fact:
    nothing is written over the change; a field changed on both sides is a 409."""
    client, base, ids, location = served
    fact = ids["deploy"]
    page = client.get(f"{base}/fact/{fact}").text
    form = {name: html.unescape(value) for name, value in re.findall(
        r'<(?:textarea|input type="hidden") name="(\w+)"(?: rows="\d+">\n| value=")(.*?)'
        r'(?:</textarea>|">)', page, re.DOTALL)}
    form["confidence"] = "1.0"
    with FactStore(location) as other:
        other.update(fact, value="Deploys of shop-api run on Thursdays.", tags=["moved"])
    sent = client.post(f"{base}/fact/{fact}/edit", data=form)
    assert 303 == sent.status_code and "nothing+changed" in sent.headers["location"]
    refused = client.post(f"{base}/fact/{fact}/edit", data={**form, "value": "Mondays."})
    assert 409 == refused.status_code and "the value of fact" in refused.text
    assert "Mondays.</textarea>" in refused.text
    with FactStore(location) as other:
        now = other.get(fact)
        assert ("Deploys of shop-api run on Thursdays.", ("moved",)) == (now.value, now.tags)


def test_the_prompt_lab_and_why_not(served):
    """The lab assembles the prompt for a message and owners, links each found fact to its
    explanation, and the why page says what :func:`explain` says; nothing counts as shown."""
    client, base, ids, location = served
    params = {"message": MESSAGE, "scope": "shop-api", "user": "ada", "agent": "coder",
              "budget": "2000"}
    lab = client.get(base + "/lab", params=params)
    assert 200 == lab.status_code
    assert "Deploys of shop-api run every Friday" in lab.text
    assert "The user is called Ada" in lab.text and "Bob" not in lab.text
    links = re.findall(r'<a class="why" href="([^"]+)"', lab.text)
    assert links and all("fact=" in link for link in links)
    why = client.get(base + html.unescape(links[0]))
    assert 200 == why.status_code and 'data-outcome="kept"' in why.text
    missing = client.get(base + "/why", params={**params, "fact": ids["english"]})
    with FactStore(location) as store:
        expected = explain(PromptAssembler(store), AssemblyRequest(
            MESSAGE, scope="shop-api", user="ada", agent="coder", budget=2000), ids["english"])
        assert 0 == store.get(ids["deploy"]).access_count
    summary = re.search(r'id="summary" data-outcome="([a-z_]+)">([^<]*)<', missing.text)
    assert (expected.outcome, expected.summary) == (summary.group(1),
                                                    html.unescape(summary.group(2)))
    assert expected.outcome == "not_found"
    other = client.get(base + "/why", params={**params, "user": "bob", "fact": ids["name"]})
    assert "it is the memory of user &#39;ada&#39;" in other.text
    for bad, said, status in [({"fact": "x"}, "whole number", 400),
                              ({"fact": "99999"}, "no fact", 404),
                              ({"fact": ids["deploy"], "budget": "-5"}, "budget", 400)]:
        page = client.get(base + "/why", params={**params, **bad})
        assert status == page.status_code and said in page.text, bad
    bad_lab = client.get(base + "/lab", params={**params, "budget": "lots"})
    assert 400 == bad_lab.status_code and 'id="error"' in bad_lab.text
    assert 200 == client.get(base + "/lab").status_code  # the empty form


def test_the_lab_assembles_a_blank_message_as_the_command_does(served):
    """A lab form sent with a blank message showed the form again and nothing else, where
    ``ctxslots assemble ""`` prints the prompt of what is shown without a message: the
    lab now assembles the same prompt and says it had no message."""
    client, base, _, location = served
    cli_text = CliRunner().invoke(cli, ["--db", location, "assemble", "", "--user", "ada"],
                                  catch_exceptions=False).output
    assert "The user is called Ada" in cli_text
    lab = client.get(base + "/lab", params={"message": "", "user": "ada", "budget": "2000"})
    assert 200 == lab.status_code
    assert 'id="no-message"' in lab.text
    shown = re.search(r'<pre class="prompt" id="prompt-text">(.*?)</pre>', lab.text, re.DOTALL)
    assert shown is not None
    assert cli_text.rstrip("\n") == html.unescape(shown.group(1)).rstrip("\n")
    opened = client.get(base + "/lab", params={"user": "ada"})  # no form sent: none
    assert 200 == opened.status_code and 'id="prompt-text"' not in opened.text


def test_the_lab_and_why_take_a_safety_margin_and_an_answer_reserve(served):
    """A prompt assembled with a safety margin and an answer reserve, as ``ctxslots
    assemble`` takes them: the lab shows what they leave, its links keep them, and the why
    page explains that prompt, a fact the reserve dropped as dropped."""
    client, base, _, location = served
    params = {"message": MESSAGE, "scope": "shop-api", "user": "ada", "agent": "coder",
              "budget": "2000"}
    with FactStore(location) as store:
        assembler = PromptAssembler(store)
        full = assembler.assemble(AssemblyRequest(
            MESSAGE, scope="shop-api", user="ada", agent="coder"), record_shown=False)
        request = AssemblyRequest(MESSAGE, scope="shop-api", user="ada", agent="coder",
                                  safety_margin=10, answer_reserve=1991 - full.total_tokens)
        short = assembler.assemble(request, record_shown=False)
        lost = [d.item.fact.id for d in full.kept if d.item.fact is not None
                and d.item.fact.id not in {k.item.fact.id for k in short.kept if k.item.fact}]
        assert lost
        expected = explain(assembler, request, lost[0])
    assert "dropped" == expected.outcome
    params |= {"safety_margin": "10", "answer_reserve": str(request.answer_reserve)}
    lab = client.get(base + "/lab", params=params)
    assert 200 == lab.status_code
    assert f"tokens used of the {request.available} available" in lab.text
    links = [html.unescape(link) for link in re.findall(r'<a class="why" href="([^"]+)"',
                                                         lab.text)]
    assert links and all(f"answer_reserve={request.answer_reserve}" in link
                         and "safety_margin=10" in link for link in links)
    why = client.get(base + "/why", params={**params, "fact": lost[0]})
    summary = re.search(r'id="summary" data-outcome="([a-z_]+)">([^<]*)<', why.text)
    assert (expected.outcome, expected.summary) == (summary.group(1),
                                                    html.unescape(summary.group(2)))
    assert f"answer reserve <bdi>{request.answer_reserve}</bdi>" in why.text


def test_the_lab_says_when_the_sticky_sections_did_not_fit(served):
    """A budget the sticky user section does not fit: assembling raises, and the lab, which
    shows the prompt that fitted, says the sticky sections did not fit, as the dumps do;
    a budget they fit says nothing of it."""
    client, base, _, location = served
    message = "Does Ada want short answers?"
    params = {"message": message, "scope": "shop-api", "user": "ada", "agent": "coder"}
    with FactStore(location) as store:
        with pytest.raises(BudgetExceededError) as raised:
            PromptAssembler(store).assemble(AssemblyRequest(
                message, scope="shop-api", user="ada", agent="coder", budget=3),
                record_shown=False)
    assert raised.value.prompt.sticky_overflow
    lab = client.get(base + "/lab", params={**params, "budget": "3"})
    assert 200 == lab.status_code
    assert re.search(r'<p class="error" id="overflow">The sticky sections did not fit into '
                     r"the budget: assembling for it raises BudgetExceededError", lab.text)
    assert "The sticky sections did not fit" in raised.value.prompt.dump("html")
    fits = client.get(base + "/lab", params={**params, "budget": "2000"})
    assert 200 == fits.status_code and 'id="overflow"' not in fits.text


def test_health_shows_the_doctor_report(served):
    """The health page shows the doctor's verdict and the counts per slot and owner."""
    client, base, _, _ = served
    page = client.get(base + "/health")
    assert 200 == page.status_code and 'data-ok="1"' in page.text
    assert re.search(r'<p id="counts">\d+ live, 0 expired', page.text)


def test_it_never_binds_beyond_loopback_without_host_and_token(tmp_path):
    """The default address is 127.0.0.1; another address needs --host and a token of one's
    own, and a malformed token is refused, each in one line."""
    db = str(tmp_path / "m.db")
    FactStore(db).close()
    runner = CliRunner()
    result = runner.invoke(cli, ["--db", db, "ui", "--host", "0.0.0.0"], env={
        "CTXSLOTS_UI_TOKEN": None})
    assert 2 == result.exit_code
    assert "not loopback) needs --token" in result.output
    with FactStore(db) as store:
        with pytest.raises(InvalidArgumentError, match="not loopback"):
            anyio.run(lambda: serve(store, host="0.0.0.0", token=TOKEN))
        with pytest.raises(InvalidArgumentError, match="16 or more"):
            create_app(store, token="short")
        with pytest.raises(InvalidArgumentError, match="16 or more"):
            create_app(store, token="a token; with=spaces")
    proc = subprocess.run([sys.executable, "-m", "ctxslots", "--db", db, "ui", "--port", "0",
                           "--token", "short"], capture_output=True, text=True, timeout=120,
                          check=False)
    assert 1 == proc.returncode
    assert ["Error: the token must be 16 or more letters, digits, '-' or '_'"] == \
        proc.stderr.splitlines()
    with serving(db) as address:
        assert address.startswith("http://127.0.0.1:")


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals stop a program")
@pytest.mark.parametrize(("sent", "status", "said"), [
    ("SIGINT", 130, "interrupted (Ctrl-C)"), ("SIGTERM", 143, "stopped (SIGTERM)")])
def test_ctrl_c_stops_the_inspector_with_one_line_and_status_130(tmp_path, sent, status, said):
    """Ctrl-C (SIGINT) stops ``ctxslots ui`` as it stops every command: the port released,
    one line, exit status 130; it exited 0 and said nothing, as if it had ended by itself.
    SIGTERM (a service manager's stop) the same way, with 143; it died by the signal."""
    import signal
    import socket

    db = str(tmp_path / "m.db")
    with FactStore(db) as store:
        store.add("agent", "A lesson from before the inspector ran.")
    # Started with SIGINT handled, as a terminal starts it (a test runner's worker may
    # have it ignored, which a child inherits).
    ignored = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        proc = subprocess.Popen([sys.executable, "-m", "ctxslots", "--db", db, "ui", "--port",
                                 "0", "--token", TOKEN], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
    finally:
        signal.signal(signal.SIGINT, ignored)
    try:
        assert proc.stderr is not None and proc.stdout is not None
        line = proc.stderr.readline()
        assert line.startswith("Inspector at http://127.0.0.1:"), line + proc.stderr.read()
        address = line.split(" at ", 1)[1].strip()
        port = urllib.parse.urlsplit(address).port
        assert 200 == httpx.get(address).status_code  # serving, before the signal
        proc.send_signal(getattr(signal, sent))
        assert status == proc.wait(timeout=120)
        assert [f"Error: {said}"] == proc.stderr.read().splitlines()
        assert "" == proc.stdout.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    with socket.socket() as free:
        free.bind(("127.0.0.1", port))  # nothing listens there any more
    with FactStore(db) as store:
        assert ["A lesson from before the inspector ran."] == [f.value for f in store.facts()]


@pytest.mark.parametrize(("args", "variable"), [([], ""), ([], "  "), (["--token", ""], None)])
def test_an_empty_token_is_refused_rather_than_replaced_by_a_random_one(tmp_path, args,
                                                                      variable):
    """$CTXSLOTS_UI_TOKEN set but empty (an unset ${TOKEN} in a unit file), or an empty
    --token, served on loopback with a new random token each start instead of the one
    meant; it is refused in one line, as the MCP server's token variables are, before the
    store is opened (so a store that cannot be opened still gets this answer, and a
    regression fails here rather than serving)."""
    db = str(tmp_path / "missing" / "m.db")
    result = CliRunner().invoke(cli, ["--db", db, "ui", "--port", "0", *args],
                                env={"CTXSLOTS_UI_TOKEN": variable})
    assert 2 == result.exit_code
    assert "Error: the inspector's token (--token or $CTXSLOTS_UI_TOKEN) is empty: give a " \
        "secret, or leave both out for a random one" in result.output
    assert "Traceback" not in result.output


def test_a_name_given_with_allow_host_is_accepted(tmp_path):
    """A name the browser reaches the server by (a proxy's, a DNS name) passes the Host and
    Origin checks once given with --allow-host; another name still gets 403."""
    db = str(tmp_path / "m.db")
    FactStore(db).close()
    with serving(db, "--allow-host", "inspector.test") as address, \
            httpx.Client(timeout=60) as client:
        port = urllib.parse.urlsplit(address).port
        ours = {"host": f"inspector.test:{port}", "origin": f"http://inspector.test:{port}"}
        assert 200 == client.get(address, headers=ours).status_code
        theirs = {"host": f"other.test:{port}"}
        assert 403 == client.get(address, headers=theirs).status_code


def test_a_page_on_another_port_of_this_host_cannot_change_anything(one_fact):
    """Cookies ignore ports, so a page served on another port of 127.0.0.1 would send the
    inspector's cookie: a change naming that page's origin, or that a browser says another
    page sent (Sec-Fetch-Site), gets 403; the inspector's own origin and a typed address pass."""
    client, base, port, fact = one_fact.client, one_fact.base, one_fact.port, one_fact.fact
    assert 200 == client.get(one_fact.address).status_code  # the cookie
    refused = {
        "origin on another port": {"origin": f"http://127.0.0.1:{port + 1}"},
        "origin without a port": {"origin": "http://127.0.0.1"},
        "another page of this site": {"origin": base, "sec-fetch-site": "same-site"},
        "another site": {"sec-fetch-site": "cross-site"},
    }
    got = {name: client.post(f"{base}/fact/{fact}/delete", headers=headers).status_code
           for name, headers in refused.items()}
    assert dict.fromkeys(refused, 403) == got
    assert 200 == client.get(base + "/", headers={"sec-fetch-site": "cross-site"}).status_code
    own = client.post(f"{base}/fact/{fact}/reinforce",
                      headers={"origin": base, "sec-fetch-site": "same-origin"})
    assert 303 == own.status_code
    with FactStore(one_fact.db) as store:
        assert 3 == store.get(fact).score


def test_an_id_no_fact_can_have_is_a_404_not_a_server_error(one_fact):
    """An id past 64 bits, on a page or an action, answers 404 naming what an id is."""
    client, base = one_fact.client, one_fact.base
    assert 200 == client.get(one_fact.address).status_code
    huge = "9" * 23
    for answer in (client.get(f"{base}/fact/{huge}"),
                   client.post(f"{base}/fact/{huge}/forget", headers={"origin": base}),
                   client.get(f"{base}/fact/-{huge}")):
        assert 404 == answer.status_code
        assert "fits in 64 bits" in answer.text
    assert 404 == client.get(f"{base}/fact/-5").status_code
    with FactStore(one_fact.db) as store:
        assert store.get(one_fact.fact) is not None


def test_an_address_no_page_answers_gets_the_inspectors_own_page(one_fact):
    """A mistyped address (404) and a form's address opened as a page (405) answer with an
    HTML page in English, with the navigation and the inspector's headers, and say what
    went wrong; the 405 keeps its Allow header."""
    client, base = one_fact.client, one_fact.base
    assert 200 == client.get(one_fact.address).status_code
    for path, status, said in [("/nope", 404, "no page at /nope"),
                               (f"/fact/{one_fact.fact}/edit", 405,
                                f"/fact/{one_fact.fact}/edit takes the form on a fact's page"),
                               ("/health", 405, "/health does not take a POST request")]:
        answer = (client.post(base + path, headers={"origin": base}) if path == "/health"
                  else client.get(base + path))
        assert status == answer.status_code, path
        assert answer.headers["content-type"].startswith("text/html"), path
        assert "default-src 'none'" in answer.headers["content-security-policy"]
        assert '<html lang="en">' in answer.text and '<a href="/timeline"' in answer.text
        assert said in html.unescape(re.search(r'id="error">([^<]*)<', answer.text)[1])
    assert "POST" in client.get(f"{base}/fact/{one_fact.fact}/edit").headers["allow"]


def test_why_refuses_an_id_past_64_bits_naming_the_range(one_fact):
    """Why-not for an id past 64 bits, either way, is a 400 whose message names the whole
    range of ids: a negative one is not told it must be "at most" a larger number."""
    client, base = one_fact.client, one_fact.base
    assert 200 == client.get(one_fact.address).status_code
    for fact in ("9" * 23, "-" + "9" * 23):
        answer = client.get(f"{base}/why", params={"fact": fact, "message": "deploy"})
        assert 400 == answer.status_code
        error = html.unescape(re.search(r'id="error">([^<]*)<', answer.text)[1])
        assert f"fact id {fact} is out of range (-{2**63} to {2**63 - 1})" == error


def test_the_why_page_links_only_to_a_fact_that_exists(one_fact):
    """The why page's heading links to the fact's page when the fact exists; for an id
    that is no number or names no fact it links nowhere (no link to a 404)."""
    client, base = one_fact.client, one_fact.base
    assert 200 == client.get(one_fact.address).status_code
    for fact, linked in [(str(one_fact.fact), True), ("abc", False), ("999", False),
                         ("", False), (f" {one_fact.fact}", True)]:
        page = client.get(f"{base}/why", params={"fact": fact, "message": "deploy"})
        # A fact that does not exist is a 404, as its own page; an id that is no number
        # (or none) is a request the page cannot read: 400.
        assert {True: 200, "999": 404}.get(linked if linked else fact, 400) == \
            page.status_code, fact
        heading = re.search(r"<h1>(.*?)</h1>", page.text, re.DOTALL)[1]
        links = re.findall(r'href="([^"]*)"', heading)
        assert ([f"/fact/{one_fact.fact}"] if linked else []) == links, fact
        for link in links:
            assert 200 == client.get(base + link).status_code


def test_every_fact_is_reached_a_page_at_a_time(tmp_path):
    """650 facts: the memory page shows 300 at a time, newest first; older and newer links
    keep the filters; the last page holds the first fact; a page past the end is a 404."""
    db = str(tmp_path / "m.db")
    with FactStore(db) as store, store.batch():
        ids = [store.add("agent", f"Lesson number {n} about deploys.").id for n in range(650)]
    with serving(db) as address, httpx.Client(timeout=60) as client:
        base = base_of(address)
        assert 200 == client.get(address).status_code

        def listed(page: httpx.Response) -> list[int]:
            return [int(n) for n in re.findall(r'<tr class="fact" data-id="(\d+)"', page.text)]

        first = client.get(f"{base}/?slot=agent")
        assert "650 facts, 1 to 300 shown (page 1 of 3)" in html.unescape(first.text)
        assert sorted(ids, reverse=True)[:300] == listed(first)
        older = re.search(r'<a href="([^"]+)" id="older">', first.text)
        assert older is not None and "slot=agent" in html.unescape(older[1])
        last = client.get(f"{base}/{html.unescape(older[1])}".replace("page=2", "page=3"))
        assert sorted(ids, reverse=True)[600:] == listed(last) and ids[0] in listed(last)
        assert 'id="newer"' in last.text and 'id="older"' not in last.text
        for bad in ("4", "0", "x"):
            assert 404 == client.get(f"{base}/?page={bad}").status_code
        assert 200 == client.get(f"{base}/timeline?page=3").status_code


def test_a_memory_or_timeline_page_reads_one_page_of_facts_not_the_store(tmp_path):
    """1,000 facts: the memory page and the timeline, unfiltered, by owner or far back,
    take from the store the 300 facts they show (and a count), not every fact; with a
    text to look for, the page still finds it in every fact."""
    db = str(tmp_path / "m.db")
    with FactStore(db) as store, store.batch():
        ids = [store.add("user", f"Note {n} of the user.", user=f"u{n % 4}").id
               for n in range(1000)]
    with rows_read() as read, FactStore(db) as store, served_here(store) as base, \
            httpx.Client(timeout=120) as client:
        assert 200 == client.get(f"{base}/fact/{ids[0]}?token={TOKEN}").status_code
        for path, matched, first in [("/", 1000, ids[-1]), ("/?page=4", 1000, ids[99]),
                                     ("/timeline?page=2", 1000, ids[-301]),
                                     ("/?user=u1", 250, ids[-3])]:
            read.clear()
            page = client.get(base + path)
            assert 200 == page.status_code, path
            assert f'data-matched="{matched}"' in page.text, path
            shown = [int(n) for n in re.findall(r'data-id="(\d+)"', page.text)]
            assert first == shown[0], path
            # The page, the count, and (by when said) whether a fact lacks its observed
            # time.
            assert read.get("facts", 0) <= 302, (path, read)
        found = client.get(base + "/", params={"q": "note 7 of"})
        assert [ids[7]] == [int(n) for n in re.findall(r'data-id="(\d+)"', found.text)]


def test_the_tag_filter_finds_a_tag_as_stored(location):
    """A tag holding a comma, or beginning with a space, is found by the tag filter as the
    store keeps it, and the edit form lists the tags one per line."""
    with FactStore(location) as store:
        comma = store.add("project", "The release checklist.", tags=["release,2024", "ops"]).id
        spaced = store.add("project", "A tag with a space first.", tags=[" lead"]).id
    with serving(location) as address, httpx.Client(timeout=60) as client:
        base = base_of(address)
        assert 200 == client.get(address).status_code
        for tag, expected in [("release,2024", [comma]), (" lead", [spaced]), ("lead", [])]:
            page = client.get(base + "/", params={"tag": tag})
            assert expected == [int(i) for i in re.findall(r'data-id="(\d+)"', page.text)], tag
        form = client.get(f"{base}/fact/{comma}").text
        assert '<textarea name="tags" rows="2">\nrelease,2024\nops</textarea>' in form


def test_the_owner_filters_and_the_lab_name_an_owner_as_stored(location):
    """A user named with a trailing space is another user than the one without: the
    memory filter lists that user's facts, and the lab a fact page links to assembles
    that user's prompt, never the other's."""
    with FactStore(location) as store:
        plain = store.upsert("user", "editor", "Ana uses Helix.", user="Ana").id
        spaced = store.upsert("user", "editor", "The other Ana uses Emacs.", user="Ana ").id
    with serving(location) as address, httpx.Client(timeout=60) as client:
        base = base_of(address)
        assert 200 == client.get(address).status_code
        for user, expected in [("Ana ", [spaced]), ("Ana", [plain])]:
            page = client.get(base + "/", params={"user": user})
            assert expected == [int(i) for i in re.findall(r'data-id="(\d+)"', page.text)]
        fact = client.get(f"{base}/fact/{spaced}").text
        lab_link = html.unescape(re.search(r'href="([^"]+)" id="try"', fact).group(1))
        assert lab_link.endswith("user=Ana%20")
        lab = client.get(base + lab_link + "&message=Which+editor%3F")
        assert 200 == lab.status_code
        assert "The other Ana uses Emacs." in lab.text and "Helix" not in lab.text


def test_the_health_page_counts_live_facts_apart_from_expired_ones(tmp_path):
    """One live fact and one that has expired: the health page says 1 live, 1 expired."""
    db = str(tmp_path / "m.db")
    with FactStore(db) as store:
        store.add("project", "Still true.")
    # Written by a clock an hour behind, to expire half an hour ago.
    with FactStore(db, clock=lambda: time.time() - 3600) as store:
        gone = store.add("project", "No longer true.", expires_at=time.time() - 1800).id
    with serving(db) as address, httpx.Client(timeout=60) as client:
        page = client.get(address.replace("/?", "/health?"))
        assert '<p id="counts">1 live, 1 expired, 0 forgotten' in page.text
        assert '<td data-label="live">1</td><td data-label="expired">1</td>' in page.text
        listed = client.get(base_of(address) + "/", params={"expired": "1"}).text
        assert str(gone) in re.findall(r'data-id="(\d+)"', listed)
        assert str(gone) not in re.findall(r'data-id="(\d+)"',
                                           client.get(base_of(address) + "/").text)


def test_a_damaged_store_gets_a_503_page_and_the_doctor_reports_it(tmp_path):
    """A facts page overwritten on disk: each page that reads a fact answers 503 with the
    store's error naming the repair, the health page shows the doctor's report of it, and
    the server keeps serving."""
    db = str(tmp_path / "m.db")
    with FactStore(db) as store:
        for n in range(5):
            store.add("project", f"Fact number {n}.")
    damage_the_facts_table(db)
    with serving(db) as address, httpx.Client(timeout=60) as client:
        base = base_of(address)
        for path in ("/", "/timeline", "/fact/1", "/why?fact=1&message=fact"):
            page = client.get(base + path if path != "/" else address)
            assert 503 == page.status_code, path
            error = html.unescape(re.search(r'id="error">([^<]*)<', page.text)[1])
            assert f"{db} is damaged" in error and ".recover" in error, path
        for action in ("edit", "reinforce", "forget"):
            page = client.post(f"{base}/fact/1/{action}", data={"value": "x", "amount": "1"})
            assert 503 == page.status_code and "is damaged" in page.text, action
        health = client.get(base + "/health")
        assert 503 == health.status_code and 'data-ok="0"' in health.text
        assert "integrity check failed" in health.text
        assert "The facts could not be counted" in health.text


def test_health_does_not_wait_for_a_write_lock_another_process_holds(tmp_path, monkeypatch):
    """Another connection holds the write lock: the health page answers that its full-text
    check could not run, naming the holder, instead of waiting for the lock and saying all
    is well; the other pages answer meanwhile."""
    db = str(tmp_path / "m.db")
    with FactStore(db) as store:
        store.add("project", "Deploy on Fridays.")
    monkeypatch.setenv("CTXSLOTS_BUSY_TIMEOUT", "2")  # what a check that waited would wait
    with serving(db) as address, httpx.Client(timeout=60) as client:
        base = base_of(address)
        assert 200 == client.get(address).status_code
        holder = apsw.Connection(db)
        holder.execute("BEGIN IMMEDIATE")
        try:
            with concurrent.futures.ThreadPoolExecutor(1) as pool:
                health = pool.submit(client.get, base + "/health")
                assert 200 == client.get(base + "/fact/1").status_code
                page = health.result()
            assert 'data-ok="0"' in page.text
            said = html.unescape(page.text)
            assert "the full-text index's own check could not run" in said
            assert "holds the write lock" in said
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert 'data-ok="1"' in client.get(base + "/health").text


def test_a_change_waiting_for_another_process_keeps_no_page_waiting(tmp_path):
    """A reinforce waits for the write lock another process holds: the fact's page and the
    memory page answer meanwhile, and the reinforce lands once the lock is let go."""
    db = str(tmp_path / "m.db")
    with FactStore(db) as store:
        fact = store.add("project", "Deploy on Fridays.")
        with served_here(store) as base, httpx.Client(timeout=120) as client, \
                concurrent.futures.ThreadPoolExecutor(1) as pool:
            assert 200 == client.get(f"{base}/?token={TOKEN}").status_code
            holder = SQLiteHolder(db)
            try:
                change = pool.submit(client.post, f"{base}/fact/{fact.id}/reinforce",
                                     data={"amount": "2"})
                while not change.done() and not inside_a_sqlite_write(
                        [t for t in threading.enumerate() if t is not threading.current_thread()]):
                    time.sleep(0.001)
                page = client.get(f"{base}/fact/{fact.id}")
                assert 200 == page.status_code and "Deploy on Fridays." in page.text
                assert 200 == client.get(f"{base}/").status_code
                assert not change.done()  # still waiting for the lock
            finally:
                holder.release()
            assert 303 == change.result().status_code
        assert 2.0 == store.get(fact.id).score


def test_a_hidden_fact_is_marked_in_the_memory_list(tmp_path):
    """A fact a newer near-duplicate hides is listed with a link to the one hiding it (a
    list showing it like any other left the reader wondering why search never finds it);
    the survivor and other facts carry no such mark."""
    db = str(tmp_path / "m.db")
    clock_start = 1_700_000_000.0
    moments = iter(clock_start + n for n in range(100))
    with FactStore(db, clock=lambda: next(moments)) as store:
        old = store.add("user", "Rosaline prefers dark mode in every editor.").id
        new = store.add("user", "Rosaline prefers dark mode in every editor!").id
        other = store.add("user", "Rosaline drinks green tea.").id
        assert [s.fact_id for s in store.consolidate().superseded] == [old]
    with serving(db) as address, httpx.Client(timeout=60) as client:
        page = client.get(address)
        assert 200 == page.status_code
        rows = dict(re.findall(r'<tr class="fact" data-id="(\d+)">(.*?)</tr>', page.text,
                               re.DOTALL))
    assert f'hidden from search by <a href="/fact/{new}">#{new}</a>' in rows[str(old)]
    assert "hidden from search" not in rows[str(new)]
    assert "hidden from search" not in rows[str(other)]


def test_every_time_a_page_shows_says_it_is_utc(location):
    """A fact said late in the evening in New York was said the next day in UTC: the fact
    page (said, written, updated, expires, each earlier value's times) and the timeline show
    each time with its zone, as the last access already was, so that no reader takes one for
    local time."""
    new_york = dt.timezone(dt.timedelta(hours=-4))
    with FactStore(location, clock=lambda: 1_697_000_000.0) as store:  # 2023-10-11 04:53 UTC
        store.upsert("user", "tea", "The user drinks green tea.",
                     observed_at=dt.datetime(2023, 10, 9, 8, 0, tzinfo=new_york))
        fact = store.upsert("user", "tea", "The user drinks black tea.",
                            observed_at=dt.datetime(2023, 10, 10, 23, 30, tzinfo=new_york),
                            expires_at=dt.datetime(2999, 1, 1, tzinfo=dt.UTC)).id
    with serving(location) as address, httpx.Client(timeout=60) as client:
        base = base_of(address)
        assert 200 == client.get(address).status_code
        page = client.get(f"{base}/fact/{fact}").text
        timeline = client.get(f"{base}/timeline").text
    fields = dict(re.findall(r"<dt>(\w+)</dt><dd[^>]*>([^<]*)</dd>", page))
    assert fields["Said"] == "2023-10-11 03:30 UTC"
    assert fields["Written"] == "2023-10-11 04:53 UTC, updated 2023-10-11 04:53 UTC"
    assert fields["Expires"] == "2999-01-01 00:00 UTC"
    assert re.findall(r'<td data-label="said">([^<]*)</td><td data-label="from">([^<]*)</td>'
                      r'<td data-label="until">([^<]*)</td>', page) == [
        ("2023-10-09 12:00 UTC", "2023-10-11 04:53 UTC", "2023-10-11 04:53 UTC")]
    assert re.findall(r'<td data-label="said">([^<]*)</td>', timeline) == [
        "2023-10-11 03:30 UTC"]
