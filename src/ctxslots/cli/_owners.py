"""The ``--user`` and ``--agent`` options: whose memory a command reads or writes."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click

__all__ = ["READ_AS", "WRITE_AS", "owner_check_options", "owner_options", "scoped_slots"]

F = TypeVar("F", bound=Callable[..., Any])


def owner_options(user_help: str, agent_help: str) -> Callable[[F], F]:
    """Give a command ``--user`` and ``--agent`` (passed as ``user`` and ``agent``)."""

    def decorate(command: F) -> F:
        command = click.option("--agent", help=agent_help)(command)
        return click.option("--user", help=user_help)(command)

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
    command = click.option("--scope", help="Only a fact this workspace sees (its own or a "
                           "global one; default: any).")(command)
    command = click.option("--agent", help="Only a fact this agent sees (its own or one of "
                           "no agent; default: any).")(command)
    return click.option("--user", help="Only a fact this user sees (theirs or one of no "
                        "user; default: any owner's).")(command)


def scoped_slots(store: Any, slots: Sequence[str]) -> set[str]:
    """The slots of ``--slot`` whose facts get the command's ``--scope`` (a flush's, the
    memory tools'): ``project``, and each plugin slot whose facts may belong to a
    workspace (the built-in ``user`` and ``agent`` facts stay the user's and the agent's
    own, as without ``--slot``)."""
    from ..stores import BUILTIN_SLOTS

    return {slot for slot in slots if slot == "project" or (
        slot not in BUILTIN_SLOTS and store.limits.owners_of(slot).scope)}
