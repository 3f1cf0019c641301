"""``ctxslots assemble`` and ``ctxslots demo``: build a prompt and show why it holds what it holds."""

from __future__ import annotations

import datetime as dt
import tempfile
from pathlib import Path

import click

from .._files import check_replaceable, make_private_dirs, write_private
from ._app import CliContext, pass_cli_context
from ._output import document_stdout, echo
from ._owners import READ_AS, owner_options, scope_option
from ._params import Moment, WholeNumber

__all__ = ["register"]


@click.command()
@click.argument("message")
@scope_option("Workspace of the turn (default: global facts only).")
@owner_options(*READ_AS)
@click.option("--budget", type=WholeNumber(1), default=2000, show_default=True,
              help="Token budget of the assembled context.")
@click.option("--tokenizer", default=None, metavar="NAME|PATH",
              help="What counts tokens: o200k_base (default) or cl100k_base, or the path of a "
              "HuggingFace tokenizer.json (needs the 'tokenizers' extra; never downloaded).")
@click.option("--safety-margin", type=WholeNumber(0), default=0, show_default=True,
              help="Tokens of the budget left unused, for a tokenizer that counts a little "
              "differently from the model's.")
@click.option("--answer-reserve", type=WholeNumber(0), default=0, show_default=True,
              help="Tokens of the budget kept for the model's answer.")
@click.option("--now", type=Moment(), default=None, metavar="ISO-8601",
              help="Rank the memories as of this moment (a dump's 'now'), leaving out what "
              "was said after it (default: the store's clock).")
@click.option("--dump", "dump_format", type=click.Choice(["json", "markdown", "html"]),
              help="Also render a dump showing every item kept or dropped, and why.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the dump to this file, readable by you only (0600), replacing it "
                   "whole; never through a symbolic link (the prompt still goes to stdout).")
@pass_cli_context
def assemble(
    app: CliContext, message: str, scope: str | None, user: str | None, agent: str | None,
    budget: int, tokenizer: str | None,
    safety_margin: int, answer_reserve: int, now: dt.datetime | None, dump_format: str | None,
    output: Path | None,
) -> None:
    """Assemble the context for MESSAGE and print it (with --dump, print the dump instead).

    When the sticky sections alone do not fit the budget, the command fails (exit 1), but
    with --dump it first writes the dump of what was tried, marked as a sticky overflow."""
    from ..assembler import PromptAssembler
    from ..errors import BudgetExceededError
    from ..request import AssemblyRequest
    from ..tokens import counter_from_spec

    if output is not None and dump_format is None:
        raise click.UsageError("-o/--output needs --dump")
    if output is not None:
        app.refuse_store_file(output)
        _check_place(output)
    counter = counter_from_spec(tokenizer) if tokenizer else None
    request = AssemblyRequest(message, scope=scope, user=user, agent=agent, budget=budget,
                              safety_margin=safety_margin, answer_reserve=answer_reserve,
                              now=now)
    with app.open_store() as store:
        assembler = PromptAssembler(store, plugin_manager=app.plugin_manager(),
                                    counter=counter)
        overflow: BudgetExceededError | None = None
        try:
            prompt = assembler.assemble(request)
        except BudgetExceededError as exc:
            if dump_format is None:
                raise
            overflow, prompt = exc, exc.prompt
        dumped = assembler.dump(prompt, dump_format) if dump_format else None
    if dumped is not None and output is not None:
        try:
            write_private(output, lambda fp: fp.write(dumped))
        except OSError as exc:
            raise click.ClickException(f"cannot write {exc.filename or output}: "
                                       f"{exc.strerror or exc}") from exc
    if overflow is not None:
        if output is None:
            echo(dumped or "", nl=False, file=document_stdout())
        raise overflow
    if dumped is None or output is not None:
        echo(prompt.text, nl=False)
    else:
        echo(dumped, nl=False, file=document_stdout())  # a dump is UTF-8, as its file is


def _check_place(output: Path) -> None:
    """Refuse, before the store is read, an ``output`` no file can be written at: one
    under a file, a folder, a symbolic link, a device or a pipe. An assembly counts the
    facts it shows as accessed, and a command that then fails to write its dump would
    have changed the store for nothing."""
    for parent in output.absolute().parents:
        if parent.exists():
            if not parent.is_dir():
                raise click.ClickException(f"cannot write {output}: {parent} is not a folder")
            break
    try:
        check_replaceable(output)
    except OSError as exc:
        raise click.ClickException(f"cannot write {exc.filename or output}: "
                                   f"{exc.strerror or exc}") from exc


@click.command()
@click.option("--db-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Keep the demo store and an HTML dump in this directory, created readable "
                   "by you only (default: a temporary store, removed at the end).")
@pass_cli_context
def demo(app: CliContext, db_dir: Path | None) -> None:
    """Write a few facts to a fresh store; show a search, an assembled prompt and its dump."""
    from ._demo import run_demo

    pm = app.plugin_manager()
    if db_dir is not None:
        try:
            make_private_dirs(db_dir)
            run_demo(db_dir / "demo.db", echo, plugin_manager=pm)
        except OSError as exc:
            raise click.ClickException(f"cannot write {exc.filename or db_dir}: "
                                       f"{exc.strerror or exc}") from exc
        return
    try:
        temporary = tempfile.TemporaryDirectory(prefix="ctxslots-demo-")
    except OSError as exc:  # no temporary folder is writable (a read-only container)
        raise click.ClickException(f"no folder to keep the demo's temporary store in: "
                                   f"{exc.strerror or exc}; set TMPDIR, or keep the demo in a "
                                   "folder with --db-dir DIR") from exc
    with temporary as folder:
        run_demo(Path(folder) / "demo.db", echo, keep=False, plugin_manager=pm)


def register(group: click.Group) -> None:
    """Add ``assemble`` and ``demo`` to the ``ctxslots`` group."""
    group.add_command(assemble)
    group.add_command(demo)
