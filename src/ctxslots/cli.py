"""The ``ctxslots`` command: a thin layer over the library.

Every command opens the store named by ``--db`` (or ``$CTXSLOTS_DB``, or the
default under the user data directory). Errors print one line to stderr and
exit with status 1 (2 for usage errors); never a traceback.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import click

from .errors import CtxslotsError
from .model import Fact, Hit
from .stores import FactStore, default_db_path

__all__ = ["cli", "main"]

F = TypeVar("F", bound=Callable[..., Any])


class _Group(click.Group):
    """A click group that turns library errors into one clear line."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except CtxslotsError as exc:
            raise click.ClickException(str(exc)) from exc


@click.group(cls=_Group)
@click.option(
    "--db",
    type=click.Path(dir_okay=False, path_type=Path),
    envvar="CTXSLOTS_DB",
    help="The SQLite store (default: $CTXSLOTS_DB, else the user data directory).",
)
@click.option(
    "--embedder",
    envvar="CTXSLOTS_EMBEDDER",
    help="hash (default), sentence-transformers:PATH_OR_PACKAGE, or openai:MODEL.",
)
@click.option(
    "--embed-base-url",
    envvar="CTXSLOTS_EMBED_BASE_URL",
    help="API root of an OpenAI-compatible embeddings server (for --embedder openai:MODEL).",
)
@click.version_option(package_name="ctxslots")
@click.pass_context
def cli(
    ctx: click.Context, db: Path | None, embedder: str | None, embed_base_url: str | None
) -> None:
    """Memory slots for LLM agents: store facts, search them, assemble prompts."""
    ctx.obj = {"db": db, "embedder": embedder, "embed_base_url": embed_base_url}


@contextmanager
def _store(ctx: click.Context, *, long_running: bool = False) -> Iterator[FactStore]:
    from .stores.embedders import embedder_from_spec

    path = ctx.obj["db"] or default_db_path()
    spec = ctx.obj.get("embedder")
    embedder = embedder_from_spec(spec, base_url=ctx.obj.get("embed_base_url")) if spec else None
    # A one-shot command searches once or twice: sqlite-vec's scan (30 ms at 100k facts) beats
    # loading the in-memory vector copy first (1.6 s). A server keeps the copy.
    with FactStore(path, embedder=embedder, vector_cache=long_running) as store:
        yield store


def _echo_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, ensure_ascii=False))


def _fact_line(fact: Fact) -> str:
    where = fact.slot + (f"@{fact.scope}" if fact.scope else "")
    key = f" {fact.key}:" if fact.key else ""
    flags = " (archived)" if fact.archived else ""
    if fact.superseded_by is not None:
        flags += f" (superseded by {fact.superseded_by})"
    return f"[id:{fact.id}] {where}{key} {fact.value}{flags}"


def _hit_line(hit: Hit) -> str:
    t = hit.trace
    signals = f"bm25 {t.bm25:.3f} (#{t.bm25_rank})" if t.bm25 is not None else "bm25 -"
    if t.cosine is not None:
        signals += f", cosine {t.cosine:.3f} (#{t.vector_rank})"
    return (
        f"{t.rank:>2}. {_fact_line(hit.fact)}\n"
        f"    score {t.final:.4g} = {signals}; decay {t.decay:.3f}, "
        f"reinforcement {t.reinforcement:.3f}, confidence {t.confidence:.2f}"
        + (f"; hides {t.hides} near-duplicate(s)" if t.hides else "")
    )


def _split_tags(tags: str | None) -> list[str]:
    return [t.strip() for t in (tags or "").split(",") if t.strip()]


