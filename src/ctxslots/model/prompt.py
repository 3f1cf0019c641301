"""An assembled prompt: the sections and items contributors offer, and what became of them."""

from __future__ import annotations

import datetime as dt
import enum
from collections.abc import Iterable
from typing import Any

import attrs

from .._readable import count
from .._readable import share as percent
from ..errors import InvalidRequestError
from .facts import Fact, HitTrace

__all__ = ["DEFAULT_PRIORITY", "DUMP_SCHEMA_VERSION", "NEAR_ZERO_RELEVANCE", "REPR_TEXT_CHARS",
           "AssembledPrompt", "DropReason", "Item", "ItemDecision", "Section", "SectionReport",
           "trace_signals"]


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


#: The reasons a contributor may give for an item it offers already dropped; the others
#: (``budget``, ``header_does_not_fit``, ``contributor_error``) are the assembler's to give.
CONTRIBUTOR_DROP_REASONS = frozenset({DropReason.SLOT_LIMIT, DropReason.THRESHOLD,
                                      DropReason.DUPLICATE})


def _optional_reason(value: DropReason | str | None) -> DropReason | None:
    if value is None:
        return None
    try:
        reason = DropReason(value)
    except ValueError:
        raise _invalid("dropped", f"unknown drop reason {value!r}", value) from None
    if reason not in CONTRIBUTOR_DROP_REASONS:
        # A dump would say the budget (or an error) dropped an item that was never placed.
        raise _invalid("dropped", f"an item is offered dropped for slot_limit, threshold or "
                       f"duplicate, not {reason.value} (the assembler's to decide)", value)
    return reason


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


