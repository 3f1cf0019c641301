"""The OpenAI Agents SDK integration, run by the SDK's own runner against a scripted
chat-completions server on 127.0.0.1 (the real openai HTTP client): memory in the
instructions, the tools, the flush at the end of a run, identity, and failures."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys

import pytest

agents = pytest.importorskip("agents")
openai = pytest.importorskip("openai")

from _agent_scripts import (  # noqa: F401  (fixtures, found by pytest by name)
    fixture_servers,
    fixture_store,
    flush_reply,
    scripted_flusher,
    store_call,
    tool_calls,
)
from ctxslots import (
    FactStore,
    InvalidArgumentError,
)
from ctxslots.errors import MemoryUnavailableError
from ctxslots.integrations import Memory, MemoryContext
from ctxslots.integrations.openai_agents import (
    memory_instructions,
    memory_tools,
    to_messages,
    with_memory,
)
from ctxslots.testing import ScriptedChatServer

agents.set_tracing_disabled(True)


def _agent(server: ScriptedChatServer, name: str = "assistant", **options) -> agents.Agent:
    client = openai.AsyncOpenAI(base_url=server.base_url, api_key="test-key", max_retries=0)
    model = agents.OpenAIChatCompletionsModel(model="scripted", openai_client=client)
    return agents.Agent(name=name, instructions="Answer briefly.", model=model, **options)


def _run(agent, text, context):
    return asyncio.run(agents.Runner.run(agent, text, context=context))


def _runs(*runs):
    """Several runs in order on one event loop (the model's HTTP client is bound to it)."""
    async def main():
        return [await agents.Runner.run(agent, text, context=context)
                for agent, text, context in runs]

    return asyncio.run(main())


def _system(request: dict) -> str:
    return request["messages"][0]["content"]


def test_memory_reaches_the_instructions(store, servers):
    """The run's user sees their own facts after the agent's instructions, found by the
    latest user input."""
    model, _ = servers(["You use Helix."])
    agent = with_memory(_agent(model), Memory(store))
    result = _run(agent, "Which editor do I use?", MemoryContext(user="alice"))
    assert "You use Helix." == result.final_output
    system = _system(model.requests[0])
    assert system.startswith("Answer briefly.\n\n")
    assert "The user edits code in Helix." in system and "Emacs" not in system


def test_a_tool_call_writes_a_fact_for_the_runs_user(store, servers):
    """The strict memory tools run for the context's user; the other user's memory is
    untouched."""
    model, _ = servers([tool_calls(store_call("user", "The user drinks green tea.")), "Noted."])
    agent = with_memory(_agent(model), Memory(store))
    result = _run(agent, "I drink green tea.", MemoryContext(user="bob", scope="shop"))
    assert "Noted." == result.final_output
    assert ["The user drinks green tea.", "The user edits code in Emacs."] == sorted(
        f.value for f in store.facts(slots=["user"], user="bob"))
    assert "tea" not in " ".join(f.value for f in store.facts(slots=["user"], user="alice"))
    tool_answer = model.requests[1]["messages"][-1]
    assert tool_answer["role"] == "tool" and tool_answer["content"].startswith("Stored [id:")
    assert all(t["function"].get("strict") for t in model.requests[0]["tools"])


def test_agent_facts_belong_to_the_agent_and_scope(store, servers):
    """A fact the model keeps in the agent slot is the run's agent's (the Agent's name,
    unless the context names one); with the agent slot scoped, in the context's scope."""
    model, _ = servers([tool_calls(store_call("agent", "Refunds need a receipt.")), "Ok.",
                        tool_calls(store_call("agent", "Refunds take a week.")), "Ok."])
    agent = with_memory(_agent(model, name="support"),
                       Memory(store, scoped_slots={"project", "agent"}))
    _runs((agent, "Remember: refunds need a receipt.", MemoryContext(user="a", scope="shop")),
          (agent, "Remember: refunds take a week.", MemoryContext(agent="triage")))
    assert store.find_memory("agent", "Refunds need a receipt.", agent="support",
                             scope="shop") is not None
    assert store.find_memory("agent", "Refunds need a receipt.", agent="support") is None
    assert store.find_memory("agent", "Refunds take a week.", agent="triage") is not None
    assert [] == store.facts(slots=["agent"])  # nothing for the default agent


def test_the_tools_alone_write_as_the_agent_that_calls_them(store, servers):
    """``memory_tools(memory)`` on an agent of its own (no ``with_memory``): an agent fact
    the model keeps is the calling agent's, so the agent's next prompt shows it; tools
    made for a named agent (``agent=``) keep writing as that one."""
    model, _ = servers([tool_calls(store_call("agent", "Users like answers as tables.")), "Ok.",
                        "Tables it is.",
                        tool_calls(store_call("agent", "Refunds need a receipt.")), "Ok."])
    memory = Memory(store)
    agent = _agent(model, name="helper", tools=memory_tools(memory))
    agent.instructions = memory_instructions(memory, "Answer briefly.")
    named = _agent(model, name="helper", tools=memory_tools(memory, agent="support"))
    _runs((agent, "Remember: answers as tables.", MemoryContext(user="alice")),
          (agent, "Should answers be tables?", MemoryContext(user="alice")),
          (named, "Remember: refunds need a receipt.", MemoryContext(user="alice")))
    assert store.find_memory("agent", "Users like answers as tables.",
                             agent="helper") is not None
    assert store.find_memory("agent", "Refunds need a receipt.", agent="support") is not None
    assert [] == store.facts(slots=["agent"])  # nothing for the default agent
    assert "- Users like answers as tables." in _system(model.requests[2])


def test_the_runs_messages_are_flushed_when_it_ends(store, servers):
    """With a flusher whose policy is due, the run's conversation is flushed for the
    context's user and agent; the report lands on the context; the memory tools'
    own calls are not part of it."""
    model, flush = servers(
        [tool_calls(("memory_query", {"query": "tea", "slot": None, "limit": None,
                                      "tags": None, "source": None, "said_after": None,
                                      "said_before": None})),
         "Lisbon is lovely."],
        [flush_reply(("user", "city", "The user lives in Lisbon."))])
    memory = Memory(store, flusher=scripted_flusher(store, flush, every_n_turns=1))
    context = MemoryContext(user="alice", conversation="chat-1")
    _run(with_memory(_agent(model, name="concierge"), memory), "I moved to Lisbon.", context)
    report = context.flush_report
    assert report is not None and report.status == "applied"
    assert ("alice", "concierge") == (report.user, report.agent)
    assert "The user lives in Lisbon." == store.get_by_key("user", "city", user="alice").value
    assert store.get_by_key("user", "city", user="bob") is None
    sent = flush.requests[0]["messages"][-1]["content"]
    assert "I moved to Lisbon." in sent and "Lisbon is lovely." in sent
    assert "memory_query" not in sent


def test_a_flush_not_due_is_logged_and_reported(store, servers, caplog):
    """The default policy waits; the report says why and a log line says so."""
    model, flush = servers(["Hello."])
    memory = Memory(store, flusher=scripted_flusher(store, flush))
    context = MemoryContext(user="alice")
    with caplog.at_level(logging.INFO, logger="ctxslots.integrations"):
        _run(with_memory(_agent(model), memory), "Hi there.", context)
    assert context.flush_report.status == "not_due"
    assert [] == flush.requests
    assert any("not_due" in r.getMessage() and "of 10 turns" in r.getMessage()
               for r in caplog.records)


def test_the_next_run_continues_the_conversation(store, servers):
    """A second run given the first one's items reads on from where the first stopped."""
    model, flush = servers(["Hello.", "Noted."],
                           [flush_reply(("user", "pet", "The user has a cat."))])
    memory = Memory(store, flusher=scripted_flusher(store, flush, every_n_turns=2))
    agent = with_memory(_agent(model), memory)
    first, second = (MemoryContext(user="alice", conversation="c") for _ in range(2))

    async def main():
        result = await agents.Runner.run(agent, "Hi.", context=first)
        await agents.Runner.run(agent, [*result.to_input_list(),
                                        {"role": "user", "content": "I have a cat."}],
                                context=second)

    asyncio.run(main())
    assert first.flush_report.status == "not_due"
    report = second.flush_report
    assert (report.status, report.first, report.last, report.restarted) == \
        ("applied", 1, 4, False)


def test_identity_keeps_two_users_apart(store, servers):
    """Two runs of one agent, one per user: each sees and writes only its own memory."""
    model, _ = servers([tool_calls(store_call("user", "The user is vegetarian.")), "Ok.",
                        "Ok."])
    agent = with_memory(_agent(model), Memory(store))
    _runs((agent, "I am vegetarian.", {"user": "alice"}),
          (agent, "What do I eat?", MemoryContext(user="bob")))
    bob_system = _system(model.requests[2])
    assert "Emacs" in bob_system and "vegetarian" not in bob_system and "Helix" not in bob_system
    assert store.find_memory("user", "The user is vegetarian.", user="alice") is not None
    assert store.find_memory("user", "The user is vegetarian.", user="bob") is None


def test_a_streamed_run_with_a_handoff_keeps_memory(store, servers):
    """A streamed run whose first agent hands off: the second agent's instructions carry
    memory for the same user, and its end flushes the run as the run's first agent."""
    model, flush = servers([tool_calls(("transfer_to_billing", {})), "Your invoice is sent."],
                           [flush_reply(("agent", "invoices", "Invoices go out by mail."))])
    memory = Memory(store, flusher=scripted_flusher(store, flush, every_n_turns=1))
    billing = with_memory(_agent(model, name="billing"), memory)
    front = with_memory(_agent(model, name="front", handoffs=[billing]), memory)
    context = MemoryContext(user="alice")

    async def stream() -> list[str]:
        run = agents.Runner.run_streamed(front, "Send my invoice; I use Helix.", context=context)
        return [event.type async for event in run.stream_events()] and [run.final_output]

    assert ["Your invoice is sent."] == asyncio.run(stream())
    assert all(r.get("stream") is True for r in model.requests)
    assert "Helix" in _system(model.requests[1])
    assert ("applied", "front") == (context.flush_report.status, context.flush_report.agent)
    assert store.get_by_key("agent", "invoices", agent="front") is not None


def test_a_handoff_from_an_agent_without_memory_is_left_out_of_the_flush(store, servers):
    """The first agent has no memory, its handoff reaches one that has: the flush runs as
    that agent and reads no handoff call or reply."""
    model, flush = servers([tool_calls(("transfer_to_billing", {})), "Billing here."],
                           [flush_reply()])
    memory = Memory(store, flusher=scripted_flusher(store, flush, every_n_turns=1))
    billing = with_memory(_agent(model, name="billing"), memory)
    front = _agent(model, name="front", handoffs=[billing])
    context = MemoryContext(user="alice")
    _run(front, "A billing question.", context)
    assert ("applied", "billing") == (context.flush_report.status, context.flush_report.agent)
    sent = flush.requests[0]["messages"][-1]["content"]
    assert "A billing question." in sent and "transfer_to_billing" not in sent


def test_runs_that_end_with_different_agents_keep_one_progress(store, servers):
    """A conversation continued over three runs, the first and last handed off to
    billing: each flush reads only the messages new since the last one."""
    model, flush = servers(
        [tool_calls(("transfer_to_billing", {})), "Billing here.", "Noted.",
         tool_calls(("transfer_to_billing", {})), "Billing again."],
        [flush_reply(), flush_reply(), flush_reply()])
    memory = Memory(store, flusher=scripted_flusher(store, flush, every_n_turns=1))
    billing = with_memory(_agent(model, name="billing"), memory)
    front = with_memory(_agent(model, name="front", handoffs=[billing]), memory)


    async def main() -> list:
        history: list = []
        reports = []
        for message in ("I moved to Lisbon; a billing question.", "I like tea.",
                        "Another billing question."):
            context = MemoryContext(user="alice", conversation="chat-1")
            result = await agents.Runner.run(
                front, history + [{"role": "user", "content": message}], context=context)
            history = result.to_input_list()
            reports.append(context.flush_report)
        return reports

    reports = asyncio.run(main())
    assert [r.agent for r in reports] == ["front"] * 3
    assert not any(r.restarted for r in reports)
    sent = [r["messages"][-1]["content"] for r in flush.requests]
    assert "I moved to Lisbon" in sent[0]
    assert "I moved to Lisbon" not in sent[1] and "I like tea." in sent[1]
    assert "I like tea." not in sent[2] and "Another billing question." in sent[2]


def test_an_agent_run_as_a_tool_flushes_as_itself(store, servers):
    """A manager calls a researcher through ``as_tool``, both with memory: the nested run
    flushes as the researcher, and the manager's next run reads on from its own progress."""
    research = ("research", {"input": "Find the capital of Portugal."})
    model, flush = servers(
        [tool_calls(research), "Lisbon is the capital.", "Lisbon.",
         tool_calls(research, prefix="again"), "Madrid is the capital.", "Madrid."],
        [flush_reply(("agent", "sources", "Atlases name capitals.")),
         flush_reply(("agent", "delegate", "The researcher finds capitals.")),
         flush_reply(), flush_reply()])
    memory = Memory(store, flusher=scripted_flusher(store, flush, every_n_turns=1))
    researcher = with_memory(_agent(model, name="researcher"), memory)
    manager = with_memory(_agent(model, name="manager",
                                 tools=[researcher.as_tool("research", "Ask the researcher.")]),
                          memory)
    contexts = [MemoryContext(user="alice", conversation="c1") for _ in range(2)]

    async def main() -> None:
        result = await agents.Runner.run(manager, "The capital of Portugal?",
                                         context=contexts[0])
        await agents.Runner.run(manager, [*result.to_input_list(),
                                          {"role": "user", "content": "And of Spain?"}],
                                context=contexts[1])

    asyncio.run(main())
    assert store.get_by_key("agent", "sources", agent="researcher") is not None
    assert store.get_by_key("agent", "sources", agent="manager") is None
    assert store.get_by_key("agent", "delegate", agent="manager") is not None
    first, second = (c.flush_report for c in contexts)
    assert ("manager", 1, 4) == (first.agent, first.first, first.last)
    assert ("manager", 5, 8, False) == (second.agent, second.first, second.last,
                                        second.restarted)
    assert "The capital of Portugal?" not in flush.requests[3]["messages"][-1]["content"]


def test_a_failing_store_does_not_stop_the_run(db_path, clock, servers, caplog):
    """A closed store: the run answers, without memory, and each failure is logged."""
    store = FactStore(db_path, clock=clock)
    model, flush = servers(["Still here."], [flush_reply()])
    memory = Memory(store, flusher=scripted_flusher(store, flush, every_n_turns=1))
    agent = with_memory(_agent(model), memory)
    store.close()
    context = MemoryContext(user="alice")
    with caplog.at_level(logging.WARNING, logger="ctxslots.integrations"):
        result = _run(agent, "Hello?", context)
    assert "Still here." == result.final_output
    assert "Answer briefly." == _system(model.requests[0])
    failures = [r.getMessage() for r in caplog.records if r.name == "ctxslots.integrations"]
    assert any("assembling the context failed" in m for m in failures)
    assert any("flushing the conversation failed" in m for m in failures)
    assert context.flush_report is None


def test_a_failing_store_stops_a_strict_run(db_path, clock, servers):
    """With strict memory the failure is raised into the run."""
    store = FactStore(db_path, clock=clock)
    model, _ = servers(["Never sent."])
    agent = with_memory(_agent(model), Memory(store, strict=True))
    store.close()
    with pytest.raises(MemoryUnavailableError, match="assembling the context failed"):
        _run(agent, "Hello?", MemoryContext(user="alice"))
    assert [] == model.requests


def test_a_failing_tool_answers_the_model(db_path, clock, servers):
    """A tool call on a closed store answers an error to the model; the run goes on."""
    store = FactStore(db_path, clock=clock)
    model, _ = servers([tool_calls(store_call("user", "The user likes jazz.")), "Sorry."])
    tools = memory_tools(Memory(store))
    agent = _agent(model, tools=tools)
    store.close()
    assert "Sorry." == _run(agent, "I like jazz.", MemoryContext(user="alice")).final_output
    answer = model.requests[1]["messages"][-1]["content"]
    assert "Error: the memory store is unavailable; try again later" == answer


def test_a_strict_run_naming_no_user_has_its_tool_calls_answered(store, servers, caplog):
    """With require_user and strict, a tool call of a run whose context names no user is
    answered with the error, as every failing tool call is, and logged: not raised."""
    model, _ = servers([tool_calls(store_call("user", "The user likes jazz.")), "Sorry."])
    agent = _agent(model, tools=memory_tools(Memory(store, require_user=True, strict=True)))
    with caplog.at_level(logging.WARNING, logger="ctxslots.integrations"):
        assert "Sorry." == _run(agent, "I like jazz.", MemoryContext()).final_output
    answer = model.requests[1]["messages"][-1]["content"]
    assert "Error: memory is unavailable (the run names no user)" == answer
    assert any("names no user" in r.getMessage() for r in caplog.records)
    assert [] == store.facts()


def test_bad_input_is_refused_with_a_clear_error(store):
    """Not an agent, not a Memory, or a tool name already taken: one clear error each."""
    memory = Memory(store)
    with pytest.raises(InvalidArgumentError, match="agent must be an agents.Agent"):
        with_memory("assistant", memory)
    with pytest.raises(InvalidArgumentError, match="memory must be a ctxslots Memory"):
        with_memory(agents.Agent(name="a"), store)
    taken = agents.Agent(name="a", tools=memory_tools(memory)[:1])
    with pytest.raises(InvalidArgumentError, match="already has tools named memory_query"):
        with_memory(taken, memory)
    with pytest.raises(InvalidArgumentError, match="store must be a FactStore"):
        Memory("memory.db")
    with ScriptedChatServer([]) as server, pytest.raises(
            InvalidArgumentError, match=r"flusher's scoped_slots \['project'\] differ"):
        Memory(store, flusher=scripted_flusher(store, server), scoped_slots={"project", "agent"})


def test_a_malformed_identity_runs_without_memory(store, servers, caplog):
    """A context whose user is not a string: logged, and the run goes on without memory."""
    model, _ = servers(["Hi."])
    with caplog.at_level(logging.WARNING, logger="ctxslots.integrations"):
        result = _run(with_memory(_agent(model), Memory(store)), "Hi", {"user": 42})
    assert "Hi." == result.final_output and "Answer briefly." == _system(model.requests[0])
    assert any("the run's user must be a string" in r.getMessage() for r in caplog.records)


def test_items_become_messages():
    """Roles and text are kept, tool calls read as lines, memory tools and reasoning left out."""
    items = [
        {"role": "developer", "content": "Be kind."},
        {"role": "user", "content": [{"type": "input_text", "text": "Hi"},
                                     {"type": "input_image", "image_url": "x"}]},
        {"type": "function_call", "name": "weather", "arguments": '{"city": "Porto"}',
         "call_id": "a"},
        {"type": "function_call_output", "call_id": "a", "output": "sunny"},
        {"type": "function_call", "name": "memory_store", "arguments": "{}", "call_id": "b"},
        {"type": "function_call_output", "call_id": "b", "output": "Stored [id:1]"},
        {"type": "reasoning", "summary": []},
        {"type": "message", "role": "assistant",
         "content": [{"type": "output_text", "text": "It is sunny."}]},
    ]
    assert [("system", "Be kind."), ("user", "Hi"),
            ("assistant", '[called weather({"city": "Porto"})]'), ("tool", "sunny"),
            ("assistant", "It is sunny.")] == \
        [(m.role, m.content) for m in to_messages(items, skip_tools=frozenset({"memory_store"}))]


def test_without_the_sdk_the_import_says_which_extra():
    """Importing the integration without the SDK names the extra to install."""
    code = ("import sys; sys.modules['agents'] = None\n"
            "try:\n    import ctxslots.integrations.openai_agents\n"
            "except ImportError as exc:\n    print(type(exc).__name__, exc)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == ("IntegrationUnavailableError ctxslots.integrations.openai_agents "
                           "needs the 'openai-agents' extra: pip install "
                           "'ctxslots[openai-agents]'")
