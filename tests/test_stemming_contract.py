"""One stemmer for both engines: the same text and query find the same facts on
SQLite and PostgreSQL (see ctxslots.stores.stemming).

The corpus holds inflected forms that FTS5's Porter stemmer and PostgreSQL's own
Snowball dictionary used to treat differently (``deploys``: ``deploi`` against
``deploy``), diacritics, case, digits inside words, words split by punctuation
and words of other scripts. Every query's candidate set is compared across the
engines and the SQLite engine's in-memory copy of its index, with the BM25 scores.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from _backend_contract import make_row
from _sql import plan_of
from ctxslots.stores.backend import FactFilter
from ctxslots.stores.sanitize import query_tokens
from ctxslots.stores.stemming import first_stem, stem_text, stem_words

#: Facts with inflected forms (the deploy family is the case of the report that
#: found 1 of 6 on SQLite and 4 on PostgreSQL).
CORPUS = (
    "We deploy on Fridays.",
    "Otto deploys the service every week.",
    "The team deployed version 2 yesterday.",
    "Deploying takes ten minutes.",
    "The deployment failed twice.",
    "Deployments need an approval.",
    "Imogen runs every morning.",
    "Running a marathon was her dream.",
    "She ran the community garden.",
    "Communities gather at the café.",
    "The CAFE on the corner closed.",
    "Cafés in Zürich are expensive.",
    "A naïve plan; a Naive question.",
    "Greta always enjoys her hikes.",
    "They enjoyed the hiking trails, always.",
    "The re-deploy of src/api.py went fine.",
    "Rosaline's translation agency called.",
    "He adopted two cats; adoptions are slow.",
    "The 2runs script and abc123 token and 3rd place.",
    "Straße und Strasse sind gleich.",
    "Ελληνικά λέξεις και λέξη.",
    "日本語のテキスト",
    "Generously, generations generated general generalizations.",
)
#: Queries, each a few words: inflected forms of the corpus, folded forms, misses.
QUERIES = (
    "deployment", "deploys", "deploy", "deployed", "redeploy", "re-deploy",
    "running", "runs", "ran", "run", "community", "communities", "cafe", "café", "CAFÉS",
    "zurich", "naive", "naïvely", "enjoying", "enjoy", "always", "hike", "hiking",
    "adopt", "adoption", "Rosaline", "rosalines", "2runs", "abc123", "3rd", "api py",
    "strasse", "straße", "λέξεις", "日本語のテキスト", "general", "generation",
    "generous", "nothing matches this", "What did Otto deploy when the deployment failed?",
)


def _candidates(backend: Any, query: str, *, scopes: tuple[str, ...] | None = None
                ) -> dict[str, float]:
    """Value -> BM25 score of every fact the lexical leg finds for ``query``."""
    plan = plan_of(query_tokens(query))
    found = backend.lexical(plan, FactFilter(scopes=scopes), 100)
    return {c.row["value"]: c.score for c in found}


def _fill(backend: Any) -> None:
    with backend.transaction():
        for n, text in enumerate(CORPUS):
            # Every third fact carries its words as context instead, weighed apart.
            if n % 3 == 2:
                backend.insert(make_row(f"fact {n}", context=text))
            else:
                backend.insert(make_row(text, tags="inflected" if n % 2 else ""))


@pytest.fixture(name="engines")
def fixture_engines(tmp_path: Path, pg_url: str) -> Any:
    """The same corpus on SQLite (FTS5, and the in-memory copy) and PostgreSQL."""
    from ctxslots.stores.postgres import PostgresBackend
    from ctxslots.stores.sqlite import SQLiteBackend

    sqlite = SQLiteBackend(tmp_path / "memory.db", lexical_cache=True)
    postgres = PostgresBackend(pg_url, pool_size=2)
    try:
        _fill(sqlite)
        _fill(postgres)
        assert sqlite.load_lexical_cache(timeout=None)
        yield sqlite, postgres
    finally:
        sqlite.close()
        postgres.close()


def test_same_candidates_and_scores_on_both_engines(engines):
    """Every query finds the same facts with the same BM25 on SQLite, its in-memory copy,
    and PostgreSQL."""
    sqlite, postgres = engines
    empty = []
    for query in QUERIES:
        on_sqlite = _candidates(sqlite, query)
        on_copy = _candidates(sqlite, query, scopes=("",))
        on_postgres = _candidates(postgres, query)
        assert set(on_sqlite) == set(on_postgres) == set(on_copy), query
        for value, score in on_sqlite.items():
            assert on_postgres[value] == pytest.approx(score, rel=1e-6), (query, value)
            assert on_copy[value] == pytest.approx(score, rel=1e-6), (query, value)
        if not on_sqlite:
            empty.append(query)
    # Snowball keeps a prefix: "redeploy" is not "deploy" (on both engines alike).
    assert ["redeploy", "nothing matches this"] == empty


def test_inflected_forms_meet_on_both_engines(engines):
    """deployment finds all six deploy facts (and the re-deploy); folded case and
    diacritics meet."""
    texts = [make_row(t)["value"] if n % 3 != 2 else f"fact {n}" for n, t in enumerate(CORPUS)]
    deploys = {texts[n] for n in (0, 1, 2, 3, 4, 5, 15)}
    for backend in engines:
        assert deploys == set(_candidates(backend, "deployment")), backend
        cafes = {texts[9], texts[10], texts[11]}
        assert cafes <= set(_candidates(backend, "cafe")), backend
        assert set(_candidates(backend, "cafe")) == set(_candidates(backend, "CAFÉS"))
        assert {texts[12]} == set(_candidates(backend, "naïvely"))
        assert {texts[19]} == set(_candidates(backend, "straße"))


def test_an_edit_and_the_archive_keep_the_stems(engines):
    """A changed value is found by its new words only, on both engines; an archived fact
    is found in the archive by the same stems."""
    for backend in engines:
        with backend.transaction():
            fact_id = backend.insert(make_row("The cat sleeps."))
            backend.update(fact_id, {"value": "The dogs barked."})
        assert "The dogs barked." in _candidates(backend, "barking dog")
        assert "The dogs barked." not in _candidates(backend, "sleeping cats")
        with backend.transaction():
            backend.archive(fact_id, archived_at=1.0, reason="test")
        assert "The dogs barked." not in _candidates(backend, "barking dog")
        found = backend.lexical(plan_of(["barking"]), FactFilter(), 10, archived=True)
        assert ["The dogs barked."] == [c.row["value"] for c in found]


def test_stemming_folds_case_and_diacritics_and_splits_as_unicode61():
    """The one stemmer: Snowball English over unicode61's words, case and diacritics folded."""
    assert stem_text("Deploys deployment DEPLOYED", None, "re-deploy") == \
        "deploy deploy deploy re deploy"
    assert stem_words(["Cafés", "naïve", "Zürich", "src/api.py"]) == \
        ["cafe", "naiv", "zurich", "src", "api", "py"]
    assert stem_text(None, "") == ""


