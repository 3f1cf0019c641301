"""``ctxslots mcp``: serve the memory tools over MCP, on stdio or streamable HTTP."""

from __future__ import annotations

import os
import sys
from contextlib import ExitStack, nullcontext, redirect_stdout
from pathlib import Path
from typing import TYPE_CHECKING

import click
from click.core import ParameterSource

from ._app import CliContext, pass_cli_context
from ._owners import owner_options, scope_option, scoped_slots
from ._params import WholeNumber

if TYPE_CHECKING:
    from ..tools.token_users import TokenUsers

__all__ = ["register"]


@click.command()
@scope_option("The agent's workspace (default: global facts only).")
@click.option("--slot", "slots", multiple=True,
              help="A slot the tools may use (repeatable; default: user, project, agent).")
@click.option("--transport", type=click.Choice(["stdio", "http"]), default="stdio",
              show_default=True, help="stdio for a client that starts the server; http to serve "
              "streamable HTTP at /mcp.")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on (http). Other than loopback needs --token. Requests "
                   "must name it (or an --allow-host) in Host and Origin.")
@click.option("--port", type=WholeNumber(0, 65535), default=8765, show_default=True,
              help="Port to listen on (http; 0: any free port, written to stderr).")
@click.option("--token", envvar="CTXSLOTS_MCP_TOKEN", default=None,
              help="Require 'Authorization: Bearer TOKEN' on every request (http; or set "
              "CTXSLOTS_MCP_TOKEN, which keeps it out of the process list).")
@click.option("--allow-host", "allow_hosts", multiple=True, metavar="NAME",
              help="Another host name clients reach the server by (a DNS name, a proxy's "
                   "host), accepted in Host and Origin (http; repeatable).")
@click.option("--tokens", "tokens_file", type=click.Path(dir_okay=False, path_type=Path),
              envvar="CTXSLOTS_MCP_TOKENS_FILE",
              help="One token per user (http): a file only you can read, one 'USER TOKEN' "
                   "per line; each client then reaches its own user's facts and the shared "
                   "ones (agent facts are the agent's: every user's client shares them); or "
                   "$CTXSLOTS_MCP_TOKENS_FILE. Or set CTXSLOTS_MCP_TOKENS to 'USER=TOKEN' "
                   "pairs.")
@owner_options("The user whose memory the tools reach (default: the store's default user; "
               + "with per-user tokens, the token's user).",
               "The agent using the tools (default: the store's default agent).")
@click.option("--allow-delete", is_flag=True,
              help="Offer memory_delete, which erases a fact for good (off by default).")
@pass_cli_context
def mcp(app: CliContext, scope: str | None, slots: tuple[str, ...], transport: str,
        host: str, port: int, token: str | None, allow_hosts: tuple[str, ...],
        tokens_file: Path | None, user: str | None, agent: str | None,
        allow_delete: bool) -> None:
    """Serve the memory tools (query, store, update, reinforce, demote, forget, timeline)
    to an MCP client, over stdin and stdout or streamable HTTP."""
    from ..errors import CtxslotsError
    from ..tools import DEFAULT_SLOTS, MemoryTools
    from ..tools.mcp_server import is_loopback, require_sdk, serve_http, serve_stdio
    from ..tools.token_users import check_token

    # Before opening the store, so a missing SDK creates no file; its error
    # (MCPUnavailableError) is a CtxslotsError, printed as one line.
    require_sdk()
    if transport == "http":
        _refuse_empty_variables(tokens_file)
    users = _token_users(tokens_file, transport, token, user)
    if transport == "http" and token is not None:
        check_token(token)  # a token easy to guess is refused before a store file is made
    if transport == "http" and not is_loopback(host) and not token and users is None:
        raise click.UsageError(f"serving on {host} (not loopback) needs --token or --tokens")
    import anyio  # installed with the SDK

    with ExitStack() as stack:
        # Over stdio, stdout is the protocol's from the first byte: what a plugin or a model
        # library prints while the store opens (before the SDK takes stdout) goes to stderr.
        with redirect_stdout(sys.stderr) if transport == "stdio" else nullcontext():
            store = stack.enter_context(app.open_store(long_running=True, create=True))
            tools = MemoryTools(store, scope=scope, user=user, agent=agent,
                                allow_delete=allow_delete, slots=slots or DEFAULT_SLOTS,
                                scoped_slots=scoped_slots(store, slots or DEFAULT_SLOTS),
                                slot_notes=_plugin_slot_notes(app, slots))
        if transport == "http":
            try:
                anyio.run(lambda: serve_http(tools, host=host, port=port, token=token,
                                             allow_hosts=allow_hosts, users=users))
            except OSError as exc:
                raise CtxslotsError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
        else:
            # Its output failing (full, or closed by the client) ends the command in one
            # line or quietly, as for every command (the root group unwraps the SDK's
            # task groups).
            anyio.run(serve_stdio, tools)


