"""``ctxslots mcp``: serve the memory tools over MCP on stdio."""

from __future__ import annotations

import click

__all__ = ["register"]


@click.command()
@click.option("--scope", default=None, help="The agent's workspace (default: global facts only).")
@click.option("--slot", "slots", multiple=True,
              help="A slot the tools may use (repeatable; default: user, project, agent).")
@click.pass_context
def mcp(ctx: click.Context, scope: str | None, slots: tuple[str, ...]) -> None:
    """Serve the memory tools (query, store, update, reinforce, demote, forget, timeline)
    to an MCP client over stdin and stdout."""
    from .cli import _store
    from .errors import CtxslotsError
    from .tools import MemoryTools
    from .tools.mcp_server import MCPUnavailableError, require_sdk, serve_stdio

    try:
        require_sdk()  # before opening the store, so a missing SDK creates no file
    except MCPUnavailableError as exc:
        raise CtxslotsError(str(exc)) from None
    import anyio  # installed with the SDK

    with _store(ctx, long_running=True) as store:
        tools = MemoryTools(store, scope=scope, slots=slots) if slots else \
            MemoryTools(store, scope=scope)
        anyio.run(serve_stdio, tools)


def register(cli: click.Group) -> None:
    """Add ``mcp`` to the ``ctxslots`` command group."""
    cli.add_command(mcp)
