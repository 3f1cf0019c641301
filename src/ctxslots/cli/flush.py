"""``ctxslots flush``: extract facts from a conversation file with a model."""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, cast

import attrs
import click

from .._json_fields import DECODER, DuplicateFieldError
from .._secrets import scrub, split_credentials
from ..errors import FlushError
from ..flusher import BROKEN_TEXT, broken_text
from ..flusher.openai_client import MAX_TIMEOUT
from ..model import MESSAGE_ROLES, Message
from ..stores.owners import OwnerArgs
from ._app import CliContext, pass_cli_context
from ._format import count
from ._output import echo, echo_json
from ._owners import owner_options, scope_option, scoped_slots
from ._params import WholeNumber
from ._progress import Progress

__all__ = ["RAW_OUTPUT_SHOWN", "flush", "read_conversation", "register"]

#: Characters of each raw model reply that ``flush --json`` shows: enough to see what
#: went wrong, where a reply may be megabytes long.
RAW_OUTPUT_SHOWN = 4000


def read_conversation(path: Path) -> list[Message]:
    """Read OpenAI-style ``{"role", "content"}`` lines (an ``"id"`` is kept); blank lines skipped.

    :raises click.ClickException: A line is not a JSON object with a string ``role``,
        or the file is not UTF-8 text (the first line that is not is named).
    """
    try:
        return _read_messages(path)
    except UnicodeDecodeError:
        number, reason = _undecodable_line(path)
        raise click.ClickException(f"{path}:{number}: not UTF-8 text ({reason}); nothing was "
                                   "sent to the model") from None


def _undecodable_line(path: Path) -> tuple[int, str]:
    """The number of the first line of ``path`` that is not UTF-8 (counted as the text
    is read: a line ends at ``\n``, ``\r\n`` or ``\r``), and why."""
    for number, raw in enumerate(path.read_bytes().splitlines(), start=1):
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            return number, exc.reason
    return 1, "cut inside a character"  # not reached: the text did not decode


def _read_messages(path: Path) -> list[Message]:
    messages = []
    # utf-8-sig: a byte-order mark (as Notepad saves) is not part of the first message.
    with path.open(encoding="utf-8-sig") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                data = DECODER.decode(line)
            except DuplicateFieldError as exc:
                raise click.ClickException(f"{path}:{number}: the message names "
                                           f"{exc.args[0]!r} twice") from None
            except json.JSONDecodeError as exc:
                raise click.ClickException(f"{path}:{number}: not JSON: {exc.msg}") from exc
            except (ValueError, RecursionError):  # a number of over 4,300 digits; deep nesting
                raise click.ClickException(f"{path}:{number}: not a message this command reads "
                                           "(a number too long, or nesting too deep)") from None
            if not isinstance(data, dict) or not isinstance(data.get("role"), str):
                raise click.ClickException(
                    f"{path}:{number}: expected an object with \"role\" and \"content\"")
            if data["role"] not in MESSAGE_ROLES:
                raise click.ClickException(
                    f"{path}:{number}: the role {data['role'][:40]!r} is not one of "
                    f"{', '.join(MESSAGE_ROLES)}; nothing was sent to the model")
            message = Message.from_dict(data)
            if broken_text(message):  # a "\\ud83d" escape alone, say
                raise click.ClickException(f"{path}:{number}: the message {BROKEN_TEXT}")
            messages.append(message)
    return messages


def conversation_id(path: Path) -> str:
    """The default conversation id of a file: its name and a hash of its absolute path."""
    # The name's own bytes, whatever the locale decoded them to (Latin-1 characters in a
    # Latin-1 locale, lone surrogates for bytes not the locale's): the same id in every
    # locale, shown as UTF-8.
    digest = hashlib.sha256(os.fsencode(path.resolve())).hexdigest()[:12]
    name = os.fsencode(path.name).decode("utf-8", "replace")
    return f"file:{name[:100]}:{digest}"


def conversation_files(paths: Sequence[Path]) -> list[Path]:
    """The conversation files named: each file as given, each directory's ``*.jsonl`` files
    in name order, without repeats.

    :raises click.UsageError: A directory holds no ``.jsonl`` file.
    """
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            found = sorted(p for p in path.glob("*.jsonl") if p.is_file())
            if not found:
                raise click.UsageError(f"no .jsonl conversation files in {path}")
            files += found
        else:
            files.append(path)
    return list(dict.fromkeys(files))


def _seconds(_ctx: click.Context, _param: click.Parameter, value: float) -> float:
    """``--timeout``, which its range alone lets through as ``nan``."""
    if math.isnan(value):
        raise click.BadParameter("nan is not a number of seconds")
    return value


@click.command()
@click.argument("paths", metavar="CONVERSATION.jsonl|DIR...", nargs=-1, required=True,
                type=click.Path(exists=True, path_type=Path))
@click.option("--conversation", help="Conversation id (default: derived from the file's path; "
                                     "only with one file).")
@scope_option("Workspace of project facts (default: global).")
@click.option("--slot", "slots", multiple=True,
              help="A slot the model may write (repeatable; default: user, project, agent).")
