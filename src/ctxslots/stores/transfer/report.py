"""What an import reports, and the error it raises for a malformed file."""

from __future__ import annotations

from typing import Any

import attrs

from ..._readable import count as _count
from ...errors import InvalidImportError
from ..embedders.binding import spec_of_model

__all__ = ["ImportIssue", "ImportReport", "InvalidImportError"]


@attrs.frozen
class ImportIssue:
    """One line an import could not use.

    Attributes:
        line: The line (1-based).
        message: What is wrong with it.
        field: The offending field, when one is to blame.
        value: The offending value.
    """

    line: int
    message: str
    field: str | None = None
    value: Any = attrs.field(default=None, repr=False, eq=False)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data (without the value)."""
        return {"line": self.line, "message": self.message, "field": self.field}


@attrs.frozen
class ImportReport:
    """What an import did.

    Attributes:
        added: Live facts written.
        archived: Facts written to the archive.
        history_entries: Earlier values written to the history.
        skipped_duplicates: Facts already in the store (not written).
        renumbered: Facts that got a new id because theirs was taken.
        ignored_lines: Markdown lines that are no bullet (prose, rules, code).
        redacted: Facts written with a credential-shaped string in their value
            (or an earlier value) replaced by ``[redacted KIND]`` (the store's
            :attr:`~ctxslots.stores.Limits.secrets` policy).
        unhidden: Facts whose ``superseded_by`` names a record the file does not
            hold: imported without the mark, so searches show them.
        errors: Lines skipped as invalid (only with ``skip_invalid=True``).
        repaired: Lines imported without a field that made them invalid (only
            with ``skip_invalid=True``), one per fact: each fact of a loop of
            ``superseded_by``, which would have hidden them all from every search.
        vectors_not_kept: Live facts written whose vector in the file was not
            stored as it is: this store keeps no vectors, or embeds with another
            model (and embedded them again).
        vector_model: The model that built those vectors (the first met), or ``None``.
    """

    added: int = 0
    archived: int = 0
    history_entries: int = 0
    skipped_duplicates: int = 0
    renumbered: int = 0
    ignored_lines: int = 0
    redacted: int = 0
    unhidden: int = 0
    errors: tuple[ImportIssue, ...] = ()
    repaired: tuple[ImportIssue, ...] = ()
    vectors_not_kept: int = 0
    vector_model: str | None = None

    def summary(self) -> str:
        """One line for people."""
        text = (f"imported {_count(self.added, 'fact')}, {self.archived} archived, "
                f"{_count(self.history_entries, 'history entry', 'history entries')}; "
                f"skipped {_count(self.skipped_duplicates, 'duplicate')}")
        if self.renumbered:
            text += f"; {self.renumbered} renumbered"
        if self.ignored_lines:
            text += f"; {_count(self.ignored_lines, 'prose line')} ignored"
        if self.redacted:
            text += (f"; {_count(self.redacted, 'fact')} written with secrets redacted "
                     "(memory is no place for them)")
        if self.unhidden:
            it = "it" if self.unhidden == 1 else "them"
            text += (f"; {_count(self.unhidden, 'fact')} imported shown (the near-duplicate "
                     f"that hid {it} is not in the file)")
        if self.errors:
            text += f"; {_count(len(self.errors), 'invalid line')} skipped"
        if self.repaired:
            its, it = ("its", "it") if len(self.repaired) == 1 else ("their", "them")
            text += (f"; {_count(len(self.repaired), 'fact')} imported without {its} "
                     f"superseded_by (a loop that would hide {it})")
        if self.vectors_not_kept and (model := self.vector_model) is not None:
            text += (f"; {_count(self.vectors_not_kept, 'vector')} of {model} "
                     "not kept: this store does not search with that model (import into a "
                     f"store opened with its embedder, --embedder {spec_of_model(model)} or "
                     "embedder=, to keep them)")
        return text

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data."""
        out = attrs.asdict(self, recurse=False)
        out["errors"] = [e.to_dict() for e in self.errors]
        out["repaired"] = [e.to_dict() for e in self.repaired]
        return out
