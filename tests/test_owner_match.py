"""One owner's search in a store of many: the match asks for their owner terms.

Past a few thousand facts, when the facts a search may see are a small share of
the store, the SQLite FTS5 match is narrowed to the owner terms of the user,
agent and scope asking (``owner_term``, a word of no weight in ``rank``), so FTS5
scores their facts alone; on PostgreSQL (past 20,000 facts) the GIN match asks
for them in ``search``. The narrowing must change what a search costs, never what
it finds: the candidates and their scores are those of the same search without it.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import psycopg
import pytest

from _sql import engine_of, plan_of, raw, traced
from ctxslots import FactStore
from ctxslots.stores.backend import FactFilter
from ctxslots.stores.sanitize import to_match
from ctxslots.stores.sqlite._schema import owner_term
from ctxslots.stores.stemming import stemmed_query

WORDS = ("deploy", "staging", "invoice", "garden", "python", "kayak", "recipe", "budget",
         "meeting", "travel", "piano", "lisbon", "vaccine", "laptop", "coffee", "marathon")
#: Sixty users, two of them with ids far from ASCII words (an owner term is their hex).
USERS = [f"user{n:02d}" for n in range(58)] + ["Zoë Ångström", "用户" * 100]


@pytest.fixture(name="statements")
def fixture_statements() -> Iterator[list[tuple[str, object]]]:
    """Every statement run by connections opened during the test, with its bindings."""
    with traced(lambda sql, bindings: (sql, bindings)) as seen:
        yield seen


def _sentence(rng: random.Random, user: str) -> str:
    return f"{user.title()} said the {' '.join(rng.sample(WORDS, 4))} plan changed."


@pytest.fixture(name="many_file", scope="module")
def fixture_many_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A file of 60 users of 90 facts each, and 100 shared facts of the workspace."""
    rng = random.Random(7)
    path = tmp_path_factory.mktemp("owners") / "many.db"
    with FactStore(path, embedder=False) as store, store.batch():
        for user in USERS:
            for _ in range(90):
                store.add("user", _sentence(rng, user), user=user)
        for _ in range(100):
            store.add("project", _sentence(rng, "team"), scope="shop")
    return path


@pytest.fixture(name="many")
def fixture_many(many_file: Path, statements: list[tuple[str, object]]) -> Iterator[FactStore]:
    """The many-user store, opened for one test (its statements traced)."""
    with FactStore(many_file, embedder=False) as store:
        yield store


def _matches(statements: list[tuple[str, object]]) -> list[str]:
    return [str(bindings[0]) for sql, bindings in statements  # type: ignore[index]
            if "MATCH" in sql and "_fts.rank" in sql]


def test_a_users_search_matches_their_owner_terms(many, statements):
    """In a store of 60 users, a search by one matches the terms of their facts and the shared ones."""
    hits = many.search("kayak budget recipe", user="user07", scope="shop")
    assert hits and all(h.fact.user in ("user07", None) for h in hits)
    [match] = _matches(statements)
    assert f'"{owner_term("user07", "", "")}"' in match
    assert f'"{owner_term("", "", "shop")}"' in match
    assert owner_term("user08", "", "") not in match


def test_the_narrowed_match_finds_what_the_filter_alone_finds(many):
    """For each user and query, the engine's candidates and scores are those of the
    same FTS5 statement with no owner terms (typed out here on its own connection)."""
    rng = random.Random(3)
    conn = raw(many)
    try:
        with engine_of(many) as backend:
            for user in [*rng.sample(USERS[:-2], 6), *USERS[-2:]]:
                words = rng.sample(WORDS, 3)
                flt = FactFilter(scopes=("shop", ""), users=(user, ""), agents=("default", ""))
                found = [(c.row["id"], c.score)
                         for c in backend.lexical(plan_of(words), flt, 40)]
                expected = conn.execute(
                    "SELECT f.id, facts_fts.rank FROM facts_fts JOIN facts AS f "
                    "ON f.id = facts_fts.rowid WHERE facts_fts MATCH ? AND f.user_id IN (?, '') "
                    "AND f.agent_id IN ('default', '') AND f.scope IN ('shop', '') "
                    "ORDER BY facts_fts.rank, f.id LIMIT 40",
                    (to_match(stemmed_query(words)), user)).fetchall()
                assert len(found) == 40
                assert [(int(i), float(r)) for i, r in expected] == found
    finally:
        conn.close()


