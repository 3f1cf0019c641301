"""Reading a JSONL export and writing its facts into a store.

The file is read and every record checked before the write transaction opens;
the write keeps ids where they are free, the archive and the history.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from ..errors import InvalidFactError
from ._jsonl_records import ParsedFact, check_header, parse_record
from ._transfer_report import ImportIssue, ImportReport, InvalidImportError

if TYPE_CHECKING:
    from ._sqlite import Connection
    from .fact_store import FactStore

__all__ = ["check_on_duplicate", "existing_id", "fail_or_keep", "read_jsonl", "write_facts"]

#: What an import may do with a fact already in the store.
ON_DUPLICATE = ("skip", "error")


def check_on_duplicate(on_duplicate: str) -> None:
    """Raise :class:`InvalidFactError` unless ``on_duplicate`` is one of :data:`ON_DUPLICATE`."""
    if on_duplicate not in ON_DUPLICATE:
        raise InvalidFactError(f"on_duplicate must be one of {', '.join(ON_DUPLICATE)}, "
                               f"not {on_duplicate!r}", field="on_duplicate", value=on_duplicate)


def fail_or_keep(errors: list[ImportIssue], skip_invalid: bool) -> tuple[ImportIssue, ...]:
    """Raise for the first bad line unless ``skip_invalid``; else return the bad lines."""
    if errors and not skip_invalid:
        raise InvalidImportError(errors[0], errors)
    return tuple(errors)


def _lines(fp: TextIO) -> Iterator[tuple[int, str]]:
    """Numbered lines of ``fp``; text that is not UTF-8 fails naming its line."""
    number = 0
    try:
        for number, line in enumerate(fp, start=1):
            yield number, line
    except UnicodeDecodeError as exc:
        raise InvalidImportError(ImportIssue(number + 1, f"not UTF-8 text ({exc.reason})",
                                             "encoding")) from None


def read_jsonl(store: FactStore, fp: TextIO) -> tuple[list[ParsedFact], list[ImportIssue]]:
    """Check the header and every record of ``fp``; return the facts and the bad lines.

    :raises InvalidImportError: The header is missing, malformed or newer, or
        the text is not UTF-8.
    """
    parsed: list[ParsedFact] = []
    errors: list[ImportIssue] = []
    seen_header = False
    now = store.clock()
    for number, line in _lines(fp):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
            if not seen_header:
                check_header(data)
                seen_header = True
                continue
            parsed.append(parse_record(data, line=number, limits=store.limits, now=now))
        except InvalidFactError as exc:
            issue = ImportIssue(number, str(exc), exc.field, exc.value)
        except json.JSONDecodeError as exc:
            issue = ImportIssue(number, f"not JSON: {exc.msg} (column {exc.colno})", "json", line)
        except (ValueError, RecursionError) as exc:  # an integer of thousands of digits, deep nesting
            issue = ImportIssue(number, f"not JSON this store can read: {exc}", "json", line)
        else:
            continue
        if not seen_header:
            raise InvalidImportError(issue) from None
        errors.append(issue)
    if not seen_header:
        raise InvalidImportError(ImportIssue(1, "the file is empty: expected the header line",
                                             "format"))
    return parsed, errors


def existing_id(conn: Connection, table: str, row: dict[str, Any]) -> int | None:
    """The id of a fact in ``table`` that ``row`` duplicates, or ``None``.

    Live facts: the same slot, scope and key, or for a free memory the same
    slot, scope and value. Archived facts: the same slot, scope, key and value.
    """
    if table == "facts" and row["key"] is not None:
        sql, params = "slot = ? AND scope = ? AND key = ?", [row["key"]]
    elif table == "facts":
        sql, params = "slot = ? AND scope = ? AND key IS NULL AND value = ?", [row["value"]]
    else:
        sql, params = "slot = ? AND scope = ? AND key IS ? AND value = ?", [row["key"], row["value"]]
    found = conn.scalar(f"SELECT id FROM {table} WHERE {sql} ORDER BY id LIMIT 1",
                        [row["slot"], row["scope"], *params])
    return None if found is None else int(found)


def _id_is_free(conn: Connection, fact_id: int) -> bool:
    return conn.scalar(
        "SELECT 1 WHERE EXISTS (SELECT 1 FROM facts WHERE id = ?) OR EXISTS "
        "(SELECT 1 FROM archive WHERE id = ?) OR EXISTS (SELECT 1 FROM fact_history "
        "WHERE fact_id = ?)", (fact_id, fact_id, fact_id)) is None


def _reserve(conn: Connection, fact_id: int) -> None:
    """Make AUTOINCREMENT skip ``fact_id``, so an archived id is never handed out again."""
    changed = conn.execute("UPDATE sqlite_sequence SET seq = max(seq, ?) WHERE name = 'facts' "
                           "RETURNING seq", (fact_id,)).fetchall()
    if not changed:
        conn.execute("INSERT INTO sqlite_sequence (name, seq) VALUES ('facts', ?)", (fact_id,))


def _next_id(conn: Connection) -> int:
    return 1 + int(conn.scalar(
        "SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'facts'), 0), "
        "coalesce((SELECT max(id) FROM facts), 0), coalesce((SELECT max(id) FROM archive), 0))"))


_INSERT_COLUMNS = ("slot, scope, key, value, tags, source, confidence, score, created_at, "
                   "updated_at, last_accessed, access_count, expires_at")


def _write_fact(store: FactStore, fact: ParsedFact) -> int:
    """Insert one checked fact, keeping its id when that id is free; return the id used."""
    conn, row = store._conn, fact.row
    values = [row[c.strip()] for c in _INSERT_COLUMNS.split(",")]
    keep = fact.id is not None and _id_is_free(conn, fact.id)
    if fact.archived:
        fact_id = fact.id if keep and fact.id is not None else _next_id(conn)
        conn.execute(f"INSERT INTO archive (id, {_INSERT_COLUMNS}, archived_at, reason) "
                     f"VALUES (?, {','.join('?' * 15)})",
                     (fact_id, *values, row["archived_at"], row["reason"]))
        _reserve(conn, fact_id)
        return fact_id
    if keep:
        conn.execute(f"INSERT INTO facts (id, {_INSERT_COLUMNS}) VALUES (?, {','.join('?' * 13)})",
                     (fact.id, *values))
        fact_id = int(fact.id)  # type: ignore[arg-type]
    else:
        fact_id = int(conn.execute(f"INSERT INTO facts ({_INSERT_COLUMNS}) "
                                   f"VALUES ({','.join('?' * 13)}) RETURNING id",
                                   values).fetchall()[0][0])
    store._queue_vector(fact_id, row)
    return fact_id



def write_facts(store: FactStore, parsed: Sequence[ParsedFact], *, on_duplicate: str) -> ImportReport:
    """Write checked facts in one transaction; skip (or fail on) those already stored."""
    conn = store._conn
    counts = {"added": 0, "archived": 0, "history_entries": 0, "skipped_duplicates": 0,
              "renumbered": 0}
    id_map: dict[int, int] = {}
    links: list[tuple[str, int, int | None]] = []
    with store._writing():
        for fact in parsed:
            table = "archive" if fact.archived else "facts"
            existing = existing_id(conn, table, fact.row)
            if existing is not None:
                if on_duplicate == "error":
                    raise InvalidImportError(ImportIssue(
                        fact.line, f"fact already in the store (id {existing})", "duplicate",
                        fact.row["value"]))
                counts["skipped_duplicates"] += 1
                if fact.id is not None:
                    id_map[fact.id] = existing
                continue
            new_id = _write_fact(store, fact)
            if fact.id is not None:
                id_map[fact.id] = new_id
            counts["renumbered"] += fact.id is not None and new_id != fact.id
            counts["archived" if fact.archived else "added"] += 1
            links.append((table, new_id, fact.row["superseded_by"]))
            conn.executemany(
                "INSERT INTO fact_history (fact_id, slot, scope, key, value, tags, source, "
                "confidence, valid_from, valid_to) VALUES (?,?,?,?,?,?,?,?,?,?)",
                [(new_id, fact.row["slot"], fact.row["scope"], fact.row["key"], h.value, h.tags,
                  h.source, h.confidence, h.valid_from, h.valid_to) for h in fact.history])
            counts["history_entries"] += len(fact.history)
        # Links last: they point at facts later in the file.
        for table, fact_id, target in links:
            if target is not None:
                conn.execute(f"UPDATE {table} SET superseded_by = ? WHERE id = ?",
                             (id_map.get(target), fact_id))
        _write_links(conn, parsed, id_map)
    return ImportReport(added=counts["added"], archived=counts["archived"],
                        history_entries=counts["history_entries"],
                        skipped_duplicates=counts["skipped_duplicates"],
                        renumbered=counts["renumbered"])


def _write_links(conn: Connection, parsed: Sequence[ParsedFact], id_map: dict[int, int]) -> None:
    """Co-recall links between imported (or matching) facts; the stronger one wins on a clash."""
    rows = []
    for fact in parsed:
        if fact.id is None or fact.id not in id_map:
            continue
        for to, strength, updated_at in fact.links:
            if to in id_map and id_map[to] != id_map[fact.id]:
                a, b = sorted((id_map[fact.id], id_map[to]))
                rows.append((a, b, strength, updated_at))
    conn.executemany(
        "INSERT INTO fact_links (a, b, strength, updated_at) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (a, b) DO UPDATE SET strength = max(strength, excluded.strength), "
        "updated_at = max(updated_at, excluded.updated_at)", rows)
