"""What the command line and the dumps show a person: readable numbers, raw values in JSON."""

from __future__ import annotations

import json
import re

from click.testing import CliRunner

from ctxslots import AssemblyRequest, FactStore, PromptAssembler
from ctxslots._readable import multiplier, share
from ctxslots.cli import cli

# A float in scientific notation, as '1e-06' or '-1.375e-06'.
E_NOTATION = re.compile(r"\d(?:\.\d+)?e[-+]\d")


def _tiny_store(path):
    # Every fact holds the query word: FTS5's BM25 of each hit is then close to zero.
    with FactStore(path) as store:
        store.add("agent", "deploy notes: deploy from main")
        store.add("agent", "deploy notes: deploy on Friday")
        store.add("agent", "deploy notes: deploy with care")


def test_search_trace_shows_ranks_shares_and_ages_not_raw_scores(db_path):
    """On a tiny store the trace reads as a relevance share, ranks and an age in words."""
    _tiny_store(db_path)
    raw = json.loads(CliRunner().invoke(cli, ["--db", str(db_path), "search", "deploy", "--json"],
                                        catch_exceptions=False).output)
    assert abs(raw[0]["trace"]["bm25"]) < 1e-3  # the raw value a person cannot read
    out = CliRunner().invoke(cli, ["--db", str(db_path), "search", "deploy"],
                             catch_exceptions=False).output
    assert "relevance 100% (words #1, meaning -); age today; decay 1.00" in out
    assert "bm25" not in out and "score" not in out
    assert not E_NOTATION.search(out), out


def test_search_trace_names_the_multiplier_and_the_link_that_brought_a_hit(db_path):
    """The trace lines left out the multipliers of a trace's ``extra`` (a period named
    in the query) and the fact whose co-recall link pulled a hit in, which the dumps
    show: a hit ranked by them read as if nothing had."""
    import datetime as dt

    year = dt.datetime.now(dt.UTC).year - 1
    with FactStore(db_path) as store:
        billing = store.add("project", "The billing service deploys with the blue pipeline.",
                            scope="x").id
        cache = store.add("project", "The cache must be warmed before traffic returns.",
                          scope="x").id
        for _ in range(3):  # found together, then one reinforced: a co-recall link
            assert {billing, cache} == {h.fact.id for h in store.search("billing cache",
                                                                        scope="x")}
            store.reinforce(billing)
        july = store.add("project", "The deploy failed twice.", scope="shop",
                         observed_at=dt.datetime(year, 7, 12, tzinfo=dt.UTC)).id
        store.add("project", "The shop deploy of the shop moved to Fridays.", scope="shop")

    def lines(query, scope):
        out = CliRunner().invoke(cli, ["--db", str(db_path), "search", query, "--scope", scope],
                                 catch_exceptions=False).output.splitlines()
        return {int(re.search(r"\[id:(\d+)\]", head)[1]): trace
                for head, trace in zip(out[::2], out[1::2], strict=True)}

    linked = lines("billing deploy", "x")
    assert linked[cache].endswith(f"; pulled in by its co-recall link to fact {billing}")
    assert "co-recall" not in linked[billing]
    period = lines(f"What happened to the shop deploy in July {year}?", "shop")
    assert period[july].endswith("confidence 1.00; period ×2.00"), period[july]
    assert ["×" in trace for trace in period.values()].count(True) == 1


def test_markdown_and_html_dumps_show_no_scientific_notation(db_path):
    """The dumps show shares, ranks and ages in words; the JSON dump keeps the raw BM25."""
    _tiny_store(db_path)
    with FactStore(db_path) as store:
        prompt = PromptAssembler(store).assemble(AssemblyRequest("deploy"))
    markdown, html = prompt.dump("markdown"), prompt.dump("html")
    table = [line for line in markdown.splitlines() if line.startswith("| 1 | kept")]
    assert table and re.search(r"\| \d+% \(#\d\) \|", table[0]) and "(today)" in table[0]
    assert not E_NOTATION.search(markdown), markdown
    assert not E_NOTATION.search(re.sub(r'title="[^"]*"', "", html))  # raw values only on hover
    item = next(s for s in json.loads(prompt.dump("json"))["sections"] if s["items"])["items"][0]
    assert abs(item["trace"]["bm25"]) < 1e-3 and item["trace"]["age_days"] < 1


def test_readable_numbers_round_for_people():
    """Shares read as whole percentages, multipliers with two decimals, tiny values as '<'."""
    assert ["100%", "62%", "<1%", "0%", "–"] == [share(v) for v in (1.0, 0.62, 1e-6, 0.0, None)]
    assert ["1.00", "0.97", "<0.01", "20.09", "–"] == [
        multiplier(v) for v in (1.0, 0.973, 2.7e-5, 20.0855, None)]