def test_the_first_stem_is_the_subject_word():
    """``first_stem``: the stem of a text's first word, as a search compares it with the
    query's common words; ``None`` for a text with no word."""
    assert "otto" == first_stem("Otto's sister says he adores turtles.")
    assert "rosalin" == first_stem("Rosaline: Hey Imo!") == stem_words(["Rosaline"])[0]
    assert "cafe" == first_stem("  -- Cafés open late")
    assert "2023" == first_stem("2023 was the year")
    assert first_stem("... !") is None and first_stem("") is None


def test_both_engines_agree_on_which_facts_hold_a_word(engines):
    """``holding`` finds, among given facts, those the lexical leg would match for a word
    (in the text or the context), the same on both engines, the archive too."""
    for query in QUERIES:
        words = query_tokens(query)
        by_engine = []
        for backend in engines:
            ids = [int(r["id"]) for r in backend.select(FactFilter())]
            held = backend.holding(words, ids)
            matched = {int(c.row["id"]) for c in backend.lexical(plan_of(words), FactFilter(),
                                                                 100)}
            assert matched == held, (query, backend)
            values = {int(r["id"]): r["value"] for r in backend.select(FactFilter())}
            by_engine.append({values[i] for i in held})
            assert set() == backend.holding(words, [])
        assert by_engine[0] == by_engine[1], query
    for backend in engines:
        with backend.transaction():
            fact_id = backend.insert(make_row("Otto deploys on Mondays."))
            backend.archive(fact_id, archived_at=1.0, reason="test")
        assert {fact_id} == backend.holding(["deployed"], [fact_id], archived=True)
        assert set() == backend.holding(["deployed"], [fact_id])