@owner_options("Whose conversation: user facts are theirs (default: the store's default user).",
               "The agent of the conversation: agent facts are its lessons (default: the "
               + "store's default agent).")
@click.option("--client", "client_name", default="openai", show_default=True,
              envvar="CTXSLOTS_LLM_CLIENT",
              help="The LLM client: openai (any OpenAI-compatible endpoint) or one a plugin "
                   "registers (register_llm_clients); see ctxslots plugins (or "
                   "$CTXSLOTS_LLM_CLIENT).")
@click.option("--base-url", envvar="CTXSLOTS_LLM_BASE_URL",
              help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8080/v1 "
                   "(or $CTXSLOTS_LLM_BASE_URL).")
@click.option("--model", envvar="CTXSLOTS_LLM_MODEL",
              help="Model name sent to the endpoint (or $CTXSLOTS_LLM_MODEL).")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True, max=MAX_TIMEOUT),
              callback=_seconds, default=60.0, show_default=True,
              help="Seconds one request to the model may take in all, its retries and the "
                   "waits between them included (a reply that cannot be read is asked for "
                   "once more, with as long again).")
@click.option("--max-reply-bytes", type=WholeNumber(1),
              help="Largest model reply read, in bytes (default 16 MiB); a larger one fails "
                   "naming the cap, unread past it.")
@click.option("--if-due", is_flag=True,
              help="Flush only when the policy says so (default: always flush what is new).")
@click.option("--every-n-turns", type=WholeNumber(1), default=10, show_default=True,
              help="Policy for --if-due: due after this many user turns.")
@click.option("--token-threshold", type=WholeNumber(1), default=2000, show_default=True,
              help="Policy for --if-due: due once the new text has this many tokens.")
