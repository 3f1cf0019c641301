"""What ``ctxslots demo`` shows: a fresh store, a search, an assembled prompt and its dump."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._files import write_private
from ..assembler import PromptAssembler
from ..plugins import reranker_from_plugins, slot_owners
from ..request import AssemblyRequest
from ..stores import FactStore, Limits
from ._format import hit_line

if TYPE_CHECKING:
    import pluggy

DEMO_FACTS: tuple[tuple[str, str | None, str | None, str], ...] = (
    ("user", "name", None, "The user is called Ada Lovelace and prefers concise answers."),
    ("user", "editor", None, "The user edits code in Helix with the default keymap."),
    ("project", "deploy.day", "shop-api", "Deploys of shop-api run every Friday after the 15:00 freeze."),
    ("project", "tests.command", "shop-api", "Run the shop-api tests with `pytest -x services/billing`."),
    ("project", "deploy.day", "blog", "The blog deploys on every push to main."),
    ("agent", None, "shop-api", "test_refund_retry in services/billing is flaky under load; rerun it once."),
    ("agent", None, None, "Answer in British English when the user writes in British English."),
)

DEMO_QUERY = "How do I deploy shop-api on Friday and rerun the flaky billing tests?"


def run_demo(path: Path, echo: Callable[[str], None], *, keep: bool = True,
             plugin_manager: pluggy.PluginManager | None = None) -> None:
    """Fill a store at ``path`` with :data:`DEMO_FACTS`; print a search, a prompt and its dump.

    :param keep: The store stays; the HTML dump is written next to it, as
        ``dump.html``. Otherwise the caller removes the store afterwards, and
        the last line says how to keep both.
    :param plugin_manager: The plugins whose slots, reranker, contributors and templates
        the demo uses, as any command does (the command's: the installed ones);
        ``None``: the built-ins only.
    """
    options: dict[str, Any] = {}
    if plugin_manager is not None:
        owners = slot_owners(plugin_manager)
        options = {"limits": Limits(slots=tuple(owners), slot_owners=owners),
                   "rerank": reranker_from_plugins(plugin_manager)}
    with FactStore(path, **options) as store, store.batch():
        for slot, key, scope, value in DEMO_FACTS:
            if key:
                store.upsert(slot, key, value, scope=scope, source="demo")
            else:
                store.add(slot, value, scope=scope, source="demo")
    echo(f"Stored {len(DEMO_FACTS)} facts in {path}")
    echo(f"\nSearch (scope shop-api): {DEMO_QUERY}\n")
    with FactStore(path, **options) as store:
        hits = store.search(DEMO_QUERY, scope="shop-api", track_access=False)
        best = max((hit.trace.relevance for hit in hits), default=None)
        for hit in hits:
            echo(hit_line(hit, best))
        echo("\nThe blog's facts (another scope) are never searched from shop-api.")

        assembler = PromptAssembler(store, plugin_manager=plugin_manager)
        everything = assembler.assemble(AssemblyRequest(DEMO_QUERY, scope="shop-api"))
        # A budget a little short of what everything needs, so the dump shows a drop (the
        # user profile takes a share of the budget, so a smaller one can need no drop).
        budget = everything.total_tokens
        while True:
            budget = max(1, budget - 5)
            prompt = assembler.assemble(AssemblyRequest(DEMO_QUERY, scope="shop-api",
                                                        budget=budget))
            if budget == 1 or any(not d.kept for s in prompt.sections for d in s.items):
                break
        echo(f"\nAssembled prompt with a budget of {budget} tokens "
             f"({prompt.total_tokens} used, {prompt.encoding}):\n")
        echo(prompt.text)
        echo("Dump (markdown):\n")
        echo(prompt.dump("markdown"))
        if keep:
            html_path = path.parent / "dump.html"
            html = prompt.dump("html")
            write_private(html_path, lambda fp: fp.write(html))
            echo(f"HTML dump: {html_path}")
        else:
            echo("The demo store was temporary and is gone; `ctxslots demo --db-dir DIR` keeps "
                 "it there, with an HTML dump (dump.html).")
