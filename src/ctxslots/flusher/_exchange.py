"""The exchange with the model during a flush, written once for sync and async callers.

:func:`talk` holds the logic and does no I/O: it yields the chat to send, is sent the
model's answer (or thrown its failure) and returns the operations. :func:`ask` drives
it with ``client.complete``; :func:`aask` with ``client.acomplete`` on the event loop
when the client has one, else with ``complete`` in a worker thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Generator, Mapping
from typing import Any

import attrs

from ..errors import FlushError
from ..model import Message
from .llm_client import ChatResult, LLMClient
from .operations import Operation, ReplyFormatError, parse_reply
from .report import FlushReport

__all__ = ["RETRY_ECHO_CHARS", "RETRY_PROMPT", "aask", "ask", "talk"]

#: Sent after a reply that could not be read; ``{error}`` is the reason.
RETRY_PROMPT = (
    "Your reply could not be used: {error}. Reply again with only one JSON object "
    '{{"operations": [...]}} that matches the schema above, and no other text.'
)

#: Of an unreadable reply, the retry shows the model at most this many characters: a
#: model that looped until its limit wrote megabytes, and sending them back would make
#: a request far longer than any model's context.
RETRY_ECHO_CHARS = 8000

#: Added to a format error when the server says it cut the reply at its token limit.
CUT_AT_LIMIT = 'the server cut the reply off at its token limit (finish_reason "length")'

Answer = tuple[tuple[Operation, ...], FlushReport]


def _echo(reply: str) -> str:
    """``reply`` as the retry shows it, cut to :data:`RETRY_ECHO_CHARS`."""
    if len(reply) <= RETRY_ECHO_CHARS:
        return reply
    return (f"{reply[:RETRY_ECHO_CHARS]}\n[... {len(reply) - RETRY_ECHO_CHARS:,} more "
            "characters of your reply not shown]")


def talk(prompt: str, base: FlushReport) -> Generator[list[Message], ChatResult, Answer]:
    """The model exchange: the operations read from its reply, and the report so far.

    :raises FlushError: The model call failed, or its reply could not be read after
        one retry.
    """
    chat: list[Message] = [Message(role="user", content=prompt)]
    raws: list[str] = []
    errors: list[str] = []
    usage: list[int | None] = [None, None]
    report = base
    for attempt in (1, 2):
        try:
            result = yield chat
        except Exception as exc:
            failed = attrs.evolve(report, status="failed", attempts=attempt,
                                  error=f"the model call failed: {exc}")
            raise FlushError(f"flush {base.flush_id} of {base.conversation} failed: the "
                             f"model call failed: {exc}", report=failed, reason="model") from exc
        content = result.text if isinstance(result.text, str) else repr(result.text)
        raws.append(content)
        for i, used in enumerate((result.prompt_tokens, result.completion_tokens)):
            if used is not None:
                usage[i] = (usage[i] or 0) + used
        report = attrs.evolve(report, attempts=attempt, raw_outputs=tuple(raws),
                              prompt_tokens=usage[0], completion_tokens=usage[1],
                              model=result.model or report.model)
        try:
            ops = parse_reply(content)
        except ReplyFormatError as exc:
            error = str(exc)
            if getattr(result, "finish_reason", None) == "length":
                error += f" ({CUT_AT_LIMIT}: write fewer or shorter operations)"
            errors.append(error)
            report = attrs.evolve(report, format_errors=tuple(errors))
            chat = [*chat, Message(role="assistant", content=_echo(content)),
                    Message(role="user", content=RETRY_PROMPT.format(error=error))]
            continue
        return ops, report
    message = f"the model's reply could not be read after one retry: {errors[-1]}"
    if CUT_AT_LIMIT in errors[-1]:
        message += ("; let the model write more (the client's max_tokens, or the server's own "
                    "limit) or send fewer messages per flush (max_flush_tokens, ctxslots flush "
                    "--max-tokens)")
    raise FlushError(f"flush {base.flush_id} of {base.conversation} failed: {message}",
                     report=attrs.evolve(report, status="failed", error=message),
                     reason="reply")


def ask(client: LLMClient, prompt: str, base: FlushReport, *,
        schema: Mapping[str, Any] | None, temperature: float) -> Answer:
    """Run :func:`talk` with ``client.complete``."""
    exchange = talk(prompt, base)
    chat = next(exchange)
    while True:
        try:
            result = client.complete(chat, json_schema=schema, temperature=temperature)
        except Exception as exc:  # noqa: BLE001 - talk() turns any failure into a FlushError
            exchange.throw(exc)  # raises FlushError
        try:
            chat = exchange.send(result)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]


async def aask(client: LLMClient, prompt: str, base: FlushReport, *,
               schema: Mapping[str, Any] | None, temperature: float) -> Answer:
    """Run :func:`talk` with ``client.acomplete`` (else ``complete`` in a worker thread).

    Cancelling the task abandons the call in flight (a worker thread's call runs
    on, but its answer is dropped).
    """
    exchange = talk(prompt, base)
    chat = next(exchange)
    acomplete = getattr(client, "acomplete", None)
    while True:
        try:
            if acomplete is not None:
                result = await acomplete(chat, json_schema=schema, temperature=temperature)
            else:
                result = await asyncio.to_thread(client.complete, chat, json_schema=schema,
                                                 temperature=temperature)
        except Exception as exc:  # noqa: BLE001 - talk() turns any failure into a FlushError
            exchange.throw(exc)  # raises FlushError
        try:
            chat = exchange.send(result)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
