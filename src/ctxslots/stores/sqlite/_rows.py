"""Fact rows on SQLite: read, insert, update, archive, history, supersession, lookups.

Each function takes the engine's connection (autocommit, or inside the
caller's write) and runs plain SQL; the backend chooses when. Free memories (no
key) are found by value through the value indexes (``facts_free_value``,
``archive_value``), so an import of a million memories checks each in about
constant time.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, cast

import apsw
import attrs

from ...errors import DuplicateKeyError
from ..backend import (
    Erased,
    FactFields,
    FactFilter,
    FactKey,
    FactRow,
    GroupCount,
    HistoryEntry,
    owner_keys,
    rows_in,
)
from ..stemming import with_stems
from ._connection import Connection
from ._schema import IMPORTANCE, IMPORTANT_WHERE
from ._sql import (
    ARCHIVE_READ,
    COPIED,
    COPY,
    INSERTED,
    LIMIT,
    READ,
    WRITABLE,
    filter_clause,
    insert_values,
    marks,
)

__all__ = [
    "add_history", "add_replaced", "adjust_score", "all_history", "archive", "counts",
    "find_existing", "find_same", "get", "get_archived", "get_by_key", "group_counts",
    "hand_over_superseded",
    "hidden_counts", "history", "history_of", "id_is_free", "ids_passing", "important", "insert",
    "insert_archived", "neighbours", "rows_by_ids", "select", "set_superseded",
    "superseded_links", "taken_ids", "touch", "update",
]

_HISTORY = ("fact_id, slot, scope, key, value, tags, source, confidence, "
            "valid_from, valid_to, observed_at")
#: Items per lookup statement (each binds seven parameters).
_BATCH = 280


def _rows(conn: Connection, sql: str, params: Sequence[Any] = ()) -> list[FactRow]:
    return cast(list[FactRow], conn.rows(sql, params))


def _one(conn: Connection, sql: str, params: Sequence[Any]) -> FactRow | None:
    found = _rows(conn, sql, params)
    return found[0] if found else None


def _history(row: Mapping[str, Any]) -> HistoryEntry:
    return HistoryEntry(
        fact_id=int(row["fact_id"]), slot=row["slot"], scope=row["scope"], key=row["key"],
        value=row["value"], tags=row["tags"], source=row["source"],
        confidence=float(row["confidence"]), valid_from=float(row["valid_from"]),
        valid_to=float(row["valid_to"]),
        observed_at=None if row["observed_at"] is None else float(row["observed_at"]))


# -- reading one fact ------------------------------------------------------------


def get(conn: Connection, fact_id: int, live_at: float | None) -> FactRow | None:
    """The fact with this id (``None`` when absent or expired at ``live_at``)."""
    cond, params = filter_clause(FactFilter(live_at=live_at))
    return _one(conn, f"SELECT {READ} FROM facts WHERE id = ? AND {cond}", (fact_id, *params))


def get_archived(conn: Connection, fact_id: int) -> FactRow | None:
    """The archived fact with this id."""
    return _one(conn, f"SELECT {ARCHIVE_READ} FROM archive WHERE id = ?", (fact_id,))


def get_by_key(conn: Connection, slot: str, scope: str, user_id: str, agent_id: str, key: str,
               live_at: float | None) -> FactRow | None:
    """The fact with this slot, owners and key."""
    cond, params = filter_clause(FactFilter(live_at=live_at))
    return _one(conn, f"SELECT {READ} FROM facts WHERE slot = ? AND scope = ? AND user_id = ? "
                f"AND agent_id = ? AND key = ? AND {cond}",
                (slot, scope, user_id, agent_id, key, *params))


def find_same(conn: Connection, slot: str, scope: str, user_id: str, agent_id: str,
              key: str | None, value: str, *, archived: bool, live_at: float | None
              ) -> int | None:
    """The lowest id with exactly this slot, owners, key and value (live at ``live_at``)."""
    key_cond, params = ("key IS NULL", []) if key is None else ("key = ?", [key])
    live, live_params = ("1", []) if live_at is None else \
        ("(expires_at IS NULL OR expires_at > ?)", [live_at])
    found = conn.scalar(
        f"SELECT id FROM {'archive' if archived else 'facts'} WHERE slot = ? AND scope = ? "
        f"AND user_id = ? AND agent_id = ? AND {key_cond} AND value = ? AND {live} "
        "ORDER BY id LIMIT 1", (slot, scope, user_id, agent_id, *params, value, *live_params))
    return None if found is None else int(found)


_SAME_OWNERS = ("f.slot = q.slot AND f.scope = q.scope AND f.user_id = q.user_id "
                "AND f.agent_id = q.agent_id")


def find_existing(conn: Connection, items: Sequence[FactKey], *, archived: bool
                  ) -> list[int | None]:
    """For each item the lowest id of the stored fact it duplicates (see the Backend)."""
    out: list[int | None] = [None] * len(items)
    same_value = "f.value = q.value"
    if archived:
        groups = [(list(range(len(items))), "archive",
                   f"{_SAME_OWNERS} AND {same_value} AND f.key IS q.key")]
    else:
        groups = [([i for i, it in enumerate(items) if it[4] is not None], "facts",
                   f"{_SAME_OWNERS} AND f.key = q.key"),
                  ([i for i, it in enumerate(items) if it[4] is None], "facts",
                   f"f.key IS NULL AND {_SAME_OWNERS} AND {same_value}")]
    for positions, table, join in groups:
        for chunk in rows_in(positions, _BATCH):
            params: list[Any] = []
            for i in chunk:
                params += [i, *items[i]]
            values = ",".join(["(?,?,?,?,?,?,?)"] * len(chunk))
            found = conn.execute(
                f"WITH q(i, slot, scope, user_id, agent_id, key, value) AS (VALUES {values}) "
                f"SELECT q.i, min(f.id) FROM q JOIN {table} AS f ON {join} GROUP BY q.i",
                params).fetchall()
            for i, fact_id in found:
                out[int(i)] = int(fact_id)
    return out


def taken_ids(conn: Connection, fact_ids: Sequence[int]) -> set[int]:
    """Which of these ids a live, archived or historical fact ever had."""
    taken: set[int] = set()
    for chunk in rows_in(list(dict.fromkeys(fact_ids)), _BATCH):
        ids = marks(len(chunk))
        taken.update(int(r[0]) for r in conn.execute(
            f"SELECT id FROM facts WHERE id IN ({ids}) UNION "
            f"SELECT id FROM archive WHERE id IN ({ids}) UNION "
            f"SELECT fact_id FROM fact_history WHERE fact_id IN ({ids})",
            (*chunk, *chunk, *chunk)).fetchall())
    return taken


def id_is_free(conn: Connection, fact_id: int) -> bool:
    """Whether no fact ever had this id (live, archived, in history or handed out)."""
    return conn.scalar(
        "SELECT 1 WHERE EXISTS (SELECT 1 FROM facts WHERE id = ?) OR EXISTS "
        "(SELECT 1 FROM archive WHERE id = ?) OR EXISTS (SELECT 1 FROM fact_history "
        "WHERE fact_id = ?)", (fact_id, fact_id, fact_id)) is None


# -- writing -------------------------------------------------------------------


def insert(conn: Connection, row: FactFields, fact_id: int | None, path: str) -> int:
    """Insert a live fact; AUTOINCREMENT never hands out an id twice.

    :raises DuplicateKeyError: A live fact holds the slot, scope and key;
        nothing was written and the transaction goes on.
    """
    values = insert_values(row)
    try:
        if fact_id is None:
            cursor = conn.execute(f"INSERT INTO facts ({', '.join(INSERTED)}) "
                                  f"VALUES ({marks(len(values))}) RETURNING id", values)
            return int(cursor.fetchall()[0][0])
        conn.execute(f"INSERT INTO facts (id, {', '.join(INSERTED)}) "
                     f"VALUES (?, {marks(len(values))})", (fact_id, *values))
        return fact_id
    except apsw.ConstraintError:
        if row["key"] is not None and get_by_key(conn, row["slot"], row["scope"], row["user_id"],
                                                 row["agent_id"], row["key"], None):
            raise DuplicateKeyError(row["slot"], row["scope"], row["key"], path=path) from None
        raise


def insert_archived(conn: Connection, row: FactRow, fact_id: int) -> None:
    """Insert straight into the archive and keep its id from being handed out."""
    values = insert_values(row)
    conn.execute(f"INSERT INTO archive (id, {', '.join(INSERTED)}, archived_at, reason) "
                 f"VALUES (?, {marks(len(values) + 2)})",
                 (fact_id, *values, row["archived_at"], row["reason"]))
    changed = conn.execute(
        "UPDATE sqlite_sequence SET seq = max(seq, ?) WHERE name = 'facts' RETURNING seq",
        (fact_id,)).fetchall()
    if not changed:
        conn.execute("INSERT INTO sqlite_sequence (name, seq) VALUES ('facts', ?)", (fact_id,))


def update(conn: Connection, fact_id: int, fields: Mapping[str, Any]) -> None:
    """Set some columns of a fact."""
    unknown = set(fields) - WRITABLE
    if unknown:
        raise ValueError(f"not fact columns: {sorted(unknown)}")
    fields = with_stems(fields, lambda: conn.execute(
        "SELECT key, value, tags, context FROM facts WHERE id = ?", (fact_id,)).fetchone())
    if fields:
        sets = ", ".join(f"{name} = ?" for name in fields)
        conn.execute(f"UPDATE facts SET {sets} WHERE id = ?", (*fields.values(), fact_id))


def add_replaced(conn: Connection, entry: HistoryEntry) -> None:
    """Record the value a write is about to replace, from when it began: the end of the
    fact's latest entry, or ``entry.valid_from`` when it has none or that is later."""
    conn.execute(
        f"INSERT INTO fact_history ({_HISTORY}) VALUES ({marks(8)}, max(?, coalesce("
        "(SELECT max(valid_to) FROM fact_history WHERE fact_id = ?), 0)), ?, ?)",
        (entry.fact_id, entry.slot, entry.scope, entry.key, entry.value, entry.tags,
         entry.source, entry.confidence, entry.valid_from, entry.fact_id, entry.valid_to,
         entry.observed_at))


