"""Vectors an embedder or an import file gets wrong: zero, huge (3e38) or denormal (1e-40)
values never break a search, doctor counts the ones no search can use, and reindex
embeds only the facts that need it."""

from __future__ import annotations

import base64
import io
import json
import threading
import warnings

import numpy as np
import pytest
from click.testing import CliRunner

from ctxslots import FactStore, RankingPolicy
from ctxslots.cli import cli
from ctxslots.errors import InvalidImportError
from ctxslots.stores.embedders import HashingEmbedder
from ctxslots.stores.transfer.jsonl_records import encode_vector
from ctxslots.tools import MemoryTools

FUSED = RankingPolicy(vector_weight=1.0)
DIM = 32
HEADER = json.dumps({"format": "ctxslots-facts", "version": 1})

#: The vector each hostile value embeds to; any other text embeds as the hashing embedder does.
HOSTILE = {
    "zero": np.zeros(DIM, np.float32),
    "huge": np.full(DIM, 3e38, np.float32),
    "denormal": np.full(DIM, 1e-40, np.float32),
    "nan": np.full(DIM, np.nan, np.float32),
}


def hostile_value(kind: str) -> str:
    return f"The {kind} deploy note names the staging cluster."


class HostileEmbedder:
    """The hashing embedder, except that a text naming a :data:`HOSTILE` kind gets that vector
    (what a broken model server sends back)."""

    def __init__(self) -> None:
        self.inner = HashingEmbedder(dimension=DIM)
        self.model_id, self.dimension = "hostile-test", DIM
        self.embedded: list[str] = []

    def embed(self, texts):
        out = self.inner.embed(texts).copy()
        for i, text in enumerate(texts):
            for kind, vector in HOSTILE.items():
                if f"The {kind} " in text:
                    out[i] = vector
        self.embedded += list(texts)
        return out


@pytest.fixture(name="vector_store", params=["sqlite-copy", "sqlite-file", "postgresql"])
def fixture_vector_store(request, db_path, clock):
    """A store with the hostile embedder and a vector leg, on each engine (SQLite searching
    its in-memory copy of the vectors, then reading them from the file)."""
    location = (str(request.getfixturevalue("pg_url")) if request.param == "postgresql"
                else str(db_path))
    store = FactStore(location, clock=clock, embedder=HostileEmbedder(), ranking=FUSED,
                      vector_writes="inline", vector_cache=request.param != "sqlite-file")
    try:
        yield store
    finally:
        store.close()


@pytest.mark.parametrize("kind", ["huge", "denormal"])
def test_a_huge_or_denormal_vector_is_stored_at_unit_length_and_found(vector_store, kind):
    """The scale of a vector is no part of its direction: the fact is found by its vector."""
    normal = vector_store.add("agent", "Lunch is at noon in the big room.")
    fact = vector_store.add("agent", hostile_value(kind))
    hits = vector_store.search("staging cluster deploy note", scope=None)
    assert fact.id == hits[0].fact.id
    assert hits[0].trace.cosine is not None and -1.0 <= hits[0].trace.cosine <= 1.0
    assert normal.id in {h.fact.id for h in vector_store.search("lunch noon")}
    assert vector_store.doctor().ok


@pytest.mark.parametrize("kind", ["zero", "nan"])
def test_a_vector_with_no_direction_never_breaks_a_search(vector_store, kind):
    """Every search of the scope answers, the fact is still found by its words, and doctor
    counts its vector as one no search can use."""
    normal = vector_store.add("agent", "The staging cluster restarts on Sundays.")
    fact = vector_store.add("agent", hostile_value(kind))
    hits = vector_store.search("staging cluster deploy note")
    assert {normal.id, fact.id} == {h.fact.id for h in hits}
    assert next(h for h in hits if h.fact.id == fact.id).trace.cosine is None
    # A query whose own vector has no direction answers by words too.
    assert fact.id in {h.fact.id for h in vector_store.search(f"The {kind} deploy")}
    reply = MemoryTools(vector_store).dispatch("memory_query", {"query": "staging cluster"})
    assert "deploy note names the staging cluster" in reply
    report = vector_store.doctor()
    (line,) = report.problems
    assert line.startswith("1 vector has no direction or is not of unit length") and "ctxslots reindex" in line
    assert 1 == report.vectors.unusable


