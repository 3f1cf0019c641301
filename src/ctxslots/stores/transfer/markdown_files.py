"""A Markdown export directory: one file per slot and scope, kept in step with the store.

``DIR/<slot>.md`` holds a slot's global facts and ``DIR/scopes/<scope>/<slot>.md``
a scope's (the directory name percent-encoded, the exact scope in the file's
title). Every file is written privately and whole (:mod:`ctxslots._files`); a
symbolic link where a file or directory of the export goes is refused before
anything is written; and a file of an earlier export whose slot and scope no
longer hold a live fact is removed, so re-importing the directory never brings a
forgotten fact back. A file counts as an earlier export's when the export's
manifest (``.ctxslots-export.json``) lists it and its first line is still the
title :func:`title` wrote: a person's own notes in the directory are left alone.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import re
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import TextIO

from ..._files import (
    existing_subdir,
    open_dir,
    open_subdir,
    read_head,
    refuse_link,
    remove_file,
    replace_file,
)
from .markdown_memory import scope_dirname, title

__all__ = ["write_directory"]

logger = logging.getLogger("ctxslots.transfer")

#: Where the files of scoped facts go, under the export directory.
SCOPES = "scopes"
#: The export's record of the files it wrote (so only those are ever removed).
MANIFEST = ".ctxslots-export.json"
MANIFEST_FORMAT = "ctxslots-markdown-export"
_SLOT_FILE = re.compile(r"([a-z][a-z0-9_\-]{0,63})\.md")

Files = Mapping[tuple[str, str | None], str]


def _write(text: str, fp: TextIO) -> int:
    return fp.write(text)


def _name(slot: str) -> str:
    return f"{slot}.md"


def _check_links(root: int, files: Files) -> None:
    """Raise before anything is written if a link stands where the export writes."""
    for slot, scope in files:
        if scope is None:
            refuse_link(root, _name(slot))
    scoped = sorted({scope for _, scope in files if scope is not None})
    if not scoped:
        return
    with existing_subdir(root, SCOPES) as scopes:
        if scopes is None:
            return
        for scope in scoped:
            with existing_subdir(scopes, scope_dirname(scope)) as folder:
                if folder is None:
                    continue
                for slot, file_scope in files:
                    if file_scope == scope:
                        refuse_link(folder, _name(slot))


def _ours(dir_fd: int, name: str, scope_dir: str | None) -> str | None:
    """The slot of an earlier export's file ``name`` in ``dir_fd``, else ``None``."""
    found = _SLOT_FILE.fullmatch(name)
    head = read_head(dir_fd, name, 1024) if found else None
    if found is None or head is None:
        return None
    slot, first = found.group(1), head.split("\n", 1)[0]
    if scope_dir is None:
        return slot if first == title(slot, None) else None
    prefix = f"# {slot} (scope: "
    if not (first.startswith(prefix) and first.endswith(")")):
        return None
    return slot if scope_dirname(first[len(prefix):-1]) == scope_dir else None


def _read_manifest(root: int) -> set[str]:
    """The files the earlier exports into this directory wrote (relative paths)."""
    text = read_head(root, MANIFEST, 16 * 1024 * 1024)
    try:
        data = json.loads(text) if text else None
    except ValueError:
        return set()
    files = data.get("files") if isinstance(data, dict) else None
    return {f for f in files if isinstance(f, str)} if isinstance(files, list) else set()


def _covers(relative: str, slots: Collection[str] | None, scope: str | None) -> bool:
    """Whether this export (of ``slots`` and ``scope``) writes the file ``relative``."""
    parts = relative.split("/")
    found = _SLOT_FILE.fullmatch(parts[-1])
    if found is None or (slots is not None and found.group(1) not in slots):
        return False
    if len(parts) == 1:
        return scope is None
    return len(parts) == 3 and parts[0] == SCOPES and (
        scope is None or parts[1] == scope_dirname(scope))


def _remove_stale(root: int, root_path: Path, written: list[str],
                  slots: Collection[str] | None, scope: str | None) -> list[Path]:
    """Remove files an earlier export wrote (by its manifest, and still with the title it
    wrote) that this export covers but did not write; record what the directory now holds."""
    earlier = _read_manifest(root)
    stale = sorted(f for f in earlier - set(written) if _covers(f, slots, scope))
    removed: list[Path] = []
    for relative in stale:
        parts = relative.split("/")
        if len(parts) == 1:
            if _ours(root, parts[0], None):
                remove_file(root, parts[0])
                removed.append(root_path / relative)
            continue
        with contextlib.ExitStack() as stack:
            try:  # a link (never followed) or a missing directory: nothing to remove
                scopes = stack.enter_context(existing_subdir(root, SCOPES))
                folder = None if scopes is None else stack.enter_context(
                    existing_subdir(scopes, parts[1]))
            except OSError:
                continue
            if scopes is None or folder is None or not _ours(folder, parts[2], parts[1]):
                continue
            remove_file(folder, parts[2])
            removed.append(root_path / relative)
            with contextlib.suppress(OSError):  # left empty: it goes too
                os.rmdir(parts[1], dir_fd=scopes)
    kept = (earlier - set(stale)) | set(written)
    replace_file(root, MANIFEST, lambda fp: json.dump(
        {"format": MANIFEST_FORMAT, "files": sorted(kept)}, fp, indent=1))
    if removed:
        logger.info("removed %d files of facts no longer in the store: %s", len(removed),
                    ", ".join(map(str, removed)))
    return removed


def write_directory(root: Path, files: Files, *, slots: Collection[str] | None,
                    scope: str | None) -> list[Path]:
    """Write ``files`` (text by ``(slot, scope)``) under ``root``; return the paths written.

    :param slots: The slots this export covers (``None``: every slot).
    :param scope: The stored scope this export covers (``None``: every scope).
    :raises OSError: A symbolic link stands where a file or directory goes (nothing is
        written), or writing failed (files already replaced stay replaced, the one
        being written keeps its old content).
    """
    written: list[Path] = []
    with open_dir(root) as root_fd:
        _check_links(root_fd, files)
        for (slot, file_scope), text in files.items():
            if file_scope is None:
                replace_file(root_fd, _name(slot), functools.partial(_write, text))
                written.append(root / _name(slot))
                continue
            dirname = scope_dirname(file_scope)
            with open_subdir(root_fd, SCOPES) as scopes, open_subdir(scopes, dirname) as folder:
                replace_file(folder, _name(slot), functools.partial(_write, text))
            written.append(root / SCOPES / dirname / _name(slot))
        _remove_stale(root_fd, root, [str(p.relative_to(root)) for p in written], slots, scope)
    return written
