"""``ctxslots flush``: extract facts from a conversation file with a model."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import click

from ..errors import FlushError
from ..model import Message
from ._app import CliContext, pass_cli_context

__all__ = ["flush", "read_conversation", "register"]


def read_conversation(path: Path) -> list[Message]:
    """Read OpenAI-style ``{"role", "content"}`` lines (an ``"id"`` is kept); blank lines skipped.

    :raises click.ClickException: A line is not a JSON object with a string ``role``.
    """
    messages = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
            except json.JSONDecodeError as exc:
                raise click.ClickException(f"{path}:{number}: not JSON: {exc.msg}") from exc
            if not isinstance(data, dict) or not isinstance(data.get("role"), str):
                raise click.ClickException(
                    f"{path}:{number}: expected an object with \"role\" and \"content\"")
            messages.append(Message.from_dict(data))
    return messages


def conversation_id(path: Path) -> str:
    """The default conversation id of a file: its name and a hash of its absolute path."""
    digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]
    return f"file:{path.name[:100]}:{digest}"


@click.command()
@click.argument("conversation_file", metavar="CONVERSATION.jsonl",
                type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--conversation", help="Conversation id (default: derived from the file's path).")
@click.option("--scope", help="Workspace of project facts (default: global).")
@click.option("--client", "client_name", default="openai", show_default=True,
              envvar="CTXSLOTS_LLM_CLIENT",
              help="The LLM client: openai (any OpenAI-compatible endpoint) or one a plugin "
                   "registers (register_llm_clients); see ctxslots plugins.")
@click.option("--base-url", envvar="CTXSLOTS_LLM_BASE_URL",
              help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8080/v1 "
                   "(or $CTXSLOTS_LLM_BASE_URL).")
@click.option("--model", envvar="CTXSLOTS_LLM_MODEL",
              help="Model name sent to the endpoint (or $CTXSLOTS_LLM_MODEL).")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=60.0,
              show_default=True, help="Seconds to wait for one model reply.")
@click.option("--if-due", is_flag=True,
              help="Flush only when the policy says so (default: always flush what is new).")
@click.option("--every-n-turns", type=click.IntRange(min=1), default=10, show_default=True,
              help="Policy for --if-due: due after this many user turns.")
@click.option("--token-threshold", type=click.IntRange(min=1), default=2000, show_default=True,
              help="Policy for --if-due: due once the new text has this many tokens.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@pass_cli_context
def flush(
    app: CliContext, conversation_file: Path, conversation: str | None, scope: str | None,
    client_name: str, base_url: str | None, model: str | None, timeout: float, if_due: bool, every_n_turns: int,
    token_threshold: int, as_json: bool,
) -> None:
    """Extract facts from CONVERSATION.jsonl (one {role, content} object per line).

    Only messages not read by an earlier flush of the same conversation are sent.
    The API key, when the server needs one, is read from $OPENAI_API_KEY and sent
    as a bearer token. Exits 1 when the flush failed; the store is then unchanged.
    """
    from ..flusher import FlushPolicy, MemoryFlusher

    messages = read_conversation(conversation_file)
    conv = conversation or conversation_id(conversation_file)
    client = make_client(app, client_name, base_url=base_url, model=model, timeout=timeout)
    policy = FlushPolicy(every_n_turns=every_n_turns, token_threshold=token_threshold)
    with app.open_store() as store:
        flusher = MemoryFlusher(store, client, policy=policy)
        try:
            report = flusher.flush(messages, conversation=conv, scope=scope, force=not if_due)
        except FlushError as exc:
            if as_json:  # the failed report for a program; a person gets the one line below
                _show(exc.report, as_json)
            raise click.ClickException(str(exc)) from exc
    _show(report, as_json)


def make_client(app: CliContext, name: str, **options: Any) -> Any:
    """The LLM client ``name`` from the plugins' ``register_llm_clients`` (``openai`` built in),
    made with the options given (``None`` values left out).

    :raises click.ClickException: No plugin registers that name.
    """
    from ..plugins import llm_client_factories

    factories = llm_client_factories(app.plugin_manager())
    if name not in factories:
        raise click.ClickException(f"unknown LLM client {name!r}; registered: "
                                   f"{', '.join(sorted(factories))}")
    given = {k: v for k, v in options.items() if v is not None}
    try:
        return factories[name](**given)
    except TypeError as exc:  # a plugin's factory that takes other options
        raise click.ClickException(f"the LLM client {name!r} refused the options "
                                   f"{', '.join(sorted(given))}: {exc}") from exc


def _show(report: Any, as_json: bool) -> None:
    if report is None:
        return
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2, ensure_ascii=False))
    else:
        click.echo(report.summary())


def register(cli: click.Group) -> None:
    """Add the ``flush`` command to the ``ctxslots`` group."""
    cli.add_command(flush)
