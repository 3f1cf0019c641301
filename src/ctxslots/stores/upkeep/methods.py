"""The upkeep methods of :class:`~ctxslots.FactStore`: checks, rebuilds, consolidation, pruning."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ...errors import InvalidArgumentError
from ..backend import FactFilter
from ..core import StoreCore
from ..writes.writer import check_ids
from .consolidate import DEFAULT_THRESHOLD, ConsolidationReport, consolidate
from .doctor import DoctorReport, doctor, reindex
from .prune import PrunePolicy, PruneReport, group_of, prune

__all__ = ["DOCTOR_VECTOR_WAIT_S", "UpkeepMethods"]

#: Seconds ``doctor`` waits for the vectors this store still owes: an embedding server that
#: is slow or hung must not hold the check (nor the inspector's health page) for each queued
#: batch's timeout; a vector still owed after it is reported as missing.
DOCTOR_VECTOR_WAIT_S = 10.0


class UpkeepMethods:
    """The upkeep methods of :class:`~ctxslots.FactStore`."""

    _core: StoreCore

    def doctor(self) -> DoctorReport:
        """Check the store's integrity, its full-text index and its vectors.

        What this store writes in the background lands first, so that no write of its
        own holds the lock a check needs (outside a batch): its access counts, and its
        vectors for up to :data:`DOCTOR_VECTOR_WAIT_S` (one still owed then is reported
        as missing).
        """
        core = self._core
        if not core.backend.in_transaction:
            if core.access_writer is not None:
                core.access_writer.wait()
            core.wait_for_vectors(DOCTOR_VECTOR_WAIT_S)
        return doctor(core)

    def reindex(self, *, progress: Callable[[int, int], None] | None = None,
                full: bool = False) -> int:
        """Rebuild every derived index from the facts and repair what ``doctor`` finds;
        return the facts embedded.

        Only the facts without a usable vector are embedded, unless the vectors were
        built by another embedder or ``full`` asks for every fact (see
        :func:`~ctxslots.stores.upkeep.doctor.reindex`).
        """
        self._core.wait_for_vectors()
        return reindex(self._core, progress=progress, full=full)


    def consolidate(self, *, threshold: float = DEFAULT_THRESHOLD,
                    fact_ids: Iterable[int] | None = None, dry_run: bool = False
                    ) -> ConsolidationReport:
        """Mark older near-duplicates superseded by the newer fact of the same slot and owners.

        Superseded facts are never deleted: search hides them unless
        ``include_superseded=True``, the survivor's ``trace.hides`` counts them,
        and pruning archives them first. See :mod:`ctxslots.stores.upkeep.consolidate`.

        :param threshold: Cosine similarity above which two facts are duplicates.
        :param fact_ids: Only check these facts against older ones (``None``: all).
        :param dry_run: Only report what would be marked.
        :raises StoreError: The store has no usable vector index.
        :raises InvalidFactError: ``threshold`` or ``fact_ids`` is malformed.
        """
        self._core.wait_for_vectors()
        return consolidate(self._core, threshold=threshold, fact_ids=fact_ids, dry_run=dry_run)


    def prune(self, policy: PrunePolicy | None = None, *, dry_run: bool = False,
              fact_ids: Iterable[int] | None = None) -> PruneReport:
        """Move facts over the policy's caps to the archive (never deleting them).

        Over a slot's cap (counted per scope, user and agent), the unprotected facts
        with the lowest retention go first; see :mod:`ctxslots.stores.upkeep.prune`
        for the rule.

        :param policy: Caps and protections (default: :class:`PrunePolicy`).
        :param dry_run: Only report what would move.
        :param fact_ids: Only prune the slots and owners these facts belong to (what
            a flush wrote to: one user's writes never archive another's facts), the
            size cap too; ids of facts no longer live are ignored (``None``: every
            slot and owner).
        :raises InvalidFactError: An id is not an integer, or ``policy`` is not a
            :class:`PrunePolicy` (InvalidArgumentError).
        """
        if policy is not None and not isinstance(policy, PrunePolicy):
            raise InvalidArgumentError(f"policy must be a PrunePolicy or None, not {policy!r}",
                                       field="policy", value=policy)
        core = self._core
        groups = None
        if fact_ids is not None:
            groups = frozenset(group_of(r) for r in core.backend.rows_by_ids(
                check_ids(fact_ids), FactFilter()))
        core.settle_access()
        return prune(core, PrunePolicy() if policy is None else policy, dry_run=dry_run,
                     groups=groups)

