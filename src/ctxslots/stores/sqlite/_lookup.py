"""Finding facts by content, one at a time (a write) or a batch at a time (an import).

Free memories (no key) are found by value. The value indexes
(``facts_free_value``, ``archive_value``, migration ``m010``) make that a search
instead of a scan of the slot and scope, so an import of a million memories
checks each in about constant time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..backend.types import rows_in
from ._connection import Connection

__all__ = ["find_existing", "find_same", "taken_ids"]

#: Items per statement (each binds five parameters).
_BATCH = 400


def _marks(count: int, width: int) -> str:
    return ",".join([f"({','.join('?' * width)})"] * count)


def find_same(conn: Connection, slot: str, scope: str, key: str | None, value: str, *,
              archived: bool, live_at: float | None) -> int | None:
    """The lowest id with exactly this slot, scope, key and value (live at ``live_at``)."""
    key_cond, params = ("key IS NULL", []) if key is None else ("key = ?", [key])
    live, live_params = ("1", []) if live_at is None else \
        ("(expires_at IS NULL OR expires_at > ?)", [live_at])
    found = conn.scalar(
        f"SELECT id FROM {'archive' if archived else 'facts'} WHERE slot = ? AND scope = ? "
        f"AND {key_cond} AND value = ? AND {live} ORDER BY id LIMIT 1",
        (slot, scope, *params, value, *live_params))
    return None if found is None else int(found)


def find_existing(conn: Connection, items: Sequence[tuple[str, str, str | None, str]], *,
                  archived: bool) -> list[int | None]:
    """For each item the lowest id of the stored fact it duplicates (see the Backend)."""
    out: list[int | None] = [None] * len(items)
    same_value = "f.value = q.value"
    if archived:
        groups = [(list(range(len(items))), "archive",
                   f"f.slot = q.slot AND f.scope = q.scope AND {same_value} AND f.key IS q.key")]
    else:
        groups = [([i for i, it in enumerate(items) if it[2] is not None], "facts",
                   "f.slot = q.slot AND f.scope = q.scope AND f.key = q.key"),
                  ([i for i, it in enumerate(items) if it[2] is None], "facts",
                   f"f.key IS NULL AND f.slot = q.slot AND f.scope = q.scope AND {same_value}")]
    for positions, table, join in groups:
        for chunk in rows_in(positions, _BATCH):
            params: list[Any] = []
            for i in chunk:
                slot, scope, key, value = items[i]
                params += [i, slot, scope, key, value]
            rows = conn.execute(
                f"WITH q(i, slot, scope, key, value) AS (VALUES {_marks(len(chunk), 5)}) "
                f"SELECT q.i, min(f.id) FROM q JOIN {table} AS f ON {join} GROUP BY q.i",
                params).fetchall()
            for i, fact_id in rows:
                out[int(i)] = int(fact_id)
    return out


def taken_ids(conn: Connection, fact_ids: Sequence[int]) -> set[int]:
    """Which of these ids a live, archived or historical fact ever had."""
    taken: set[int] = set()
    for chunk in rows_in(list(dict.fromkeys(fact_ids)), _BATCH):
        marks = ",".join("?" * len(chunk))
        taken.update(int(r[0]) for r in conn.execute(
            f"SELECT id FROM facts WHERE id IN ({marks}) UNION "
            f"SELECT id FROM archive WHERE id IN ({marks}) UNION "
            f"SELECT fact_id FROM fact_history WHERE fact_id IN ({marks})",
            (*chunk, *chunk, *chunk)).fetchall())
    return taken