def test_reindex_embeds_only_the_fact_whose_vector_no_search_can_use(vector_store):
    """reindex re-embeds the one bad vector, not the store; the embedder still gives zeros
    for that text, so doctor still counts it (and says an embedder that gives such a
    vector again cannot embed it)."""
    for i in range(5):
        vector_store.add("agent", f"Release {i} moved the billing queue.")
    vector_store.add("agent", hostile_value("zero"))
    embedder = vector_store.embedder
    embedder.embedded.clear()
    assert 1 == vector_store.reindex()
    assert [hostile_value("zero")] == embedder.embedded
    assert 1 == vector_store.doctor().vectors.unusable
    embedder.embedded.clear()
    assert 6 == vector_store.reindex(full=True)
    assert ["reindex"] == embedder.embedded[:1]  # asked once before any vector is dropped
    assert 6 == len(embedder.embedded[1:])


@pytest.mark.parametrize(("kind", "scale"), [("huge", 3e38), ("denormal", 1e-40)])
def test_an_import_with_a_huge_or_denormal_vector_is_searchable(vector_store, kind, scale):
    """A vector of the store's model at any scale is stored at unit length."""
    own = vector_store.embedder.inner.embed(["Blue-green deploys of the billing service."])[0]
    vector = (own.astype(np.float64) / np.abs(own).max() * scale).astype(np.float32)
    record = {"id": 1, "slot": "agent", "value": "Blue-green deploys of the billing service.",
              "vector": encode_vector("hostile-test", vector)}
    vector_store.import_jsonl(io.StringIO(HEADER + "\n" + json.dumps(record) + "\n"))
    hit = vector_store.search("blue-green billing deploys")[0]
    assert hit.trace.cosine is not None and hit.trace.cosine > 0.5
    assert vector_store.doctor().ok


def test_an_import_with_a_zero_vector_is_refused_naming_the_line(vector_store):
    """All zeros says nothing: the line is refused and nothing is written."""
    record = {"slot": "agent", "value": "Nothing points anywhere.",
              "vector": encode_vector("hostile-test", np.zeros(DIM, np.float32))}
    text = HEADER + "\n" + json.dumps(record) + "\n"
    with pytest.raises(InvalidImportError) as caught:
        vector_store.import_jsonl(io.StringIO(text))
    assert (2, "vector") == (caught.value.line, caught.value.field)
    assert "all zeros" in str(caught.value)
    assert [] == vector_store.facts()



@pytest.mark.parametrize("extra", [1, 2, 3])
def test_an_import_with_vector_data_cut_inside_a_value_names_the_vector(tmp_path, extra):
    """Base64 data that is no whole number of float32 values is a bad vector of that line,
    not unreadable JSON."""
    data = np.arange(1, DIM + 1, dtype="<f4").tobytes() + b"\x01" * extra
    record = {"slot": "agent", "value": "The cut vector note.",
              "vector": {"model": "hostile-test", "dimension": DIM,
                         "data": base64.b64encode(data).decode("ascii")}}
    text = HEADER + "\n" + json.dumps(record) + "\n"
    with FactStore(tmp_path / "cut.db") as store:
        with pytest.raises(InvalidImportError) as caught:
            store.import_jsonl(io.StringIO(text))
        assert (2, "vector") == (caught.value.line, caught.value.field)
        assert f"vector data must hold {DIM} finite float32 values" in str(caught.value)
        assert "JSON" not in str(caught.value)
        assert [] == store.facts()

