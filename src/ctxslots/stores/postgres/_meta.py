"""Store-wide settings and per-conversation flush progress on PostgreSQL."""

from __future__ import annotations

from ._sql import Conn

__all__ = ["get_meta", "read_progress", "set_meta", "write_progress"]


def read_progress(conn: Conn, conversation: str) -> tuple[int, str] | None:
    """``(messages_read, fingerprint)`` of a conversation."""
    found = conn.execute("SELECT messages_read, fingerprint FROM flush_progress "
                         "WHERE conversation = %s", (conversation,)).fetchone()
    return None if found is None else (int(found[0]), str(found[1]))


def write_progress(conn: Conn, conversation: str, messages_read: int, fingerprint: str,
                   now: float) -> None:
    """Record how far a conversation was read."""
    conn.execute(
        "INSERT INTO flush_progress (conversation, messages_read, fingerprint, updated_at) "
        "VALUES (%s, %s, %s, %s) ON CONFLICT (conversation) DO UPDATE SET "
        "messages_read = excluded.messages_read, fingerprint = excluded.fingerprint, "
        "updated_at = excluded.updated_at",
        (conversation, int(messages_read), fingerprint, float(now)))


def get_meta(conn: Conn, name: str) -> str | None:
    """A store-wide setting."""
    found = conn.execute("SELECT value FROM store_meta WHERE name = %s", (name,)).fetchone()
    return None if found is None else str(found[0])


def set_meta(conn: Conn, name: str, value: str) -> None:
    """Write a store-wide setting."""
    conn.execute("INSERT INTO store_meta (name, value) VALUES (%s, %s) "
                 "ON CONFLICT (name) DO UPDATE SET value = excluded.value", (name, str(value)))
