"""JSON lines: a store's every field, its archive, history and links, out and back in.

JSONL carries everything, so a store can be copied, backed up or merged. An
import is one transaction: it lands whole or not at all. Each record is checked
with the store's :class:`~ctxslots.stores.Limits` before anything is written; a
fact that is already in the store is skipped (see ``docs/transfer.md`` for the
duplicate rule).
"""

from __future__ import annotations

import codecs
import io
import json
import locale
from collections.abc import Sequence
from typing import Any, TextIO

import attrs
import numpy as np

from ..._streams import speaks_utf8
from ...errors import InvalidArgumentError
from ..backend import Row
from ..core import StoreCore
from .import_writer import Progress, run_import
from .jsonl_import import check_on_duplicate, read_jsonl
from .jsonl_records import ImportOwners, encode_vector, header, record_from_row
from .report import ImportReport
from .selection import export_filter

__all__ = ["export_jsonl", "import_jsonl"]

# json.dumps leaves these unescaped; str.splitlines() and some editors break lines there.
_LINE_BREAKS = str.maketrans({c: f"\\u{ord(c):04x}" for c in "\x85\u2028\u2029"})


def _line(data: dict[str, Any], *, ascii_only: bool = False) -> str:
    """One JSON object on one line, whatever line splitter reads it (every character
    beyond ASCII escaped with ``ascii_only``)."""
    text = json.dumps(data, ensure_ascii=ascii_only)
    # Rare in text; translating every line looked up each of its characters.
    if "\x85" in text or "\u2028" in text or "\u2029" in text:
        text = text.translate(_LINE_BREAKS)
    return text + "\n"


# -- reading the store -------------------------------------------------------


def _check_stream(fp: object, method: str, caller: str) -> None:
    """Refuse a path, a text or a file open in binary mode where a file open in text mode
    belongs (an ``AttributeError`` or a ``TypeError`` deep inside)."""
    binary = isinstance(fp, io.RawIOBase | io.BufferedIOBase) \
        or "b" in str(getattr(fp, "mode", ""))
    if binary or not callable(getattr(fp, method, None)):
        mode = "w" if method == "write" else "r"
        given = f"a file open in binary mode ({fp!r:.80})" if binary else f"{fp!r:.80}"
        raise InvalidArgumentError(
            f"{caller} takes a file open in text mode (open(path, {mode!r}) or io.StringIO), "
            f"not {given}", field="fp", value=fp)


def export_jsonl(
    core: StoreCore, fp: TextIO, *, slots: Sequence[str] | None = None,
    scope: str | None = None, user: str | None = None, agent: str | None = None,
    include_archive: bool = True, include_history: bool = True, include_vectors: bool = True,
) -> int:
    """Write the store's facts to ``fp`` as JSON lines; return how many facts were written.

    The first line is the header ``{"format": "ctxslots-facts", "version": 1,
    "exported_at": ...}``; then one line per fact, live and archived together,
    by id. Every field is written (timestamps as Unix seconds), expired facts
    included, with the co-recall links between exported facts, so :func:`import_jsonl` into an empty store rebuilds the same
    facts. The record schema is in ``docs/transfer.md``. The text is UTF-8: to ``fp``
    in another encoding (``open(path, "w")`` in a Latin-1 locale) every character beyond
    ASCII is written as its JSON escape, which reads back as the same value.

    :param slots: Only these slots (``None``: every slot).
    :param scope: ``None`` exports **every** scope, global facts included; a
        name exports that scope only (not the global facts).
    :param user: ``None`` exports every user's facts (and the facts of no
        user); a name exports that user's own facts only.
    :param agent: As ``user``, for agents.
    :param include_archive: Also write archived facts (``"archived": true``).
    :param include_history: Give each fact its earlier values (``"history"``).
    :param include_vectors: Give each live fact its stored vector (``"vector"``, with the
        embedder's model id), so a store with the same embedder takes it as it is
        instead of embedding the text again.
    :raises InvalidFactError: A slot or an owner is malformed.
    """
    _check_stream(fp, "write", "export_jsonl")
    # A file in another encoding (open(path, "w") in a Latin-1 locale) gets ASCII JSON:
    # still UTF-8, the same values, and no character it cannot encode.
    ascii_only = not speaks_utf8(fp)
    flt = export_filter(core, slots, scope, user, agent)
    backend = core.backend
    with backend.snapshot():
        rows: list[tuple[Row, bool]] = [(r, False) for r in backend.select(flt)]
        if include_archive:
            rows += [(r, True) for r in backend.select(flt, archived=True)]
        exported = {int(r["id"]) for r, _ in rows}
        history: dict[int, list[dict[str, Any]]] = {}
        # An export of some owners, scopes or slots reads their facts' history and links
        # alone, not every user's (which held the store for all of it).
        whole = slots is None and scope is None and user is None and agent is None
        if include_history:
            for h in backend.all_history() if whole else backend.history_of(sorted(exported)):
                history.setdefault(h.fact_id, []).append(attrs.asdict(h))
        vectors = {}
        if include_vectors and core.keeps_vectors:
            vectors = backend.vectors_of([int(r["id"]) for r, archived in rows if not archived])
        links: dict[int, list[dict[str, Any]]] = {}
        for a, b, strength, updated_at in (backend.all_links() if whole
                                           else backend.links_within(sorted(exported))):
            if a in exported and b in exported:
                links.setdefault(a, []).append(
                    {"a": a, "b": b, "strength": strength, "updated_at": updated_at})
    rows.sort(key=lambda item: (int(item[0]["id"]), item[1]))
    fp.write(_line(header(core.clock()), ascii_only=ascii_only))
    model_id = "" if core.embedder is None else core.embedder.model_id
    for row, archived in rows:
        fact_id = int(row["id"])
        hist = history.get(fact_id, []) if include_history else None
        # A vector with no direction is left out: the import embeds the value instead.
        vector = None if archived or not vectors.get(fact_id, np.zeros(1)).any() \
            else encode_vector(model_id, vectors[fact_id])
        record = record_from_row(row, archived=archived, history=hist,
                                 links=links.get(fact_id, ()), vector=vector)
        fp.write(_line(record, ascii_only=ascii_only))
    return len(rows)


