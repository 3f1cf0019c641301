"""Memory for the OpenAI Agents SDK: context in the instructions, the memory tools, a
flush when the run ends.

::

    from agents import Agent, Runner
    from ctxslots.integrations import Memory, MemoryContext
    from ctxslots.integrations.openai_agents import with_memory

    agent = with_memory(Agent(name="assistant", instructions="Be brief."), Memory(store))
    result = await Runner.run(agent, "hi", context=MemoryContext(user="alice"))

Whose memory a run uses comes from the run context (``Runner.run(..., context=...)``):
a :class:`~ctxslots.integrations.MemoryContext`, or any object or mapping with
``user``, ``scope``, ``agent`` and ``conversation``. The agent defaults to the
``Agent``'s ``name``. The pieces :func:`with_memory` puts together are public too:
:func:`memory_instructions`, :func:`memory_tools` and :class:`MemoryHooks`.
Needs the ``openai-agents`` extra.
"""

from __future__ import annotations

import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, ClassVar, TypeVar

from ..errors import IntegrationUnavailableError, InvalidArgumentError
from ..model import Message
from ..tools.memory_tools import openai_tools
from ._memory import Memory, RunIdentity, identity_of, record_report

try:
    from agents import Agent, AgentHooks, FunctionTool, RunContextWrapper
    from agents.handoffs import Handoff
    from agents.items import ModelResponse
    from agents.tool_context import ToolContext
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise IntegrationUnavailableError("ctxslots.integrations.openai_agents",
                                      "openai-agents") from exc

__all__ = ["MemoryHooks", "memory_instructions", "memory_tools", "to_messages", "with_memory"]

#: What an ``Agent`` takes as instructions.
Instructions = str | Callable[[RunContextWrapper[Any], Agent[Any]], Any] | None

_ROLES = {"user": "user", "assistant": "assistant", "system": "system", "developer": "system"}


def _agent_name(agent: object) -> str | None:
    name = getattr(agent, "name", None)
    return name if isinstance(name, str) and name.strip() else None


def _who(context: RunContextWrapper[Any], agent: object) -> RunIdentity:
    return identity_of(context.context, agent=_agent_name(agent))


# -- instructions ---------------------------------------------------------------


def _text(content: object) -> str:
    """The text of a message's content: a string, or the text of its parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        return "\n".join(str(p.get("text")) for p in content
                         if isinstance(p, Mapping) and isinstance(p.get("text"), str))
    return ""


def _as_dict(item: object) -> Mapping[str, Any]:
    if isinstance(item, Mapping):
        return item
    dump = getattr(item, "model_dump", None)
    return dump(exclude_unset=True) if callable(dump) else {}


def latest_user_text(items: Sequence[object]) -> str:
    """The text of the last user message among a run's input items (``""`` for none)."""
    for item in reversed(items):
        data = _as_dict(item)
        if data.get("role") == "user":
            return _text(data.get("content"))
    return ""


async def _base_text(instructions: Instructions, context: RunContextWrapper[Any],
                     agent: Agent[Any]) -> str:
    if instructions is None:
        return ""
    if isinstance(instructions, str):
        return instructions
    result = instructions(context, agent)
    if isinstance(result, Awaitable):
        result = await result
    return result or ""


def memory_instructions(memory: Memory, instructions: Instructions = None
                        ) -> Callable[[RunContextWrapper[Any], Agent[Any]], Awaitable[str]]:
    """Dynamic instructions: ``instructions`` (a string or the SDK's callable), then the
    memory assembled for the run's latest user input, for the run context's owners.

    When memory fails the instructions go out without it (logged; raised with
    ``memory.strict``).
    """
    if instructions is not None and not isinstance(instructions, str) \
            and not callable(instructions):
        raise InvalidArgumentError("instructions must be a string, a callable or None",
                                   field="instructions", value=instructions)

    async def instructions_with_memory(context: RunContextWrapper[Any],
                                       agent: Agent[Any]) -> str:
        base = await _base_text(instructions, context, agent)
        message = latest_user_text(getattr(context, "turn_input", None) or [])
        try:
            who = _who(context, agent)
        except InvalidArgumentError as exc:
            return str(memory.handle_failure("reading the run's identity", exc, base))
        recalled = await memory.acontext(message, who)
        return "\n\n".join(part for part in (base, recalled) if part)

    return instructions_with_memory


# -- tools ----------------------------------------------------------------------


