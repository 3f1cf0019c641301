"""Memory for pydantic-ai: a capability that gives an agent its memory context, the
memory tools and a flush after each run.

::

    from pydantic_ai import Agent
    from ctxslots.integrations import Memory, MemoryContext
    from ctxslots.integrations.pydantic_ai import MemoryCapability

    agent = Agent(model, deps_type=MemoryContext, capabilities=[MemoryCapability(Memory(store))])
    result = await agent.run("hi", deps=MemoryContext(user="alice", scope="shop"))

Whose memory a run uses comes from the run's dependencies (``deps``): a
:class:`~ctxslots.integrations.MemoryContext`, or any object or mapping with
``user``, ``scope``, ``agent`` and ``conversation``. The agent defaults to the
``Agent``'s ``name``, the conversation to the run's ``conversation_id``. The pieces
are public too: :func:`memory_instructions`, :func:`memory_toolset` and
:func:`to_messages`. Needs the ``pydantic-ai`` extra.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..errors import IntegrationUnavailableError, InvalidArgumentError
from ..model import Message
from ..tools.memory_tools import openai_tools
from ._memory import Memory, RunIdentity, identity_of, record_report

try:
    from pydantic_ai import RunContext, Tool
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.messages import (
        ModelMessage,
        ModelRequest,
        ModelResponse,
        SystemPromptPart,
        TextContent,
        ToolReturnPart,
        UserPromptPart,
    )
    from pydantic_ai.run import AgentRunResult
    from pydantic_ai.toolsets import FunctionToolset, ToolsetTool
    from pydantic_core import SchemaValidator, ValidationError, core_schema
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise IntegrationUnavailableError("ctxslots.integrations.pydantic_ai", "pydantic-ai") from exc

__all__ = ["MemoryCapability", "memory_instructions", "memory_toolset", "to_messages"]


def _who(ctx: RunContext[Any]) -> RunIdentity:
    agent = getattr(ctx, "agent", None)
    name = getattr(agent, "name", None)
    conversation = getattr(ctx, "conversation_id", None)
    return identity_of(ctx.deps, agent=name if isinstance(name, str) and name.strip() else None,
                       conversation=conversation if isinstance(conversation, str)
                       and conversation.strip() else None)


def _prompt_text(prompt: object) -> str:
    """The text of a user prompt: a string, or its strings and ``TextContent`` parts."""
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, Sequence):
        return "\n".join(p if isinstance(p, str) else p.content for p in prompt
                         if isinstance(p, str | TextContent))
    return ""


def _latest_user_text(ctx: RunContext[Any]) -> str:
    text = _prompt_text(getattr(ctx, "prompt", None))
    if text:
        return text
    for message in reversed(ctx.messages):
        if isinstance(message, ModelRequest):
            for part in reversed(message.parts):
                if isinstance(part, UserPromptPart):
                    return _prompt_text(part.content)
    return ""


def memory_instructions(memory: Memory) -> Callable[[RunContext[Any]], Awaitable[str]]:
    """An instructions function: the memory assembled for the run's user prompt, for
    the owners its dependencies name (``""`` when memory fails: logged, or raised
    with ``memory.strict``)."""

    async def memory_context(ctx: RunContext[Any]) -> str:
        try:
            who = _who(ctx)
        except InvalidArgumentError as exc:
            return str(memory.handle_failure("reading the run's identity", exc, ""))
        return await memory.acontext(_latest_user_text(ctx), who)

    return memory_context


class _NotAnObject:
    """Tool-call arguments that are not a JSON object (null, a list, a string...) or not
    JSON at all, as the text to hand the dispatcher."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


#: The keyword that carries arguments that are not an object into the tool function.
_ARGUMENTS = "arguments"


def _as_keywords(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) \
        else {_ARGUMENTS: _NotAnObject(json.dumps(value, default=str))}


#: pydantic-ai calls a tool with ``**arguments``, which fails for anything but an object:
#: this validator hands those through, so the dispatcher answers the model what is wrong.
_KEYWORDS = SchemaValidator(core_schema.no_info_plain_validator_function(_as_keywords))


class _KeywordsValidator:
    """The memory tools' argument validator: :data:`_KEYWORDS`, and arguments that are not
    JSON at all handed through as their text too. pydantic-ai would answer those with a
    retry prompt of its own and, past the tool's retries, end the run with an error; the
    dispatcher answers them ``Error: the arguments are not valid JSON (...)`` instead."""

    def validate_python(self, input: Any, *, allow_partial: Any = False, **kwargs: Any) -> Any:
        return _KEYWORDS.validate_python(input, allow_partial=allow_partial, **kwargs)

    def validate_json(self, input: str | bytes | bytearray, *, allow_partial: Any = False,
                      **kwargs: Any) -> Any:
        try:
            return _KEYWORDS.validate_json(input, allow_partial=allow_partial, **kwargs)
        except ValidationError:
            if allow_partial not in (False, "off"):  # arguments still streaming in
                raise
            text = input if isinstance(input, str) else bytes(input).decode("utf-8", "replace")
            return {_ARGUMENTS: _NotAnObject(text)}


