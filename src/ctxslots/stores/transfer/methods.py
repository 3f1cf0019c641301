"""The transfer methods of :class:`~ctxslots.FactStore`: JSONL and Markdown, out and in."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO, overload

from ..core import StoreCore
from . import jsonl, markdown
from .import_writer import Progress
from .report import ImportReport

__all__ = ["TransferMethods"]


class TransferMethods:
    """The export and import methods of :class:`~ctxslots.FactStore`."""

    _core: StoreCore

    def export_jsonl(self, fp: TextIO, *, slots: Sequence[str] | None = None,
                     scope: str | None = None, user: str | None = None, agent: str | None = None,
                     include_archive: bool = True, include_history: bool = True,
                     include_vectors: bool = True) -> int:
        """Write facts, archive, history and links as JSON lines; return the facts written.

        See :func:`ctxslots.stores.transfer.jsonl.export_jsonl` for the options.
        """
        self._core.settle_access()
        return jsonl.export_jsonl(self._core, fp, slots=slots, scope=scope, user=user,
                                  agent=agent, include_archive=include_archive,
                                  include_history=include_history,
                                  include_vectors=include_vectors)


    def import_jsonl(self, fp: TextIO, *, on_duplicate: str = "skip", skip_invalid: bool = False,
                     progress: Progress | None = None, user: str | None = None,
                     agent: str | None = None) -> ImportReport:
        """Read what :meth:`export_jsonl` wrote, in one transaction.

        See :func:`ctxslots.stores.transfer.jsonl.import_jsonl` for the options.

        :raises InvalidImportError: A line is malformed; nothing is written.
        """
        return jsonl.import_jsonl(self._core, fp, on_duplicate=on_duplicate,
                                  skip_invalid=skip_invalid, progress=progress, user=user,
                                  agent=agent)


    @overload
    def export_markdown(self, directory: None = None, *, slots: Sequence[str] | None = None,
                        scope: str | None = None, user: str | None = None,
                        agent: str | None = None) -> str: ...

    @overload
    def export_markdown(self, directory: str | os.PathLike[str], *,
                        slots: Sequence[str] | None = None, scope: str | None = None,
                        user: str | None = None, agent: str | None = None) -> list[Path]: ...

    def export_markdown(self, directory: str | os.PathLike[str] | None = None, *,
                        slots: Sequence[str] | None = None, scope: str | None = None,
                        user: str | None = None, agent: str | None = None) -> str | list[Path]:
        """Write the live facts as Markdown bullets: one text without ``directory``, else
        one file per slot and scope in it, returning the paths written.

        See :func:`ctxslots.stores.transfer.markdown.export_markdown`.
        """
        return markdown.export_markdown(self._core, directory, slots=slots, scope=scope,
                                        user=user, agent=agent)

    def render_markdown(self, *, slots: Sequence[str] | None = None, scope: str | None = None,
                        user: str | None = None, agent: str | None = None
                        ) -> dict[tuple[str, str | None], str]:
        """The Markdown file of each slot and scope with live facts, keyed ``(slot, scope)``:
        what :meth:`export_markdown` writes, nothing written.

        See :func:`ctxslots.stores.transfer.markdown.render_markdown` for the options.
        """
        return markdown.render_markdown(self._core, slots=slots, scope=scope, user=user,
                                        agent=agent)


    def import_markdown(self, path_or_text: str | os.PathLike[str], *, slot: str,
                        scope: str | None = None, user: str | None = None,
                        agent: str | None = None, skip_invalid: bool = False,
                        progress: Progress | None = None) -> ImportReport:
        """Read ``MEMORY.md``-style bullets into ``slot``, skipping duplicates.

        See :func:`ctxslots.stores.transfer.markdown.import_markdown`.

        :raises InvalidImportError: A bullet is refused; nothing is written.
        """
        return markdown.import_markdown(self._core, path_or_text, slot=slot, scope=scope,
                                        user=user, agent=agent, skip_invalid=skip_invalid,
                                        progress=progress)
