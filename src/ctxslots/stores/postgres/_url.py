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
    """
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return "postgresql://(unreadable URL)"
    user = unquote(parts.username or "")
    host = unquote(parts.hostname or "")
    db = unquote(parts.path.lstrip("/"))
    socket = parse_qs(parts.query).get("host", [""])[0]
    at = f"{user}@" if user else ""
    if not host and socket:
        return f"postgresql://{at}/{db}?host={socket}"
    return f"postgresql://{at}{host}{f':{port}' if port else ''}/{db}"
