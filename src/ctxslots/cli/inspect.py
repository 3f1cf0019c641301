"""``ctxslots why`` and ``ctxslots ui``: why a fact is in a prompt or not, and the inspector."""

from __future__ import annotations

import click

from ._app import CliContext, pass_cli_context
from ._output import echo, echo_json
from ._owners import READ_AS, owner_options
from ._params import ID, WholeNumber

__all__ = ["register"]


@click.command()
@click.argument("fact_id", type=ID)
@click.argument("message")
@click.option("--scope", help="Workspace of the turn (default: global facts only).")
@owner_options(*READ_AS)
@click.option("--budget", type=WholeNumber(1), default=2000, show_default=True,
              help="Token budget of the assembled context.")
@click.option("--json", "as_json", is_flag=True, help="Print the explanation as JSON.")
@pass_cli_context
def why(app: CliContext, fact_id: int, message: str, scope: str | None, user: str | None,
        agent: str | None, budget: int, as_json: bool) -> None:
    """Why fact FACT_ID is, or is not, in the prompt assembled for MESSAGE: its owners, its
    section, the words it shares, its vector rank and cosine, its rank, the section's cut
    and the budget. No fact counts as accessed."""
    from ..assembler import PromptAssembler
    from ..inspector import explain
    from ..request import AssemblyRequest

    request = AssemblyRequest(message, scope=scope, user=user, agent=agent, budget=budget)
    with app.open_store() as store:
        assembler = PromptAssembler(store, plugin_manager=app.plugin_manager())
        answer = explain(assembler, request, fact_id)
    if as_json:
        echo_json(answer.to_dict())
        return
    for line in answer.lines():
        echo(line)


def register(group: click.Group) -> None:
    """Add ``why`` and ``ui`` to the ``ctxslots`` group."""
    group.add_command(why)
