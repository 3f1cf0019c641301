"""Plain data shared by every part of ctxslots: facts, hits, messages and prompts.

These classes know nothing about SQLite, pluggy or jinja2. Timestamps are
timezone-aware UTC :class:`datetime.datetime` values. :class:`AssemblyRequest`
and :class:`ContextBlock` (what the assembler and every contributor read) are
defined in :mod:`ctxslots.request` and importable from here.
"""

from __future__ import annotations

import datetime as dt
import enum
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from .errors import InvalidRequestError
from .request import AssemblyRequest, ContextBlock

__all__ = [
    "AssembledPrompt",
    "AssemblyRequest",
    "ContextBlock",
    "DropReason",
    "Fact",
    "Hit",
    "HitTrace",
    "Item",
    "ItemDecision",
    "Message",
    "Section",
    "SectionReport",
    "from_timestamp",
    "to_timestamp",
]


_UTC = dt.timezone.utc
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
            value = value.replace(tzinfo=dt.timezone.utc)
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
        superseded_by: The id of the newer near-duplicate that hides this fact
            from search (see :meth:`~ctxslots.FactStore.consolidate`), or ``None``.
        context: Words that make the memory findable without being part of it
            (the message it answers, the turns before it): searched by words at
            half weight, never embedded, never shown in a prompt; ``None`` if none.
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

    The final score is ``relevance * decay * reinforcement * confidence``.
    ``relevance`` is the positive BM25 relevance (``-bm25``) when only the
    lexical leg runs; when several legs are fused it is the fused value, which
    is only meaningful as an ordering within one search.

    Attributes:
        bm25_rank: 1-based rank in the lexical leg, or ``None`` if not found there.
        bm25: Raw FTS5 ``bm25()`` value (more negative is better), or ``None``.
        vector_rank: 1-based rank in the vector leg, or ``None``.
        cosine: Cosine similarity to the query in the vector leg, or ``None``.
        relevance: The relevance the multipliers were applied to.
        decay: ``exp(-age / tau)``; 1.0 when the slot does not decay.
        age_days: Age of the fact in days at search time (since its last update).
        reinforcement: ``exp(0.2 * score)``.
        confidence: The fact's confidence.
        final: The score the hits were ordered by.
        rank: 1-based position in the returned list.
        extra: Additional signals added by boosts or rerankers.
        hides: How many near-duplicates this fact supersedes (hidden from search).
        linked_from: The hit whose co-recall link pulled this fact in (it did
            not match the query itself), or ``None``.
        ranked_at: The moment (Unix seconds) ages and decay were counted to:
            the search's ``now``.
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
    extra: Mapping[str, float] = attrs.field(factory=dict)
    hides: int = 0
    linked_from: int | None = None
    ranked_at: float | None = None

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
        """Build a message from an OpenAI-style ``{"role", "content"}`` mapping."""
        content = data.get("content")
        if isinstance(content, list):  # content parts: keep the text ones
            content = "".join(
                p.get("text", "") for p in content if isinstance(p, Mapping)
            )
        msg_id = data.get("id")
        return cls(
            role=str(data.get("role", "")),
            content="" if content is None else str(content),
            id=None if msg_id is None else str(msg_id),
        )

    def to_dict(self) -> dict[str, str]:
        """Return ``{"role", "content"}`` for a chat-completions request."""
        return {"role": self.role, "content": self.content}


# -- assembly: sections, items and what became of them ------------------------


class DropReason(str, enum.Enum):
    """Why an item offered by a contributor is not in the prompt."""

    #: It did not fit into what was left of the token budget.
    BUDGET = "budget"
    #: It was found, but below the contributor's per-section limit.
    SLOT_LIMIT = "slot_limit"
    #: Its score was under the contributor's minimum.
    THRESHOLD = "threshold"
    #: The same fact or the same text is already offered by an earlier section.
    DUPLICATE = "duplicate"
    #: Its contributor raised (or returned something that is not a section).
    CONTRIBUTOR_ERROR = "contributor_error"
    #: Its section's header alone did not fit, so the section was left out whole.
    HEADER_DOES_NOT_FIT = "header_does_not_fit"


def _invalid(field: str, message: str, value: Any) -> Exception:
    return InvalidRequestError(message, field=field, value=value)


