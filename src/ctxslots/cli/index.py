"""``ctxslots doctor`` and ``ctxslots reindex``: the health of the derived indexes."""

from __future__ import annotations

import click

from ._app import CliContext, pass_cli_context
from ._format import count as _count
from ._output import echo, echo_json
from ._progress import Progress

__all__ = ["register"]


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@pass_cli_context
def doctor(app: CliContext, as_json: bool) -> None:
    """Check the file, the full-text index and the vectors; exit 1 when anything is wrong."""

    with app.open_store() as store:
        report = store.doctor()
    if as_json:
        echo_json(report.to_dict())
    else:
        echo(f"integrity: {report.integrity}")
        if not report.facts_readable:
            echo("full-text index: not checked (the facts cannot be read)")
        else:
            echo(f"full-text index: {'in sync' if report.fts_in_sync else 'OUT OF SYNC'}")
        v = report.vectors
        if v is None:
            echo("vectors: no vector leg")
        else:
            echo(f"vectors: {v.vectors} by {v.model_id} ({v.dimension} dimensions); "
                 f"embedder in use {v.current_model_id} ({v.current_dimension}); "
                 f"{v.missing} missing, {v.orphans} orphaned")
        for problem in report.problems:
            echo(f"problem: {problem}", err=True)
        echo("ok" if report.ok else f"{len(report.problems)} problem(s)")
    if not report.ok:
        click.get_current_context().exit(1)


@click.command()
@click.option("--full", is_flag=True,
              help="Embed every fact again, even when the stored vectors are the embedder's own.")
@pass_cli_context
def reindex(app: CliContext, full: bool) -> None:
    """Rebuild the full-text index and repair what doctor finds.

    When searches read vectors: embed the facts without a usable vector, or every
    fact after a change of embedder (or with --full).
    """

    with app.open_store() as store, \
            Progress("reindexing", total=store.stats()["facts"], unit="facts") as bar:
        count = store.reindex(progress=bar.update, full=full)
    echo(f"reindexed: full-text index rebuilt, {_count(count, 'fact')} embedded")


def register(group: click.Group) -> None:
    """Add ``doctor`` and ``reindex`` to the ``ctxslots`` command."""
    group.add_command(doctor)
    group.add_command(reindex)
