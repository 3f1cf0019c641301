"""Store-wide settings and per-conversation flush progress on SQLite."""

from __future__ import annotations

from ._connection import Connection

__all__ = ["erase_all_progress", "erase_progress", "get_meta", "read_progress", "set_meta", "write_progress"]


def read_progress(conn: Connection, conversation: str, user_id: str, agent_id: str
                  ) -> tuple[int, str] | None:
    """``(messages_read, fingerprint)`` of a user's and agent's conversation."""
    found = conn.execute("SELECT messages_read, fingerprint FROM flush_progress "
                         "WHERE user_id = ? AND agent_id = ? AND conversation = ?",
                         (user_id, agent_id, conversation)).fetchone()
    return None if found is None else (int(found[0]), str(found[1]))


def write_progress(conn: Connection, conversation: str, messages_read: int, fingerprint: str,
                   now: float, user_id: str, agent_id: str) -> None:
    """Record how far a conversation was read."""
    conn.execute(
        "INSERT OR REPLACE INTO flush_progress (user_id, agent_id, conversation, messages_read, "
        "fingerprint, updated_at) VALUES (?, ?, ?, ?, ?, ?)",
        (user_id, agent_id, conversation, messages_read, fingerprint, now))


def erase_progress(conn: Connection, kind: str, owner: str) -> int:
    """Remove the progress of every conversation of this user or agent."""
    column = {"user": "user_id", "agent": "agent_id"}[kind]
    return conn.changed(f"DELETE FROM flush_progress WHERE {column} = ?", (owner,))


def erase_all_progress(conn: Connection) -> int:
    """Remove the progress of every conversation; how many there were."""
    return conn.changed("DELETE FROM flush_progress")


def get_meta(conn: Connection, name: str) -> str | None:
    """A store-wide setting (``store_meta``), or ``None``."""
    value = conn.scalar("SELECT value FROM store_meta WHERE name = ?", (name,))
    return None if value is None else str(value)


def set_meta(conn: Connection, name: str, value: str) -> None:
    """Write a store-wide setting (inside a write)."""
    conn.execute("INSERT INTO store_meta (name, value) VALUES (?, ?) "
                 "ON CONFLICT(name) DO UPDATE SET value = excluded.value", (name, value))