def add_history(conn: Connection, entries: Sequence[HistoryEntry]) -> None:
    """Record earlier values."""
    conn.executemany(
        f"INSERT INTO fact_history ({_HISTORY}) VALUES ({marks(11)})",
        [(e.fact_id, e.slot, e.scope, e.key, e.value, e.tags, e.source, e.confidence,
          e.valid_from, e.valid_to, e.observed_at) for e in entries])


def archive(conn: Connection, fact_id: int, archived_at: float, reason: str | None
            ) -> FactRow | None:
    """Move a live fact to the archive; the archived row (``None``: no such fact)."""
    if conn.scalar("SELECT 1 FROM facts WHERE id = ?", (fact_id,)) is None:
        return None
    conn.execute(f"INSERT OR REPLACE INTO archive ({COPIED}, archived_at, reason) "
                 f"SELECT {COPY}, ?, ? FROM facts WHERE id = ?", (archived_at, reason, fact_id))
    conn.execute("DELETE FROM facts WHERE id = ?", (fact_id,))
    return get_archived(conn, fact_id)


def adjust_score(conn: Connection, fact_id: int, delta: float, live_at: float) -> bool:
    """Add to a live fact's score; whether it existed."""
    cond, params = filter_clause(FactFilter(live_at=live_at))
    return bool(conn.changed(f"UPDATE facts SET score = score + ? WHERE id = ? AND {cond}",
                             (float(delta), fact_id, *params)))