def _items(value: Iterable[Item]) -> tuple[Item, ...]:
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
        when: When the entry was said, as the prompt shows it ("8 May 2023",
            "3 months ago"), or ``None`` to show no time; the built-in item
            template puts it after the text, or, in a section with a
            ``group_template``, its group's heading says it; the budget counts it.
    """

    text: str
    key: str | None = None
    fact: Fact | None = None
    trace: HitTrace | None = None
    dropped: DropReason | None = attrs.field(default=None, converter=_optional_reason)
    detail: str | None = None
    profile: bool = False
    when: str | None = None

    def __attrs_post_init__(self) -> None:
        # A memory section offers a hundred items a turn: one test of the usual
        # types first, the field-by-field checks (and their errors) only when it fails.
        if type(self.text) is str and type(self.profile) is bool \
                and (self.key is None or type(self.key) is str) \
                and (self.fact is None or type(self.fact) is Fact) \
                and (self.trace is None or type(self.trace) is HitTrace) \
                and (self.detail is None or type(self.detail) is str) \
                and (self.when is None or type(self.when) is str):
            return
        for attribute in attrs.fields(Item):
            check = _ITEM_CHECKS.get(attribute.name)
            if check is not None:
                check(self, attribute, getattr(self, attribute.name))


_ITEM_CHECKS = {
    "text": _is(str), "key": _is(str, optional=True), "fact": _is(Fact, optional=True),
    "trace": _is(HitTrace, optional=True), "detail": _is(str, optional=True),
    "profile": _is(bool), "when": _is(str, optional=True),
}


#: A section's priority when neither it nor its contributor names one.
DEFAULT_PRIORITY = 50


@attrs.frozen
class Section:
    """What one contributor offers for one turn: a titled list of ranked items.

    Items come best first; when the budget is short the last ones go first.
    Malformed fields raise :class:`~ctxslots.InvalidRequestError`.

    Attributes:
        title: The heading shown to the model (kept on one line).
        items: The ranked items, best first.
        priority: Higher is kept longer; ``None`` (the default): the contributor's
            ``priority``, filled in by the assembler (:data:`DEFAULT_PRIORITY` when
            no one names one).
        sticky: Placed before every non-sticky section; ``None`` (the default): the
            contributor's ``sticky``, filled in by the assembler.
        name: Unique name; the assembler fills in the contributor's name when empty,
            and a contributor's section named otherwise is an error section.
        intro: An optional line under the heading.
        header_template: Template that renders the heading (and intro).
        item_template: Template that renders one item.
        group_template: Template that renders the heading of the items said at
            one time (the same :attr:`Item.when`), or ``None`` (the default).
            With it, each item with a ``when`` is shown under its time's
            heading, rendered without it, so a date the lines share costs its
            tokens once: the items with no ``when`` come first under no heading,
            then each time's group in the order of its best item, and items
            keep their rank order within a group.
        stop_note: Why the contributor offered no more items (for instance
            "no more facts match the message"); shown in the dump, never in
            the prompt.
        fills: The section offers more items than may fit, to fill the budget
            (as the memory sections do): a sticky one whose last items do not
            fit has not overflowed, as long as it keeps one.
    """

    title: str = attrs.field(validator=_is(str))
    items: tuple[Item, ...] = attrs.field(default=(), converter=_items)
    priority: int | None = attrs.field(default=None, validator=_is(int, optional=True))
    sticky: bool | None = attrs.field(default=None, validator=_is(bool, optional=True))
    name: str = attrs.field(default="", validator=_is(str))
    intro: str | None = attrs.field(default=None, validator=_is(str, optional=True))
    header_template: str = attrs.field(default="section_header.md.j2", validator=_is(str))
    item_template: str = attrs.field(default="item.md.j2", validator=_is(str))
    group_template: str | None = attrs.field(default=None, validator=_is(str, optional=True))
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
        group_tokens: What the headings of the times its kept items were said (a
            section grouped by date) cost; ``tokens`` is ``header_tokens``, this and
            its kept items' tokens (0 unless kept).
        tokens: What it adds to the prompt (0 unless kept).
        items: One decision per item, in rank order.
        stopped: Why the section holds no more items: the reason and note of
            the first item after the last kept one that was not taken (a
            duplicate aside), else the contributor's :attr:`Section.stop_note`.
        room: The tokens its contributor was told the sections placed before it
            left (what their matches left: their fill comes after this section's
            matches), or ``None`` when it was not told (asked with the others at
            once, by :meth:`~ctxslots.PromptAssembler.aassemble`).
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
    group_tokens: int = 0
    stopped: str | None = None
    room: int | None = None


# -- the dump's data (schema in docs/assembler.md) ---------------------------

#: Version of the JSON layout; bumped when a field changes meaning or goes away.
DUMP_SCHEMA_VERSION = 1

#: A kept item whose relevance is under this share of the best relevance in the
#: prompt counts as near zero (and is flagged when a more relevant item was dropped).
NEAR_ZERO_RELEVANCE = 0.05

#: Drops that do not make a kept item suspicious: the dropped item is shown elsewhere.
_NOT_A_LOSS = {"duplicate"}


def trace_signals(trace: HitTrace) -> dict[str, Any]:
    """The per-signal values of a retrieval trace, and its final rank."""
    out: dict[str, Any] = {
        "rank": trace.rank,
        "bm25": trace.bm25,
        "bm25_rank": trace.bm25_rank,
        "vector_rank": trace.vector_rank,
        "cosine": trace.cosine,
        "decay": trace.decay,
        "age_days": trace.age_days,
        "reinforcement": trace.reinforcement,
        "confidence": trace.confidence,
    }
    if trace.extra:
        out["extra"] = {k: trace.extra[k] for k in sorted(trace.extra)}
    out["fill"] = trace.fill
    out["linked_from"] = trace.linked_from
    return out


def _item(decision: ItemDecision) -> dict[str, Any]:
    item, fact = decision.item, decision.item.fact
    return {
        "rank": decision.rank,
        "decision": "kept" if decision.kept else "dropped",
        "reason": None if decision.reason is None else decision.reason.value,
        "detail": decision.detail,
        "tokens": decision.tokens,
        "text": item.text,
        "when": item.when,
        "key": item.key,
        "profile": item.profile,
        "fact": None if fact is None else {
            "id": fact.id, "slot": fact.slot, "scope": fact.scope, "key": fact.key,
            "tags": list(fact.tags), "source": fact.source,
        },
        "trace": None if item.trace is None else trace_signals(item.trace),
    }


def _section(report: SectionReport) -> dict[str, Any]:
    return {
        "name": report.name,
        "title": report.title,
        "priority": report.priority,
        "sticky": report.sticky,
        "status": report.status,
        "reason": None if report.reason is None else report.reason.value,
        "error": report.error,
        "header_tokens": report.header_tokens,
        "group_tokens": report.group_tokens,
        "tokens": report.tokens,
        "stopped": report.stopped,
        "items": [_item(d) for d in report.items],
    }


def _iso(seconds: float) -> str:
    """A moment in ISO 8601, in UTC."""
    return dt.datetime.fromtimestamp(seconds, dt.UTC).isoformat()


def _prompt_to_dict(prompt: AssembledPrompt) -> dict[str, Any]:
    """The JSON dump's data, schema version :data:`DUMP_SCHEMA_VERSION`."""
    sections = [_section(s) for s in prompt.sections]
    _flag_low_relevance(prompt, sections)
    return {
        "schema_version": DUMP_SCHEMA_VERSION,
        "budget": prompt.budget,
        "safety_margin": prompt.safety_margin,
        "answer_reserve": prompt.answer_reserve,
        "available": prompt.available,
        "total_tokens": prompt.total_tokens,
        "encoding": prompt.encoding,
        "sticky_overflow": prompt.sticky_overflow,
        "message": prompt.message,
        "scope": prompt.scope,
        "user": prompt.user,
        "agent": prompt.agent,
        "now": None if prompt.now is None else _iso(prompt.now),
        "flagged": sum(1 for s in sections for i in s["items"] if i["warning"]),
        "sections": sections,
        "text": prompt.text,
    }


