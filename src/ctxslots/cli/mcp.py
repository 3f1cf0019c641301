"""``ctxslots mcp``: serve the memory tools over MCP, on stdio or streamable HTTP."""

from __future__ import annotations

import click

from ._app import CliContext, pass_cli_context
from ._params import WholeNumber

__all__ = ["register"]


@click.command()
@click.option("--scope", default=None, help="The agent's workspace (default: global facts only).")
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
@pass_cli_context
def mcp(app: CliContext, scope: str | None, slots: tuple[str, ...], transport: str,
        host: str, port: int, token: str | None, allow_hosts: tuple[str, ...]) -> None:
    """Serve the memory tools (query, store, update, reinforce, demote, forget, timeline)
    to an MCP client, over stdin and stdout or streamable HTTP."""
    from ..errors import CtxslotsError
    from ..tools import MemoryTools
    from ..tools.mcp_server import is_loopback, require_sdk, serve_http, serve_stdio

    # Before opening the store, so a missing SDK creates no file; its error
    # (MCPUnavailableError) is a CtxslotsError, printed as one line.
    require_sdk()
    if transport == "http" and not is_loopback(host) and not token:
        raise click.UsageError(f"serving on {host} (not loopback) needs --token")
    import anyio  # installed with the SDK

    with app.open_store(long_running=True, create=True) as store:
        tools = MemoryTools(store, scope=scope, slots=slots) if slots else \
            MemoryTools(store, scope=scope)
        if transport == "http":
            try:
                anyio.run(lambda: serve_http(tools, host=host, port=port, token=token,
                                             allow_hosts=allow_hosts))
            except OSError as exc:
                raise CtxslotsError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
        else:
            anyio.run(serve_stdio, tools)


def register(cli: click.Group) -> None:
    """Add ``mcp`` to the ``ctxslots`` command group."""
    cli.add_command(mcp)
