"""A memory's context: words that find it without being part of it, on both engines."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest

from ctxslots import (
    AssemblyRequest,
    FactStore,
    InvalidFactError,
    InvalidImportError,
    PromptAssembler,
    RankingPolicy,
)
from ctxslots.stores.writes.limits import Limits

QUESTION = "Who did you meet at the robotics conference?"
REPLY = "It was Ilse Varga."


def ids(hits):
    return [h.fact.id for h in hits]


def test_a_reply_is_found_through_its_context(store):
    """A reply that shares no word with the question is found through the question as context."""
    plain = store.add("user", "It was Jane Doe.")
    reply = store.add("user", REPLY, context=QUESTION)
    assert QUESTION == reply.context
    assert plain.context is None
    assert [reply.id] == ids(store.search("whom did they meet at the robotics conference"))
    assert [plain.id] == ids(store.search("Jane Doe"))


def test_context_words_weigh_less_than_the_memory_own(store):
    """A word in a memory's context counts less than the same word in another memory's value."""
    in_context = store.add("agent", "The build passed on Tuesday.", context="What about the flaky deploy?")
    in_value = store.add("agent", "The deploy is flaky on Tuesday.")
    hits = store.search("flaky deploy")
    assert [in_value.id, in_context.id] == ids(hits)
    assert hits[0].trace.bm25 < hits[1].trace.bm25  # FTS5's sign: more negative is better


def test_context_is_never_shown_in_a_prompt(store):
    """The prompt shows the memory's value; its context is searched, not rendered."""
    store.add("user", REPLY, context=QUESTION + " Zanzibar-7")
    prompt = PromptAssembler(store).assemble(AssemblyRequest("robotics conference", budget=500))
    assert REPLY in prompt.text
    assert "Zanzibar" not in prompt.text and "robotics" not in prompt.text


def test_context_is_never_embedded(engine, location, clock):
    """The stored vector is the value's alone, whatever the context."""
    with FactStore(location, clock=clock, ranking=RankingPolicy(vector_weight=1.0)) as store:
        assert store.keeps_vectors
        fact = store.add("user", REPLY, context=QUESTION)
        stored = engine(store).vectors_of([fact.id])[fact.id]
        expected = store.embedder.embed([REPLY])[0]
        np.testing.assert_allclose(stored, expected, atol=1e-6)


def test_upsert_keeps_the_context_of_the_same_value_and_drops_it_for_a_new_one(store):
    """Writing a keyed fact again without a context keeps it only while the value is the same."""
    first = store.upsert("user", "editor", "The user edits in Helix.", context="Which editor?")
    again = store.upsert("user", "editor", "The user edits in Helix.", tags=["tools"])
    assert (first.id, "Which editor?") == (again.id, again.context)
    moved = store.upsert("user", "editor", "The user edits in Zed.")
    assert moved.context is None
    given = store.upsert("user", "editor", "The user edits in Zed.", context="Editor of choice?")
    assert "Editor of choice?" == given.context


def test_update_sets_and_removes_the_context_and_search_follows(store):
    """update(context=...) replaces the context, "" removes it, and search follows at once."""
    fact = store.add("agent", "Port 8443 is taken.")
    assert [] == ids(store.search("staging proxy"))
    assert "The staging proxy?" == store.update(fact.id, context="The staging proxy?").context
    assert [fact.id] == ids(store.search("staging proxy"))
    assert "Port 8443 is taken." == store.update(fact.id, tags=["ports"]).value
    assert "The staging proxy?" == store.get(fact.id).context
    assert store.update(fact.id, context="").context is None
    assert [] == ids(store.search("staging proxy"))


def test_the_in_memory_lexical_copy_scores_context_as_fts5_does(db_path, clock):
    """The SQLite engine's in-memory copy gives FTS5's candidates and scores with contexts."""
    with FactStore(db_path, clock=clock, lexical_cache=True) as store:
        with store.batch():
            for n in range(60):
                store.add("agent", f"Note {n}: the queue worker {'retries' if n % 3 else 'waits'}.",
                          context=None if n % 2 else f"Why is the deploy {n} slow? cache miss")
        assert store.load_lexical_cache()
        with FactStore(db_path, clock=clock) as plain:
            for query in ("deploy cache", "worker retries", "slow queue deploy"):
                cached = [(h.fact.id, h.trace.bm25) for h in store.search(query, limit=30)]
                fts5 = [(h.fact.id, h.trace.bm25) for h in plain.search(query, limit=30)]
                assert [i for i, _ in fts5] == [i for i, _ in cached]
                assert [b for _, b in fts5] == pytest.approx([b for _, b in cached], rel=1e-6)


def test_context_round_trips_through_export_and_import(store, location, clock, tmp_path):
    """Exports carry a context (and no field where there is none); an import restores it."""
    with_context = store.add("user", REPLY, context=QUESTION)
    store.add("user", "The user likes tea.")
    gone = store.add("user", "It was in Lisbon.", context="Where was the conference?")
    store.forget(gone.id)
    out = io.StringIO()
    store.export_jsonl(out)
    records = [json.loads(line) for line in out.getvalue().splitlines()[1:]]
    by_value = {r["value"]: r for r in records}
    assert QUESTION == by_value[REPLY]["context"]
    assert "context" not in by_value["The user likes tea."]
    assert "Where was the conference?" == by_value["It was in Lisbon."]["context"]
    with FactStore(tmp_path / "copy.db", clock=clock) as copy:
        copy.import_jsonl(io.StringIO(out.getvalue()))
        assert QUESTION == copy.get(with_context.id).context
        assert [with_context.id] == ids(copy.search("robotics conference"))
        archived = copy.search("conference", include_archive=True)
        assert "Where was the conference?" in {h.fact.context for h in archived}


@pytest.mark.parametrize("context, message", [
    (123, "context must be a string or None"),
    ("x" * 5000, "context is 5000 bytes, over the limit of 4096"),
    ("a\x00b", "context must not contain NUL characters"),
    ("\udcff broken", "context is not valid Unicode text"),
], ids=["number", "too-large", "nul", "surrogate"])
def test_a_malformed_context_is_refused_and_nothing_is_written(store, context, message):
    """A context that is not text, too large, or holds NUL or a lone surrogate writes nothing."""
    with pytest.raises(InvalidFactError, match=message) as caught:
        store.add("user", "The user likes tea.", context=context)
    assert "context" == caught.value.field
    assert [] == list(store.facts())


def test_a_blank_context_is_none_and_a_secret_in_it_is_redacted(store):
    """Blank context is stored as none; a credential in a context is redacted as in a value."""
    assert store.add("user", "The user likes tea.", context="  \n").context is None
    key = "sk-" + "a1B2" * 12
    fact = store.add("user", "The user rotated the key.", context=f"The key was {key}")
    assert key not in fact.context and "[redacted" in fact.context
    refusing = Limits(secrets="refuse")
    with pytest.raises(InvalidFactError, match="context holds what looks like"):
        refusing.context(f"The key was {key}")


def test_an_import_with_a_malformed_context_writes_nothing(store):
    """A record whose context is not text stops the import with its line; nothing is written."""
    header = {"format": "ctxslots-facts", "version": 1}
    lines = [header, {"slot": "user", "value": "The user likes tea.", "context": "Tea?"},
             {"slot": "user", "value": "The user likes coffee.", "context": ["not", "text"]}]
    with pytest.raises(InvalidImportError, match="context") as caught:
        store.import_jsonl(io.StringIO("\n".join(json.dumps(r) for r in lines)))
    assert "line 3" in str(caught.value)
    assert [] == list(store.facts())