def _flag_low_relevance(prompt: AssembledPrompt, sections: list[dict[str, Any]]) -> None:
    """Give each item its ``relevance_share`` and a ``warning`` when it was kept with
    near-zero relevance while a more relevant item was dropped (the first thing a
    person asks of a prompt that went wrong).

    The share is the item's trace relevance over the best relevance of any traced
    item in the prompt, kept or dropped. With fused legs the relevance is a fused
    rank value, which keeps shares well above zero: the flag then rarely fires.
    """
    relevances = [decision.item.trace.relevance if decision.item.trace else None
                  for report in prompt.sections for decision in report.items]
    best = max((r for r in relevances if r is not None), default=0.0)
    rows = [(section, item) for section in sections for item in section["items"]]
    for relevance, (_, item) in zip(relevances, rows, strict=True):
        item["relevance_share"] = None if relevance is None or best <= 0 else relevance / best
        item["warning"] = None
    lost = [(section, item) for section, item in rows if item["decision"] == "dropped"
            and item["reason"] not in _NOT_A_LOSS and item["relevance_share"] is not None]
    for _, item in rows:
        share = item["relevance_share"]
        if item["decision"] != "kept" or share is None or share >= NEAR_ZERO_RELEVANCE:
            continue
        better = [(s, i) for s, i in lost if i["relevance_share"] > share]
        if not better:
            continue
        section, dropped = max(better, key=lambda pair: pair[1]["relevance_share"])
        item["warning"] = (
            f"kept with {percent(share)} of the best relevance while a more relevant item "
            f"({percent(dropped['relevance_share'])}, {section['name']} rank {dropped['rank']}) "
            f"was dropped ({dropped['reason']})")


#: Characters of the text and the message an :class:`AssembledPrompt`'s repr shows.
REPR_TEXT_CHARS = 200


def _short_text(text: str) -> str:
    """A long text in a repr: its start and its length."""
    if len(text) <= REPR_TEXT_CHARS:
        return repr(text)
    return f"{text[:REPR_TEXT_CHARS]!r}... ({len(text)} characters)"


def _section_counts(sections: tuple[SectionReport, ...]) -> str:
    """The sections in a repr: what became of each, not every item (a prompt of a large
    budget offers thousands, each with its fact and trace)."""
    return "(" + ", ".join(
        f"<{s.name}: {s.status}, {sum(1 for d in s.items if d.kept)} of "
        f"{count(len(s.items), 'item')}, {count(s.tokens, 'token')}>" for s in sections) + ")"


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
        user: The user the prompt was assembled for (``None``: the store's default).
        agent: The agent it was assembled for (``None``: the store's default).
        now: The moment its memories were ranked at, in Unix seconds: the request's
            ``now``, from which the ages and dates its items show count; else the
            store's clock as the assembly began, and then each memory section ranks
            from the store's clock as it searches, later by the time the sections
            asked before it took (``None``: no store clock to read, or one that
            raised or read no time a store keeps).

    Its repr shows the start of the text and of the message, and what became of each
    section; :meth:`dump` shows every item.
    """

    text: str = attrs.field(repr=_short_text)
    total_tokens: int
    budget: int
    safety_margin: int
    answer_reserve: int
    encoding: str
    message: str = attrs.field(repr=_short_text)
    scope: str | None
    sections: tuple[SectionReport, ...] = attrs.field(repr=_section_counts)
    sticky_overflow: bool = False
    user: str | None = None
    agent: str | None = None
    now: float | None = None

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

    def to_dict(self) -> dict[str, Any]:
        """The JSON dump's data (schema version :data:`DUMP_SCHEMA_VERSION`, documented
        in ``docs/assembler.md``): every item kept or dropped with its raw signals."""
        return _prompt_to_dict(self)

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
        # until it is dumped; the renderer reads the dump's data, not this class.
        from ..prompts.dump import render_dump

        return render_dump(self.to_dict(), format, environment=environment)