@click.option("--max-tokens", type=WholeNumber(1),
              help="Most tokens of messages sent in one request (default 8000); a longer "
                   "conversation is read in several requests, one after the other.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@pass_cli_context
def flush(
    app: CliContext, paths: tuple[Path, ...], conversation: str | None, scope: str | None,
    slots: tuple[str, ...], user: str | None, agent: str | None, client_name: str,
    base_url: str | None, model: str | None, timeout: float, max_reply_bytes: int | None,
    if_due: bool, every_n_turns: int, token_threshold: int, max_tokens: int | None,
    as_json: bool,
) -> None:
    """Extract facts from conversation files (one {role, content} object per line): each
    CONVERSATION.jsonl given, and every *.jsonl file of each DIR, one conversation per file.

    Only messages not read by an earlier flush of the same conversation are sent, at
    most --max-tokens of them per request: a longer conversation is read in several
    flushes in a row, each reported (--json: one JSON object per line), and a failed
    one stops at what was read so far.
    The API key, when the server needs one, is read from $OPENAI_API_KEY and sent
    as a bearer token. A failed flush leaves the store as it was; with several
    files the others still run, and the command exits 1 if any failed.
    """
    from ..flusher import FlushPolicy, MemoryFlusher

    files = conversation_files(paths)
    if conversation is not None and len(files) > 1:
        raise click.UsageError("--conversation names one conversation: give one file")
    client = make_client(app, client_name, base_url=base_url, model=model, timeout=timeout,
                         max_reply_bytes=max_reply_bytes)
    out = _Out(as_json, _held_secrets(client, base_url))
    policy = FlushPolicy(every_n_turns=every_n_turns, token_threshold=token_threshold)
    options: dict[str, Any] = {} if max_tokens is None else {"max_flush_tokens": max_tokens}
    owners = OwnerArgs(scope=scope, user=user, agent=agent)
    if slots:
        options["slots"] = _slot_meanings(app, slots)
    if len(files) == 1:
        # Read before the store is opened: a malformed file leaves no new store behind.
        messages = read_conversation(files[0])
        with app.open_store(create=True) as store:
            if slots:
                options["scoped_slots"] = scoped_slots(store, slots)
            flusher = MemoryFlusher(store, client, policy=policy, **options)
            _flush_one(flusher, files[0], messages, conversation, owners, if_due, out)
        return
    reports: list[dict[str, Any]] = []
    failed = 0
    with app.open_store(create=True) as store, \
            Progress("flushing", total=len(files), unit="conversations") as bar:
        if slots:
            options["scoped_slots"] = scoped_slots(store, slots)
        flusher = MemoryFlusher(store, client, policy=policy, **options)
        for file in files:
            def shown(report: Any, file: Path = file) -> None:
                reports.append({"file": str(file), **out.data(report)})
                if not as_json:
                    echo(f"{file}: {out.text(report.summary())}")

            try:
                _flush_until_read(flusher, read_conversation(file), conversation_id(file),
                                  owners, not if_due, shown, progress=False)
            except (FlushError, click.ClickException) as exc:
                failed += 1
                failure = exc.report if isinstance(exc, FlushError) else None
                reports.append({"file": str(file), **(out.data(failure) if failure else {}),
                                "error": out.text(_message(exc))})
                if not as_json:
                    echo(f"{file}: Error: {out.text(_message(exc))}", err=True)
            bar.advance()
    if as_json:
        echo_json(reports)
    if failed:
        raise click.ClickException(f"{failed} of {count(len(files), 'conversation')} failed")


def _message(exc: Exception) -> str:
    return exc.message if isinstance(exc, click.ClickException) else str(exc)


def _flush_until_read(flusher: Any, messages: list[Message], conversation: str,
                      owners: OwnerArgs, force: bool,
                      shown: Callable[[Any], None] | None = None, *,
                      progress: bool = True) -> list[Any]:
    """Flush ``conversation`` again while a flush leaves messages for the next one (its
    token cap); return the reports, each passed to ``shown`` as it comes.

    Each flush after the first goes on only from where the one before stopped, or from
    further on (another flush read on meanwhile): when the conversation's progress went
    back in between (its user's or agent's memory erased, or another flush reading another
    version of it from the start), the next flush would read it from the start again and
    write an erased memory back, so the command stops instead.

    :raises FlushError: A flush failed (the ones before it stand).
    :raises click.ClickException: The progress went back between two flushes.
    """
    reports: list[Any] = []
    with Progress("flushing", total=len(messages), unit="messages",
                  enabled=None if progress else False) as bar:
        while True:
            if reports and flusher.messages_read(
                    conversation, user=owners.get("user"), agent=owners.get("agent")
                    ) < reports[-1].messages_read:
                raise click.ClickException(
                    f"the progress of {conversation} went back after message "
                    f"{reports[-1].messages_read} was read (its user's or agent's memory was "
                    "erased, or another flush read another version of it): stopped rather "
                    "than read it again from the start; flush again to go on")
            report = flusher.flush(messages, conversation=conversation, **owners,
                                   force=force or bool(reports))
            reports.append(report)
            bar.update(report.messages_read)
            if shown is not None:
                shown(report)
            if report.status != "applied" or not report.remaining:
                return reports


def _slot_meanings(app: CliContext, slots: Sequence[str]) -> dict[str, str]:
    """Each slot of ``--slot`` with what it holds, as the model is told: a built-in
    slot's meaning, a plugin's slot's description (``register_slots``)."""
    from ..flusher import DEFAULT_SLOTS
    from ..plugins import known_slots

    described = known_slots(app.plugin_manager())
    return {slot: DEFAULT_SLOTS.get(slot) or described.get(slot) or f"facts of the {slot} slot."
            for slot in dict.fromkeys(slots)}


def _flush_one(flusher: Any, file: Path, messages: list[Message], conversation: str | None,
               owners: OwnerArgs, if_due: bool, out: _Out) -> None:
    conv = conversation_id(file) if conversation is None else conversation
    try:
        _flush_until_read(flusher, messages, conv, owners, not if_due, out.show)
    except FlushError as exc:
        if out.as_json:  # the failed report for a program; a person gets the one line below
            out.show(exc.report)
        raise click.ClickException(out.text(str(exc))) from exc


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


def _held_secrets(client: Any, base_url: str | None) -> tuple[str, ...]:
    """The credentials this flush sends, which a model or a server may echo back."""
    found = [os.environ.get("OPENAI_API_KEY"), getattr(client, "api_key", None)]
    found += split_credentials(base_url)[1] or () if base_url else ()
    return tuple(s for s in found if isinstance(s, str) and s)


@attrs.frozen
class _Out:
    """How reports are shown: as JSON or as lines, never with a credential in them (the
    model's replies included: a model may echo the key), and the model's raw replies
    cut to :data:`RAW_OUTPUT_SHOWN` characters each.

    Attributes:
        as_json: Print JSON.
        secrets: The credentials the flush sent.
    """

    as_json: bool
    secrets: tuple[str, ...] = ()

    def text(self, text: str) -> str:
        """``text`` without a credential."""
        return scrub(text, self.secrets)

    def data(self, report: Any) -> dict[str, Any]:
        """The report as JSON-ready data, every string scrubbed, raw replies cut."""
        data = report.to_dict()
        data["raw_outputs"] = [_cut(raw) for raw in data.get("raw_outputs") or ()]
        return cast(dict[str, Any], self._scrubbed(data))

    def show(self, report: Any) -> None:
        """Print ``report`` (nothing for ``None``)."""
        if report is None:
            return
        if self.as_json:  # one line each: a file read in several requests prints JSON Lines
            echo_json(self.data(report), indent=None)
        else:
            echo(self.text(report.summary()))

    def _scrubbed(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {k: self._scrubbed(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self._scrubbed(v) for v in value]
        return value


def _cut(raw: str) -> str:
    if len(raw) <= RAW_OUTPUT_SHOWN:
        return raw
    return f"{raw[:RAW_OUTPUT_SHOWN]}... ({len(raw):,} characters in all)"


def register(cli: click.Group) -> None:
    """Add the ``flush`` command to the ``ctxslots`` group."""
    cli.add_command(flush)
