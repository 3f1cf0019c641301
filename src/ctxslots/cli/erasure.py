"""Commands that erase for good: delete one fact, erase an owner's memory, reset the store.

Each asks before erasing (``--yes`` does not ask) and prints the one-line report of
what it removed.
"""

from __future__ import annotations

import click

from ..stores import ErasureReport, FactStore
from ._app import CliContext, pass_cli_context
from ._format import count, fact_line
from ._output import echo, terminal_safe
from ._owners import not_blank, owner_check_options, scope_option
from ._params import ID

__all__ = ["register"]

_YES = click.option("--yes", "-y", is_flag=True, help="Do not ask before erasing.")


def _confirm(question: str, yes: bool) -> None:
    """Ask ``question``; anything but yes (or no answer at all) stops with nothing erased."""
    if yes:
        return
    try:
        agreed = click.confirm(terminal_safe(question), default=False, err=True)
    except (click.Abort, RuntimeError, OSError):  # no answer: stdin closed or unreadable
        agreed = False
    if not agreed:
        raise click.ClickException("nothing erased")


def _done(report: ErasureReport) -> None:
    echo(report.summary())


@click.command()
@click.argument("fact_id", metavar="ID", type=ID)
@owner_check_options
@_YES
@pass_cli_context
def delete(app: CliContext, fact_id: int, user: str | None, agent: str | None,
           scope: str | None, yes: bool) -> None:
    """Erase the fact with this ID (live or archived) with its history, vector and
    links. Unlike forget, nothing is kept."""
    with app.open_store() as store:
        fact = store.get(fact_id, include_archive=True, user=user, agent=agent, scope=scope)
        if fact is None:
            raise click.ClickException(f"no fact with id {fact_id}")
        _confirm(f"erase {fact_line(fact)}?", yes)
        _done(store.delete(fact_id, user=user, agent=agent, scope=scope))


@click.command()
@click.option("--user", callback=not_blank, help="Erase everything of this user.")
@click.option("--agent", callback=not_blank, help="Erase everything of this agent.")
@scope_option("Erase everything of this workspace.")
@_YES
@pass_cli_context
def erase(app: CliContext, user: str | None, agent: str | None, scope: str | None,
          yes: bool) -> None:
    """Erase everything one owner holds: facts, archived facts, earlier values,
    vectors, links (and a user's or agent's flush progress). Name one owner."""
    named = [(kind, value) for kind, value in (("user", user), ("agent", agent),
                                               ("scope", scope)) if value is not None]
    if len(named) != 1:
        raise click.UsageError("name exactly one of --user, --agent, --scope")
    kind, value = named[0]
    with app.open_store() as store:
        _check_owner(store, kind, value)
        _confirm(f"erase everything of {kind} {value!r}? This cannot be undone", yes)
        _done(store.erase(**{kind: value}))


def _check_owner(store: FactStore, kind: str, value: str) -> None:
    """A malformed owner is refused before the question is asked."""
    if kind == "scope":
        store.limits.scope(value)
    else:
        store.limits.owner(value, kind)


@click.command()
@_YES
@pass_cli_context
def reset(app: CliContext, yes: bool) -> None:
    """Erase every fact of every owner, with history, vectors, links and flush
    progress. The store stays, empty."""
    with app.open_store() as store:
        total = store.stats()
        _confirm(f"erase all {count(total['facts'], 'fact')} and "
                 f"{count(total['archived'], 'archived fact')} of {app.db_path}? This cannot be "
                 "undone", yes)
        _done(store.reset())


def register(group: click.Group) -> None:
    """Add ``delete``, ``erase`` and ``reset`` to the ``ctxslots`` group."""
    for command in (delete, erase, reset):
        group.add_command(command)
