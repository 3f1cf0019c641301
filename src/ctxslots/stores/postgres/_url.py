"""PostgreSQL URLs, read without the driver (so a path or URL can be told apart without psycopg)."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, unquote, urlsplit

__all__ = ["is_postgres_url", "safe_location"]

_URL = re.compile(r"^postgres(?:ql)?://", re.IGNORECASE)


def is_postgres_url(text: object) -> bool:
    """Whether ``text`` is a ``postgresql://`` (or ``postgres://``) URL."""
    return isinstance(text, str) and _URL.match(text) is not None


def safe_location(url: str) -> str:
    """``url`` without its password and options, fit to print.

    >>> safe_location("postgresql://ada:secret@db.example:5433/memory?sslmode=require")
    'postgresql://ada@db.example:5433/memory'

    A socket directory, in the query or percent-encoded as the host, is shown in the
    query, so that the text is a URL of the same database; so is a port given in the
    query:

    >>> safe_location("postgresql://ada@%2Frun%2Fpg:5433/memory")
    'postgresql://ada@/memory?host=/run/pg&port=5433'
    >>> safe_location("postgresql://ada@db.example/memory?port=5433")
    'postgresql://ada@db.example:5433/memory'
    """
    try:
        parts = urlsplit(url)
        port: int | str | None = parts.port
    except ValueError:
        return "postgresql://(unreadable URL)"
    user = unquote(parts.username or "")
    host = unquote(parts.hostname or "")
    db = unquote(parts.path.lstrip("/"))
    query = parse_qs(parts.query)
    socket = query.get("host", [""])[0]
    port = port or query.get("port", [""])[0] or None
    at = f"{user}@" if user else ""
    if host.startswith("/"):  # a socket directory written percent-encoded as the host
        socket, host = host, ""
    if not host and socket:
        return f"postgresql://{at}/{db}?host={socket}{f'&port={port}' if port else ''}"
    return f"postgresql://{at}{host}{f':{port}' if port else ''}/{db}"
