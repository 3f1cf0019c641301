"""Store-wide settings and per-conversation flush progress on SQLite."""

from __future__ import annotations

from ._connection import Connection

__all__ = ["get_meta", "read_progress", "set_meta", "write_progress"]


def read_progress(conn: Connection, conversation: str) -> tuple[int, str] | None:
    """``(messages_read, fingerprint)`` of a conversation."""
    found = conn.execute("SELECT messages_read, fingerprint FROM flush_progress "
                         "WHERE conversation = ?", (conversation,)).fetchone()
    return None if found is None else (int(found[0]), str(found[1]))


def write_progress(conn: Connection, conversation: str, messages_read: int, fingerprint: str,
                   now: float) -> None:
    """Record how far a conversation was read."""
    conn.execute(
        "INSERT OR REPLACE INTO flush_progress (conversation, messages_read, fingerprint, "
        "updated_at) VALUES (?, ?, ?, ?)", (conversation, messages_read, fingerprint, now))


def get_meta(conn: Connection, name: str) -> str | None:
    """A store-wide setting (``store_meta``), or ``None``."""
    value = conn.scalar("SELECT value FROM store_meta WHERE name = ?", (name,))
    return None if value is None else str(value)


def set_meta(conn: Connection, name: str, value: str) -> None:
    """Write a store-wide setting (inside a write)."""
    conn.execute("INSERT INTO store_meta (name, value) VALUES (?, ?) "
                 "ON CONFLICT(name) DO UPDATE SET value = excluded.value", (name, value))
