"""A plugin's section lands where its contributor says (the documented example, run from
docs/plugins.md itself), and a reranker that moved a hit leaves a mark on it."""

from __future__ import annotations

import json
import re
import types
from pathlib import Path

import pytest

from ctxslots import AssemblyRequest, FactStore, Item, PromptAssembler, Section, hookimpl
from ctxslots.cli._format import hit_line

DOCS = Path(__file__).resolve().parents[1] / "docs" / "plugins.md"
MESSAGE = "How do we deploy the shop? Answer briefly."


def _documented_plugin() -> types.ModuleType:
    """The first Python block of docs/plugins.md (HouseRules and its register_contributors),
    run as a module: the example exactly as a reader copies it."""
    block = re.search(r"```python\n(.*?)```", DOCS.read_text(encoding="utf-8"), re.DOTALL)
    assert block is not None and "class HouseRules" in block.group(1)
    module = types.ModuleType("house_rules_plugin")
    exec(compile(block.group(1), str(DOCS), "exec"), module.__dict__)  # noqa: S102
    return module


@pytest.fixture(name="filled")
def fixture_filled(store):
    store.upsert("user", "name", "The user is called Ada.")
    store.upsert("project", "deploy", "The shop deploys with make deploy.", scope="shop")
    store.add("agent", "Deploys of the shop need the checklist first.", scope="shop")
    return store


def test_the_documented_plugin_lands_where_its_contributor_says(filled):
    """HouseRules (sticky = True, priority = 95 on the contributor; its Section names
    neither) is placed first, as sticky and priority 95: before the user section (88),
    not after the project section as priority 50."""
    plugin = _documented_plugin()
    assembler = PromptAssembler(filled, plugins=[plugin])
    prompt = assembler.assemble(AssemblyRequest(MESSAGE, scope="shop"))
    order = [s.name for s in prompt.sections if s.status == "kept"]
    assert ["house_rules", "user_memory", "project_memory", "agent_memory"] == order
    rules = prompt.section("house_rules")
    assert (95, True) == (rules.priority, rules.sticky)
    assert prompt.text.startswith("## House rules\n- Answer in British English.\n")
    dumped = json.loads(prompt.dump("json"))["sections"][0]
    assert ("house_rules", 95, True) == (dumped["name"], dumped["priority"], dumped["sticky"])


def test_a_section_that_names_its_placement_keeps_it(filled):
    """A Section that sets priority and sticky itself wins over its contributor's."""

    class Demoted:
        name, priority, sticky = "demoted", 99, True

        def contribute(self, request):
            return Section(title="Demoted", items=[Item("Last of all.")], priority=1,
                           sticky=False)

    prompt = PromptAssembler(filled, contributors=[Demoted(), *PromptAssembler(filled)
                                                   .contributors]).assemble(
        AssemblyRequest(MESSAGE, scope="shop"))
    assert "demoted" == [s.name for s in prompt.sections if s.status == "kept"][-1]
    assert (1, False) == (prompt.section("demoted").priority, prompt.section("demoted").sticky)


class Reverse:
    """A rerank_hits plugin that turns the fused order around."""

    @hookimpl
    def rerank_hits(self, hits):
        return list(reversed(hits))


def _reranked_store(path: Path) -> FactStore:
    from ctxslots.plugins import make_plugin_manager, reranker_from_plugins

    pm = make_plugin_manager(plugins=[Reverse()])
    store = FactStore(path, rerank=reranker_from_plugins(pm))
    store.add("project", "Deploy deploy deploy: the deploy runbook.")
    store.add("project", "Deploy on Fridays.")
    store.add("project", "The shop has a deploy checklist and a long list of other steps.")
    return store


def test_a_moved_hit_carries_its_rank_before_the_reranker(db_path):
    """Each hit the reranker moved has extra["reranked_from"]: the rank it had before; one it
    left in place has no mark; search --json shows the same trace."""
    store = _reranked_store(db_path)
    try:
        with FactStore(db_path) as unranked:
            plain = [h.fact.id for h in unranked.search("deploy")]
        hits = store.search("deploy")
    finally:
        store.close()
    assert list(reversed(plain)) == [h.fact.id for h in hits]
    marks = [h.trace.extra.get("reranked_from") for h in hits]
    assert [3.0, None, 1.0] == marks
    assert {"reranked_from": 3.0} == hits[0].to_dict()["trace"]["extra"]


def test_the_search_output_and_the_dumps_show_the_move(db_path):
    """The search line of a moved hit says so, and the markdown and HTML dumps name the rank
    it came from."""
    store = _reranked_store(db_path)
    try:
        hits = store.search("deploy")
        best = max(h.trace.relevance for h in hits)
        lines = [hit_line(h, best) for h in hits]
        prompt = PromptAssembler(store, plugins=[Reverse()]).assemble(AssemblyRequest("deploy"))
    finally:
        store.close()
    assert lines[0].endswith("; moved here from #3 by a reranker")
    assert "moved here" not in lines[1]
    markdown, html = prompt.dump("markdown"), prompt.dump("html")
    assert "| 1 (reranked from #3) |" in markdown
    assert "(reranked from #3)" in html