def memory_tools(memory: Memory, *, agent: str | None = None) -> list[FunctionTool]:
    """The memory tools as strict ``FunctionTool`` objects, each bound per call to the
    run context's owners.

    :param agent: The agent whose tools these are, when the run context names none
        (:func:`with_memory` passes the ``Agent``'s name; else the calling agent's name
        when the SDK says it, else the store's default agent).
    """

    def tool(entry: Mapping[str, Any]) -> FunctionTool:
        function = entry["function"]
        name = function["name"]

        # Annotated as the SDK's ToolContext: the SDK passes a tool declaring a plain
        # RunContextWrapper a copy without the calling agent.
        async def invoke(context: ToolContext[Any], arguments: str) -> str:
            try:
                who = identity_of(context.context,
                                  agent=agent or _agent_name(getattr(context, "agent", None)))
            except InvalidArgumentError as exc:
                return f"Error: memory is unavailable ({exc})"
            return await memory.adispatch(name, arguments, who)

        return FunctionTool(name=name, description=function["description"],
                            params_json_schema=function["parameters"], on_invoke_tool=invoke,
                            strict_json_schema=True)

    return [tool(entry) for entry in
            openai_tools(memory.slots, strict=True, delete=memory.allow_delete,
                         limits=memory.store.limits)]


# -- the flush ------------------------------------------------------------------


def to_messages(items: Sequence[object], *, skip_tools: frozenset[str] = frozenset()
                ) -> list[Message]:
    """A run's items as conversation messages for the flusher.

    Messages keep their role (``developer`` reads as ``system``) and text; a function
    call becomes an assistant line naming the tool and its arguments, its output a
    ``tool`` message. Calls of the tools in ``skip_tools`` (the memory tools) and
    their outputs are left out, as are items with no text (reasoning, images).
    """
    out: list[Message] = []
    skipped_calls: set[str] = set()
    for item in items:
        data = _as_dict(item)
        kind = data.get("type")
        role = data.get("role")
        if kind == "function_call":
            name = str(data.get("name", ""))
            if name in skip_tools:
                skipped_calls.add(str(data.get("call_id")))
                continue
            out.append(Message("assistant", f"[called {name}({data.get('arguments', '')})]"))
        elif kind == "function_call_output":
            if str(data.get("call_id")) in skipped_calls:
                continue
            output = data.get("output")
            text = output if isinstance(output, str) else _text(output)
            if text.strip():
                out.append(Message("tool", text))
        elif isinstance(role, str) and role in _ROLES and kind in (None, "message"):
            text = _text(data.get("content"))
            if text.strip():
                out.append(Message(_ROLES[role], text))
    return out


class _Transcript:
    """What one run's model saw last and answered last, kept until the run ends."""

    __slots__ = ("input", "output")

    def __init__(self) -> None:
        self.input: list[object] = []
        self.output: list[object] = []


class _RunStart:
    """The agent a run started with, and the names of the handoff tools its agents had."""

    __slots__ = ("agent", "handoffs")

    def __init__(self, agent: object) -> None:
        self.agent = agent
        self.handoffs: set[str] = set()


_Record = TypeVar("_Record")


def _of_run(records: dict[int, tuple[weakref.ref[object], _Record]], run: object,
            make: Callable[[], _Record]) -> _Record:
    """The record of the run whose context wrapper is ``run``, made when new and dropped
    once the run is gone."""
    key = id(run)
    entry = records.get(key)
    if entry is None or entry[0]() is not run:
        entry = (weakref.ref(run, lambda _ref: records.pop(key, None)), make())
        records[key] = entry
    return entry[1]


def _run_of(context: RunContextWrapper[Any]) -> RunContextWrapper[Any]:
    """The context wrapper of the run ``context`` belongs to.

    The model hooks get the run's own wrapper; ``on_end`` gets a copy holding the same
    usage and turn input. Usage alone does not tell runs apart: an agent run as a tool
    (``Agent.as_tool``) adds to the calling run's usage, in a wrapper of its own.
    """
    for ref, _run in list(MemoryHooks._started.values()):
        run = ref()
        if run is context or (isinstance(run, RunContextWrapper)
                              and run.usage is context.usage
                              and run.turn_input is context.turn_input):
            return run
    return context


