"""The query sanitizer: any text becomes a valid FTS5 query or none."""

from __future__ import annotations

import os
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxslots import FactStore, QueryPolicy, sanitize_query
from ctxslots.stores.sanitize import keep_words, query_tokens
from ctxslots.stores.sqlite import open_connection

MAX_EXAMPLES = int(os.environ.get("CTXSLOTS_FUZZ_EXAMPLES", "300"))

HOSTILE = [
    "",
    "   ",
    '"',
    '""""',
    "NEAR(a b, 3)",
    "a AND b OR NOT c",
    "col:value",
    "^start",
    "prefix*",
    "{key value}: x",
    "'; DROP TABLE facts; --",
    "SELECT * FROM facts_fts WHERE facts_fts MATCH 'x'",
    "https://example.com/a?b=c&d=e#frag and www.example.org",
    "deploy-day well_known src/api/routes.py",
    "\x00\x01\x02",
    "😀🔥 日本語 العربية עברית",
    "\u200b\u200e\u202e zero width",
    "a" * 100_000,
    "word " * 10_000,
    "fn main() { println!(\"{}\", x[0]); }",
    "(((((",
    ")",
    "- * + : ^ ~ $ @ ! ? | \\",
]


@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_queries_never_raise(store, text):
    """Hostile text returns hits or nothing, never an exception."""
    store.add("agent", "Deploys of the api run on Friday via routes.py and 日本語.")
    hits = store.search(text)
    assert isinstance(hits, list)


def test_sanitized_form():
    """URLs go, joiners split, operators and short tokens drop, tokens are quoted and OR-joined."""
    got = sanitize_query('Deploy-day? see https://x.io/a "NEAR(" AND src/api.py a')
    assert '"deploy" OR "day" OR "see" OR "near" OR "src" OR "api" OR "py"' == got


def test_a_long_run_before_a_url_keeps_its_words():
    """A URL's scheme is at most 64 characters (MAX_SCHEME_CHARS): a longer run of words joined
    by '+', '.' or '-' before '://' stays words, and only the URL with its scheme goes
    (unbounded, the run went too, and stripping it scanned to the run's end from each of
    its word boundaries: minutes for a pasted 200 KB message)."""
    text = "deploy+" * 2_000 + "https://x.io/a friday"
    assert ["deploy", "friday"] == query_tokens(text)
    assert ["friday"] == query_tokens("a" * 64 + "://x.io/a friday")
    long_scheme = "a" * 65
    assert [long_scheme, "io", "friday"] == query_tokens(long_scheme + "://x.io/a friday")
    assert ["see", "friday"] == query_tokens("see git+ssh://host/x vscode-insiders://y friday")


def test_a_long_message_before_a_url_still_finds_its_words(store):
    """A search with such a message finds the facts its words name."""
    store.add("agent", "Deploy the api on Friday.")
    hits = store.search("deploy+" * 2_000 + "https://x.io/a")
    assert ["Deploy the api on Friday."] == [hit.fact.value for hit in hits]


def test_stop_words_are_configurable():
    """Stop words are left out by default and kept with an empty stop list."""
    assert '"deploy"' == sanitize_query("when do we deploy")
    keep = QueryPolicy(stop_words=frozenset())
    assert '"when" OR "do" OR "we" OR "deploy"' == sanitize_query("when do we deploy", keep)
    assert "" == sanitize_query("what is it")


def test_min_token_length_and_max_tokens():
    """Short tokens drop at the configured length; at most max_tokens distinct tokens stay."""
    policy = QueryPolicy(min_token_length=4, max_tokens=2, stop_words=frozenset())
    assert '"alpha" OR "gamma"' == sanitize_query("ab abc alpha gamma delta", policy)


def test_rejects_bad_policy():
    """A policy with a minimum token length below 1 is refused."""
    with pytest.raises(ValueError):
        QueryPolicy(min_token_length=0)


def test_non_string_query_is_a_value_error(store):
    """A query that is not a string is a clear ValueError."""
    with pytest.raises(ValueError, match="query must be a string"):
        store.search(None)  # type: ignore[arg-type]


@settings(max_examples=MAX_EXAMPLES, deadline=None)
@given(st.text(max_size=300))
def test_any_text_is_valid_fts5(text):
    """Every sanitized query is accepted by FTS5 itself (or is empty)."""
    query = sanitize_query(text)
    if not query:
        return
    assert re.fullmatch(r'"[^"\s]+"( OR "[^"\s]+")*', query), query
    conn = _memory_fts()
    rows = conn.execute("SELECT rowid FROM t WHERE t MATCH ?", (query,)).fetchall()
    assert rows in ([], [(1,)])


@settings(max_examples=MAX_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(alphabet=st.characters(codec="utf-8"), max_size=200))
def test_search_never_raises(store, text):
    """FactStore.search accepts any unicode text."""
    if not store.facts():
        store.add("agent", "Deploy the api on Friday with src/api/routes.py.")
    assert isinstance(store.search(text), list)


