"""How the framework integrations' shared :class:`Memory` tells a failure: once, on the
``ctxslots.integrations`` logger, naming whose run failed."""

from __future__ import annotations

import asyncio
import logging

import pytest

from ctxslots import FactStore, MemoryFlusher, Message, OpenAIChatClient
from ctxslots.errors import MemoryUnavailableError
from ctxslots.integrations import Memory, RunIdentity
from ctxslots.testing import ScriptedChatServer, ScriptedReply


def _warnings(caplog: pytest.LogCaptureFixture, logger: str) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == logger and r.levelno == logging.WARNING]


def test_a_failed_flush_names_the_run_it_failed_for(db_path, caplog):
    """Of many users' runs, the warning of a failed flush says whose: user, agent, scope
    and conversation."""
    with FactStore(db_path) as store, \
            ScriptedChatServer([ScriptedReply(status=400, body="model not found")]) as server:
        client = OpenAIChatClient(server.base_url, "m", max_retries=0)
        memory = Memory(store, flusher=MemoryFlusher(store, client), force_flush=True)
        who = RunIdentity(user="alice", agent="helper", scope="shop", conversation="chat-77")
        with caplog.at_level(logging.WARNING, logger="ctxslots.integrations"):
            assert "failed" == asyncio.run(memory.aflush([Message("user", "Hi.")], who)).status
    [said] = _warnings(caplog, "ctxslots.integrations")
    assert said.startswith("memory is unavailable for user 'alice', agent 'helper', scope "
                           "'shop', conversation 'chat-77' (flushing the conversation failed: ")
    assert "HTTP 400: model not found" in said


def test_a_failed_context_names_the_run_and_so_does_the_strict_error(db_path, caplog):
    """A store that cannot be read: the warning, and the error a strict memory raises,
    name the run's user (the store's default one when it names none) and conversation."""
    store = FactStore(db_path)
    store.close()
    with caplog.at_level(logging.WARNING, logger="ctxslots.integrations"):
        assert "" == Memory(store).context("Hi", RunIdentity(conversation="chat-8"))
    [said] = _warnings(caplog, "ctxslots.integrations")
    assert said.startswith("memory is unavailable for the default user, conversation 'chat-8' "
                           "(assembling the context failed: StoreClosedError: ")
    with pytest.raises(MemoryUnavailableError,
                       match=r"^memory is unavailable for user 'bob', conversation 'default' "
                             r"\(assembling the context failed: StoreClosedError"):
        Memory(store, strict=True).context("Hi", RunIdentity(user="bob"))