class MemoryHooks(AgentHooks[Any]):
    """Agent hooks that flush the run's conversation when the agent gives its final
    output (through the flusher's policy), as the run's first agent: after a handoff
    the conversation's progress stays the one agent's, whichever agent finished.

    The conversation is what the model saw on its last call and what it answered;
    the memory tools' calls and the handoffs are left out. The report goes to a
    :class:`~ctxslots.integrations.MemoryContext` run context (``flush_report``);
    a flush that is not due is logged at INFO on ``ctxslots.integrations``.
    Every other hook is passed on to ``inner`` (the agent's own hooks).
    """

    #: Each run's first agent and handoff tools, by run (its context wrapper, shared by
    #: every agent of the run), for every hooks object: with handoffs another agent's hooks
    #: end it.
    _started: ClassVar[dict[int, tuple[weakref.ref[object], _RunStart]]] = {}

    def __init__(self, memory: Memory, inner: AgentHooks[Any] | None = None) -> None:
        self.memory = memory
        self.inner = inner
        self._runs: dict[int, tuple[weakref.ref[object], _Transcript]] = {}
        self._skip = frozenset(spec["function"]["name"] for spec in
                               openai_tools(memory.slots, delete=memory.allow_delete))

    def _transcript(self, run: RunContextWrapper[Any]) -> _Transcript:
        return _of_run(self._runs, run, _Transcript)

    async def on_llm_start(self, context: RunContextWrapper[Any], agent: Agent[Any],
                           system_prompt: str | None, input_items: list[Any]) -> None:
        """Keep what the model is shown, and the agent the run started with."""
        run = _of_run(MemoryHooks._started, context, lambda: _RunStart(agent))
        run.handoffs.update(h.tool_name if isinstance(h, Handoff) else Handoff.default_tool_name(h)
                            for h in getattr(agent, "handoffs", None) or ())
        transcript = self._transcript(context)
        transcript.input, transcript.output = list(input_items), []
        if self.inner is not None:
            await self.inner.on_llm_start(context, agent, system_prompt, input_items)

    async def on_llm_end(self, context: RunContextWrapper[Any], agent: Agent[Any],
                         response: ModelResponse) -> None:
        """Keep what the model answered."""
        self._transcript(context).output = list(response.to_input_items())
        if self.inner is not None:
            await self.inner.on_llm_end(context, agent, response)

    async def on_end(self, context: Any, agent: Any, output: Any) -> None:
        """Flush the run's conversation, then call the inner hook."""
        wrapper = _run_of(context)
        entry = self._runs.pop(id(wrapper), None)
        transcript = entry[1] if entry is not None and entry[0]() is wrapper else _Transcript()
        run = _of_run(MemoryHooks._started, wrapper, lambda: _RunStart(agent))
        # Handoffs are plumbing, and the SDK moves their items in the next run's history:
        # the ones the run's agents offered, and the one that handed the run to this agent
        # (its first agent may have no memory hooks to say so).
        handoffs = run.handoffs | {Handoff.default_tool_name(agent)}
        messages = to_messages([*transcript.input, *transcript.output],
                               skip_tools=self._skip | handoffs)
        record_report(context.context, None)
        try:
            who = _who(context, run.agent)
        except InvalidArgumentError as exc:
            self.memory.handle_failure("reading the run's identity", exc, None)
        else:
            record_report(context.context, await self.memory.aflush(messages, who))
        if self.inner is not None:
            await self.inner.on_end(context, agent, output)

    async def on_start(self, context: Any, agent: Any) -> None:
        """Passed on to the inner hooks."""
        if self.inner is not None:
            await self.inner.on_start(context, agent)

    async def on_handoff(self, context: RunContextWrapper[Any], agent: Any, source: Any) -> None:
        """Passed on to the inner hooks."""
        if self.inner is not None:
            await self.inner.on_handoff(context, agent, source)

    async def on_tool_start(self, context: RunContextWrapper[Any], agent: Any,
                            tool: Any) -> None:
        """Passed on to the inner hooks."""
        if self.inner is not None:
            await self.inner.on_tool_start(context, agent, tool)

    async def on_tool_end(self, context: RunContextWrapper[Any], agent: Any, tool: Any,
                          result: Any) -> None:
        """Passed on to the inner hooks."""
        if self.inner is not None:
            await self.inner.on_tool_end(context, agent, tool, result)


def with_memory(agent: Agent[Any], memory: Memory) -> Agent[Any]:
    """A copy of ``agent`` with memory: its instructions followed by the assembled
    context, the memory tools after its own, and (with a flusher) hooks that flush
    the run when this agent gives the final output.

    For handoffs, give each agent that may finish a run its memory the same way; the
    flush runs as the agent the run started with.

    :raises InvalidArgumentError: ``agent`` is not an ``Agent``, ``memory`` not a
        :class:`~ctxslots.integrations.Memory`, or the agent already has a tool
        with a memory tool's name.
    """
    if not isinstance(agent, Agent):
        raise InvalidArgumentError(f"agent must be an agents.Agent, not {type(agent).__name__}",
                                   field="agent", value=agent)
    if not isinstance(memory, Memory):
        raise InvalidArgumentError(f"memory must be a ctxslots Memory, not "
                                   f"{type(memory).__name__}", field="memory", value=memory)
    tools = memory_tools(memory, agent=_agent_name(agent))
    taken = sorted({t.name for t in tools} & {getattr(t, "name", None) for t in agent.tools})
    if taken:
        raise InvalidArgumentError(f"the agent already has tools named {', '.join(taken)}",
                                   field="agent", value=taken)
    hooks = agent.hooks if memory.flusher is None else MemoryHooks(memory, agent.hooks)
    return agent.clone(instructions=memory_instructions(memory, agent.instructions),
                       tools=[*agent.tools, *tools], hooks=hooks)
