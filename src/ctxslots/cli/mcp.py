"""``ctxslots mcp``: serve the memory tools over MCP on stdio."""

from __future__ import annotations

import click

from ._app import CliContext, pass_cli_context

__all__ = ["register"]


@click.command()
@click.option("--scope", default=None, help="The agent's workspace (default: global facts only).")
@click.option("--slot", "slots", multiple=True,
              help="A slot the tools may use (repeatable; default: user, project, agent).")
@pass_cli_context
def mcp(app: CliContext, scope: str | None, slots: tuple[str, ...]) -> None:
    """Serve the memory tools (query, store, update, reinforce, demote, forget, timeline)
    to an MCP client over stdin and stdout."""
    from ..tools import MemoryTools
    from ..tools.mcp_server import require_sdk, serve_stdio

    # Before opening the store, so a missing SDK creates no file; its error
    # (MCPUnavailableError) is a CtxslotsError, printed as one line.
    require_sdk()
    import anyio  # installed with the SDK

    with app.open_store(long_running=True) as store:
        tools = MemoryTools(store, scope=scope, slots=slots) if slots else \
            MemoryTools(store, scope=scope)
        anyio.run(serve_stdio, tools)


def register(cli: click.Group) -> None:
    """Add ``mcp`` to the ``ctxslots`` command group."""
    cli.add_command(mcp)
