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
    import anyio

    from .cli import _store
    from .errors import CtxslotsError
    from .tools import MemoryTools
    from .tools.mcp_server import MCPUnavailableError, serve_stdio

    with _store(ctx) as store:
        try:
            tools = MemoryTools(store, scope=scope, **({"slots": slots} if slots else {}))
            anyio.run(serve_stdio, tools)
        except MCPUnavailableError as exc:
            raise CtxslotsError(str(exc)) from None


def register(cli: click.Group) -> None:
    """Add ``mcp`` to the ``ctxslots`` command group."""
    cli.add_command(mcp)