def touch(conn: Connection, fact_ids: Sequence[int], now: float) -> int:
    """Count an access of each fact; how many changed."""
    changed = 0
    for chunk in rows_in(fact_ids):
        changed += conn.changed(
            "UPDATE facts SET access_count = access_count + 1, last_accessed = ? "
            f"WHERE id IN ({marks(len(chunk))})", (now, *chunk))
    return changed


def set_superseded(conn: Connection, pairs: Sequence[tuple[int, int | None]], archived: bool
                   ) -> None:
    """Set ``superseded_by``."""
    conn.executemany(
        f"UPDATE {'archive' if archived else 'facts'} SET superseded_by = ? WHERE id = ?",
        [(by, fid) for fid, by in pairs])


def superseded_links(conn: Connection, archived: bool) -> list[tuple[int, int]]:
    """Every ``(id, superseded_by)`` of the live facts or of the archive."""
    table = "archive" if archived else "facts"
    return [(int(a), int(b)) for a, b in conn.execute(
        f"SELECT id, superseded_by FROM {table} WHERE superseded_by IS NOT NULL "
        "ORDER BY id").fetchall()]


def hand_over_superseded(conn: Connection, old: int, new: int) -> None:
    """Facts hidden by ``old`` are hidden by ``new``."""
    conn.execute("UPDATE facts SET superseded_by = ? WHERE superseded_by = ?", (new, old))


