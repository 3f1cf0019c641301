"""Where the vectors of written facts go: into the same transaction, or to a background writer."""

from __future__ import annotations

import attrs

from ..backend import Backend, VectorRow
from ..embedders.binding import EmbedderBinding
from ..embedders.partial import embed_what_it_takes, warn_refused
from .vector_writer import VectorWriter

__all__ = ["Pending", "VectorSink"]

#: ``fact_id -> (where its vector goes, its value)`` of the facts a transaction wrote.
Pending = dict[int, tuple[VectorRow, str]]


@attrs.define
class VectorSink:
    """Embeds what a transaction wrote: before it commits, or after, in the background.

    Attributes:
        backend: The engine.
        embedding: The embedder and whether the stored vectors are its own.
        vector_weight: The search's vector weight (0: searches read no vectors,
            so none are kept).
        background: The background writer (``None``: vectors are written inline).
    """

    backend: Backend
    embedding: EmbedderBinding
    vector_weight: float
    background: VectorWriter | None = None

    @property
    def keeps(self) -> bool:
        """Whether written facts get vectors: an embedder that built the store's
        vectors, and searches that read them."""
        return self.embedding.usable and self.vector_weight > 0

    def before_commit(self, pending: Pending) -> None:
        """Embed the values written in a transaction and store their vectors (inline);
        a value the embedder refuses is kept without one, with a warning."""
        if not self.keeps or not pending or self.background is not None:
            return
        assert self.embedding.embedder is not None
        rows = list(pending.values())
        made = embed_what_it_takes(self.embedding.embed, [value for _, value in rows])
        self.backend.put_vectors([rows[i][0] for i in made.kept], made.vectors)
        ids = list(pending)
        refused = {ids[i]: exc for i, exc in made.refused.items()}
        if refused:  # a replaced value's old vector would say what it no longer does
            self.backend.delete_vectors(list(refused))
        warn_refused(refused)

    def replaced(self, fact_id: int) -> None:
        """A fact's value changed (inside the transaction). Unless its new vector is
        written in this transaction (inline), its old one goes now: written in the
        background, the new one lands after the commit; kept by no search of this
        store, none comes (while a vector another process or an older release wrote
        stays). Either way it is a fact without a vector (which ``doctor`` counts and
        ``reindex`` embeds), never one whose vector says its old value."""
        if self.background is not None or not self.keeps:
            self.backend.delete_vectors([fact_id])

    def after_commit(self, pending: Pending) -> None:
        """Queue the vectors of what a committed transaction wrote (background)."""
        if self.background is not None and self.keeps and pending:
            self.background.put(pending)