def test_the_cli_search_answers_on_a_store_holding_a_zero_vector(db_path):
    """`ctxslots search` over a store with a vector of no direction prints hits, no traceback."""
    with FactStore(db_path, embedder=HostileEmbedder(), ranking=FUSED,
                   vector_writes="inline") as store:
        store.add("agent", hostile_value("zero"))
        store.add("agent", "The staging cluster restarts on Sundays.")
    # The CLI opens the store with the same embedder (an object is not recorded): through
    # a store object, as MCP and the tools do; the CLI's own path reads the same engine.
    with FactStore(db_path, embedder=HostileEmbedder(), ranking=FUSED) as store:
        assert 2 == len(store.search("staging cluster"))
    result = CliRunner().invoke(cli, ["--db", str(db_path), "search", "staging cluster"])
    assert 0 == result.exit_code and "Traceback" not in result.output
    assert "staging cluster" in result.output


class FailingEmbedder:
    """The hashing embedder; on the background writer's thread it fails once ``fail`` is set
    (the model server went away) and waits for ``gate`` before each batch."""

    def __init__(self) -> None:
        self.inner = HashingEmbedder(dimension=DIM)
        self.model_id, self.dimension = self.inner.model_id, DIM
        self.fail = threading.Event()
        self.gate = threading.Event()
        self.embedded: list[str] = []

    def embed(self, texts):
        if threading.current_thread().name == "ctxslots-vectors":
            self.gate.wait(60)
            if self.fail.is_set():
                raise OSError("the embeddings server closed the connection")
        self.embedded += list(texts)
        return self.inner.embed(texts)


@pytest.mark.parametrize("engine_name", ["sqlite", "postgresql"])
def test_wait_for_vectors_is_false_while_dropped_facts_have_no_vector(request, db_path,
                                                                      engine_name):
    """The background writer fails and drops its queue: wait_for_vectors answers false,
    doctor counts the facts, and reindex embeds those facts only, after which it answers true."""
    location = (str(request.getfixturevalue("pg_url")) if engine_name == "postgresql"
                else str(db_path))
    embedder = FailingEmbedder()
    with FactStore(location, embedder=embedder, ranking=FUSED,
                   vector_writes="background") as store:
        embedder.gate.set()
        kept = [store.add("agent", f"Kept note {i} on the release train.").id for i in range(3)]
        assert store.wait_for_vectors(60)
        embedder.gate.clear()
        embedder.fail.set()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            lost = [store.add("agent", f"Lost note {i} on the billing queue.").id
                    for i in range(5)]
            embedder.gate.set()
            assert not store.wait_for_vectors(60)
        assert any("could not be written" in str(w.message) for w in caught)
        assert not store.wait_for_vectors(60)  # still false: nothing repaired them
        report = store.doctor()
        assert 5 == report.vectors.missing
        assert any(p.startswith("5 facts have no vector") for p in report.problems)
    embedder = FailingEmbedder()
    embedder.gate.set()
    with FactStore(location, embedder=embedder, ranking=FUSED,
                   vector_writes="background") as store:
        assert 5 == store.reindex()
        assert sorted(f"Lost note {i} on the billing queue." for i in range(5)) == sorted(
            embedder.embedded)
        assert store.wait_for_vectors(60) and store.doctor().ok
        assert set(lost) <= {h.fact.id for h in store.search("lost note billing", limit=10)}
        assert set(kept) <= {h.fact.id for h in store.search("kept note release", limit=10)}


def test_wait_for_vectors_turns_true_once_the_dropped_facts_are_written_again(db_path):
    """In the same store: the facts whose vectors were dropped get them when rewritten."""
    embedder = FailingEmbedder()
    with FactStore(db_path, embedder=embedder, ranking=FUSED,
                   vector_writes="background") as store:
        embedder.fail.set()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            lost = store.add("agent", "Lost note on the billing queue.")
            embedder.gate.set()
            assert not store.wait_for_vectors(60)
        embedder.fail.clear()
        store.reindex()
        assert store.wait_for_vectors(60)
        assert lost.id in {h.fact.id for h in store.search("billing queue")}