def test_a_store_of_one_user_matches_words_alone(tmp_path, statements):
    """Where the facts a search sees are most of the store, matching owner terms would
    cost more than it saves: the match holds the words only."""
    rng = random.Random(5)
    with FactStore(tmp_path / "solo.db", embedder=False) as store:
        with store.batch():
            for _ in range(5_200):
                store.add("user", _sentence(rng, "ada"))
        statements.clear()
        assert store.search("kayak budget")
    [match] = _matches(statements)
    assert "owner_term :" not in match and match.startswith("{stems context_stems} : (")


def test_owner_words_in_a_query_match_no_owner(many):
    """A query holding another user's owner term finds nothing of theirs: words are
    matched in the text columns only, and the filter decides whose facts are seen."""
    stranger = owner_term("user08", "", "")
    hits = many.search(f"{stranger} team", user="user07", scope="shop")
    assert hits and all(h.fact.user is None for h in hits)
    assert not many.search(stranger, user="user07", scope="shop")


def test_owner_terms_are_the_generated_column_folded(many_file):
    """The owner term the search asks for is the one the index holds for every fact,
    whatever its owners' characters and length."""
    with FactStore(many_file, embedder=False) as store:
        conn = raw(store)
        try:
            rows = conn.execute("SELECT DISTINCT user_id, agent_id, scope, owner_term FROM facts"
                                ).fetchall()
        finally:
            conn.close()
        assert len(rows) == len(USERS) + 1
        assert all(owner_term(u, a, s) == term.lower() for u, a, s, term in rows)
        for user in USERS[-2:]:
            hits = store.search("kayak budget recipe", user=user, slots=["user"])
            assert hits and {h.fact.user for h in hits} == {user}


class _Recording(psycopg.Cursor):  # type: ignore[type-arg]
    """A cursor noting each statement it runs (``seen``, set on the class by the test)."""

    seen: ClassVar[list[str]] = []

    def execute(self, query, params=None, **kwargs):  # type: ignore[no-untyped-def]
        self.seen.append(str(query))
        return super().execute(query, params, **kwargs)


def test_postgres_narrows_a_users_match_to_their_owner_terms(pg_url, monkeypatch):
    """On PostgreSQL (``search`` holds each fact's owner term, ``m006``), a large table's
    match is narrowed to the owner terms a search sees where they are a small share:
    the candidates and scores are those of the same search not narrowed."""
    from ctxslots.stores.postgres import _lexical

    monkeypatch.setattr(_lexical, "_EXACT_BELOW", 0)  # this small table counts as large
    rng = random.Random(11)
    with FactStore(pg_url, embedder=False) as store, store.batch():
        for user in USERS[:30]:
            for _ in range(20):
                store.add("user", _sentence(rng, user), user=user)
        for _ in range(40):
            store.add("project", _sentence(rng, "team"), scope="shop")
    with psycopg.connect(pg_url, autocommit=True, cursor_factory=_Recording) as conn:
        for user in [*rng.sample(USERS[:28], 4), *USERS[28:30]]:
            words = rng.sample(WORDS, 3)
            flt = FactFilter(scopes=("shop", ""), users=(user, ""), agents=("default", ""))
            _Recording.seen = []
            narrowed = [(c.row["id"], c.score) for c in _lexical.LexicalLeg().search(
                conn, "facts", plan_of(words), flt, 30)]
            assert any("md5(o.u" in sql and "bm25" in sql for sql in _Recording.seen)
            with monkeypatch.context() as off:
                off.setattr(_lexical, "_OWNERS_MAX_SHARE", -1.0)
                _Recording.seen = []
                whole = [(c.row["id"], c.score) for c in _lexical.LexicalLeg().search(
                    conn, "facts", plan_of(words), flt, 30)]
                assert not any("md5(o.u" in sql and "bm25" in sql for sql in _Recording.seen)
            assert len(narrowed) == 30 and narrowed == whole