# -- reading many ----------------------------------------------------------------


def history(conn: Connection, fact_id: int) -> list[HistoryEntry]:
    """Earlier values of one fact, oldest first."""
    return [_history(r) for r in conn.rows(
        f"SELECT {_HISTORY} FROM fact_history WHERE fact_id = ? ORDER BY valid_to, id",
        (fact_id,))]


def all_history(conn: Connection) -> Iterator[HistoryEntry]:
    """Every history entry, by fact id then time."""
    for r in conn.rows(f"SELECT {_HISTORY} FROM fact_history ORDER BY fact_id, valid_to, id"):
        yield _history(r)


def history_of(conn: Connection, fact_ids: Sequence[int]) -> Iterator[HistoryEntry]:
    """The history entries of these facts, by fact id then time."""
    for chunk in rows_in(sorted(set(fact_ids)), _BATCH):
        for r in conn.rows(f"SELECT {_HISTORY} FROM fact_history WHERE fact_id IN "
                           f"({marks(len(chunk))}) ORDER BY fact_id, valid_to, id", chunk):
            yield _history(r)


def select(conn: Connection, flt: FactFilter, order: str, archived: bool,
           newest_first: bool = False, limit: int | None = None, offset: int = 0
           ) -> Iterator[FactRow]:
    """Facts passing ``flt``, by id or by observed time (the highest first when
    ``newest_first``), at most ``limit`` of them after ``offset``."""
    cond, params = filter_clause(flt)
    table, read = ("archive", ARCHIVE_READ) if archived else ("facts", READ)
    # The column by its table's name: bare, ORDER BY would name READ's expression of
    # the same name, which no index holds, and sort every fact the filter selects. A fact
    # written before the column was filled holds NULL there, which the index places
    # before every other: while one is left, the facts are sorted by READ's expression
    # (when each was written, for those), as they are shown.
    said = f"{table}.observed_at"
    if order == "created" and _unobserved(conn, table):
        said = f"coalesce({table}.observed_at, {table}.created_at)"
    by = {"id": "id", "created": f"{said}, id"}[order]
    if newest_first:
        by = {"id": "id DESC", "created": f"{said} DESC, id DESC"}[order]
    cut = "" if limit is None and not offset else f" {LIMIT} OFFSET +?"
    if cut:
        params = [*params, -1 if limit is None else limit, offset]
    yield from _rows(conn, f"SELECT {read} FROM {table} WHERE {cond} ORDER BY {by}{cut}",
                     params)


def _unobserved(conn: Connection, table: str) -> bool:
    """Whether a fact of ``table`` has no observed time (written before it was kept; the
    facts' index on it finds one at once)."""
    return bool(conn.scalar(f"SELECT EXISTS (SELECT 1 FROM {table} WHERE observed_at IS NULL)"))


def count(conn: Connection, flt: FactFilter) -> int:
    """How many facts pass ``flt``."""
    cond, params = filter_clause(flt)
    return int(conn.scalar(f"SELECT count(*) FROM facts WHERE {cond}", params))


