"""``ctxslots why`` and ``ctxslots ui``: why a fact is in a prompt or not, and the inspector."""

from __future__ import annotations

import datetime as dt
import os

import click

from ._app import CliContext, pass_cli_context
from ._output import echo, echo_json
from ._owners import READ_AS, owner_options, scope_option
from ._params import ID, Moment, WholeNumber

__all__ = ["register"]


@click.command()
@click.argument("fact_id", type=ID)
@click.argument("message")
@scope_option("Workspace of the turn (default: global facts only).")
@owner_options(*READ_AS)
@click.option("--budget", type=WholeNumber(1), default=2000, show_default=True,
              help="Token budget of the assembled context.")
@click.option("--tokenizer", default=None, metavar="NAME|PATH",
              help="What counts tokens, as for 'ctxslots assemble': o200k_base (default), "
              "cl100k_base or the path of a HuggingFace tokenizer.json.")
@click.option("--safety-margin", type=WholeNumber(0), default=0, show_default=True,
              help="Tokens of the budget left unused, as for 'ctxslots assemble'.")
@click.option("--answer-reserve", type=WholeNumber(0), default=0, show_default=True,
              help="Tokens of the budget kept for the model's answer, as for "
              "'ctxslots assemble'.")
@click.option("--now", type=Moment(), default=None, metavar="ISO-8601",
              help="Rank the memories as of this moment (a dump's 'now'), leaving out what "
              "was said after it (default: the store's clock).")
@click.option("--json", "as_json", is_flag=True, help="Print the explanation as JSON.")
@pass_cli_context
def why(app: CliContext, fact_id: int, message: str, scope: str | None, user: str | None,
        agent: str | None, budget: int, tokenizer: str | None, safety_margin: int,
        answer_reserve: int, now: dt.datetime | None, as_json: bool) -> None:
    """Why fact FACT_ID is, or is not, in the prompt assembled for MESSAGE: its owners, its
    section, the words it shares, its vector rank and cosine, its rank, the section's cut
    and the budget. No fact counts as accessed. Give the budget options 'ctxslots
    assemble' was given to explain the prompt it made."""
    from ..assembler import PromptAssembler
    from ..inspector import explain
    from ..request import AssemblyRequest
    from ..tokens import counter_from_spec

    counter = counter_from_spec(tokenizer) if tokenizer else None
    request = AssemblyRequest(message, scope=scope, user=user, agent=agent, budget=budget,
                              safety_margin=safety_margin, answer_reserve=answer_reserve,
                              now=now)
    with app.open_store() as store:
        assembler = PromptAssembler(store, plugin_manager=app.plugin_manager(),
                                    counter=counter)
        answer = explain(assembler, request, fact_id)
    if as_json:
        echo_json(answer.to_dict())
        return
    for line in answer.lines():
        echo(line)


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on. Other than loopback needs --token. Requests must "
                   "name it (or an --allow-host) in Host and Origin.")
@click.option("--port", type=WholeNumber(0, 65535), default=8766, show_default=True,
              help="Port to listen on (0: any free port).")
@click.option("--token", envvar="CTXSLOTS_UI_TOKEN", default=None,
              help="The secret the address carries (default: a new random one each start; "
                   "env CTXSLOTS_UI_TOKEN).")
@click.option("--allow-host", "allow_hosts", multiple=True, metavar="NAME",
              help="Another host name the browser reaches the server by (repeatable).")
@pass_cli_context
def ui(app: CliContext, host: str, port: int, token: str | None,
       allow_hosts: tuple[str, ...]) -> None:
    """Serve the inspector on this machine: the memory (filter, open, edit, forget, delete,
    reinforce, demote), a prompt lab with "why not?" for any fact, the timeline and the
    store's health. Prints the address to open, with its token."""
    import secrets

    from ..assembler import PromptAssembler
    from ..errors import CtxslotsError
    from ..inspector.app import serve
    from ..tools.mcp_server import is_loopback

    # click reads an empty variable as no value at all.
    variable = os.environ.get("CTXSLOTS_UI_TOKEN")
    empty_variable = token is None and variable is not None and not variable.strip()
    if (token is not None and not token.strip()) or empty_variable:
        # As for the MCP server's tokens: an empty value (an unset ${TOKEN} in a unit
        # file) served with a new random token each start, not the one meant.
        raise click.UsageError("the inspector's token (--token or $CTXSLOTS_UI_TOKEN) is "
                               "empty: give a secret, or leave both out for a random one")
    if not is_loopback(host) and not token:
        raise click.UsageError(f"serving on {host} (not loopback) needs --token")
    try:
        import anyio
        import uvicorn  # noqa: F401 - checked here for one clear line
    except ImportError:
        raise CtxslotsError("ctxslots ui needs Starlette and uvicorn: "
                            "pip install 'ctxslots[ui]'") from None
    plugins = app.plugin_manager()
    with app.open_store(long_running=True) as store:
        # Ctrl-C: uvicorn stops serving (the port is released), then raises it again; the
        # root group ends the command with one line and exit status 130, as every command.
        try:
            anyio.run(lambda: serve(
                store, host=host, port=port, token=token or secrets.token_urlsafe(24),
                token_given=bool(token), allow_hosts=allow_hosts,
                assembler_factory=lambda s: PromptAssembler(s, plugin_manager=plugins)))
        except OSError as exc:
            raise CtxslotsError(f"cannot listen on {host}:{port}: {exc.strerror}") from None


def register(group: click.Group) -> None:
    """Add ``why`` and ``ui`` to the ``ctxslots`` group."""
    group.add_command(why)
    group.add_command(ui)
