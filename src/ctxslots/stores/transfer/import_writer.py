"""Writing an import into a store: a batch at a time, in one transaction, in bounded memory.

An import is all or nothing: every record is written inside one transaction,
and a bad line (without ``skip_invalid``) or a duplicate (with
``on_duplicate="error"``) rolls all of it back. Within that transaction the
records are read, checked and written :data:`BATCH` at a time: the duplicate
check asks the engine about a whole batch at once (by an index, so it does not
slow down as the store grows), ids are checked a batch at a time, and vectors
are embedded a batch at a time. What stays in memory across batches is 16 bytes
per id in the file (to resolve ``superseded_by`` and links, which may point at
later lines) and the references themselves, never the facts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, cast

import attrs
import numpy as np

from ..backend import MAX_COUNT, FactKey, FactRow, HistoryEntry, VectorRow, rows_in
from ..core import StoreCore
from ..embedders.partial import embed_what_it_takes, warn_refused
from ..upkeep.consistency import loops
from .id_map import IdMap
from .jsonl_records import ParsedFact
from .report import ImportIssue, ImportReport, InvalidImportError

__all__ = ["BATCH", "MAX_KEPT_ID", "ImportWriter", "Progress", "run_import"]

#: Records read, checked and written together.
BATCH = 1000

#: Facts an import writes past which the engine counts its tables again (and again each
#: time it has written as many more as it had, and once more before it commits): on
#: PostgreSQL an import planned its duplicate checks from the counts before it, scanning
#: the table once a record (an import of 40,000 facts took 400 s, the same file again
#: 206 s; BENCHMARKS.md).
RECOUNT_AFTER = 1000

#: Records that need a new id wait, up to this many (a batch: an import holds no more
#: than two in memory, whatever the file's size), until the end of the import: by
#: then every free id the file names is taken by its own record, so a new id (the
#: store's next) never takes one a later record names (which would renumber it too).
LATER = BATCH

#: Ids from a file are kept only below this bound, so a hostile id cannot use
#: up the id space (SQLite and PostgreSQL ids stop at 2**63 - 1).
MAX_KEPT_ID = MAX_COUNT

#: ``progress(records)``: called after each batch with the records handled so far.
Progress = Callable[[int], None]


def _identity(fact: ParsedFact) -> tuple[Any, ...]:
    """What makes two records the same fact (the duplicate rule): the same owners, and
    the same key, or the same value when there is no key."""
    row = fact.row
    owners = (row["slot"], row["scope"], row["user_id"], row["agent_id"])
    if fact.archived:
        return ("archived", *owners, row["key"], row["value"])
    if row["key"] is not None:
        return ("key", *owners, row["key"])
    return ("free", *owners, row["value"])


@attrs.define
class ImportWriter:
    """Writes checked records into a store, batch by batch, inside the caller's transaction.

    Attributes:
        store: The store (its :meth:`~ctxslots.FactStore.batch` must be open).
        on_duplicate: ``"skip"`` or ``"error"``.
        progress: Told how many records were handled after each batch.
        repair_loops: Import facts whose ``superseded_by`` forms a loop without it
            (and report them) instead of failing the import.
    """

    core: StoreCore
    on_duplicate: str = "skip"
    progress: Progress | None = None
    repair_loops: bool = False
    _ids: IdMap = attrs.field(factory=IdMap, init=False)
    # (archived, id written, superseded_by in the file, line)
    _supersede: list[tuple[bool, int, int, int]] = attrs.field(factory=list, init=False)
    _repaired: list[ImportIssue] = attrs.field(factory=list, init=False)
    _links: list[tuple[int, int, float, float]] = attrs.field(factory=list, init=False)
    _later: list[ParsedFact] = attrs.field(factory=list, init=False)
    _later_idents: set[tuple[Any, ...]] = attrs.field(factory=set, init=False)
    _recount_at: int = attrs.field(default=RECOUNT_AFTER, init=False)
    _recounted: int = attrs.field(default=0, init=False)  # facts written at the last recount
    # The model of the first vector of the file this store did not take as it is.
    _vector_model: str | None = attrs.field(default=None, init=False)
    _counts: dict[str, int] = attrs.field(init=False, factory=lambda: dict.fromkeys(
        ("added", "archived", "history_entries", "skipped_duplicates", "renumbered",
         "redacted", "handled", "vectors_not_kept"), 0))

    def write(self, facts: Sequence[ParsedFact], *, renumber: bool = False) -> None:
        """Write one batch: skip (or fail on) duplicates, keep free ids, add history and
        vectors. A record whose id is taken (or that has none), and a later one the same
        as it, waits in :attr:`_later` (see :data:`LATER`) unless ``renumber``: then it
        gets the store's next id."""
        if not facts:
            return
        backend = self.core.backend
        found = self._stored_twins(facts)
        wanted = [f.id for f in facts if f.id is not None and 0 < f.id < MAX_KEPT_ID]
        taken = backend.taken_ids(wanted) if wanted else set()
        first_of: dict[tuple[Any, ...], int] = {}
        history: list[HistoryEntry] = []
        vectors: list[tuple[int, ParsedFact]] = []
        for fact, existing in zip(facts, found):
            ident = _identity(fact)
            existing = existing if existing is not None else first_of.get(ident)
            if existing is not None:
                self._duplicate(fact, existing)
                continue
            keep = fact.id is not None and 0 < fact.id < MAX_KEPT_ID and fact.id not in taken
            # A record the same as one waiting waits too: the first of them stays first.
            if not renumber and (not keep or ident in self._later_idents):
                self._later.append(fact)
                self._later_idents.add(ident)
                continue
            new_id = self._insert(fact, keep)
            # A record renumbered earlier in this batch may have got the id a later one names.
            taken.add(new_id)
            first_of[ident] = new_id
            self._written(fact, new_id, history)
            if not fact.archived:
                vectors.append((new_id, fact))
        backend.add_history(history)
        self._vectors(vectors)
        written = self._written_count()
        if written >= self._recount_at:  # the planner counts what this import wrote so far
            self._recount(written)
            self._recount_at = 2 * written
        if not renumber:
            self._counts["handled"] += len(facts)
            if self.progress is not None:
                self.progress(self._counts["handled"])
        if len(self._later) >= LATER:
            self._write_later()

    def _written_count(self) -> int:
        return self._counts["added"] + self._counts["archived"]

    def _recount(self, written: int) -> None:
        """Have the engine count its tables again, this import's rows included."""
        self.core.backend.refresh_statistics()
        self._recounted = written

    def _write_later(self) -> None:
        """Write the records that wait for a new id, a batch at a time."""
        later, self._later = self._later, []
        self._later_idents.clear()
        for chunk in rows_in(range(len(later)), BATCH):
            self.write([later[i] for i in chunk], renumber=True)

    def _stored_twins(self, facts: Sequence[ParsedFact]) -> list[int | None]:
        """The stored fact each record duplicates, asked of the engine a batch at a time."""
        found: list[int | None] = [None] * len(facts)
        for archived in (False, True):
            positions = [i for i, f in enumerate(facts) if f.archived == archived]
            if not positions:
                continue
            items: list[FactKey] = [
                (facts[i].row["slot"], facts[i].row["scope"], facts[i].row["user_id"],
                 facts[i].row["agent_id"], facts[i].row["key"], facts[i].row["value"])
                for i in positions]
            for i, fact_id in zip(positions, self.core.backend.find_existing(
                    items, archived=archived)):
                found[i] = fact_id
        return found

    def _duplicate(self, fact: ParsedFact, existing: int) -> None:
        if self.on_duplicate == "error":
            raise InvalidImportError(ImportIssue(
                fact.line, f"fact already in the store (id {existing})", "duplicate",
                fact.row["value"]))
        self._counts["skipped_duplicates"] += 1
        if fact.id is not None:
            self._ids.add(fact.id, existing)
            self._links += [(existing, to, s, u) for to, s, u in fact.links]

    def _insert(self, fact: ParsedFact, keep: bool) -> int:
        """Insert one record, under its own id when ``keep``; return the id used."""
        backend, raw = self.core.backend, dict(fact.row)
        raw.setdefault("observed_at", raw["created_at"])
        row = cast(FactRow, {**raw, "superseded_by": None})
        if fact.archived:
            if keep and fact.id is not None:
                backend.insert_archived(cast(FactRow, raw), fact.id)
                return fact.id
            fact_id = backend.insert(row)
            backend.archive(fact_id, archived_at=row["archived_at"], reason=row["reason"])
            return fact_id
        return backend.insert(row, fact_id=fact.id if keep else None)

    def _written(self, fact: ParsedFact, new_id: int, history: list[HistoryEntry]) -> None:
        """Count a written record and keep what must follow it: references and history."""
        counts, row = self._counts, fact.row
        counts["archived" if fact.archived else "added"] += 1
        counts["renumbered"] += fact.id is not None and new_id != fact.id
        counts["redacted"] += bool(fact.redacted)
        counts["history_entries"] += len(fact.history)
        if fact.id is not None:
            self._ids.add(fact.id, new_id)
            self._links += [(new_id, to, s, u) for to, s, u in fact.links]
        if row["superseded_by"] is not None:
            self._supersede.append((fact.archived, new_id, int(row["superseded_by"]),
                                    fact.line))
        history += [HistoryEntry(
            fact_id=new_id, slot=row["slot"], scope=row["scope"], key=row["key"],
            value=h.value, tags=h.tags, source=h.source, confidence=h.confidence,
            valid_from=h.valid_from, valid_to=h.valid_to, observed_at=h.observed_at)
            for h in fact.history]

    def _vectors(self, written: list[tuple[int, ParsedFact]]) -> None:
        """Store the batch's vectors: the file's own when the same embedder built them,
        else embedded now, this batch only (never the whole import in one array)."""
        core = self.core
        keeps = core.keeps_vectors
        model, dimension = (core.embedder.model_id, core.embedder.dimension) \
            if keeps and core.embedder is not None else (None, 0)
        carried: list[tuple[int, ParsedFact]] = []
        rest: list[tuple[int, ParsedFact]] = []
        for fact_id, fact in written:
            same = fact.vector is not None and fact.vector[0] == model \
                and fact.vector[1].shape == (dimension,)
            if fact.vector is not None and not same:
                self._counts["vectors_not_kept"] += 1
                self._vector_model = self._vector_model or fact.vector[0]
            (carried if same else rest).append((fact_id, fact))
        if not keeps:
            return
        if carried:
            core.backend.put_vectors([_filed(i, f) for i, f in carried],
                                      np.stack([f.vector[1] for _, f in carried if f.vector]))
        if rest:
            made = embed_what_it_takes(core.embed, [f.row["value"] for _, f in rest])
            core.backend.put_vectors([_filed(*rest[i]) for i in made.kept], made.vectors)
            warn_refused({rest[i][0]: exc for i, exc in made.refused.items()})

    def _without_loops(self, targets: list[int | None]) -> list[int | None]:
        """``targets`` (each record's ``superseded_by``, resolved) with the loops broken.

        :raises InvalidImportError: A loop, unless :attr:`repair_loops`.
        """
        found = loops((fact_id, to) for (_, fact_id, _, _), to in zip(self._supersede, targets)
                      if to is not None)
        if not found:
            return targets
        line_of = {fact_id: line for _, fact_id, _, line in self._supersede}
        issues = [ImportIssue(
            line_of[loop[0]], "superseded_by forms a loop (lines "
            + " -> ".join(str(line_of[f]) for f in [*loop, loop[0]])
            + "): every fact of it would be hidden from every search", "superseded_by",
            loop) for loop in found]
        if not self.repair_loops:
            raise InvalidImportError(issues[0], issues)
        # Every fact of a loop is written without its superseded_by: each is listed, on its line.
        self._repaired += [attrs.evolve(issue, line=line_of[fact])
                           for issue, loop in zip(issues, found) for fact in loop]
        looped = {fact for loop in found for fact in loop}
        return [None if fact_id in looped else to
                for (_, fact_id, _, _), to in zip(self._supersede, targets)]

    def finish(self) -> ImportReport:
        """Point ``superseded_by`` and links at the ids the records got, have the engine count
        its tables again when the import wrote many facts; the report.

        :raises InvalidImportError: ``superseded_by`` forms a loop (unless
            :attr:`repair_loops`).
        """
        self._write_later()
        backend = self.core.backend
        resolved = [self._ids.get(target) for _, _, target, _ in self._supersede]
        # A mark naming a record the file does not hold is dropped: the fact is shown.
        unhidden = sum(1 for to in resolved if to is None)
        targets = self._without_loops(resolved)
        for archived in (False, True):
            pairs = [(fact_id, to) for (was_archived, fact_id, _, _), to
                     in zip(self._supersede, targets) if was_archived == archived]
            for chunk in rows_in(range(len(pairs)), BATCH):
                backend.set_superseded([pairs[i] for i in chunk], archived=archived)
        rows = []
        for source, to, strength, updated_at in self._links:
            target = self._ids.get(to)
            if target is not None and target != source:
                a, b = sorted((source, target))
                rows.append((a, b, strength, updated_at))
        for chunk in rows_in(range(len(rows)), BATCH):
            backend.merge_links([rows[i] for i in chunk])
        # The last count, inside the transaction (its own rows are counted): after the commit,
        # an interrupt or a lost connection during it would fail an import that was written.
        written = self._written_count()
        if written >= RECOUNT_AFTER and written != self._recounted:
            self._recount(written)
        counts = self._counts
        return ImportReport(added=counts["added"], archived=counts["archived"],
                            history_entries=counts["history_entries"],
                            skipped_duplicates=counts["skipped_duplicates"],
                            renumbered=counts["renumbered"], redacted=counts["redacted"],
                            unhidden=unhidden, repaired=tuple(self._repaired),
                            vectors_not_kept=counts["vectors_not_kept"],
                            vector_model=self._vector_model)


