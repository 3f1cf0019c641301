"""The ``ctxslots`` command: a thin layer over the library.

Every command opens the store named by ``--db`` (or ``$CTXSLOTS_DB``, or the
default under the user data directory) through the :class:`CliContext` the
root group puts in the click context. Errors print one line to stderr and exit
with status 1 (2 for usage errors); never a traceback.

One module per family of commands; this one assembles the group.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from . import assemble, erasure, facts, flush, index, inspect, mcp, plugins, prune, transfer
from ._app import CliContext, cli, pass_cli_context
from ._output import tolerant_streams
from ._signals import sigterm_as_interrupt

__all__ = ["CliContext", "cli", "main", "pass_cli_context"]

for _module in (facts, erasure, assemble, inspect, flush, index, prune, mcp, transfer,
                plugins):
    _module.register(cli)


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of the ``ctxslots`` console script (SIGTERM stops it as Ctrl-C does;
    any stored text prints in any locale, see :func:`tolerant_streams`)."""
    tolerant_streams()
    with sigterm_as_interrupt():
        cli.main(args=list(argv) if argv is not None else sys.argv[1:], prog_name="ctxslots")