_VALIDATOR = _KeywordsValidator()


class _MemoryToolset(FunctionToolset[Any]):
    """The memory tools, whose arguments the dispatcher checks, not pydantic-ai."""

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        tools = await super().get_tools(ctx)
        return {name: replace(tool, args_validator=_VALIDATOR) for name, tool in tools.items()}


def memory_toolset(memory: Memory) -> FunctionToolset[Any]:
    """The memory tools as a toolset, each call bound to the owners the run's
    dependencies name. The schemas are the plain ones (optional arguments left out of
    ``required``), which pydantic-ai's test models can fill and its OpenAI profile
    sends as they are. Arguments that are wrong (unknown, missing, ill-typed, not a
    JSON object, or not JSON at all) are answered with an ``Error: ...`` text, as the dispatcher
    words it."""

    def tool(entry: dict[str, Any]) -> Tool[Any]:
        function = entry["function"]
        name = function["name"]

        async def call(ctx: RunContext[Any], /, **arguments: Any) -> str:
            try:
                who = _who(ctx)
            except InvalidArgumentError as exc:
                return f"Error: memory is unavailable ({exc})"
            given = arguments.get(_ARGUMENTS)
            if isinstance(given, _NotAnObject):
                return await memory.adispatch(name, given.text, who)
            return await memory.adispatch(name, arguments, who)

        return Tool.from_schema(call, name=name, description=function["description"],
                                json_schema=function["parameters"], takes_ctx=True)

    return _MemoryToolset([tool(e) for e in
                           openai_tools(memory.slots, delete=memory.allow_delete,
                                        limits=memory.store.limits)])


def to_messages(messages: Sequence[ModelMessage], *,
                skip_tools: frozenset[str] = frozenset()) -> list[Message]:
    """A run's messages as conversation messages for the flusher: system and user
    prompts, the model's text, tool calls as assistant lines and their returns as
    ``tool`` messages; the calls of ``skip_tools`` (the memory tools), their returns,
    retries and thinking are left out."""
    out: list[Message] = []
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, SystemPromptPart | UserPromptPart):
                    text = _prompt_text(part.content)
                    role = "system" if isinstance(part, SystemPromptPart) else "user"
                elif isinstance(part, ToolReturnPart) and part.tool_name not in skip_tools \
                        and getattr(part, "outcome", "success") != "retried":
                    text, role = part.model_response_str(), "tool"
                else:
                    continue
                if text.strip():
                    out.append(Message(role, text))
        elif isinstance(message, ModelResponse):
            for reply in message.parts:
                if reply.part_kind == "text" and reply.content.strip():
                    out.append(Message("assistant", reply.content))
                elif reply.part_kind == "tool-call" and reply.tool_name not in skip_tools:
                    out.append(Message("assistant", f"[called {reply.tool_name}"
                                                    f"({reply.args_as_json_str()})]"))
    return out


@dataclass
class MemoryCapability(AbstractCapability[Any]):
    """A pydantic-ai capability: :func:`memory_instructions`, :func:`memory_toolset`
    and, when the memory has a flusher, a flush of the run's messages after it ends
    (through the flusher's policy; the report goes to a
    :class:`~ctxslots.integrations.MemoryContext` ``deps``).

    :raises InvalidArgumentError: ``memory`` is not a :class:`~ctxslots.integrations.Memory`.
    """

    memory: Memory

    def __post_init__(self) -> None:
        if not isinstance(self.memory, Memory):
            raise InvalidArgumentError(f"memory must be a ctxslots Memory, not "
                                       f"{type(self.memory).__name__}", field="memory",
                                       value=self.memory)

    @classmethod
    def get_serialization_name(cls) -> str | None:
        """Not built from a spec: it holds a store."""
        return None

    def get_instructions(self) -> Callable[[RunContext[Any]], Awaitable[str]]:
        """The memory context, assembled per request (:func:`memory_instructions`)."""
        return memory_instructions(self.memory)

    def get_toolset(self) -> FunctionToolset[Any]:
        """The memory tools (:func:`memory_toolset`)."""
        return memory_toolset(self.memory)

    async def after_run(self, ctx: RunContext[Any], *,
                        result: AgentRunResult[Any]) -> AgentRunResult[Any]:
        """Flush the run's messages; the result is returned unchanged."""
        if self.memory.flusher is None:
            return result
        skip = frozenset(e["function"]["name"] for e in
                         openai_tools(self.memory.slots, delete=self.memory.allow_delete))
        record_report(ctx.deps, None)
        try:
            who = _who(ctx)
        except InvalidArgumentError as exc:
            self.memory.handle_failure("reading the run's identity", exc, None)
            return result
        report = await self.memory.aflush(to_messages(result.all_messages(), skip_tools=skip),
                                          who)
        record_report(ctx.deps, report)
        return result