def run_import(core: StoreCore, records: Iterable[ParsedFact | ImportIssue], *,
               on_duplicate: str, skip_invalid: bool, progress: Progress | None = None,
               ignored: Callable[[], int] = lambda: 0) -> ImportReport:
    """Write ``records`` in one transaction, :data:`BATCH` at a time.

    An invalid record (an :class:`ImportIssue`) fails the import unless
    ``skip_invalid``; the rest of the file is still read, so the error counts
    every invalid line, and nothing is written.

    :param ignored: Read after the records: lines that were not records (Markdown prose).
    :raises InvalidImportError: A record is invalid (without ``skip_invalid``),
        ``superseded_by`` forms a loop (without ``skip_invalid``: with it, the facts
        of the loop are written without it, listed in ``repaired``) or a duplicate
        (with ``on_duplicate="error"``); nothing is written.
    """
    writer = ImportWriter(core, on_duplicate, progress, repair_loops=skip_invalid)
    errors: list[ImportIssue] = []
    with core.writer.writing():
        # Another import (or writer) of the same facts waits, then finds them stored.
        core.backend.hold_writes()
        batch: list[ParsedFact] = []
        for record in records:
            if isinstance(record, ImportIssue):
                errors.append(record)
                batch = batch if skip_invalid else []
                continue
            if errors and not skip_invalid:
                continue  # failing: only the invalid lines are still counted
            batch.append(record)
            if len(batch) >= BATCH:
                writer.write(batch)
                batch = []
        if errors and not skip_invalid:
            raise InvalidImportError(errors[0], errors)
        writer.write(batch)
        report = writer.finish()
    return attrs.evolve(report, ignored_lines=ignored(), errors=tuple(errors))


def _filed(fact_id: int, fact: ParsedFact) -> VectorRow:
    """Where the vector of an imported fact (stored under ``fact_id``) is filed."""
    return VectorRow(fact_id, fact.row["scope"], fact.row["slot"], fact.row["user_id"],
                     fact.row["agent_id"])