def important(conn: Connection, flt: FactFilter, limit: int) -> list[FactRow]:
    """Keyed or reinforced facts passing ``flt``, most important first (index walks).

    The index leads with the owners, slot and scope, so one ``IN`` list on any
    of them would mean sorting every match; instead each combination of owners,
    slot and scope is its own arm walking the index for at most ``limit``
    entries, and only those are sorted.
    """
    keys = owner_keys(flt)
    if not keys:  # an owner list left open, or too many combinations to walk one by one
        cond, params = filter_clause(flt)
        return _rows(conn, f"SELECT {READ} FROM facts WHERE {cond} AND {IMPORTANT_WHERE} "
                     f"ORDER BY {IMPORTANCE} {LIMIT}", (*params, limit))
    selects: list[str] = []
    params = []
    for user, agent, slot, scope in keys:
        cond, arm = filter_clause(attrs.evolve(
            flt, users=(user,), agents=(agent,), slots=(slot,), scopes=(scope,)))
        selects.append(f"SELECT * FROM (SELECT {READ} FROM facts WHERE {cond} AND "
                       f"{IMPORTANT_WHERE} ORDER BY {IMPORTANCE} {LIMIT})")
        params += [*arm, limit]
    if len(selects) == 1:
        return _rows(conn, selects[0], params)
    return _rows(conn, f"SELECT * FROM ({' UNION ALL '.join(selects)}) "
                 f"ORDER BY {IMPORTANCE} {LIMIT}", (*params, limit))


def rows_by_ids(conn: Connection, fact_ids: Sequence[int], flt: FactFilter, archived: bool
                ) -> list[FactRow]:
    """The facts with these ids that pass ``flt``."""
    table, read = ("archive", ARCHIVE_READ) if archived else ("facts", READ)
    out: list[FactRow] = []
    for sql, params in _by_ids(read, table, fact_ids, flt):
        out += _rows(conn, sql, params)
    return out


def ids_passing(conn: Connection, fact_ids: Sequence[int], flt: FactFilter) -> set[int]:
    """Which of these facts (not archived) pass ``flt``: :func:`rows_by_ids` reading the
    ids alone."""
    return {int(fid) for sql, params in _by_ids("id", "facts", fact_ids, flt)
            for (fid,) in conn.execute(sql, params).fetchall()}


def _by_ids(columns: str, table: str, fact_ids: Sequence[int], flt: FactFilter
            ) -> Iterator[tuple[str, tuple[Any, ...]]]:
    """The statements reading ``columns`` of the rows of ``table`` with these ids that
    pass ``flt``, a chunk of ids each, with their parameters."""
    cond, params = filter_clause(flt)
    for chunk in rows_in(fact_ids):
        # NOT INDEXED: one rowid lookup per id, the filter checked on the row; the
        # planner would otherwise seek (slot, scope, rowid) in an index first.
        sql = f"SELECT {columns} FROM {table} NOT INDEXED WHERE id IN ({marks(len(chunk))}) " \
              f"AND {cond}"
        yield sql, (*chunk, *params)


def neighbours(conn: Connection, row: FactRow, flt: FactFilter, before: int, after: int
               ) -> tuple[list[FactRow], list[FactRow]]:
    """Facts just before (newest first) and after (oldest first) ``row`` by observed time
    (``facts.observed_at``: the column its index holds, not READ's expression; while a
    fact without one is left, READ's expression, which places it as it is shown)."""
    cond, params = filter_clause(flt)
    at = (row["observed_at"], row["id"])
    said = "facts.observed_at"
    if _unobserved(conn, "facts"):
        said = "coalesce(facts.observed_at, facts.created_at)"
    earlier = _rows(conn, f"SELECT {READ} FROM facts WHERE {cond} AND ({said}, id) < (?, ?) "
                    f"ORDER BY {said} DESC, id DESC {LIMIT}", (*params, *at, before))
    later = _rows(conn, f"SELECT {READ} FROM facts WHERE {cond} AND ({said}, id) > (?, ?) "
                  f"ORDER BY {said}, id {LIMIT}", (*params, *at, after))
    return earlier, later


