"""The ``--user`` and ``--agent`` options: whose memory a command reads or writes."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click

__all__ = ["READ_AS", "WRITE_AS", "not_blank", "owner_check_options", "owner_options",
           "scope_option", "scoped_slots"]

F = TypeVar("F", bound=Callable[..., Any])


def not_blank(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Refuse a blank ``--scope``, ``--user`` or ``--agent`` (an unset shell variable) in
    the command line's words, not the library's: left out, the option has its default.

    :raises click.UsageError: The value is empty or only spaces.
    """
    if value is not None and not value.strip():
        option = param.opts[0] if param.opts else param.name
        raise click.UsageError(f"{option} must not be blank: leave it out, or name "
                               f"{_NAMED.get(str(param.name), 'one')}", ctx=ctx)
    return value


_NAMED = {"scope": "a workspace", "user": "a user", "agent": "an agent"}


def scope_option(help_text: str) -> Callable[[F], F]:
    """Give a command ``--scope`` (passed as ``scope``), refused when blank."""
    return click.option("--scope", help=help_text, callback=not_blank)


def owner_options(user_help: str, agent_help: str) -> Callable[[F], F]:
    """Give a command ``--user`` and ``--agent`` (passed as ``user`` and ``agent``)."""

    def decorate(command: F) -> F:
        command = click.option("--agent", help=agent_help, callback=not_blank)(command)
        return click.option("--user", help=user_help, callback=not_blank)(command)

    return decorate


#: The help of the two options on commands that read as someone (search, assemble...).
READ_AS = ("Whose memory: this user's facts and the shared ones (default: the store's "
           + "default user).",
           "The agent whose lessons are read (default: the store's default agent).")
#: The help of the two options on commands that write a fact.
WRITE_AS = ("The user a user fact belongs to (default: the store's default user).",
            "The agent an agent fact belongs to (default: the store's default agent).")


def owner_check_options(command: F) -> F:
    """Give a command reaching a fact by id ``--user``, ``--agent`` and ``--scope``: only a
    fact these owners see is found (passed as ``user``, ``agent``, ``scope``)."""
    command = scope_option("Only a fact this workspace sees (its own or a global one; "
                           "default: any).")(command)
    command = click.option("--agent", help="Only a fact this agent sees (its own or one of "
                           "no agent; default: any).", callback=not_blank)(command)
    return click.option("--user", help="Only a fact this user sees (theirs or one of no "
                        "user; default: any owner's).", callback=not_blank)(command)


def scoped_slots(store: Any, slots: Sequence[str]) -> set[str]:
    """The slots of ``--slot`` whose facts get the command's ``--scope`` (a flush's, the
    memory tools'): ``project``, and each plugin slot whose facts may belong to a
    workspace (the built-in ``user`` and ``agent`` facts stay the user's and the agent's
    own, as without ``--slot``)."""
    from ..stores import BUILTIN_SLOTS

    return {slot for slot in slots if slot == "project" or (
        slot not in BUILTIN_SLOTS and store.limits.owners_of(slot).scope)}