@cli.command()
@click.argument("slot")
@click.argument("value")
@click.option("--key", help="Key, unique per slot and scope: a second write replaces the value.")
@click.option("--tags", help="Comma-separated tags.")
@click.option("--scope", help="Workspace the fact belongs to (default: global).")
@click.option("--confidence", type=float, default=1.0, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the stored fact as JSON.")
@click.pass_context
def remember(
    ctx: click.Context, slot: str, value: str, key: str | None, tags: str | None,
    scope: str | None, confidence: float, as_json: bool,
) -> None:
    """Store VALUE in SLOT (user, project, agent or a plugin's slot)."""
    with _store(ctx) as store:
        opts: dict[str, Any] = {"scope": scope, "tags": _split_tags(tags),
                                "confidence": confidence, "source": "cli"}
        fact = store.upsert(slot, key, value, **opts) if key else store.add(slot, value, **opts)
    click.echo(json.dumps(fact.to_dict(), ensure_ascii=False) if as_json else _fact_line(fact))


@cli.command()
@click.argument("query")
@click.option("--slot", "slots", multiple=True, help="Only this slot (repeatable).")
@click.option("--scope", help="Workspace to search (global facts are always included).")
@click.option("--limit", type=click.IntRange(1, 1000), default=10, show_default=True)
@click.option("--archive", is_flag=True, help="Also search forgotten (archived) facts.")
@click.option("--superseded", is_flag=True,
              help="Also show facts hidden by a newer near-duplicate.")
@click.option("--json", "as_json", is_flag=True, help="Print the hits and traces as JSON.")
@click.pass_context
def search(
    ctx: click.Context, query: str, slots: Sequence[str], scope: str | None, limit: int,
    archive: bool, superseded: bool, as_json: bool,
) -> None:
    """Search the store for QUERY; print hits best first with how each scored."""
    with _store(ctx) as store:
        hits = store.search(query, slots=list(slots) or None, scope=scope, limit=limit,
                            include_archive=archive, include_superseded=superseded)
    if as_json:
        _echo_json([hit.to_dict() for hit in hits])
    elif not hits:
        click.echo("no matching facts")
    else:
        for hit in hits:
            click.echo(_hit_line(hit))


def _by_id(action: Callable[[FactStore, int], Fact], help_text: str) -> Callable[..., None]:
    @click.argument("fact_id", metavar="ID", type=int)
    @click.option("--json", "as_json", is_flag=True, help="Print the fact as JSON.")
    @click.pass_context
    def command(ctx: click.Context, fact_id: int, as_json: bool) -> None:
        with _store(ctx) as store:
            fact = action(store, fact_id)
        click.echo(json.dumps(fact.to_dict(), ensure_ascii=False) if as_json else _fact_line(fact))

    command.__doc__ = help_text
    return command


def _get(store: FactStore, fact_id: int) -> Fact:
    fact = store.get(fact_id, include_archive=True)
    if fact is None:
        raise click.ClickException(f"no fact with id {fact_id}")
    return fact


cli.command("get")(_by_id(_get, "Show the fact with this ID (archived ones too)."))
cli.command("forget")(_by_id(lambda s, i: s.forget(i, reason="cli"),
                             "Move the fact with this ID to the archive."))
cli.command("reinforce")(_by_id(lambda s, i: s.reinforce(i),
                                "Add 3 to the fact's reinforcement score."))
cli.command("demote")(_by_id(lambda s, i: s.demote(i), "Take 1 from the fact's reinforcement score."))


@cli.command()
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def stats(ctx: click.Context, as_json: bool) -> None:
    """Show counts per slot and scope and facts about the database file."""
    with _store(ctx) as store:
        data = store.stats()
    if as_json:
        _echo_json(data)
        return
    click.echo(f"{data['path']}: {data['facts']} facts ({data['expired']} expired), "
               f"{data['archived']} archived, {data['history']} replaced values, "
               f"{data['size_bytes']} bytes")
    click.echo(f"SQLite {data['sqlite_version']}, sqlite-vec {data['sqlite_vec_version']}, "
               f"schema {data['schema_version']}")
    for row in data["by_slot"]:
        click.echo(f"  {row['slot']:<10} {row['scope'] or '(global)':<20} {row['facts']:>8}")


@cli.command()
@click.argument("message")
@click.option("--scope", help="Workspace of the turn (default: global facts only).")
@click.option("--budget", type=click.IntRange(min=1), default=2000, show_default=True,
              help="Token budget of the assembled context.")
@click.option("--dump", "dump_format", type=click.Choice(["json", "markdown", "html"]),
              help="Also render a dump showing every item kept or dropped, and why.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the dump to this file (the prompt still goes to stdout).")
@click.pass_context
def assemble(
    ctx: click.Context, message: str, scope: str | None, budget: int, dump_format: str | None,
    output: Path | None,
) -> None:
    """Assemble the context for MESSAGE and print it (with --dump, print the dump instead)."""
    from .assembler import AssemblyRequest, PromptAssembler

    if output is not None and dump_format is None:
        raise click.UsageError("-o/--output needs --dump")
    with _store(ctx) as store:
        assembler = PromptAssembler(store, load_entry_points=True)
        prompt = assembler.assemble(AssemblyRequest(message, scope=scope, budget=budget))
        dumped = assembler.dump(prompt, dump_format) if dump_format else None
    if dumped is None or output is not None:
        click.echo(prompt.text, nl=False)
    if dumped is not None and output is not None:
        try:
            output.write_text(dumped, encoding="utf-8")
        except OSError as exc:
            raise click.ClickException(f"cannot write {output}: {exc.strerror or exc}") from exc
    elif dumped is not None:
        click.echo(dumped, nl=False)


@cli.command()
@click.option("--db-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Where to write the demo store (default: a new temporary directory).")
def demo(db_dir: Path | None) -> None:
    """Write a few facts to a fresh store; show a search, an assembled prompt and its dump."""
    from ._demo import run_demo

    folder = db_dir or Path(tempfile.mkdtemp(prefix="ctxslots-demo-"))
    run_demo(folder / "demo.db", click.echo)


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of the ``ctxslots`` console script."""
    cli.main(args=list(argv) if argv is not None else sys.argv[1:], prog_name="ctxslots")


def _register_commands() -> None:
    # The command modules import helpers from this one, so they load after it.
    from . import cli_flush, cli_index, cli_mcp, cli_prune, cli_transfer

    for module in (cli_flush, cli_index, cli_prune, cli_mcp, cli_transfer):
        module.register(cli)


_register_commands()