def _plugin_slot_notes(app: CliContext, slots: tuple[str, ...]) -> dict[str, str]:
    """What each plugin slot of ``--slot`` holds (its ``register_slots`` description),
    for the model; the built-in slots have notes of their own."""
    from ..plugins import known_slots
    from ..tools.memory_tools import SLOT_NOTES

    described = known_slots(app.plugin_manager())
    return {slot: described[slot] for slot in slots
            if slot not in SLOT_NOTES and described.get(slot, "").strip()}


#: The variables that give the HTTP server its tokens, and what each holds.
_TOKEN_VARIABLES = (("CTXSLOTS_MCP_TOKEN", "a token"),
                    ("CTXSLOTS_MCP_TOKENS_FILE", "the token file"),
                    ("CTXSLOTS_MCP_TOKENS", "USER=TOKEN pairs"))


def _refuse_empty_variables(tokens_file: Path | None) -> None:
    """Refuse a token variable that is set but empty or blank (as an unset ``${TOKEN}``
    expands in a unit file) where no option given on the command line replaces it: click reads an
    empty variable as no token at all, which would serve without one."""
    # An option given on the command line replaces its variable; one click read from the
    # variable itself (blanks, which click keeps) is the variable's value.
    ctx = click.get_current_context()
    token_given = ctx.get_parameter_source("token") is ParameterSource.COMMANDLINE
    file_given = ctx.get_parameter_source("tokens_file") is ParameterSource.COMMANDLINE
    given = {"CTXSLOTS_MCP_TOKEN": token_given,
             "CTXSLOTS_MCP_TOKENS_FILE": file_given,
             "CTXSLOTS_MCP_TOKENS": tokens_file is not None}
    for name, holds in _TOKEN_VARIABLES:
        value = os.environ.get(name)
        if value is not None and not value.strip() and not given[name]:
            raise click.UsageError(f"${name} is set but empty: set it to {holds} or unset it")


def _token_users(tokens_file: Path | None, transport: str, token: str | None,
                 user: str | None) -> TokenUsers | None:
    """The per-user tokens of --tokens or $CTXSLOTS_MCP_TOKENS, checked; ``None`` without."""
    from ..tools.token_users import TokenUsers

    variable = os.environ.get("CTXSLOTS_MCP_TOKENS")
    if tokens_file is None and not variable:
        return None
    if transport != "http":
        raise click.UsageError("per-user tokens need --transport http")
    if token:
        raise click.UsageError("give one shared --token or a token per user, not both")
    if tokens_file is not None and variable:
        # Either alone names every user; with both, the variable's users were left out
        # without a word, and their clients got 401.
        raise click.UsageError("give the per-user tokens in --tokens (or "
                               "$CTXSLOTS_MCP_TOKENS_FILE) or in $CTXSLOTS_MCP_TOKENS, "
                               "not both")
    if user is not None:
        raise click.UsageError("with per-user tokens the token names the user: leave out --user")
    if tokens_file is not None:
        return TokenUsers.from_file(tokens_file)
    return TokenUsers.parse_variable(variable or "", "CTXSLOTS_MCP_TOKENS")


def register(cli: click.Group) -> None:
    """Add ``mcp`` to the ``ctxslots`` command group."""
    cli.add_command(mcp)
