"""Facts, hits and messages: what a store holds and returns, and what a conversation says.

Timestamps are timezone-aware UTC :class:`datetime.datetime` values.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

import attrs

from ..errors import InvalidArgumentError

__all__ = ["MESSAGE_ROLES", "RELAXED_FILL", "Fact", "Hit", "HitTrace", "Message",
           "from_timestamp", "to_timestamp"]

#: ``HitTrace.fill`` of a hit only the relaxed query (the common words kept) found.
RELAXED_FILL = "relaxed"


_UTC = dt.UTC
_FROM_SECONDS = dt.datetime.fromtimestamp


def from_timestamp(value: float | None) -> dt.datetime | None:
    """Turn Unix seconds (or ``None``) into an aware UTC datetime (or ``None``)."""
    return None if value is None else _FROM_SECONDS(value, _UTC)


def to_timestamp(value: dt.datetime | float | None) -> float | None:
    """Turn a datetime (naive means UTC) or Unix seconds into Unix seconds."""
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.UTC)
        return value.timestamp()
    return float(value)


@attrs.frozen
class Fact:
    """One stored fact or free-form memory.

    Attributes:
        id: Store-assigned identifier, stable for the life of the fact.
        slot: Which memory it belongs to: ``"user"``, ``"project"``, ``"agent"``
            or a plugin's slot.
        scope: The workspace it is scoped to, or ``None`` for a global fact.
        key: Optional key, unique per slot and scope; writing the same key again
            replaces the value and keeps the old one in history.
        value: The fact itself, as text.
        tags: Free labels, in the order given.
        source: Where the fact came from (a flush id, a tool, a person).
        confidence: How sure the writer was, 0 to 1; multiplies the score.
        score: Reinforcement score; each reinforce adds 3, each demote takes 1.
        created_at: When the fact was first written.
        updated_at: When its value last changed (was written).
        observed_at: When it was said or observed; decay, ages and timelines
            count from it. The time it was written unless given.
        last_accessed: When it was last shown to a model, if ever.
        access_count: How many times it has been shown to a model.
        expires_at: After this moment the fact is never returned.
        archived: Whether the fact was forgotten (moved to the archive).
        archive_reason: Why an archived fact moved there (the reason it was
            forgotten with, or the cap that pruned it), or ``None``.
        superseded_by: The id of the newer near-duplicate that hides this fact
            from search (see :meth:`~ctxslots.FactStore.consolidate`), or ``None``.
        context: Words that make the memory findable without being part of it
            (the message it answers, the turns before it): searched by words at
            half weight, never embedded, never shown in a prompt; ``None`` if none.
        user: The user it belongs to (a ``user`` fact), or ``None``.
        agent: The agent it belongs to (an ``agent`` fact), or ``None``.
    """

    id: int
    slot: str
    scope: str | None
    key: str | None
    value: str
    tags: tuple[str, ...] = ()
    source: str | None = None
    confidence: float = 1.0
    score: float = 0.0
    created_at: dt.datetime | None = None
    updated_at: dt.datetime | None = None
    last_accessed: dt.datetime | None = None
    access_count: int = 0
    expires_at: dt.datetime | None = None
    archived: bool = False
    superseded_by: int | None = None
    observed_at: dt.datetime | None = None
    context: str | None = None
    user: str | None = None
    agent: str | None = None
    archive_reason: str | None = None

    @property
    def said_at(self) -> dt.datetime | None:
        """When it was said: ``observed_at``, else ``updated_at``, else ``created_at``
        (what ages and dates of a fact show)."""
        return self.observed_at or self.updated_at or self.created_at

    @classmethod
    def from_row(cls, row: Mapping[str, Any], *, archived: bool = False) -> Fact:
        """Build a fact from a store row (a mapping of column name to value)."""
        # Every search builds a hundred of these: the conversions are written out
        # rather than called (a third of the time of from_timestamp calls).
        tags_text = row["tags"]
        created, updated = row["created_at"], row["updated_at"]
        accessed, expires = row["last_accessed"], row["expires_at"]
        observed = row.get("observed_at", created)
        created_at = None if created is None else _FROM_SECONDS(created, _UTC)
        # A fact never updated was observed, created and updated at one moment.
        updated_at = created_at if updated == created else (
            None if updated is None else _FROM_SECONDS(updated, _UTC))
        observed_at = created_at if observed == created else (
            None if observed is None else _FROM_SECONDS(observed, _UTC))
        return cls(
            id=int(row["id"]),
            slot=row["slot"],
            scope=row["scope"] or None,
            key=row["key"],
            value=row["value"],
            tags=tuple(t for t in tags_text.split("\n") if t) if tags_text else (),
            source=row["source"],
            confidence=float(row["confidence"]),
            score=float(row["score"]),
            created_at=created_at,
            updated_at=updated_at,
            last_accessed=None if accessed is None else _FROM_SECONDS(accessed, _UTC),
            access_count=int(row["access_count"]),
            expires_at=None if expires is None else _FROM_SECONDS(expires, _UTC),
            archived=archived,
            superseded_by=row["superseded_by"],
            observed_at=observed_at,
            context=row.get("context") or None,
            user=row.get("user_id") or None,
            agent=row.get("agent_id") or None,
            archive_reason=row.get("reason") if archived else None,
        )

    def to_dict(self) -> dict[str, Any]:
        """Return the fact as JSON-ready data (timestamps as ISO 8601 strings)."""
        out: dict[str, Any] = attrs.asdict(self, recurse=False)
        out["tags"] = list(self.tags)
        for name in ("created_at", "updated_at", "last_accessed", "expires_at", "observed_at"):
            value = out[name]
            out[name] = value.isoformat() if value is not None else None
        return out


@attrs.frozen
class HitTrace:
    """How one search hit was scored, signal by signal.

    The final score is ``relevance * decay * reinforcement * confidence``, times the
    multipliers ``extra`` records for this hit (``period``, ``common_word``,
    ``common_subject``, ``episode``, a search's ``boost``). ``relevance`` is the
    positive BM25 relevance (``-bm25``) when only the lexical leg runs; when several
    legs are fused it is the fused value, which is only meaningful as an ordering
    within one search.

    Attributes:
        bm25_rank: 1-based rank in the lexical leg, or ``None`` if not found there.
        bm25: Raw FTS5 ``bm25()`` value (more negative is better), or ``None``.
        vector_rank: 1-based rank in the vector leg, or ``None``.
        cosine: Cosine similarity to the query in the vector leg, or ``None``.
        relevance: The relevance the multipliers were applied to.
        decay: ``exp(-age / tau)``; 1.0 when the slot does not decay.
        age_days: Age of the memory in days at the search's ``now``, counted from when
            it was said (``observed_at``), as decay is.
        reinforcement: ``exp(0.2 * score)``.
        confidence: The fact's confidence.
        final: The score the hits were ordered by, within each of two groups: the
            candidates a leg found within the store's ``candidate_pool`` come first,
            those only found deeper (a search asking for more than the pool) after
            them, whatever their scores; a reranker's order, when one runs, stands.
        rank: 1-based position in the returned list.
        extra: Additional signals: the multipliers above, and ``link_strength`` or
            ``reranked_from`` (the rank before a reranker moved it).
        hides: How many near-duplicates this fact supersedes (hidden from search).
        linked_from: The hit whose co-recall link pulled this fact in (it did
            not match the query itself), or ``None``.
        ranked_at: The moment (Unix seconds) ages and decay were counted to:
            the search's ``now``.
        fill: How a memory section came to offer the hit: ``None`` for a
            match it offered first; after the matches ran out, with room left,
            ``"below_cut"`` (a match of the same search scoring under the
            section's ``min_share`` of the best) or ``"relaxed"`` (found only
            by the relaxed query, which keeps the words a search leaves out
            for being common to much of the store); ``"relaxed"`` too on a hit
            of :meth:`~ctxslots.FactStore.search` when the query's other words
            found nothing.
    """

    bm25_rank: int | None
    bm25: float | None
    relevance: float
    decay: float
    age_days: float
    reinforcement: float
    confidence: float
    final: float
    rank: int
    vector_rank: int | None = None
    cosine: float | None = None
    # Compared, not hashed (a dict has no hash): equal traces still hash alike.
    extra: Mapping[str, float] = attrs.field(factory=dict, hash=False)
    hides: int = 0
    linked_from: int | None = None
    ranked_at: float | None = None
    fill: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Return the trace as JSON-ready data."""
        out: dict[str, Any] = attrs.asdict(self, recurse=False)
        out["extra"] = dict(self.extra)
        return out


@attrs.frozen
class Hit:
    """A fact returned by a search, with the trace of how it was ranked.

    Attributes:
        fact: The fact, as it was when read (its access count already includes
            this search).
        trace: The retrieval trace.
    """

    fact: Fact
    trace: HitTrace

    @property
    def score(self) -> float:
        """The final score (shortcut for ``trace.final``)."""
        return self.trace.final

    def to_dict(self) -> dict[str, Any]:
        """Return the fact's fields plus ``"trace"``, as JSON-ready data."""
        out = self.fact.to_dict()
        out["trace"] = self.trace.to_dict()
        return out


def _part_text(part: object) -> str:
    """The text of one content part: a ``{"type": "text", "text": ...}`` part's text (as
    a content of no text, ``""`` when it has none), or a plain string, as LangChain's
    content lists hold; ``""`` for a part of no text (an image, audio)."""
    if isinstance(part, str):
        return plain_text(part)
    if isinstance(part, Mapping) and part.get("text") is not None:
        return plain_text(part["text"])
    return ""


def plain_text(value: object) -> str:
    """``value`` as text; a ``str`` subclass (a member of a ``str`` enum, whose ``str()``
    is its name, ``"Role.USER"``) as the characters it holds (``"user"``)."""
    return str.__str__(value) if isinstance(value, str) else str(value)


#: The roles a chat-completions message may have.
MESSAGE_ROLES = ("system", "user", "assistant", "tool")


@attrs.frozen
class Message:
    """One conversation message, OpenAI style.

    Attributes:
        role: ``"system"``, ``"user"``, ``"assistant"`` or ``"tool"``.
        content: The text of the message.
        id: Optional caller-assigned id, recorded as the source of facts.
    """

    role: str
    content: str
    id: str | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Message:
        """Build a message from an OpenAI-style ``{"role", "content"}`` mapping.

        A content given as a list of parts is the text of its ``"text"`` parts and plain
        strings, joined; parts of no text (images, audio) are left out.

        :raises InvalidArgumentError: ``data`` is not a mapping.
        """
        if not isinstance(data, Mapping):
            raise InvalidArgumentError(f"a message must be a mapping with 'role' and 'content', "
                                       f"not {data!r}", field="data", value=data)
        content = data.get("content")
        if isinstance(content, Mapping):  # one content part, not in a list
            content = [content]
        if isinstance(content, list):  # content parts: keep the text ones
            content = "".join(_part_text(p) for p in content)
        msg_id = data.get("id")
        return cls(
            role=plain_text(data.get("role", "")),
            content="" if content is None else plain_text(content),
            id=None if msg_id is None else plain_text(msg_id),
        )

    def to_dict(self) -> dict[str, str]:
        """Return ``{"role", "content"}``, and ``"id"`` when the message has one.

        :meth:`from_dict` reads it back whole: a conversation kept this way between
        runs keeps its ids, which the flusher's record of what it read includes.
        For a chat-completions request use :meth:`to_chat`.
        """
        out = self.to_chat()
        if self.id is not None:
            out["id"] = self.id
        return out

    def to_chat(self) -> dict[str, str]:
        """Return ``{"role", "content"}`` for a chat-completions request."""
        return {"role": self.role, "content": self.content}
