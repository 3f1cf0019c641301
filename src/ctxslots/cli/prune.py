"""``ctxslots prune`` and ``ctxslots consolidate``: keep memory small and free of repeats."""

from __future__ import annotations

import attrs
import click

from ..stores.upkeep.prune import DEFAULT_SLOT_CAPS, PrunePolicy
from ._app import CliContext, pass_cli_context
from ._format import count as _count
from ._output import echo, echo_json
from ._params import WholeNumber, whole_number
from ._progress import Progress

__all__ = ["register"]


def _parse_cap(ctx: click.Context, _param: click.Parameter, values: tuple[str, ...]
               ) -> dict[str, int]:
    """The ``--cap`` values as slot -> count; a slot the store does not know is refused
    (a mistyped ``--cap usr=50`` would cap nothing and say nothing)."""
    app = ctx.find_object(CliContext)
    limits = app.limits() if app is not None and values else None
    caps: dict[str, int] = {}
    for text in values:
        slot, sep, number = text.partition("=")
        if not sep or not slot:
            raise click.BadParameter(f"expected SLOT=COUNT, like agent=5000, not {text[:60]!r}")
        try:
            caps[limits.slot(slot) if limits is not None else slot] = whole_number(
                number, what=f"the cap of {slot[:40]!r}")
        except ValueError as exc:  # InvalidFactError, for the slot, is one too
            raise click.BadParameter(str(exc)) from None
    return caps


def _preview(value: str, width: int = 70) -> str:
    flat = " ".join(value.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


@click.command()
@click.option("--dry-run", is_flag=True, help="List what would move; change nothing.")
@click.option("--cap", "caps", multiple=True, callback=_parse_cap, metavar="SLOT=COUNT",
              help="Cap on live facts of a slot in each scope (repeatable; defaults: "
                   + ", ".join(f"{k}={v}" for k, v in DEFAULT_SLOT_CAPS.items()) + ").")
@click.option("--max-bytes", type=WholeNumber(1), default=None,
              help="Cap on the database's used bytes; over it, the lowest tenth moves.")
@click.option("--protect-days", type=click.FloatRange(min=0), default=None,
              help="Never move facts written or shown within this many days (default 7).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@pass_cli_context
def prune(app: CliContext, dry_run: bool, caps: dict[str, int], max_bytes: int | None,
          protect_days: float | None, as_json: bool) -> None:
    """Move the least useful facts of slots over their cap to the archive.

    Nothing is deleted: `ctxslots search --archive` still finds moved facts.
    """

    policy = PrunePolicy(slot_caps={**DEFAULT_SLOT_CAPS, **caps}, max_bytes=max_bytes)
    if protect_days is not None:
        policy = attrs.evolve(policy, protect_days=protect_days)
    with app.open_store() as store, Progress("pruning"):
        report = store.prune(policy, dry_run=dry_run)
    if as_json:
        echo_json(report.to_dict())
        return
    for cap in report.over_cap:
        where = f" in scope {cap.scope!r}" if cap.scope else ""
        echo(f"{cap.slot}{where}: {_count(cap.count, 'fact')}, cap {cap.cap}, "
             f"{cap.protected} protected")
    if report.over_size:
        echo(f"store uses {report.used_bytes} bytes, over the cap of {max_bytes}")
    verb = "would move" if dry_run else "moved"
    for item in report.moved:
        f = item.fact
        echo(f"{verb} [id:{f.id}] {f.slot}"
             + (f" ({f.scope})" if f.scope else "")
             + f" retention {item.retention:.3g}: {_preview(f.value)}")
    if not report.needed:
        echo("every slot is within its cap; nothing to move")
    else:
        echo(f"{verb} {_count(len(report.moved), 'fact')} to the archive")


@click.command()
@click.option("--threshold", type=click.FloatRange(0, 1, min_open=True, max_open=True),
              default=0.95, show_default=True,
              help="Cosine similarity above which the older fact is superseded.")
@click.option("--dry-run", is_flag=True, help="List what would be marked; change nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@pass_cli_context
def consolidate(app: CliContext, threshold: float, dry_run: bool, as_json: bool) -> None:
    """Hide older near-duplicates behind the newer fact of the same slot and scope.

    Superseded facts stay stored: `ctxslots search --superseded` still shows them.
    """

    with app.open_store() as store:
        with Progress("consolidating"):
            report = store.consolidate(threshold=threshold, dry_run=dry_run)
        if as_json:
            echo_json(report.to_dict())
            return
        verb = "would supersede" if dry_run else "superseded"
        for item in report.superseded:
            old = store.get(item.fact_id)
            text = _preview(old.value) if old is not None else ""
            echo(f"{verb} [id:{item.fact_id}] by [id:{item.by}] "
                 f"(cosine {item.cosine:.3f}): {text}")
    echo(f"{verb} {len(report.superseded)} of {_count(report.checked, 'fact')} checked")


def register(cli: click.Group) -> None:
    """Add ``prune`` and ``consolidate`` to the ``ctxslots`` command group."""
    cli.add_command(prune)
    cli.add_command(consolidate)
