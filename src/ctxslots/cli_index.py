"""``ctxslots doctor`` and ``ctxslots reindex``: the health of the derived indexes."""

from __future__ import annotations

import json
import sys

import click

__all__ = ["register"]


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.pass_context
def doctor(ctx: click.Context, as_json: bool) -> None:
    """Check the file, the full-text index and the vectors; exit 1 when anything is wrong."""
    from .cli import _store

    with _store(ctx) as store:
        report = store.doctor()
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2))
    else:
        click.echo(f"integrity: {report.integrity}")
        click.echo(f"full-text index: {'in sync' if report.fts_in_sync else 'OUT OF SYNC'}")
        v = report.vectors
        if v is None:
            click.echo("vectors: no vector leg")
        else:
            click.echo(f"vectors: {v.vectors} by {v.model_id} ({v.dimension} dimensions); "
                       f"embedder in use {v.current_model_id} ({v.current_dimension}); "
                       f"{v.missing} missing, {v.orphans} orphaned")
        for problem in report.problems:
            click.echo(f"problem: {problem}", err=True)
        click.echo("ok" if report.ok else f"{len(report.problems)} problem(s)")
    if not report.ok:
        ctx.exit(1)


@click.command()
@click.pass_context
def reindex(ctx: click.Context) -> None:
    """Rebuild the full-text index and every vector from the facts table."""
    from .cli import _store

    with _store(ctx) as store, click.progressbar(
            length=max(1, store.stats()["facts"]), label="embedding facts", file=sys.stderr) as bar:
        done_before = 0

        def progress(done: int, total: int) -> None:
            nonlocal done_before
            bar.update(done - done_before)
            done_before = done

        count = store.reindex(progress=progress)
    click.echo(f"reindexed {count} facts")


def register(group: click.Group) -> None:
    """Add ``doctor`` and ``reindex`` to the ``ctxslots`` command."""
    group.add_command(doctor)
    group.add_command(reindex)