def _optional_reason(value: DropReason | str | None) -> DropReason | None:
    if value is None or isinstance(value, DropReason):
        return value
    try:
        return DropReason(value)
    except ValueError:
        raise _invalid("dropped", f"unknown drop reason {value!r}", value) from None


def _is(kind: type | tuple[type, ...], *, optional: bool = False) -> Any:
    names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)

    def check(_instance: object, attribute: Any, value: Any) -> None:
        if optional and value is None:
            return
        if isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
            raise _invalid(attribute.name, f"{attribute.name} must be {names}, not a bool", value)
        if not isinstance(value, kind):
            raise _invalid(attribute.name,
                           f"{attribute.name} must be {names}, not {type(value).__name__}", value)
    return check


def _items(value: Any) -> tuple[Item, ...]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise _invalid("items", "items must be a sequence of Item", value)
    items = tuple(value)
    for item in items:
        if not isinstance(item, Item):
            raise _invalid("items", f"section items must be Item, not {type(item).__name__}", item)
    return items


@attrs.frozen
class Item:
    """One ranked entry of a section, rendered as one bullet by default.

    Attributes:
        text: The entry itself. It is data: the renderer keeps it on one line.
        key: Identity used to find the same entry in two sections
            (``"fact:12"`` for memory items), or ``None`` to compare by text.
        fact: The fact behind the entry, for memory items.
        trace: How the fact was retrieved and scored, for memory items.
        dropped: Set by a contributor that offers an entry only to show it was
            left out (``slot_limit``, ``threshold``, ``duplicate``).
        detail: A human-readable note on the decision.
        profile: Offered as part of a profile (the slot's most important
            facts, shown whatever the message), not found by the search.
    """

    text: str
    key: str | None = None
    fact: Fact | None = None
    trace: HitTrace | None = None
    dropped: DropReason | None = attrs.field(default=None, converter=_optional_reason)
    detail: str | None = None
    profile: bool = False

    def __attrs_post_init__(self) -> None:
        # A memory section offers a hundred items a turn: one test of the usual
        # types first, the field-by-field checks (and their errors) only when it fails.
        if type(self.text) is str and type(self.profile) is bool \
                and (self.key is None or type(self.key) is str) \
                and (self.fact is None or type(self.fact) is Fact) \
                and (self.trace is None or type(self.trace) is HitTrace) \
                and (self.detail is None or type(self.detail) is str):
            return
        for attribute in attrs.fields(Item):
            check = _ITEM_CHECKS.get(attribute.name)
            if check is not None:
                check(self, attribute, getattr(self, attribute.name))


_ITEM_CHECKS = {
    "text": _is(str), "key": _is(str, optional=True), "fact": _is(Fact, optional=True),
    "trace": _is(HitTrace, optional=True), "detail": _is(str, optional=True),
    "profile": _is(bool),
}


@attrs.frozen
class Section:
    """What one contributor offers for one turn: a titled list of ranked items.

    Items come best first; when the budget is short the last ones go first.
    Malformed fields raise :class:`~ctxslots.InvalidRequestError`.

    Attributes:
        title: The heading shown to the model (kept on one line).
        items: The ranked items, best first.
        priority: Higher is kept longer.
        sticky: Placed before every non-sticky section.
        name: Unique name; the assembler fills in the contributor's name when empty.
        intro: An optional line under the heading.
        header_template: Template that renders the heading (and intro).
        item_template: Template that renders one item.
        stop_note: Why the contributor offered no more items (for instance
            "no more facts match the message"); shown in the dump, never in
            the prompt.
        fills: The section offers more items than may fit, to fill the budget
            (as the memory sections do): a sticky one whose last items do not
            fit has not overflowed, as long as it keeps one.
    """

    title: str = attrs.field(validator=_is(str))
    items: tuple[Item, ...] = attrs.field(default=(), converter=_items)
    priority: int = attrs.field(default=50, validator=_is(int))
    sticky: bool = attrs.field(default=False, validator=_is(bool))
    name: str = attrs.field(default="", validator=_is(str))
    intro: str | None = attrs.field(default=None, validator=_is(str, optional=True))
    header_template: str = attrs.field(default="section_header.md.j2", validator=_is(str))
    item_template: str = attrs.field(default="item.md.j2", validator=_is(str))
    stop_note: str | None = attrs.field(default=None, validator=_is(str, optional=True))
    fills: bool = attrs.field(default=False, validator=_is(bool))


