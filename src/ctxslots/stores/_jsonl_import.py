"""Reading a JSONL export and writing its facts into a store.

The file is read and every record checked before the write transaction opens;
the write keeps ids where they are free, the archive and the history.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from ..errors import InvalidFactError
from ._jsonl_records import ParsedFact, check_header, parse_record
from ._transfer_report import ImportIssue, ImportReport, InvalidImportError
from .backend import Backend, HistoryEntry

if TYPE_CHECKING:
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
            # A byte-order mark (some Windows editors write one) is no part of the header.
            yield number, line.removeprefix("\ufeff") if number == 1 else line
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
    lines_of_ids: dict[int, int] = {}
    for number, line in _lines(fp):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
            if not seen_header:
                check_header(data)
                seen_header = True
                continue
            fact = parse_record(data, line=number, limits=store.limits, now=now)
            if fact.id is not None:
                first = lines_of_ids.setdefault(fact.id, number)
                if first != number:
                    raise InvalidFactError(
                        f"id {fact.id} is also the id of line {first}: ids must be unique in "
                        "one file (links and superseded_by would not know which fact they "
                        "mean)", field="id", value=fact.id)
            parsed.append(fact)
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


def existing_id(backend: Backend, row: Mapping[str, Any], *, archived: bool = False
                ) -> int | None:
    """The id of a stored fact that ``row`` duplicates, or ``None``.

    Live facts: the same slot, scope and key, or for a free memory the same
    slot, scope and value. Archived facts: the same slot, scope, key and value.
    """
    if not archived and row["key"] is not None:
        found = backend.get_by_key(row["slot"], row["scope"], row["key"])
        return None if found is None else int(found["id"])
    return backend.find_same(row["slot"], row["scope"], row["key"], row["value"],
                             archived=archived)


#: Ids from a file are kept only below this bound, so a hostile id cannot use
#: up the id space (SQLite and PostgreSQL ids stop at 2**63 - 1).
MAX_KEPT_ID = 2**53


def _write_fact(store: FactStore, fact: ParsedFact) -> int:
    """Insert one checked fact, keeping its id when that id is free; return the id used."""
    backend, row = store.backend, dict(fact.row)
    row.setdefault("observed_at", row["created_at"])
    keep = fact.id is not None and 0 < fact.id < MAX_KEPT_ID and backend.id_is_free(fact.id)
    if fact.archived:
        if keep and fact.id is not None:
            backend.insert_archived(row, fact.id)
            return fact.id
        fact_id = backend.insert({**row, "superseded_by": None})
        backend.archive(fact_id, archived_at=row["archived_at"], reason=row["reason"])
        return fact_id
    fact_id = backend.insert({**row, "superseded_by": None}, fact_id=fact.id if keep else None)
    if fact.vector is not None and store.keeps_vectors \
            and fact.vector[0] == store.embedder.model_id \
            and fact.vector[1].shape == (store.embedder.dimension,):
        # Built by the same embedder: taken as it is, not embedded again.
        backend.put_vectors([(fact_id, row["scope"], row["slot"])], fact.vector[1][None, :])
    else:
        store.writer.queue_vector(fact_id, row)
    return fact_id


def write_facts(store: FactStore, parsed: Sequence[ParsedFact], *, on_duplicate: str) -> ImportReport:
    """Write checked facts in one transaction; skip (or fail on) those already stored."""
    backend = store.backend
    counts = {"added": 0, "archived": 0, "history_entries": 0, "skipped_duplicates": 0,
              "renumbered": 0, "redacted": 0}
    id_map: dict[int, int] = {}
    links: list[tuple[bool, int, int | None]] = []
    with store.batch():
        for fact in parsed:
            existing = existing_id(backend, fact.row, archived=fact.archived)
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
            counts["redacted"] += bool(fact.redacted)
            links.append((fact.archived, new_id, fact.row["superseded_by"]))
            backend.add_history([HistoryEntry(
                fact_id=new_id, slot=fact.row["slot"], scope=fact.row["scope"],
                key=fact.row["key"], value=h.value, tags=h.tags, source=h.source,
                confidence=h.confidence, valid_from=h.valid_from, valid_to=h.valid_to)
                for h in fact.history])
            counts["history_entries"] += len(fact.history)
        # Links last: they point at facts later in the file.
        for archived, fact_id, target in links:
            if target is not None:
                backend.set_superseded([(fact_id, id_map.get(target))], archived=archived)
        backend.merge_links(_links(parsed, id_map))
    return ImportReport(added=counts["added"], archived=counts["archived"],
                        history_entries=counts["history_entries"],
                        skipped_duplicates=counts["skipped_duplicates"],
                        renumbered=counts["renumbered"], redacted=counts["redacted"])


def _links(parsed: Sequence[ParsedFact], id_map: dict[int, int]
           ) -> list[tuple[int, int, float, float]]:
    """Co-recall links between imported (or matching) facts."""
    rows = []
    for fact in parsed:
        if fact.id is None or fact.id not in id_map:
            continue
        for to, strength, updated_at in fact.links:
            if to in id_map and id_map[to] != id_map[fact.id]:
                a, b = sorted((id_map[fact.id], id_map[to]))
                rows.append((a, b, strength, updated_at))
    return rows
