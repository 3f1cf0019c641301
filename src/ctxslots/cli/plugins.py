"""``ctxslots plugins``: which plugins are installed and which hooks each implements."""

from __future__ import annotations

import click

from ._app import CliContext, pass_cli_context
from ._output import echo, echo_json

__all__ = ["register"]


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
@pass_cli_context
def plugins(app: CliContext, as_json: bool) -> None:
    """List the plugins the ctxslots command loads (built-ins first) and their hooks.

    Installed plugins are the ``ctxslots`` entry points; CTXSLOTS_LOAD_PLUGINS
    narrows them as for every other command.
    """
    from ..plugins import describe_plugins

    found = describe_plugins(app.plugin_manager())
    if as_json:
        echo_json(found)
        return
    for plugin in found:
        label = "built-in" if plugin["builtin"] else (plugin["version"] or "installed")
        echo(f"{plugin['name']} ({label}): {', '.join(plugin['hooks']) or 'no hooks'}")


def register(group: click.Group) -> None:
    """Add ``plugins`` to the ``ctxslots`` group."""
    group.add_command(plugins)
