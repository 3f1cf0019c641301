"""Keep a benchmark process off the network: only this machine may be reached.

    forbid_network()    # from here on, a connection or name lookup elsewhere raises

Libraries measured against ctxslots may phone home (telemetry, notices, model
downloads). Their own switches are turned off where they have one; this
audit hook makes sure nothing slipped through: a socket connecting anywhere
but a local address or a unix socket, or a name lookup of anything but
``localhost``, raises :class:`NetworkForbidden` inside the library that
tried, which the benchmark then reports.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import sys
from typing import Any

__all__ = ["NetworkForbidden", "forbid_network", "offline_environment"]

_LOCAL_NAMES = frozenset({"localhost", "localhost.localdomain", "", None})

_installed = False


class NetworkForbidden(RuntimeError):
    """Something in a benchmark process tried to reach another machine."""


def offline_environment() -> dict[str, str]:
    """The variables that turn off downloads and telemetry of the libraries measured."""
    return {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1",
            "MEM0_TELEMETRY": "False", "ANONYMIZED_TELEMETRY": "False",
            "ORT_DISABLE_TELEMETRY": "1"}


def _local(host: Any) -> bool:
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    if host in _LOCAL_NAMES:
        return True
    try:
        return ipaddress.ip_address(str(host).split("%")[0]).is_loopback
    except ValueError:
        return False


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if event == "socket.connect":
        sock, address = args
        if sock.family == getattr(socket, "AF_UNIX", None):
            return
        if isinstance(address, tuple) and _local(address[0]):
            return
        raise NetworkForbidden(f"benchmark processes stay offline: connect to {address!r}")
    if event == "socket.getaddrinfo" and not _local(args[0]):
        raise NetworkForbidden(f"benchmark processes stay offline: lookup of {args[0]!r}")


def forbid_network() -> None:
    """Set :func:`offline_environment` and refuse every non-local connection from now on."""
    global _installed
    os.environ.update(offline_environment())
    if not _installed:
        sys.addaudithook(_hook)
        _installed = True
