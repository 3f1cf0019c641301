"""Store-wide settings and per-conversation flush progress on PostgreSQL."""

from __future__ import annotations

from ._sql import Conn

__all__ = ["erase_all_progress", "erase_progress", "get_meta", "read_progress", "set_meta",
           "write_progress"]


def read_progress(conn: Conn, conversation: str, user_id: str, agent_id: str
                  ) -> tuple[int, str] | None:
    """``(messages_read, fingerprint)`` of a user's and agent's conversation."""
    found = conn.execute("SELECT messages_read, fingerprint FROM flush_progress "
                         "WHERE user_id = %s AND agent_id = %s AND conversation = %s",
                         (user_id, agent_id, conversation)).fetchone()
    return None if found is None else (int(found[0]), str(found[1]))


def write_progress(conn: Conn, conversation: str, messages_read: int, fingerprint: str,
                   now: float, user_id: str, agent_id: str) -> None:
    """Record how far a conversation was read."""
    conn.execute(
        "INSERT INTO flush_progress (user_id, agent_id, conversation, messages_read, "
        "fingerprint, updated_at) VALUES (%s, %s, %s, %s, %s, %s) "
        "ON CONFLICT (user_id, agent_id, conversation) DO UPDATE SET "
        "messages_read = excluded.messages_read, fingerprint = excluded.fingerprint, "
        "updated_at = excluded.updated_at",
        (user_id, agent_id, conversation, int(messages_read), fingerprint, float(now)))


def erase_progress(conn: Conn, kind: str, owner: str) -> int:
    """Remove the progress of every conversation of this user or agent."""
    column = {"user": "user_id", "agent": "agent_id"}[kind]
    return len(conn.execute(f"DELETE FROM flush_progress WHERE {column} = %s RETURNING 1",
                            (owner,)).fetchall())


def erase_all_progress(conn: Conn) -> int:
    """Remove the progress of every conversation."""
    return len(conn.execute("DELETE FROM flush_progress RETURNING 1").fetchall())


def get_meta(conn: Conn, name: str) -> str | None:
    """A store-wide setting."""
    found = conn.execute("SELECT value FROM store_meta WHERE name = %s", (name,)).fetchone()
    return None if found is None else str(found[0])


def set_meta(conn: Conn, name: str, value: str) -> None:
    """Write a store-wide setting."""
    conn.execute("INSERT INTO store_meta (name, value) VALUES (%s, %s) "
                 "ON CONFLICT (name) DO UPDATE SET value = excluded.value", (name, str(value)))
