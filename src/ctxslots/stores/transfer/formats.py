"""Export and import of a store's facts: JSONL (lossless) and Markdown (readable).

JSONL carries every field, the archive and the history, so a store can be
copied, backed up or merged. Markdown shows the live facts as bullets a person
reads and edits, one file per slot, and reads ``MEMORY.md``-style notes back.

An import is one transaction: it lands whole or not at all. Each record is
checked with the store's :class:`~ctxslots.stores.Limits` before anything is
written; a fact that is already in the store is skipped (see ``docs/transfer.md``
for the duplicate rule).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import attrs

from ..backend.types import FactFilter, Row
from ..writes.limits import BUILTIN_SLOTS
from .import_writer import Progress, run_import
from .jsonl_import import check_on_duplicate, read_jsonl
from .jsonl_records import encode_vector, header, record_from_row
from .markdown_files import write_directory
from .markdown_import import file_lines, markdown_source, read_markdown
from .markdown_memory import MarkdownReader, render_bullet, render_file
from .report import ImportIssue, ImportReport, InvalidImportError

if TYPE_CHECKING:
    from ..fact_store import FactStore

__all__ = [
    "ImportIssue",
    "ImportReport",
    "InvalidImportError",
    "export_jsonl",
    "export_markdown",
    "import_jsonl",
    "import_markdown",
    "render_markdown",
]

# json.dumps leaves these unescaped; str.splitlines() and some editors break lines there.
_LINE_BREAKS = str.maketrans({c: f"\\u{ord(c):04x}" for c in "\x85\u2028\u2029"})


def _line(data: dict[str, Any]) -> str:
    """One JSON object on one line, whatever line splitter reads it."""
    return json.dumps(data, ensure_ascii=False).translate(_LINE_BREAKS) + "\n"


# -- reading the store -------------------------------------------------------


def _filter(store: FactStore, slots: Sequence[str] | None, scope: str | None) -> FactFilter:
    checked = None
    if slots is not None:
        checked = store.filter(slots, None, live=False).slots
    return FactFilter(scopes=None if scope is None else (store.limits.scope(scope),),
                      slots=checked)


def export_jsonl(
    store: FactStore, fp: TextIO, *, slots: Sequence[str] | None = None,
    scope: str | None = None, include_archive: bool = True, include_history: bool = True,
    include_vectors: bool = True,
) -> int:
    """Write the store's facts to ``fp`` as JSON lines; return how many facts were written.

    The first line is the header ``{"format": "ctxslots-facts", "version": 1,
    "exported_at": ...}``; then one line per fact, live and archived together,
    by id. Every field is written (timestamps as Unix seconds), expired facts
    included, with the co-recall links between exported facts, so :func:`import_jsonl` into an empty store rebuilds the same
    facts. The record schema is in ``docs/transfer.md``.

    :param slots: Only these slots (``None``: every slot).
    :param scope: ``None`` exports **every** scope, global facts included; a
        name exports that scope only (not the global facts).
    :param include_archive: Also write archived facts (``"archived": true``).
    :param include_history: Give each fact its earlier values (``"history"``).
    :param include_vectors: Give each live fact its stored vector (``"vector"``, with the
        embedder's model id), so a store with the same embedder takes it as it is
        instead of embedding the text again.
    :raises InvalidFactError: A slot or scope name is malformed.
    """
    flt = _filter(store, slots, scope)
    backend = store.backend
    with backend.snapshot():
        rows: list[tuple[Row, bool]] = [(r, False) for r in backend.select(flt)]
        if include_archive:
            rows += [(r, True) for r in backend.select(flt, archived=True)]
        history: dict[int, list[dict[str, Any]]] = {}
        if include_history:
            for h in backend.all_history():
                history.setdefault(h.fact_id, []).append(attrs.asdict(h))
        exported = {int(r["id"]) for r, _ in rows}
        vectors = {}
        if include_vectors and store.keeps_vectors:
            vectors = backend.vectors_of([int(r["id"]) for r, archived in rows if not archived])
        links: dict[int, list[dict[str, Any]]] = {}
        for a, b, strength, updated_at in backend.all_links():
            if a in exported and b in exported:
                links.setdefault(a, []).append(
                    {"a": a, "b": b, "strength": strength, "updated_at": updated_at})
    rows.sort(key=lambda item: (int(item[0]["id"]), item[1]))
    fp.write(_line(header(store.clock())))
    for row, archived in rows:
        fact_id = int(row["id"])
        hist = history.get(fact_id, []) if include_history else None
        vector = None if archived or fact_id not in vectors else encode_vector(
            store.embedder.model_id, vectors[fact_id])
        record = record_from_row(row, archived=archived, history=hist,
                                 links=links.get(fact_id, ()), vector=vector)
        fp.write(_line(record))
    return len(rows)


# -- writing the store -------------------------------------------------------


def import_jsonl(
    store: FactStore, fp: TextIO, *, on_duplicate: str = "skip", skip_invalid: bool = False,
    progress: Progress | None = None,
) -> ImportReport:
    """Read facts written by :func:`export_jsonl` into ``store``, in one transaction.

    Each fact keeps its id when that id is free in the store (in the live
    facts, the archive and the history), else it gets a new one; ``superseded_by``
    and co-recall links follow the new ids. Timestamps, score, access counts, archive state
    and history are kept as written. Live facts get their vectors before the
    transaction commits: the file's own when the store's embedder built them,
    else embedded a batch at a time.

    The file is read and written as a stream, a thousand records at a time, so
    an import takes time in proportion to its size and memory that does not grow
    with it (16 bytes per id in the file). It is all or nothing: the whole file
    lands in one transaction, and other writers of the store wait meanwhile.

    :param on_duplicate: ``"skip"`` (count and leave out facts already in the
        store) or ``"error"`` (fail on the first one; nothing is written).
    :param skip_invalid: Import the valid lines and list the invalid ones in
        :attr:`ImportReport.errors`, instead of failing.
    :param progress: Called with the number of records handled so far, after
        each thousand.
    :raises InvalidImportError: A line is malformed (bad JSON, unknown field,
        wrong type, over a limit, unknown slot with strict slots), the header is
        missing or newer, or a duplicate with ``on_duplicate="error"``; nothing
        is written.
    """
    check_on_duplicate(on_duplicate)
    return run_import(store, read_jsonl(store, fp), on_duplicate=on_duplicate,
                      skip_invalid=skip_invalid, progress=progress)


# -- Markdown ----------------------------------------------------------------


def _slot_order(slot: str) -> tuple[int, str]:
    return (BUILTIN_SLOTS.index(slot) if slot in BUILTIN_SLOTS else len(BUILTIN_SLOTS), slot)


def render_markdown(
    store: FactStore, *, slots: Sequence[str] | None = None, scope: str | None = None
) -> dict[tuple[str, str | None], str]:
    """The Markdown file of each slot and scope with live facts, keyed ``(slot, scope)``.

    Slots in the order user, project, agent, then by name; global facts before
    scoped ones; facts by id. ``scope=None`` means every scope.
    """
    rows = store.backend.select(attrs.evolve(_filter(store, slots, scope), live_at=store.clock()))
    groups: dict[tuple[str, str | None], list[str]] = {}
    for row in rows:
        tags = [t for t in (row["tags"] or "").split("\n") if t]
        groups.setdefault((row["slot"], row["scope"] or None), []).append(
            render_bullet(row["value"], key=row["key"], tags=tags))
    order = sorted(groups, key=lambda k: (_slot_order(k[0]), k[1] is not None, k[1] or ""))
    return {k: render_file(k[0], k[1], groups[k]) for k in order}


def export_markdown(
    store: FactStore, directory: str | os.PathLike[str] | None = None, *,
    slots: Sequence[str] | None = None, scope: str | None = None,
) -> str | list[Path]:
    """Write the live facts as Markdown, one bullet per fact.

    With ``directory``, write one file per slot, ``DIR/<slot>.md`` for global
    facts and ``DIR/scopes/<scope>/<slot>.md`` for scoped ones (the scope
    percent-encoded; its exact name is in the file's title), and return the
    paths written. Each file is private (``0600``, new directories ``0700``)
    and replaces the old one only once written whole; a symbolic link where a
    file or a directory below ``DIR`` goes is refused (``OSError``, nothing
    written); and files of earlier exports (same names and titles) whose slot
    and scope, within this export's ``slots`` and ``scope``, no longer hold a
    live fact are removed. Without ``directory``, return one text with every
    file, each under its ``# slot`` title. Archived and expired facts are left
    out; JSONL is the format that keeps everything.

    :param slots: Only these slots (``None``: every slot).
    :param scope: ``None`` exports every scope; a name exports that scope only.
    :raises InvalidFactError: A slot or scope name is malformed.
    :raises OSError: A symbolic link stands in the way, or writing failed.
    """
    files = render_markdown(store, slots=slots, scope=scope)
    if directory is None:
        return "\n".join(files.values())
    flt = _filter(store, slots, scope)
    return write_directory(Path(directory), files, slots=flt.slots,
                           scope=None if flt.scopes is None else flt.scopes[0])


def import_markdown(
    store: FactStore, path_or_text: str | os.PathLike[str], *, slot: str,
    scope: str | None = None, skip_invalid: bool = False, progress: Progress | None = None,
) -> ImportReport:
    """Read Markdown bullets into ``slot`` (and ``scope``) as facts, in one transaction.

    ``- `` / ``* `` bullets (with their indented continuation lines) become
    facts, ``**key**: value`` bullets keyed facts, headings tags of the bullets
    under them (lower-case, spaces to ``-``), and code spans ending a bullet
    that start with ``#`` (``- text `#tag```) its own tags; prose is ignored
    and counted. A file written by
    :func:`export_markdown` reads back to the same values, keys and tags.
    Facts already in the store are skipped (a keyed bullet whose key is taken,
    a free one whose value is stored). A file is read line by line, so it may
    hold any number of bullets; like :func:`import_jsonl`, it lands whole or
    not at all.

    :param path_or_text: A path (a :class:`~pathlib.Path`, or a one-line string
        naming an existing file) or the Markdown text itself.
    :param skip_invalid: Import the valid bullets and list the invalid ones in
        :attr:`ImportReport.errors`, instead of failing.
    :param progress: Called with the number of bullets handled so far.
    :raises InvalidImportError: A bullet is invalid (empty, over a limit);
        nothing is written.
    :raises InvalidFactError: ``slot`` or ``scope`` is malformed, or the file
        cannot be read.
    """
    slot = store.limits.slot(slot)
    store.limits.scope(scope)
    path, text = markdown_source(path_or_text)
    lines = file_lines(path) if path is not None else (text or "").split("\n")
    reader = MarkdownReader(slot, store.limits.max_tag_chars)
    source = f"markdown:{path.name}" if path is not None else "markdown"
    return run_import(store, read_markdown(store, lines, reader, scope=scope, source=source),
                      on_duplicate="skip", skip_invalid=skip_invalid, progress=progress,
                      ignored=lambda: reader.ignored_lines)
