"""Markdown: the live facts as bullets a person reads and edits, and ``MEMORY.md``-style
notes read back.

One file per slot (and scope); an import lands whole or not at all, skipping
facts already in the store.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import stat
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import attrs

from ...errors import InvalidArgumentError
from ..backend import FactFilter
from ..core import StoreCore
from ..owners import ANY, Owners
from ..writes.limits import BUILTIN_SLOTS
from .import_writer import Progress, run_import
from .jsonl_records import import_owners
from .markdown_files import write_directory
from .markdown_import import file_lines, markdown_source, read_markdown
from .markdown_memory import MarkdownReader, heading_scope, render_bullet, render_file
from .report import ImportReport
from .selection import export_filter

__all__ = ["export_markdown", "import_markdown", "render_markdown"]


def _slot_order(slot: str) -> tuple[int, str]:
    return (BUILTIN_SLOTS.index(slot) if slot in BUILTIN_SLOTS else len(BUILTIN_SLOTS), slot)


def _selection(core: StoreCore, slots: Sequence[str] | None, scope: str | None,
               user: str | None, agent: str | None) -> FactFilter:
    """One user's and agent's memory: their own facts and the shared ones, of ``scope``
    (``None``: every scope; a name: that scope only)."""
    seen = core.filter(slots, Owners(user, agent, ANY), live=False)
    exact = export_filter(core, slots, scope)
    return attrs.evolve(exact, users=seen.users, agents=seen.agents)


def render_markdown(
    core: StoreCore, *, slots: Sequence[str] | None = None, scope: str | None = None,
    user: str | None = None, agent: str | None = None,
) -> dict[tuple[str, str | None], str]:
    """The Markdown file of each slot and scope with live facts, keyed ``(slot, scope)``.

    Slots in the order user, project, agent, then by name; global facts before
    scoped ones; facts by id. ``scope=None`` means every scope. The facts are
    those of one user and agent (``None``: the store's defaults) and the shared ones,
    without the facts a newer near-duplicate hides (no search or prompt shows them).
    """
    rows = core.backend.select(attrs.evolve(_selection(core, slots, scope, user, agent),
                                            live_at=core.clock(), include_superseded=False))
    groups: dict[tuple[str, str | None], list[str]] = {}
    for row in rows:
        tags = [t for t in (row["tags"] or "").split("\n") if t]
        groups.setdefault((row["slot"], row["scope"] or None), []).append(
            render_bullet(row["value"], key=row["key"], tags=tags, context=row.get("context")))
    order = sorted(groups, key=lambda k: (_slot_order(k[0]), k[1] is not None, k[1] or ""))
    return {k: render_file(k[0], k[1], groups[k]) for k in order}


def export_markdown(
    core: StoreCore, directory: str | os.PathLike[str] | None = None, *,
    slots: Sequence[str] | None = None, scope: str | None = None, user: str | None = None,
    agent: str | None = None,
) -> str | list[Path]:
    """Write the live facts as Markdown, one bullet per fact (its context, if any, as a
    quote closing the bullet).

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
    out, and so are those a newer near-duplicate hides (read back, they would show
    again); JSONL is the format that keeps everything.

    :param slots: Only these slots (``None``: every slot).
    :param scope: ``None`` exports every scope; a name exports that scope only.
    :param user: Whose memory: that user's facts and the facts of no user
        (``None``: the store's default user). JSONL exports every user's.
    :param agent: As ``user``, for agents.
    :raises InvalidFactError: A slot or an owner is malformed, or ``directory`` is not
        a path (a NUL character, text that is not Unicode: InvalidArgumentError).
    :raises OSError: A symbolic link stands in the way, or writing failed.
    """
    if directory is not None:
        _check_directory(directory)
    files = render_markdown(core, slots=slots, scope=scope, user=user, agent=agent)
    if directory is None:
        return "\n".join(files.values())
    flt = export_filter(core, slots, scope)
    return write_directory(Path(directory), files, slots=flt.slots,
                           scope=None if flt.scopes is None else flt.scopes[0])


def _check_directory(directory: object) -> None:
    """``directory`` names a folder the system can take."""
    if not isinstance(directory, (str, os.PathLike)):
        raise InvalidArgumentError(f"directory must be a path, not {type(directory).__name__}",
                                   field="directory", value=directory)
    try:
        usable = b"\x00" not in os.fsencode(directory)
    except UnicodeError:
        usable = False
    if not usable:
        raise InvalidArgumentError(f"directory {os.fspath(directory)!r} is not a path the "
                                   "system can take (a NUL character, or text that is not "
                                   "Unicode)", field="directory", value=directory)


def _regular(path: Path) -> bool:
    """Whether ``path`` is a regular file, which reads the same twice (``False`` when it
    cannot be read: reading it says why)."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def _kept(lines: Iterable[str], into: list[str]) -> Iterator[str]:
    """``lines``, each also added to ``into`` as it is read."""
    for line in lines:
        into.append(line)
        yield line


def import_markdown(
    core: StoreCore, path_or_text: str | os.PathLike[str], *, slot: str,
    scope: str | None = None, user: str | None = None, agent: str | None = None,
    skip_invalid: bool = False, progress: Progress | None = None,
) -> ImportReport:
    """Read Markdown bullets into ``slot`` (and ``scope``) as facts, in one transaction.

    ``- `` / ``* `` bullets (with their indented continuation lines) become
    facts, ``**key**: value`` bullets keyed facts, headings tags of the bullets
    under them (lower-case, spaces to ``-``), and code spans ending a bullet
    that start with ``#`` (``- text `#tag```) its own tags, and a quote
    closing a bullet (``> `` lines) its context; prose is ignored and counted.
    A file written by :func:`export_markdown` reads back to the same values,
    keys, tags and contexts, but for a value's trailing whitespace and a carriage
    return ending one of its lines (``\r\n`` reads back as ``\n``: a file's lines
    may end so).
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
    :param scope: The workspace of the facts (slots that have one, and a user's
        slot: the file an export writes under ``scopes/`` for the user facts an
        older release kept in a scope reads back into that scope). ``None``: the
        scope the file's title names (``# project (scope: repo)``, as an export
        writes: its first heading outside code blocks and comments, above any
        bullet), else global. A scope given wins over the title's, as
        ``ctxslots import --scope`` does.
    :param user: The user of the facts (a user's slot; ``None``: the store's default).
    :param agent: The agent of the facts (an agent's slot; ``None``: the store's default).
    :raises InvalidFactError: ``slot`` or an owner is malformed, an owner is named
        that the slot does not have, or the file cannot be read (or is not there: a
        one-line string with no bullet that reads as a file name, such as
        ``"notes/MEMORY.md"``, is refused rather than imported as text).
    """
    slot = core.limits.slot(slot)
    path, text = markdown_source(path_or_text)
    longest = core.limits.max_import_line_chars
    # Text read from a file or a pipe may still start with its byte-order mark.
    lines: Iterable[str] = file_lines(path, longest) if path is not None \
        else (text or "").removeprefix("\ufeff").split("\n")
    if scope is None:  # the scope an export's title names
        if path is None:
            scope = heading_scope(lines, slot)
        elif _regular(path):  # read twice: the lines above the title are not kept
            with contextlib.closing(file_lines(path, longest)) as head:
                scope = heading_scope(head, slot)
        else:  # a pipe (/dev/fd/N, <(...)) gives its lines once: the import reads them
            kept: list[str] = []
            scope = heading_scope(_kept(lines, kept), slot)
            lines = itertools.chain(kept, lines)
    owners = Owners(user, agent, scope)
    import_owners(core.limits, slot, user=user, agent=agent, scope=scope,
                  default_user=core.writer.default_user, default_agent=core.writer.default_agent)
    reader = MarkdownReader(slot, core.limits.max_tag_chars,
                            other_slots=frozenset(core.limits.slots))
    source = f"markdown:{path.name}" if path is not None else "markdown"
    return run_import(core, read_markdown(core, lines, reader, owners=owners, source=source),
                      on_duplicate="skip", skip_invalid=skip_invalid, progress=progress,
                      ignored=lambda: reader.ignored_lines)
