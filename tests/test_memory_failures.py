"""How the framework integrations' shared :class:`Memory` tells a failure: once, on the
``ctxslots.integrations`` logger, naming whose run failed."""

from __future__ import annotations

import asyncio
import logging

import pytest

from ctxslots import (
    FactStore,
    MemoryFlusher,
    Message,
    OpenAIChatClient,
    PromptAssembler,
    hookimpl,
)
from ctxslots.errors import InvalidArgumentError, MemoryUnavailableError
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


class _Weather:
    """A contributor whose source is down."""

    name = "weather"
    priority = 5
    sticky = False

    def contribute(self, request):
        raise RuntimeError("the weather service is down")


class _WeatherPlugin:
    @hookimpl
    def register_contributors(self, register):
        register(_Weather())


def test_a_failed_section_is_one_warning_and_the_rest_of_the_memory_goes_out(db_path, caplog):
    """A contributor that fails costs its own section only: one warning, the assembler's,
    naming it, and no second line saying the run goes on without memory while the other
    sections are still sent. A strict memory raises it, naming the run."""
    with FactStore(db_path) as store:
        store.add("user", "Alice drinks green tea.", user="alice")
        assembler = PromptAssembler(store, plugins=[_WeatherPlugin()])
        who = RunIdentity(user="alice", conversation="chat-9")
        with caplog.at_level(logging.WARNING, logger="ctxslots"):
            text = Memory(store, assembler=assembler).context("What do I drink?", who)
        assert "Alice drinks green tea." in text
        assert ["contributor 'weather' failed"] == [r.getMessage() for r in caplog.records]
        assert "the weather service is down" == str(caplog.records[0].exc_info[1])
        with pytest.raises(MemoryUnavailableError, match=r"^memory is unavailable for user "
                           r"'alice', conversation 'chat-9' \(assembling the context failed: "
                           r"weather: RuntimeError: the weather service is down\)"):
            Memory(store, assembler=assembler, strict=True).context("What do I drink?", who)


def test_a_tool_call_for_owners_the_store_refuses_is_logged(db_path, caplog):
    """A run whose user the store refuses (too long): the tool call is answered with the
    error, as always, and the operator gets a warning naming the run too."""
    with FactStore(db_path) as store:
        who = RunIdentity(user="u" * 300, conversation="chat-3")
        with caplog.at_level(logging.WARNING, logger="ctxslots.integrations"):
            answer = Memory(store).dispatch("memory_query", {"query": "tea"}, who)
    assert answer.startswith("Error: memory is unavailable (InvalidFactError: user must be at "
                             "most 200 characters")
    [said] = _warnings(caplog, "ctxslots.integrations")
    assert said.startswith(f"memory is unavailable for user {'u' * 80!r}, conversation "
                           "'chat-3' (calling a memory tool failed: InvalidFactError: user must "
                           "be at most 200 characters")


def test_scoped_slots_named_as_one_string_is_that_slot(db_path):
    """``Memory(store, scoped_slots="agent")`` scopes the agent slot, as ``MemoryTools`` and
    ``MemoryFlusher`` read one string: an agent fact the tools store lands in the run's
    workspace, not globally; what is no list of slot names is refused naming the field."""
    with FactStore(db_path) as store:
        memory = Memory(store, scoped_slots="agent")
        assert frozenset({"agent"}) == memory.scoped_slots
        who = RunIdentity(user="alice", agent="helper", scope="shop")
        answer = memory.dispatch("memory_store", {"slot": "agent",
                                                  "value": "Refunds need a receipt."}, who)
        assert answer.startswith("Stored [id:")
        kept = store.find_memory("agent", "Refunds need a receipt.", agent="helper",
                                 scope="shop")
        assert kept is not None and "shop" == kept.scope
        assert [] == store.facts(slots=["agent"], agent="helper")  # nothing global
        with pytest.raises(InvalidArgumentError, match="scoped_slots must be a list of slot "
                                                       "names, not 5") as caught:
            Memory(store, scoped_slots=5)
        assert "scoped_slots" == caught.value.field