def group_counts(conn: Connection, live_at: float) -> list[GroupCount]:
    """Facts and expired facts per slot and owners."""
    return [GroupCount(str(r[0]), str(r[1]), str(r[2]), str(r[3]), int(r[4]), int(r[5] or 0))
            for r in conn.execute(
                "SELECT slot, scope, user_id, agent_id, count(*), "
                "sum(NOT (expires_at IS NULL OR expires_at > ?)) FROM facts "
                "GROUP BY slot, scope, user_id, agent_id ORDER BY slot, scope, user_id, agent_id",
                (live_at,)).fetchall()]


def counts(conn: Connection) -> dict[str, int]:
    """Rows in facts, archive and history."""
    return {name: int(conn.scalar(f"SELECT count(*) FROM {table}"))
            for name, table in (("facts", "facts"), ("archived", "archive"),
                                ("history", "fact_history"))}


def hidden_counts(conn: Connection, fact_ids: Sequence[int]) -> dict[int, int]:
    """How many facts each of these hides."""
    out: dict[int, int] = {}
    # Every search asks; most stores hide nothing, which one index probe tells.
    if conn.scalar("SELECT EXISTS (SELECT 1 FROM facts WHERE superseded_by IS NOT NULL)") == 0:
        return out
    for chunk in rows_in(fact_ids):
        out.update((int(a), int(n)) for a, n in conn.execute(
            f"SELECT superseded_by, count(*) FROM facts WHERE superseded_by IN "
            f"({marks(len(chunk))}) GROUP BY superseded_by", chunk).fetchall())
    return out


# -- erasure ----------------------------------------------------------------------

#: The column that holds each kind of owner.
OWNER_COLUMNS = {"user": "user_id", "agent": "agent_id", "scope": "scope"}


def owned_ids(conn: Connection, kind: str, owner: str) -> list[int]:
    """The ids of the live and archived facts whose ``kind`` is ``owner``; a workspace's
    are those of no user (a user's facts in it are the user's own)."""
    mine = f"{OWNER_COLUMNS[kind]} = ?" + (" AND user_id = ''" if kind == "scope" else "")
    return [int(r[0]) for r in conn.execute(
        f"SELECT id FROM facts WHERE {mine} UNION SELECT id FROM archive "
        f"WHERE {mine} ORDER BY 1", (owner, owner)).fetchall()]


def _deleted(conn: Connection, sql: str, params: Sequence[Any]) -> int:
    return conn.changed(sql, params)


def erase_facts(conn: Connection, fact_ids: Sequence[int]) -> Erased:
    """Remove these facts, live or archived, with their history and links; the facts
    they hid as near-duplicates are shown again (no survivor is left to stand for them)."""
    erased = Erased()
    chunks = list(rows_in(list(dict.fromkeys(fact_ids)), 400))
    for chunk in chunks:
        ids = marks(len(chunk))
        erased += Erased(
            facts=_deleted(conn, f"DELETE FROM facts WHERE id IN ({ids})", chunk),
            archived=_deleted(conn, f"DELETE FROM archive WHERE id IN ({ids})", chunk),
            history=_deleted(conn, f"DELETE FROM fact_history WHERE fact_id IN ({ids})", chunk),
            links=_deleted(conn, f"DELETE FROM fact_links WHERE a IN ({ids}) OR b IN ({ids})",
                           (*chunk, *chunk)))
    # Once every chunk is gone: a fact hidden behind one chunk's fact may be in a later
    # chunk, erased too, and not shown again.
    for chunk in chunks:
        ids = marks(len(chunk))
        erased += Erased(unhidden=sum(conn.changed(f"UPDATE {table} SET superseded_by = NULL "
                                                   f"WHERE superseded_by IN ({ids})", chunk)
                                      for table in ("facts", "archive")))
    return erased


def erase_all(conn: Connection) -> Erased:
    """Remove every fact, archived fact, history entry and link."""
    return Erased(facts=_deleted(conn, "DELETE FROM facts", ()),
                  archived=_deleted(conn, "DELETE FROM archive", ()),
                  history=_deleted(conn, "DELETE FROM fact_history", ()),
                  links=_deleted(conn, "DELETE FROM fact_links", ()))
