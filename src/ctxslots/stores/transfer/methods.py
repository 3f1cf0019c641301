"""The transfer methods of :class:`~ctxslots.FactStore`: JSONL and Markdown, out and in."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, TextIO

from ..core import StoreCore
from . import jsonl, markdown
from .report import ImportReport

__all__ = ["TransferMethods"]


class TransferMethods:
    """The export and import methods of :class:`~ctxslots.FactStore`."""

    _core: StoreCore

    def export_jsonl(self, fp: TextIO, **options: Any) -> int:
        """Write facts, archive, history and links as JSON lines; return the facts written.

        See :func:`ctxslots.stores.transfer.jsonl.export_jsonl` for the options.
        """
        self._core.settle_access()
        return jsonl.export_jsonl(self._core, fp, **options)


    def import_jsonl(self, fp: TextIO, **options: Any) -> ImportReport:
        """Read what :meth:`export_jsonl` wrote, in one transaction.

        See :func:`ctxslots.stores.transfer.jsonl.import_jsonl` for the options.

        :raises InvalidImportError: A line is malformed; nothing is written.
        """
        return jsonl.import_jsonl(self._core, fp, **options)


    def export_markdown(self, directory: str | os.PathLike[str] | None = None,
                        **options: Any) -> str | list[Path]:
        """Write the live facts as Markdown bullets (a text, or one file per slot).

        See :func:`ctxslots.stores.transfer.markdown.export_markdown`.
        """
        return markdown.export_markdown(self._core, directory, **options)

    def render_markdown(self, **options: Any) -> dict[tuple[str, str | None], str]:
        """The Markdown file of each slot and scope with live facts, keyed ``(slot, scope)``:
        what :meth:`export_markdown` writes, nothing written.

        See :func:`ctxslots.stores.transfer.markdown.render_markdown` for the options.
        """
        return markdown.render_markdown(self._core, **options)


    def import_markdown(self, path_or_text: str | os.PathLike[str], *, slot: str,
                        **options: Any) -> ImportReport:
        """Read ``MEMORY.md``-style bullets into ``slot``, skipping duplicates.

        See :func:`ctxslots.stores.transfer.markdown.import_markdown`.

        :raises InvalidImportError: A bullet is refused; nothing is written.
        """
        return markdown.import_markdown(self._core, path_or_text, slot=slot, **options)