@attrs.frozen
class ItemDecision:
    """What became of one item: kept, or dropped and why.

    Attributes:
        item: The item as offered.
        rank: Its 1-based position in its section.
        kept: Whether its text is in the prompt.
        reason: Why it was dropped (``None`` when kept).
        tokens: What its rendered line costs (counted even when dropped).
        detail: A human-readable note on the decision.
    """

    item: Item
    rank: int
    kept: bool
    reason: DropReason | None = None
    tokens: int = 0
    detail: str | None = None


@attrs.frozen
class SectionReport:
    """What became of one section.

    Attributes:
        name: The section's (contributor's) name.
        title: Its heading.
        priority: Its priority.
        sticky: Whether it was placed with the sticky sections.
        status: ``"kept"`` (in the prompt), ``"dropped"`` (no item fitted),
            ``"empty"`` (nothing to show) or ``"error"`` (the contributor failed).
        reason: Why a dropped or failed section is not in the prompt.
        error: The contributor's error, as ``"Type: message"``.
        header_tokens: What its heading costs, with the blank line before it.
        tokens: What it adds to the prompt (0 unless kept).
        items: One decision per item, in rank order.
        stopped: Why the section holds no more items: the reason and note of
            the first item after the last kept one that was not taken (a
            duplicate aside), else the contributor's :attr:`Section.stop_note`.
    """

    name: str
    title: str
    priority: int
    sticky: bool
    status: str
    reason: DropReason | None = None
    error: str | None = None
    header_tokens: int = 0
    tokens: int = 0
    items: tuple[ItemDecision, ...] = ()
    stopped: str | None = None


@attrs.frozen
class AssembledPrompt:
    """The text that fits the budget, with the decision on every item offered.

    Attributes:
        text: The prompt text, exactly as counted.
        total_tokens: Tokens of ``text`` with ``encoding`` (an exact count).
        budget: The request's token budget.
        safety_margin: Tokens kept free for other tokenizers' larger counts.
        answer_reserve: Tokens kept free for the model's answer.
        encoding: What counted the tokens: the tiktoken encoding, or the counter's name.
        message: The user message the sections were chosen for.
        scope: The workspace, or ``None``.
        sections: One report per section, in placement order.
        sticky_overflow: The sticky sections did not fit whole.
    """

    text: str
    total_tokens: int
    budget: int
    safety_margin: int
    answer_reserve: int
    encoding: str
    message: str
    scope: str | None
    sections: tuple[SectionReport, ...]
    sticky_overflow: bool = False

    @property
    def available(self) -> int:
        """Tokens the text may use: budget minus safety margin and answer reserve."""
        return self.budget - self.safety_margin - self.answer_reserve

    @property
    def kept(self) -> list[ItemDecision]:
        """Every kept item, in prompt order."""
        return [d for s in self.sections for d in s.items if d.kept]

    @property
    def dropped(self) -> list[ItemDecision]:
        """Every dropped item, in placement order."""
        return [d for s in self.sections for d in s.items if not d.kept]

    def section(self, name: str) -> SectionReport:
        """The report of the section called ``name``.

        :raises KeyError: No section has that name.
        """
        for report in self.sections:
            if report.name == name:
                return report
        raise KeyError(name)

    def dump(self, format: str = "json", *, environment: Any = None) -> str:
        """Render a debugging dump: ``"json"``, ``"markdown"`` or ``"html"``.

        The JSON layout is documented in ``docs/assembler.md`` and versioned by
        its ``schema_version`` field.

        :param format: The dump format.
        :param environment: A jinja2 environment for the markdown and HTML
            dumps (default: the built-in templates); see
            :meth:`ctxslots.PromptAssembler.dump` for one with your overrides.
        :raises InvalidRequestError: Unknown format.
        """
        # Imported here: the dump renders with jinja2, which a value does not need
        # until it is dumped. prompts.dump imports this module only for type hints.
        from .prompts.dump import render_dump

        return render_dump(self, format, environment=environment)
