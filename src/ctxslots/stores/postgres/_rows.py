"""Fact rows on PostgreSQL: read, insert, update, archive, history, supersession.

Each function takes a psycopg connection (autocommit, or inside the caller's
transaction) and runs plain SQL; the backend chooses the connection.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, cast

import attrs
from psycopg.rows import dict_row

from ...errors import DuplicateKeyError
from ..backend import (
    FACT_COLUMNS,
    Erased,
    FactFields,
    FactFilter,
    FactKey,
    FactRow,
    GroupCount,
    HistoryEntry,
    Row,
    owner_keys,
)
from ..stemming import STEM_COLUMNS, stems_of, with_stems
from ._libpq import statement
from ._schema import NAME_LOCK_CLASS
from ._sql import ARCHIVE_COLUMNS, COLUMNS, Conn, filter_clause, id_list, live_clause

__all__ = [
    "archive",
    "find_existing",
    "find_same",
    "get",
    "get_by_key",
    "history",
    "history_of",
    "insert",
    "insert_archived",
    "taken_ids",
    "update",
]

_WRITABLE = frozenset(FACT_COLUMNS) - {"id"}
#: The columns an insert writes (the id aside), the stems last.
_INSERTED = (*(c for c in FACT_COLUMNS if c != "id"), *STEM_COLUMNS)
#: The last id the sequence handed out (0 before the first).
_LAST_ID = "SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM fact_ids"
_cursor_numbers = itertools.count(1)
_HISTORY = ("fact_id, slot, scope, key, value, tags, source, confidence, valid_from, valid_to, "
            "observed_at")


def _owners_equal(scope: str, user_id: str, agent_id: str) -> tuple[str, list[str]]:
    """The condition that a fact has these owners, an owner left empty written as the
    literal ``''``, and the parameters of the others.

    A read of one fact by its owners and key (or value) is prepared when run often, and
    keeps one plan for any parameters. Given an empty owner as a parameter, that plan
    judges it as narrow as a named one (where most facts have it empty) and walks the
    owners' index through every fact of the user (14 ms for a user of 4,000 facts);
    written as a literal, the planner knows how common it is and takes the key's unique
    index or the value index for any parameters.
    """
    conditions: list[str] = []
    params: list[str] = []
    for column, value in (("scope", scope), ("user_id", user_id), ("agent_id", agent_id)):
        if value:
            conditions.append(f"{column} = %s")
            params.append(value)
        else:
            conditions.append(f"{column} = ''")
    return " AND ".join(conditions), params


def rows(conn: Conn, sql: str, params: Sequence[Any] = (), *, prepare: bool | None = None
         ) -> list[dict[str, Any]]:
    """Run a query; its rows as dictionaries (``prepare``: psycopg's)."""
    with conn.cursor(row_factory=dict_row) as cur:
        return list(cur.execute(sql, params, prepare=prepare).fetchall())


def fact_rows(conn: Conn, sql: str, params: Sequence[Any] = (), *,
              prepare: bool | None = None) -> list[FactRow]:
    """Run a query that reads fact rows."""
    return cast(list[FactRow], rows(conn, sql, params, prepare=prepare))


def _one(conn: Conn, sql: str, params: Sequence[Any], *, prepare: bool | None = None
         ) -> FactRow | None:
    found = fact_rows(conn, sql, params, prepare=prepare)
    return found[0] if found else None


def reserve_name(conn: Conn, kind: str, *parts: str) -> None:
    """Hold a transaction-scoped advisory lock on a name (a store setting)."""
    statement(conn, "SELECT pg_advisory_xact_lock($1, hashtext($2))",
              (str(NAME_LOCK_CLASS), "\x1f".join((kind, *parts))))


def get(conn: Conn, fact_id: int, live_at: float | None, *, lock: bool) -> Row | None:
    """The live fact with this id (locked until the transaction ends when ``lock``)."""
    live, params = live_clause(live_at)
    return _one(conn, f"SELECT {COLUMNS} FROM facts f WHERE id = %s AND {live}"
                      f"{' FOR UPDATE' if lock else ''}", (int(fact_id), *params))


def get_archived(conn: Conn, fact_id: int) -> Row | None:
    """The archived fact with this id."""
    return _one(conn, f"SELECT {ARCHIVE_COLUMNS} FROM archive WHERE id = %s", (int(fact_id),))


def get_by_key(conn: Conn, slot: str, scope: str, user_id: str, agent_id: str, key: str,
               live_at: float | None, *, lock: bool) -> Row | None:
    """The fact with this slot, owners and key; with ``lock`` its row is locked."""
    live, params = live_clause(live_at)
    owners, owner_params = _owners_equal(scope, user_id, agent_id)
    return _one(conn, f"SELECT {COLUMNS} FROM facts f WHERE {owners} AND slot = %s "
                      f"AND key = %s AND {live}{' FOR UPDATE' if lock else ''}",
                (*owner_params, slot, key, *params))


def find_same(conn: Conn, slot: str, scope: str, user_id: str, agent_id: str, key: str | None,
              value: str, *, archived: bool, live_at: float | None) -> int | None:
    """The lowest id with exactly this slot, owners, key and value (by the value index)."""
    live, params = live_clause(live_at)
    key_cond, key_params = ("key IS NULL", []) if key is None else ("key = %s", [key])
    owners, owner_params = _owners_equal(scope, user_id, agent_id)
    found = conn.execute(
        f"SELECT min(id) FROM {'archive' if archived else 'facts'} f WHERE {owners} "
        f"AND slot = %s AND {key_cond} AND md5(value) = md5(%s) AND value = %s AND {live}",
        (*owner_params, slot, *key_params, value, value, *params)).fetchone()
    return None if found is None or found[0] is None else int(found[0])


_SAME_OWNERS = ("f.scope = q.scope AND f.user_id = q.user_id AND f.agent_id = q.agent_id "
                "AND f.slot = q.slot")


def find_existing(conn: Conn, items: Sequence[FactKey], *, archived: bool
                  ) -> list[int | None]:
    """For each item the lowest id of the stored fact it duplicates (see the Backend)."""
    out: list[int | None] = [None] * len(items)
    same_value = "md5(f.value) = md5(q.value) AND f.value = q.value"
    if archived:
        groups = [(list(range(len(items))), "archive",
                   f"{_SAME_OWNERS} AND {same_value} AND f.key IS NOT DISTINCT FROM q.key")]
    else:
        groups = [([i for i, it in enumerate(items) if it[4] is not None], "facts",
                   f"{_SAME_OWNERS} AND f.key = q.key"),
                  ([i for i, it in enumerate(items) if it[4] is None], "facts",
                   f"f.key IS NULL AND {_SAME_OWNERS} AND {same_value}")]
    for positions, table, join in groups:
        if not positions:
            continue
        columns = list(zip(*[(i, *items[i]) for i in positions]))
        found = conn.execute(
            "SELECT q.i, min(f.id) FROM unnest(%s::int[], %s::text[], %s::text[], %s::text[], "
            "%s::text[], %s::text[], %s::text[]) AS q(i, slot, scope, user_id, agent_id, key, "
            f"value) JOIN {table} f ON {join} GROUP BY q.i",
            [list(c) for c in columns]).fetchall()
        for i, fact_id in found:
            out[int(i)] = int(fact_id)
    return out


def taken_ids(conn: Conn, fact_ids: Sequence[int]) -> set[int]:
    """Which of these ids a live, archived or historical fact ever had."""
    ids = id_list(fact_ids)
    if not ids:
        return set()
    found = conn.execute(
        "SELECT id FROM facts WHERE id = ANY(%s) UNION SELECT id FROM archive WHERE id = ANY(%s) "
        "UNION SELECT fact_id FROM fact_history WHERE fact_id = ANY(%s)", (ids, ids, ids))
    return {int(r[0]) for r in found.fetchall()}


def hold_writes(conn: Conn) -> None:
    """Take the lock every writer of ``facts`` and ``archive`` waits for (``ROW EXCLUSIVE``
    conflicts with it), held until the transaction ends; reads go on."""
    conn.execute(_HOLD_WRITES)


_HOLD_WRITES = "LOCK TABLE facts, archive IN SHARE ROW EXCLUSIVE MODE"


def advance_ids(conn: Conn, fact_id: int) -> None:
    """Move the id sequence past ``fact_id`` so that it is never handed out again.

    The table lock keeps every other insert (and so every ``nextval``) out
    between reading the sequence and moving it, so it never moves backwards.
    """
    if fact_id <= conn.execute(_LAST_ID).fetchone()[0]:
        return
    conn.execute(_HOLD_WRITES)
    conn.execute(f"SELECT setval('fact_ids', %s) WHERE %s > ({_LAST_ID})", (fact_id, fact_id))


def _values(row: Mapping[str, Any]) -> list[Any]:
    values = dict(row)
    if values.get("observed_at") is None:
        values["observed_at"] = values.get("created_at")
    values.update(zip(STEM_COLUMNS, stems_of(values.get("key"), values["value"],
                                             values.get("tags") or "", values.get("context"))))
    return [values.get(name) for name in _INSERTED]


def insert(conn: Conn, row: FactFields, fact_id: int | None, where: str) -> int:
    """Insert a live fact; raise :class:`DuplicateKeyError` when its key is taken."""
    columns = ", ".join(_INSERTED)
    values = _values(row)
    marks = ", ".join(["%s"] * len(values))
    if fact_id is not None:
        advance_ids(conn, int(fact_id))
        columns = "id, " + columns
        marks = "%s, " + marks
        values = [int(fact_id), *values]
    found = conn.execute(
        f"INSERT INTO facts ({columns}) VALUES ({marks}) "
        "ON CONFLICT (scope, user_id, agent_id, slot, key) WHERE key IS NOT NULL DO NOTHING "
        "RETURNING id",
        values).fetchone()
    if found is None:
        raise DuplicateKeyError(row["slot"], row["scope"], str(row["key"]), path=where)
    return int(found[0])


def insert_archived(conn: Conn, row: Row, fact_id: int) -> None:
    """Insert a fact straight into the archive under ``fact_id``."""
    advance_ids(conn, int(fact_id))
    values = [int(fact_id), *_values(row), row["archived_at"], row.get("reason")]
    marks = ", ".join(["%s"] * len(values))
    conn.execute(f"INSERT INTO archive (id, {', '.join(_INSERTED)}, archived_at, reason) "
                 f"VALUES ({marks})", values)


def update(conn: Conn, fact_id: int, fields: Mapping[str, Any],
           history: HistoryEntry | None = None) -> None:
    """Set some columns of a live fact; with ``history``, record that earlier value in the
    same statement (one round trip for a replaced value, not two)."""
    unknown = set(fields) - _WRITABLE
    if unknown:
        raise ValueError(f"not fact columns that can be set: {', '.join(sorted(unknown))}")
    if not fields:
        if history is not None:
            conn.execute(_ADD_REPLACED, _replaced_values(history))
        return
    fields = with_stems(fields, lambda: conn.execute(
        "SELECT key, value, tags, context FROM facts WHERE id = %s", (int(fact_id),)).fetchone())
    names = list(fields)
    assignments = ", ".join(f"{name} = %s" for name in names)
    sql = f"UPDATE facts SET {assignments} WHERE id = %s"
    params = [fields[n] for n in names] + [int(fact_id)]
    if history is not None:
        # The insert sees the row as it was before the update: one snapshot, one statement.
        sql = f"WITH recorded AS ({_ADD_REPLACED}) {sql}"
        params = [*_replaced_values(history), *params]
    conn.execute(sql, params)


def archive(conn: Conn, fact_id: int, archived_at: float, reason: str | None) -> Row | None:
    """Move a live fact to the archive (replacing an archived row of the same id)."""
    inserted = ", ".join(_INSERTED)
    stems = ", ".join(STEM_COLUMNS)
    assignments = ", ".join(f"{c} = excluded.{c}" for c in (*_INSERTED, "archived_at", "reason")
                            if c not in ("scope", "user_id"))
    return _one(conn, f"""
        WITH moved AS (DELETE FROM facts WHERE id = %s RETURNING {COLUMNS}, {stems})
        INSERT INTO archive (id, {inserted}, archived_at, reason)
        SELECT id, {inserted}, %s, %s FROM moved
        ON CONFLICT (id, scope, user_id) DO UPDATE SET {assignments}
        RETURNING {ARCHIVE_COLUMNS}""", (int(fact_id), float(archived_at), reason))


def adjust_score(conn: Conn, fact_id: int, delta: float, live_at: float) -> bool:
    """Add ``delta`` to a live fact's score; whether it existed."""
    live, params = live_clause(live_at)
    found = conn.execute(f"UPDATE facts f SET score = score + %s WHERE id = %s AND {live} "
                         "RETURNING id", (float(delta), int(fact_id), *params)).fetchone()
    return found is not None


def touch(conn: Conn, fact_ids: Sequence[int], now: float, *, skip_locked: bool = False) -> int:
    """Count an access of each fact; how many changed. With ``skip_locked``, a row another
    transaction holds is left uncounted instead of waited for."""
    ids = id_list(fact_ids)
    if not ids:
        return 0
    return int(conn.execute(_touch(skip_locked), (float(now), ids), prepare=True).rowcount)


def touch_waiting(conn: Conn, fact_ids: Sequence[int], now: float, wait: float) -> int:
    """:func:`touch` skipping locked rows, in a transaction of its own that waits at most
    ``wait`` seconds (1 ms at least) for the facts table, which an import holds against
    writers (``LockNotAvailable`` then); sent at once, one round trip."""
    ids = id_list(fact_ids)
    if not ids:
        return 0
    with conn.pipeline(), conn.transaction():
        conn.execute("SELECT set_config('lock_timeout', %s, true)",
                     (f"{max(1, round(wait * 1000))}ms",))
        cursor = conn.execute(_touch(True), (float(now), ids), prepare=True)
    return int(cursor.rowcount)


def _touch(skip_locked: bool) -> str:
    # Rows locked in id order, so two concurrent touches never deadlock; skipping the
    # locked ones, a touch never waits for, nor deadlocks with, a writer's transaction.
    lock = "FOR UPDATE SKIP LOCKED" if skip_locked else "FOR UPDATE"
    return ("UPDATE facts f SET access_count = f.access_count + 1, last_accessed = %s "
            f"FROM (SELECT id, scope FROM facts WHERE id = ANY(%s) ORDER BY id {lock}) l "
            "WHERE f.id = l.id AND f.scope = l.scope")


def id_is_free(conn: Conn, fact_id: int) -> bool:
    """Whether no live, archived or historical fact ever had this id."""
    found = conn.execute(
        "SELECT EXISTS (SELECT 1 FROM facts WHERE id = %s) OR EXISTS "
        "(SELECT 1 FROM archive WHERE id = %s) OR EXISTS "
        "(SELECT 1 FROM fact_history WHERE fact_id = %s)", (fact_id, fact_id, fact_id)).fetchone()
    return not found[0]


#: A history row carries its fact's user, the key a split by user goes by.
_ADD_HISTORY = (f"INSERT INTO fact_history ({_HISTORY}, user_id) VALUES ({', '.join(['%s'] * 11)}, "
                "coalesce((SELECT user_id FROM facts WHERE id = %s LIMIT 1), ''))")


#: The value a write is about to replace, from when it began: the end of the fact's latest
#: entry, or the entry's own ``valid_from`` (the fact's creation) when it has none or that
#: is later.
_ADD_REPLACED = (f"INSERT INTO fact_history ({_HISTORY}, user_id) VALUES ({', '.join(['%s'] * 8)}, "
                 "greatest(%s, coalesce((SELECT max(h.valid_to) FROM fact_history h "
                 "WHERE h.fact_id = %s), 0)), %s, %s, "
                 "coalesce((SELECT user_id FROM facts WHERE id = %s LIMIT 1), ''))")


def _history_values(e: HistoryEntry) -> tuple[Any, ...]:
    return (e.fact_id, e.slot, e.scope, e.key, e.value, e.tags, e.source, e.confidence,
            e.valid_from, e.valid_to, e.observed_at, e.fact_id)


def _replaced_values(e: HistoryEntry) -> tuple[Any, ...]:
    return (e.fact_id, e.slot, e.scope, e.key, e.value, e.tags, e.source, e.confidence,
            e.valid_from, e.fact_id, e.valid_to, e.observed_at, e.fact_id)


def add_history(conn: Conn, entries: Sequence[HistoryEntry]) -> None:
    """Record earlier values."""
    rows = [_history_values(e) for e in entries]
    if len(rows) == 1:
        # One row (an upsert's): psycopg's executemany would open a pipeline for it,
        # three waits on the server instead of one.
        conn.execute(_ADD_HISTORY, rows[0])
    elif rows:
        with conn.cursor() as cur:
            cur.executemany(_ADD_HISTORY, rows)


def _entry(row: Sequence[Any]) -> HistoryEntry:
    return HistoryEntry(int(row[0]), row[1], row[2], row[3], row[4], row[5], row[6],
                        float(row[7]), float(row[8]), float(row[9]),
                        None if row[10] is None else float(row[10]))


def history(conn: Conn, fact_id: int) -> list[HistoryEntry]:
    """Earlier values of one fact, oldest first."""
    return [_entry(r) for r in conn.execute(
        f"SELECT {_HISTORY} FROM fact_history WHERE fact_id = %s ORDER BY valid_to, id",
        (int(fact_id),)).fetchall()]


def history_of(conn: Conn, fact_ids: Sequence[int]) -> list[HistoryEntry]:
    """The history entries of these facts, by fact id then time."""
    return [_entry(r) for r in conn.execute(
        f"SELECT {_HISTORY} FROM fact_history WHERE fact_id = ANY(%s) "
        "ORDER BY fact_id, valid_to, id", (sorted({int(i) for i in fact_ids}),)).fetchall()]


def all_history(conn: Conn) -> Iterator[HistoryEntry]:
    """Every history entry, by fact id then time."""
    with conn.cursor(name=f"ctxslots_history_{next(_cursor_numbers)}") as cur:
        cur.itersize = 2000
        cur.execute(f"SELECT {_HISTORY} FROM fact_history ORDER BY fact_id, valid_to, id")
        for row in cur:
            yield _entry(row)


def select(conn: Conn, flt: FactFilter, order: str, archived: bool,
           newest_first: bool = False, limit: int | None = None, offset: int = 0
           ) -> Iterator[Row]:
    """Facts passing ``flt`` by id or by observed time (the highest first when
    ``newest_first``), at most ``limit`` of them after ``offset``, read in chunks."""
    if order not in ("id", "created"):
        raise ValueError(f"order must be 'id' or 'created', not {order!r}")
    where, params = filter_clause(flt)
    table, columns = ("archive", ARCHIVE_COLUMNS) if archived else ("facts", COLUMNS)
    by = "id" if order == "id" else "observed_at, id"
    if newest_first:
        by = "id DESC" if order == "id" else "observed_at DESC, id DESC"
    cut = "" if limit is None and not offset else " LIMIT %s OFFSET %s"
    if cut:
        params = [*params, limit, offset]
    with conn.cursor(name=f"ctxslots_select_{next(_cursor_numbers)}",
                     row_factory=dict_row) as cur:
        cur.itersize = 2000
        cur.execute(f"SELECT {columns} FROM {table} f WHERE {where} ORDER BY {by}{cut}",
                    params)
        yield from cur


def count(conn: Conn, flt: FactFilter) -> int:
    """How many facts pass ``flt``."""
    where, params = filter_clause(flt)
    row = conn.execute(f"SELECT count(*) FROM facts f WHERE {where}", params).fetchone()
    return int(row[0])


#: One combination of owners, slot and scope: the leading columns of the ``facts_owners`` index.
_OWNER_KEY = "(f.user_id = %s AND f.agent_id = %s AND f.slot = %s AND f.scope = %s)"
_IMPORTANCE = ("score DESC, access_count DESC, confidence DESC, (key IS NULL), "
               "updated_at DESC, id")


def important(conn: Conn, flt: FactFilter, limit: int) -> list[Row]:
    """Keyed or reinforced facts passing ``flt``, most important first.

    No index serves the order: one holding ``access_count`` would make every
    access an update of every index (no HOT update), the GIN index included.
    Each combination of the owners, slot and scope asked is written out in full,
    so that any plan, the one kept for the statement too, reads the owners' index
    for exactly those rows; filtered by each list instead, a plan kept for any
    owners read every fact of the scopes asked.
    """
    keys = owner_keys(flt)
    if not keys:  # an owner list left open, or too many combinations to name one by one
        where, params = filter_clause(flt)
        # Planned for its values on every run (see above).
        return fact_rows(conn, f"SELECT {COLUMNS} FROM facts f WHERE {where} AND "
                         f"(key IS NOT NULL OR score > 0) ORDER BY {_IMPORTANCE} LIMIT %s",
                         (*params, int(limit)), prepare=False)
    rest, params = filter_clause(attrs.evolve(flt, users=None, agents=None, slots=None,
                                              scopes=None))
    owned = " OR ".join([_OWNER_KEY] * len(keys))
    return fact_rows(conn, f"SELECT {COLUMNS} FROM facts f WHERE ({owned}) AND {rest} AND "
                     f"(key IS NOT NULL OR score > 0) ORDER BY {_IMPORTANCE} LIMIT %s",
                     (*itertools.chain.from_iterable(keys), *params, int(limit)), prepare=True)


def rows_by_ids(conn: Conn, fact_ids: Sequence[int], flt: FactFilter, archived: bool = False,
                *, held: bool = False) -> list[Row]:
    """The facts (or archived facts) with these ids that pass ``flt``; ``held``: locked
    against deletion until the transaction ends, leaving out one that another
    transaction is deleting (``SKIP LOCKED``: no wait, so no deadlock with it)."""
    ids = id_list(fact_ids)
    if not ids:
        return []
    where, params = filter_clause(flt)
    table, columns = ("archive", ARCHIVE_COLUMNS) if archived else ("facts", COLUMNS)
    hold = " FOR KEY SHARE OF f SKIP LOCKED" if held else ""
    return fact_rows(conn, f"SELECT {columns} FROM {table} f WHERE id = ANY(%s) AND {where}"
                           f"{hold}", (ids, *params))


def neighbours(conn: Conn, row: Row, flt: FactFilter, before: int, after: int
               ) -> tuple[list[Row], list[Row]]:
    """Facts passing ``flt`` just before (newest first) and after (oldest first) ``row``."""
    where, params = filter_clause(flt)
    at = row.get("observed_at")
    anchor = (float(row["created_at"] if at is None else at), int(row["id"]))
    # Planned for their owners each time: filtered by lists of owners, a plan kept for
    # any owners would read every fact of the scopes asked (see important()).
    earlier = fact_rows(conn, f"SELECT {COLUMNS} FROM facts f WHERE {where} AND "
                         "(observed_at, id) < (%s, %s) ORDER BY observed_at DESC, id DESC "
                         "LIMIT %s", (*params, *anchor, max(0, before)),
                        prepare=False) if before > 0 else []
    later = fact_rows(conn, f"SELECT {COLUMNS} FROM facts f WHERE {where} AND "
                       "(observed_at, id) > (%s, %s) ORDER BY observed_at, id LIMIT %s",
                      (*params, *anchor, max(0, after)), prepare=False) if after > 0 else []
    return list(earlier), list(later)


def group_counts(conn: Conn, live_at: float) -> list[GroupCount]:
    """Facts and expired facts per slot and owners."""
    found = conn.execute(
        "SELECT slot, scope, user_id, agent_id, count(*), count(*) FILTER (WHERE expires_at "
        "IS NOT NULL AND expires_at <= %s) FROM facts GROUP BY slot, scope, user_id, agent_id "
        "ORDER BY slot COLLATE \"C\", scope COLLATE \"C\", user_id COLLATE \"C\", "
        "agent_id COLLATE \"C\"", (float(live_at),)).fetchall()
    return [GroupCount(str(s), str(c), str(u), str(a), int(n), int(e))
            for s, c, u, a, n, e in found]


def counts(conn: Conn) -> dict[str, int]:
    """Row counts of facts, archive and history."""
    facts, archived, hist = conn.execute(
        "SELECT (SELECT count(*) FROM facts), (SELECT count(*) FROM archive), "
        "(SELECT count(*) FROM fact_history)").fetchone()
    return {"facts": int(facts), "archived": int(archived), "history": int(hist)}


def set_superseded(conn: Conn, pairs: Sequence[tuple[int, int | None]], archived: bool) -> None:
    """Set ``superseded_by`` for ``(fact_id, by)`` pairs."""
    if pairs:
        with conn.cursor() as cur:
            cur.executemany(
                f"UPDATE {'archive' if archived else 'facts'} SET superseded_by = %s "
                "WHERE id = %s", [(by, int(fid)) for fid, by in pairs])


def superseded_links(conn: Conn, archived: bool) -> list[tuple[int, int]]:
    """Every ``(id, superseded_by)`` of the live facts or of the archive."""
    table = "archive" if archived else "facts"
    return [(int(a), int(b)) for a, b in conn.execute(
        f"SELECT id, superseded_by FROM {table} WHERE superseded_by IS NOT NULL "
        "ORDER BY id").fetchall()]


def hand_over_superseded(conn: Conn, old: int, new: int) -> None:
    """Facts hidden by ``old`` are hidden by ``new`` instead."""
    conn.execute("UPDATE facts SET superseded_by = %s WHERE superseded_by = %s",
                 (int(new), int(old)))


# -- erasure ----------------------------------------------------------------------

#: The column that holds each kind of owner.
OWNER_COLUMNS = {"user": "user_id", "agent": "agent_id", "scope": "scope"}


def owned_ids(conn: Conn, kind: str, owner: str) -> list[int]:
    """The ids of the live and archived facts whose ``kind`` is ``owner``; a workspace's
    are those of no user (a user's facts in it are the user's own)."""
    mine = f"{OWNER_COLUMNS[kind]} = %s" + (" AND user_id = ''" if kind == "scope" else "")
    found = conn.execute(f"SELECT id FROM facts WHERE {mine} UNION "
                         f"SELECT id FROM archive WHERE {mine} ORDER BY 1",
                         (owner, owner)).fetchall()
    return [int(r[0]) for r in found]


def _changed(conn: Conn, sql: str, params: Sequence[Any]) -> int:
    return len(conn.execute(sql + " RETURNING 1", params).fetchall())


def erase_facts(conn: Conn, fact_ids: Sequence[int]) -> Erased:
    """Remove these facts, live or archived, with their history and links; the facts
    they hid as near-duplicates are shown again (no survivor is left to stand for them)."""
    ids = id_list(fact_ids)
    if not ids:
        return Erased()
    return Erased(
        facts=_changed(conn, "DELETE FROM facts WHERE id = ANY(%s)", (ids,)),
        archived=_changed(conn, "DELETE FROM archive WHERE id = ANY(%s)", (ids,)),
        history=_changed(conn, "DELETE FROM fact_history WHERE fact_id = ANY(%s)", (ids,)),
        links=_changed(conn, "DELETE FROM fact_links WHERE a = ANY(%s) OR b = ANY(%s)",
                       (ids, ids)),
        unhidden=sum(_changed(conn, f"UPDATE {table} SET superseded_by = NULL "
                                    "WHERE superseded_by = ANY(%s)", (ids,))
                     for table in ("facts", "archive")))


def erase_all(conn: Conn) -> Erased:
    """Remove every fact, archived fact, history entry and link."""
    return Erased(facts=_changed(conn, "DELETE FROM facts", ()),
                  archived=_changed(conn, "DELETE FROM archive", ()),
                  history=_changed(conn, "DELETE FROM fact_history", ()),
                  links=_changed(conn, "DELETE FROM fact_links", ()))