# -- writing the store -------------------------------------------------------


def _read_as_utf8(fp: object) -> None:
    """Make a file open in the locale's encoding, when that is not UTF-8 (``open(path)``
    in a Latin-1 locale, or on Windows), read UTF-8; a byte that is not becomes a lone
    surrogate, so the import names its line. A file opened in another encoding by name
    is read as asked.

    :raises InvalidArgumentError: It was read from already, so it cannot be.
    """
    if not isinstance(fp, io.TextIOWrapper) or speaks_utf8(fp) \
            or codecs.lookup(fp.encoding).name != \
            codecs.lookup(locale.getpreferredencoding(False)).name:
        return
    try:
        fp.reconfigure(encoding="utf-8", errors="surrogateescape")
    except io.UnsupportedOperation:
        raise InvalidArgumentError(
            f"import_jsonl reads UTF-8, and the file is open as {fp.encoding} and was read "
            "from already: open it with encoding='utf-8'", field="fp", value=fp) from None


def import_jsonl(
    core: StoreCore, fp: TextIO, *, on_duplicate: str = "skip", skip_invalid: bool = False,
    progress: Progress | None = None, user: str | None = None, agent: str | None = None,
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
    :param user: The user of every user fact imported, whatever its record says
        (``None``: the record's own, else the store's default user).
    :param agent: As ``user``, for agent facts.
    :raises InvalidImportError: A line is malformed (bad JSON, unknown field,
        wrong type, over a limit, unknown slot with strict slots, an owner its
        slot does not have), the header is missing or newer, or a duplicate with
        ``on_duplicate="error"``; nothing is written.
    :raises InvalidFactError: ``user`` or ``agent`` is malformed.
    :raises InvalidArgumentError: ``fp`` is open in the locale's encoding, not UTF-8,
        and was read from already, so it cannot be read as UTF-8.

    The file is UTF-8: one opened in the locale's encoding (``open(path)`` in a Latin-1
    locale) is read as UTF-8 all the same (:meth:`io.TextIOWrapper.reconfigure`), never
    as that encoding, which would store ``CafÃ©`` for ``Café``; one opened with another
    ``encoding=`` by name is read as asked.
    """
    _check_stream(fp, "read", "import_jsonl")
    _read_as_utf8(fp)
    check_on_duplicate(on_duplicate)
    lim, writer = core.limits, core.writer
    owners = ImportOwners(writer.default_user, writer.default_agent,
                          None if user is None else lim.owner(user, "user"),
                          None if agent is None else lim.owner(agent, "agent"))
    return run_import(core, read_jsonl(core, fp, owners), on_duplicate=on_duplicate,
                      skip_invalid=skip_invalid, progress=progress)
