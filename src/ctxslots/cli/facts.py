"""Commands on facts: remember, search, list, get, forget, reinforce, demote, stats."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import click

from ..model import Fact
from ..prompts.ages import days_in_words
from ..stores import ANY, FactStore
from ..stores.owners import OwnerArgs
from ._app import CliContext, pass_cli_context
from ._format import count, fact_line, hit_line, whose
from ._output import echo, echo_json
from ._owners import READ_AS, WRITE_AS, owner_check_options, owner_options, scope_option
from ._params import ID, WholeNumber

__all__ = ["register"]


def _split_tags(tags: str | None) -> list[str]:
    return [t.strip() for t in (tags or "").split(",") if t.strip()]


@click.command()
@click.argument("slot")
@click.argument("value")
@click.option("--key", help="Key, unique per slot and owners: a second write replaces the value.")
@click.option("--tags", help="Comma-separated tags.")
@scope_option("Workspace a project or agent fact belongs to (default: global).")
@owner_options(*WRITE_AS)
@click.option("--confidence", type=float, default=1.0, show_default=True,
              help="How sure the fact is, from 0 to 1; it multiplies the fact's score.")
@click.option("--context", "context",
              help="Words that find the fact without being part of it (the question it "
                   "answers); searched, never shown.")
@click.option("--json", "as_json", is_flag=True, help="Print the stored fact as JSON.")
@pass_cli_context
def remember(
    app: CliContext, slot: str, value: str, key: str | None, tags: str | None,
    scope: str | None, user: str | None, agent: str | None, confidence: float,
    context: str | None, as_json: bool,
) -> None:
    """Store VALUE in SLOT: user, project, agent or a slot a plugin registers
    (any slot name with ctxslots --free-slots).

    A user fact belongs to a user (--user), a project fact to a workspace
    (--scope), an agent fact to an agent (--agent) and optionally a workspace;
    naming an owner the slot does not have is refused.
    """
    # One write: a refused one leaves no new store file behind.
    with app.open_store(create=True, undo_create=True) as store:
        owners = OwnerArgs(scope=scope, user=user, agent=agent)
        opts: dict[str, Any] = {**owners, "tags": _split_tags(tags),
                                "confidence": confidence, "source": "cli", "context": context}
        # --key "" is a key (refused, as --scope "" is), not a request for a free memory.
        before = None if key is not None else store.find_memory(slot, value, **owners)
        fact = store.upsert(slot, key, value, **opts) if key is not None else \
            store.add(slot, value, **opts)
    if as_json:
        echo_json(fact.to_dict(), indent=None)
    else:
        echo(("already stored: " if before is not None else "") + fact_line(fact))


@click.command()
@click.argument("query")
@click.option("--slot", "slots", multiple=True, help="Only this slot (repeatable).")
@scope_option("Workspace to search (global facts are always included).")
@owner_options(*READ_AS)
@click.option("--limit", type=WholeNumber(1, 1000), default=10, show_default=True,
              help="Most hits to show (1 to 1000).")
@click.option("--archive", is_flag=True, help="Also search forgotten (archived) facts.")
@click.option("--superseded", is_flag=True,
              help="Also show facts hidden by a newer near-duplicate.")
@click.option("--json", "as_json", is_flag=True, help="Print the hits and traces as JSON.")
@pass_cli_context
def search(
    app: CliContext, query: str, slots: Sequence[str], scope: str | None, user: str | None,
    agent: str | None, limit: int, archive: bool, superseded: bool, as_json: bool,
) -> None:
    """Search the store for QUERY; print hits best first with how each scored."""
    with app.open_store() as store:
        hits = store.search(query, slots=list(slots) or None, scope=scope, user=user,
                            agent=agent, limit=limit, include_archive=archive,
                            include_superseded=superseded)
    if as_json:
        echo_json([hit.to_dict() for hit in hits])
    elif not hits:
        echo("no matching facts")
    else:
        best = max(hit.trace.relevance for hit in hits)
        for hit in hits:
            echo(hit_line(hit, best))


def _by_id(action: Callable[..., Fact], help_text: str) -> Callable[..., None]:
    @click.argument("fact_id", metavar="ID", type=ID)
    @click.option("--json", "as_json", is_flag=True, help="Print the fact as JSON.")
    @owner_check_options
    @pass_cli_context
    def command(app: CliContext, fact_id: int, as_json: bool, user: str | None,
                agent: str | None, scope: str | None) -> None:
        with app.open_store() as store:
            fact = action(store, fact_id, user=user, agent=agent, scope=scope)
        if as_json:
            echo_json(fact.to_dict(), indent=None)
        else:
            echo(fact_line(fact))

    command.__doc__ = help_text
    return command


def _get(store: FactStore, fact_id: int, *, user: str | None, agent: str | None,
         scope: str | None) -> Fact:
    fact = store.get(fact_id, include_archive=True, include_expired=True, user=user,
                     agent=agent, scope=scope)
    if fact is None:
        raise click.ClickException(f"no fact with id {fact_id}")
    return fact


get = click.command("get")(_by_id(
    _get, "Show the fact with this ID (expired and archived ones too, said so)."))
forget = click.command("forget")(_by_id(lambda s, i, **o: s.forget(i, reason="cli", **o),
                                        "Move the fact with this ID to the archive."))
reinforce = click.command("reinforce")(_by_id(lambda s, i, **o: s.reinforce(i, **o),
                                              "Add 3 to the fact's reinforcement score."))
demote = click.command("demote")(_by_id(lambda s, i, **o: s.demote(i, **o),
                                        "Take 1 from the fact's reinforcement score."))


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the counts as JSON.")
@pass_cli_context
def stats(app: CliContext, as_json: bool) -> None:
    """Show counts per slot and scope, the engine and the size of the store."""
    with app.open_store() as store:
        data = store.stats()
    if as_json:
        echo_json(data)
        return
    echo(f"{data['path']}: {count(data['facts'], 'fact')} ({data['expired']} expired), "
         f"{data['archived']} archived, {count(data['history'], 'replaced value')}, "
         f"{count(data['size_bytes'], 'byte')}")
    echo(f"{_engine_line(data)}, schema {data['schema_version']}")
    for row in data["by_slot"]:
        slot = whose(row["slot"], row["user"], row["agent"], None)
        echo(f"  {slot:<10} {row['scope'] or '(global)':<20} {row['facts']:>8}")



def _engine_line(data: dict[str, Any]) -> str:
    """The engine and its versions, as ``stats`` shows them."""
    if data.get("engine") == "postgresql":
        return (f"PostgreSQL {data.get('server_version')}, "
                f"pgvector {data.get('pgvector_version') or 'not installed'}")
    return f"SQLite {data.get('sqlite_version')}, sqlite-vec {data.get('sqlite_vec_version')}"


def _stored(store: FactStore, slots: list[str] | None, scope: str | None,
            user: str | None, agent: str | None) -> list[Fact]:
    """Live facts of ``slots``: of ``scope`` and global ones, or of every scope when
    ``None``; the same for ``user`` and ``agent``."""
    return store.facts(slots=slots, scope=ANY if scope is None else scope,
                       user=ANY if user is None else user, agent=ANY if agent is None else agent)


def _age(fact: Fact, now: float) -> str:
    """How long ago the fact was said (observed), in words."""
    said = fact.said_at
    if said is None:
        return "–"
    return days_in_words((now - said.timestamp()) / 86400.0)


@click.command("list")
@click.option("--slot", "slots", multiple=True, help="Only this slot (repeatable).")
@scope_option("Only this workspace and global facts (default: every scope).")
@owner_options("Only this user's facts and facts of no user (default: every user's).",
               "Only this agent's facts and facts of no agent (default: every agent's).")
@click.option("--limit", type=WholeNumber(1, 1000), default=20, show_default=True,
              help="Facts per page (1 to 1000).")
@click.option("--page", type=WholeNumber(1), default=1, show_default=True,
              help="Which page; page 1 holds the newest facts.")
@click.option("--json", "as_json", is_flag=True, help="Print the page as JSON.")
@pass_cli_context
def list_(app: CliContext, slots: Sequence[str], scope: str | None, user: str | None,
          agent: str | None, limit: int, page: int, as_json: bool) -> None:
    """List what is stored, newest first (last written), a page at a time."""
    with app.open_store() as store:
        facts = _stored(store, list(slots) or None, scope, user, agent)
        now = store.clock()
    facts.sort(key=lambda f: (f.updated_at.timestamp() if f.updated_at else 0.0, f.id),
               reverse=True)
    pages = max(1, -(-len(facts) // limit))
    shown = facts[(page - 1) * limit: page * limit]
    if facts and not shown:  # the same failure as text or as JSON
        raise click.ClickException(f"page {page} is past the last page ({pages})")
    if as_json:
        echo_json({"total": len(facts), "page": page, "pages": pages,
                   "facts": [f.to_dict() for f in shown]})
        return
    if not facts:
        echo("no facts stored" + (f" in scope {scope!r}" if scope else ""))
        return
    for fact in shown:
        echo(f"{fact_line(fact)} ({_age(fact, now)})")
    more = f"; next: --page {page + 1}" if page < pages else ""
    echo(f"page {page} of {pages} ({count(len(facts), 'fact')}){more}")


def register(group: click.Group) -> None:
    """Add the single-fact commands to the ``ctxslots`` group."""
    for command in (remember, search, list_, get, forget, reinforce, demote, stats):
        group.add_command(command)