_FTS = None


def _memory_fts():
    global _FTS
    if _FTS is None:
        _FTS = open_connection(":memory:", migrate=False, load_vec=False)
        _FTS.execute("CREATE VIRTUAL TABLE t USING fts5(v, tokenize='porter unicode61 remove_diacritics 2')")
        _FTS.execute("INSERT INTO t VALUES ('some text to match')")
    return _FTS


def test_common_words_are_left_out_in_large_stores(db_path):
    """A word in more than max_doc_share of the facts is dropped once the store is large enough."""
    policy = QueryPolicy(max_doc_share=0.5, common_min_facts=10)
    with FactStore(db_path, query_policy=policy) as store:
        with store.batch():
            for i in range(20):
                store.add("agent", f"Service note {i} mentions the service.")
            rare = store.add("agent", "The zebra service is rare.")
        assert ["zebra"] == _kept(store, "service zebra")
        assert [rare.id] == [h.fact.id for h in store.search("service zebra")]
        # When every word is common the rarest one is kept.
        assert ["service"] == _kept(store, "service")


def test_small_stores_keep_every_word(db_path):
    """Below common_min_facts no word is dropped, however common."""
    with FactStore(db_path) as store:
        for i in range(5):
            store.add("agent", f"Service note {i}.")
        assert ["service", "zebra"] == _kept(store, "service zebra")


def test_common_words_follow_growth(db_path):
    """The frequencies are reloaded once the store has grown, so new common words drop too."""
    policy = QueryPolicy(max_doc_share=0.5, common_min_facts=10)
    with FactStore(db_path, query_policy=policy) as store:
        with store.batch():
            for i in range(20):
                store.add("agent", f"Alpha note {i}.")
        assert ["beta"] == _kept(store, "alpha beta")
        with store.batch():
            for i in range(60):
                store.add("agent", f"Beta note {i}.")
        assert ["alpha"] == _kept(store, "alpha beta")


def _kept(store, query):
    """The words of ``query`` a search of ``store`` keeps after leaving out common ones."""
    return store.query_words(query)


def test_keep_words_bounds_each_word_and_all_of_them():
    """keep_words leaves out words over the share, then the most common until the rest
    fit the total share; order is kept, ties go by the word, the rarest always stays."""
    docs = {"a": 40, "b": 30, "c": 30, "d": 5}
    assert ["a", "b", "c", "d"] == keep_words(["a", "b", "c", "d"], docs, 100, share=0.5)
    assert ["b", "c", "d"] == keep_words(["a", "b", "c", "d"], docs, 100, share=0.35)
    assert ["b", "d"] == keep_words(["a", "b", "c", "d"], docs, 100, share=0.5,
                                    total_share=0.4)
    assert ["d"] == keep_words(["a", "b", "c", "d"], docs, 100, share=0.5, total_share=0.01)
    assert ["x"] == keep_words(["a", "x"], docs, 100, share=0.01)
    assert [] == keep_words([], docs, 100, share=0.5, total_share=0.5)


def test_max_query_share_must_be_a_share():
    """max_query_share outside (0, 1] is refused."""
    for bad in (0.0, -0.1, 1.5):
        with pytest.raises(ValueError):
            QueryPolicy(max_query_share=bad)


#: The same words, composed and decomposed (NFC and NFD), and with and without the
#: vowel points of Arabic and Hebrew, which no composed form absorbs.
_WRITTEN_TWO_WAYS = (
    ("Der Nutzer wohnt in M\u00fcnchen.", "Mu\u0308nchen"),
    ("Le caf\u00e9 pr\u00e9f\u00e9r\u00e9 est \u00e0 Montr\u00e9al.", "Montre\u0301al"),
    ("Ti\u1ebfng Vi\u1ec7t r\u1ea5t \u0111\u1eb9p", "Vie\u0323\u0302t"),
    ("\u0627\u0644\u0645\u0633\u062a\u062e\u062f\u0645 \u0643\u062a\u0628",
     "\u0643\u064e\u062a\u064e\u0628\u064e"),
    ("\u05e9\u05dc\u05d5\u05dd \u05e2\u05dc\u05d9\u05db\u05dd",
     "\u05e9\u05b8\u05c1\u05dc\u05d5\u05b9\u05dd"),
)


@pytest.mark.parametrize(("value", "query"), _WRITTEN_TWO_WAYS)
def test_a_word_with_combining_marks_finds_the_fact_without_them(store, value, query):
    """A query word written decomposed or with vowel points is one word, as the fact's
    word is indexed: it finds the fact (on both engines) instead of splitting at each
    mark into pieces too short to search."""
    fact = store.add("agent", value)
    store.add("agent", "An unrelated memory about the weather.")
    assert 1 == len(store.query_words(query))
    assert [fact.id] == [hit.fact.id for hit in store.search(query)]
