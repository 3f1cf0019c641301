"""A store written before the one stemmer opens with its words stemmed in Python, on
each engine: the stems filled for live and archived facts (contexts apart), the
indexes made again over them, nothing else changed.

The old store is made at the schema just before (SQLite 12, PostgreSQL 4) and filled
with raw SQL, as the release before wrote it; its index was Porter's on SQLite and
PostgreSQL's Snowball dictionary on PostgreSQL, which did not fold ``café`` to
``cafe``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from ctxslots import ANY, FactStore
from ctxslots.stores.stemming import stem_text

NOW = 1_800_000_000.0

#: ``(id, slot, value, context)`` of the live facts.
FACTS = [
    (1, "user", "Otto deploys the service every week.", None),
    (2, "user", "The deployment failed twice.", None),
    (3, "user", "Met at the café near the office.", None),
    (4, "user", "A plain note.", "We talked about deploying on Fridays."),
    (5, "agent", "Communities gather on Sundays.", None),
]
ARCHIVED = (6, "user", "Deployed version 1 last year.", None)
COLUMNS = ("id, slot, scope, key, value, tags, source, confidence, score, created_at, "
           "updated_at, observed_at, access_count, user_id, agent_id, context")


def _row(fact: tuple[Any, ...]) -> tuple[Any, ...]:
    fact_id, slot, value, context = fact
    user, agent = ("default", "") if slot == "user" else ("", "default")
    return (fact_id, slot, "", None, value, "", "seed", 1.0, 0.0, NOW - 100, NOW - 50,
            NOW - 100, 0, user, agent, context)


def _old_sqlite(db: str) -> None:
    from ctxslots.stores.sqlite import open_connection
    from ctxslots.stores.sqlite._migrations import migrate

    conn = open_connection(db, migrate=False)
    try:
        assert migrate(conn, target=12)[-1] == "m012_owners"
        marks = ", ".join("?" * 16)
        for fact in FACTS:
            conn.execute(f"INSERT INTO facts ({COLUMNS}) VALUES ({marks})", _row(fact))
        conn.execute(f"INSERT INTO archive ({COLUMNS}, archived_at, reason) VALUES "
                     f"({marks}, ?, ?)", (*_row(ARCHIVED), NOW - 10, "replaced"))
        conn.execute("UPDATE sqlite_sequence SET seq = 100 WHERE name = 'facts'")
    finally:
        conn.close()


def _sqlite_stems(db: str) -> list[tuple[Any, ...]]:
    from ctxslots.stores.sqlite import open_connection

    conn = open_connection(db, migrate=False)
    try:
        return [tuple(r) for r in conn.execute(
            "SELECT id, stems, context_stems FROM facts UNION ALL "
            "SELECT id, stems, context_stems FROM archive ORDER BY id").fetchall()]
    finally:
        conn.close()


def _old_postgres(url: str) -> None:
    psycopg = pytest.importorskip("psycopg")
    from ctxslots.stores.postgres._schema import migrate

    with psycopg.connect(url, autocommit=True) as conn:
        assert migrate(conn, url, target=4)[-1] == "m004_owners"
        marks = ", ".join(["%s"] * 16)
        with conn.transaction():
            for fact in FACTS:
                conn.execute(f"INSERT INTO facts ({COLUMNS}) VALUES ({marks})", _row(fact))
            conn.execute(f"INSERT INTO archive ({COLUMNS}, archived_at, reason) VALUES "
                         f"({marks}, %s, %s)", (*_row(ARCHIVED), NOW - 10, "replaced"))
            conn.execute("SELECT setval('fact_ids', 100)")
        # The old index did not fold diacritics: "cafe" did not find the café.
        assert conn.execute("SELECT count(*) FROM facts WHERE search @@ "
                            "to_tsquery('ctxslots_english', 'cafe')").fetchone()[0] == 0


def _postgres_stems(url: str) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return [tuple(r) for r in conn.execute(
            "SELECT id, stems, context_stems FROM facts UNION ALL "
            "SELECT id, stems, context_stems FROM archive ORDER BY id").fetchall()]


@pytest.fixture(name="old_store", params=["sqlite", "postgresql"])
def fixture_old_store(request, db_path) -> tuple[str, Callable[[str], list[tuple[Any, ...]]]]:
    """The location of a store as the release before wrote it, and how to read its
    stems raw once migrated."""
    if request.param == "sqlite":
        _old_sqlite(str(db_path))
        return str(db_path), _sqlite_stems
    postgres = request.getfixturevalue("postgres")
    url = postgres.empty_database()
    request.addfinalizer(lambda: postgres.drop(url))
    _old_postgres(url)
    return url, _postgres_stems


def _found(store: FactStore, query: str, **kwargs: Any) -> set[int]:
    return {h.fact.id for h in store.search(query, user=ANY, agent=ANY, scope=ANY, **kwargs)}


def test_an_old_store_is_stemmed_in_python(old_store):
    location, raw_stems = old_store
    with FactStore(location, clock=lambda: NOW, embedder=False) as store:
        assert [f.value for f in store.facts(user=ANY, agent=ANY, scope=ANY)] == \
            [f[2] for f in FACTS]
        assert _found(store, "deployment") == {1, 2, 4}
        assert _found(store, "cafe") == {3}
        assert _found(store, "community") == {5}
        assert 6 in _found(store, "deploying", include_archive=True)
        # A fact written after the migration is found the same way.
        new = store.add("user", "The café deploys soon.")
        assert _found(store, "cafes deployed") == {1, 2, 3, 4, new.id}
    expected = [(f[0], stem_text(None, f[2], ""), None if f[3] is None else stem_text(f[3]))
                for f in sorted([*FACTS, ARCHIVED])]
    assert raw_stems(location)[:6] == expected


#: ``(id, value)`` of facts in scripts written without spaces, or with vowel signs.
SCRIPTS = [(11, "ユーザーは東京都渋谷区に住んでいる"), (12, "用户喜欢在医院附近散步"),
           (13, "사용자는 서울에 산다"), (14, "उपयोगकर्ता किताब पढ़ती है"),
           (15, "ガスの料金は高い")]


def _as_before_the_script_stems(location: str) -> None:
    """Each fact's stems as the release before made them (a run of Han, kana or Hangul
    one word, Indic vowel signs and kana voicing marks dropped), the schema put back."""
    import unicodedata

    def old(text: str) -> str:
        decomposed = unicodedata.normalize("NFKD", text.casefold())
        folded = "".join(c for c in decomposed if not unicodedata.combining(c))
        return " ".join(re.findall(r"[^\W_]+", folded))

    if location.startswith("postgresql"):
        import psycopg

        with psycopg.connect(location, autocommit=True) as conn:
            for fact_id, value in conn.execute("SELECT id, value FROM facts").fetchall():
                conn.execute("UPDATE facts SET stems = %s WHERE id = %s", (old(value), fact_id))
            # A store of schema 7: what m008 and later added is taken away again.
            conn.execute("DROP TRIGGER facts_text_changed ON facts; "
                         "DROP FUNCTION ctxslots_text_changed(), ctxslots_text_changes(); "
                         "DROP SEQUENCE fact_text_changes; "
                         "ALTER TABLE fact_history DROP COLUMN observed_at")
            conn.execute("DELETE FROM schema_migrations WHERE version >= 8")
        return
    from ctxslots.stores.sqlite import open_connection

    conn = open_connection(location, migrate=False)
    try:
        with conn.write():
            for fact_id, value in conn.execute("SELECT id, value FROM facts").fetchall():
                conn.execute("UPDATE facts SET stems = ? WHERE id = ?", (old(value), fact_id))
            # A store of schema 14: what m016 added is taken away again.
            conn.execute("ALTER TABLE fact_history DROP COLUMN observed_at")
        conn.execute("PRAGMA user_version = 14")
    finally:
        conn.close()


def test_words_of_every_script_are_found_and_an_old_store_is_stemmed_again(old_store):
    """Han, kana and Hangul runs are found by a word inside them (東京, 医院, 서울 of
    서울에), a Hindi word by itself (its vowel signs are part of it), and a kana voicing
    mark is kept (ガス is not カス); a store written before is stemmed again on opening."""
    location, _ = old_store
    with FactStore(location, clock=lambda: NOW, embedder=False) as store:
        for _, value in SCRIPTS:
            store.add("user", value)
    _as_before_the_script_stems(location)
    with FactStore(location, clock=lambda: NOW, embedder=False) as store:
        for query, wanted in (("東京", 0), ("医院", 1), ("서울", 2), ("किताब", 3),
                              ("猫", None), ("ガス", 4)):
            found = [h.fact.value for h in store.search(query, user=ANY, agent=ANY, scope=ANY)]
            if wanted is None:
                assert [] == found
            else:
                assert SCRIPTS[wanted][1] == found[0], (query, found)
    assert stem_text("ガス") != stem_text("カス")


def test_a_long_japanese_question_is_a_search_like_any_other(location):
    """4,000 kana and Han characters give thousands of pairs: the question's stems are
    capped, so it is a search (SQLite refused a query that deep), not an error."""
    import random

    pick = random.Random(1)
    kana = [chr(c) for c in range(0x3042, 0x3094)]
    with FactStore(location, clock=lambda: NOW, embedder=False) as store:
        with store.batch():
            for n in range(60):
                store.add("user", f"ユーザーの{n}番目のメモはここにあります。それは私の話です")
        question = "".join(pick.choice(kana) if pick.random() < 0.5 else chr(0x4E00 + i)
                           for i in range(4000))
        assert isinstance(store.search(question, user=ANY, limit=5), list)


def test_the_sqlite_index_and_its_in_memory_copy_agree_on_hindi(db_path):
    """Hindi words are stemmed without the marks inside them, so FTS5 (which splits at a
    mark) and the in-memory copy find the same facts for the same word."""
    facts = ["मैं खुश हूँ", "दिल्ली में बारिश हो रही है", "किताब पढ़ना अच्छा लगता है",
             "कुत्ता बाहर है", "मीरा को मिठाई पसंद है"]
    with FactStore(db_path, clock=lambda: NOW, embedder=False) as store:
        for value in facts:
            store.add("user", value)
    found = {}
    for cached in (False, True):
        with FactStore(db_path, clock=lambda: NOW, embedder=False, lexical_cache=cached) as store:
            if cached:
                assert store.load_lexical_cache()
            found[cached] = {query: sorted(h.fact.value for h in store.search(query, user=ANY))
                             for query in ("में", "किताब", "कुत्ता", "मीरा")}
    assert found[False] == found[True]
    assert ["किताब पढ़ना अच्छा लगता है"] == found[False]["किताब"]
