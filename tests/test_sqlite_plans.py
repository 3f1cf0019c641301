"""The SQLite engine's statements keep their plans: run again, none is planned again.

SQLite plans a statement anew each time it runs when its plan read a bound value
(a plain ``LIMIT ?`` under an ``ORDER BY`` does). The authorizer is how it shows:
SQLite asks it about each column a statement reads while it plans the statement, and
never while it runs it. FTS5 prepares its own statements on its shadow tables for
every match; those questions are not counted.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import apsw
import pytest

from _sql import connection_hook
from ctxslots import AssemblyRequest, FactStore, PromptAssembler, RankingPolicy


@contextlib.contextmanager
def planning() -> Iterator[list[int]]:
    """How many columns the statements planned on the connections opened in the block
    read, FTS5's shadow tables left out (one count for the whole block, reset by the
    caller)."""
    asked = [0]

    def authorizer(action: int, table: str | None, *_rest: object) -> int:
        if action == apsw.SQLITE_READ and table is not None and "_fts_" not in table:
            asked[0] += 1
        return apsw.SQLITE_OK

    def hook(conn: apsw.Connection) -> None:
        conn.authorizer = authorizer

    with connection_hook(hook):
        yield asked


def _fill(store: FactStore) -> None:
    with store.batch():
        store.upsert("user", "editor", "Ada edits code in Helix.", user="ada")
        store.upsert("user", "city", "Ada lives in Lyon.", user="ada")
        store.reinforce(store.add("user", "Ada deploys on Fridays.", user="ada").id, user="ada")
        store.add("project", "Deploys of shop-api run after the smoke test.", scope="shop")
        for n in range(40):
            store.add("agent", f"Deploy {n} of shop-api went out.", scope="shop", agent="bot")


_FUSED = RankingPolicy(vector_weight=1.0)  # the hashing embedder's vectors searched too


@pytest.mark.parametrize("options", [{"embedder": False}, {"ranking": _FUSED},
                                     {"ranking": _FUSED, "vector_cache": False}],
                         ids=["words", "vectors", "vectors read by SQL"])
def test_a_search_profile_timeline_and_assembly_run_again_are_not_planned_again(
        tmp_path, options):
    """Each read, run a second time with the same or new values, plans nothing: its
    plan was kept. With the hashing embedder's vectors searched, the vector leg too,
    from the in-memory copy or by SQL."""
    path = tmp_path / "plans.db"
    with FactStore(path, **options) as store:
        _fill(store)
        store.wait_for_vectors()
    with planning() as asked, FactStore(path, **options) as store:
        if options.get("vector_cache", True) and "ranking" in options:
            assert store.load_vector_cache()  # searched through the copy from the first on
        assembler = PromptAssembler(store)
        fact = store.get_by_key("user", "city", user="ada")
        assert fact is not None

        def reads(words: str, limit: int) -> None:
            assert store.search(words, scope="shop", user="ada", agent="bot", limit=limit,
                                track_access=False)
            assert store.important("user", user="ada", scope="shop", agent="bot", limit=limit)
            assert store.timeline(fact.id, before=limit, after=limit, user="ada")
            assert assembler.assemble(AssemblyRequest(words, user="ada", scope="shop",
                                                      agent="bot", budget=600),
                                      record_shown=False).text

        reads("deploy shop-api", 5)
        asked[0] = 0
        reads("deploy shop-api", 5)
        assert 0 == asked[0]
        reads("smoke test deploys", 3)
        assert 0 == asked[0]
