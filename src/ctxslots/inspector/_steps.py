"""The steps of an explanation (see :mod:`.why`), each from the store's and the prompt's data."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import attrs

from .._readable import count, multiplier, share
from ..contributors.memory import NO_ROOM
from ..model import AssembledPrompt, Fact, HitTrace
from ..prompts.ages import days_in_words
from ..request import AssemblyRequest
from ..stores import FactStore
from ..stores.explain import Located, WordMatch

__all__ = ["Facts", "Step", "located_steps", "offered_steps", "owner_step", "section_step"]

_T = TypeVar("_T")


@attrs.frozen
class Step:
    """One step of a fact's path into a prompt, and what it said of the fact.

    Attributes:
        name: ``owners``, ``section``, ``words``, ``vector``, ``pool``, ``rank``,
            ``search``, ``offer`` or ``budget``.
        title: The step in a few words.
        status: ``ok`` (the fact passed), ``fails`` (the fact stops here) or ``info``.
        text: What it said, in one sentence.
        data: The numbers behind it.
    """

    name: str
    title: str
    status: str
    text: str
    data: dict[str, Any] = attrs.field(factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data."""
        return attrs.asdict(self)


#: How the offer step says a section came to offer a fill item (``HitTrace.fill``).
_FILL_TEXT = {
    "below_cut": ", as fill: a match under the section's min_share of the best, offered once "
                 "the clear matches ran out with room left (those said at the moment of a "
                 "clear match first)",
    "relaxed": ", as fill: found by the relaxed search (every word of the message, the common "
               "ones too) once the matches ran out with room left",
}


def _fill_of(decision: dict[str, Any]) -> str | None:
    """How its section came to offer the item (``HitTrace.fill``), or ``None``."""
    trace = decision.get("trace") or {}
    fill = trace.get("fill")
    return None if fill is None else str(fill)


def _g(value: float) -> str:
    return f"{value:.3g}"


@attrs.define
class Facts:
    """What the steps read: the store, the fact, the request, the prompt, and what each
    step found so far."""

    store: FactStore
    fact: Fact
    request: AssemblyRequest
    prompt: AssembledPrompt
    contributors: Sequence[Any]
    contributor: Any = None
    search_scope: str | None = None
    decision: dict[str, Any] | None = None
    section: dict[str, Any] | None = None
    located: Located | None = None
    words: WordMatch | None = None
    _data: dict[str, Any] = attrs.field(factory=dict)

    def __attrs_post_init__(self) -> None:
        self._data = self.prompt.to_dict()
        readers = [c for c in self.contributors if getattr(c, "slot", None) == self.fact.slot]
        # The scope the fact is seen from: the request's, unless the section reading its
        # slot searches global facts only (with no such section, the request's own).
        self.search_scope = self.request.scope
        if readers:
            self.contributor = readers[0]
            if not getattr(self.contributor, "scoped", True):
                self.search_scope = None
        found = [(s, i) for s in self._data["sections"] for i in s["items"]
                 if i["fact"] is not None and i["fact"]["id"] == self.fact.id]
        kept = [pair for pair in found if pair[1]["decision"] == "kept"]
        if kept or found:
            self.section, self.decision = (kept or found)[0]
        elif self.contributor is not None:
            self.section = next((s for s in self._data["sections"]
                                 if s["name"] == self.contributor.name), None)

    @property
    def now(self) -> float:
        """The moment the request ranks from."""
        return self.request.now if self.request.now is not None else self.store.clock()

    def room(self) -> tuple[int, int, str]:
        """Tokens the sections placed before the fact's section used, the room left, and
        what used them: the room its contributor was told when it was told one (what the
        matches of those sections left: their fill comes after its matches), else what
        those sections hold."""
        name = None if self.section is None else self.section["name"]
        told = next((s.room for s in self.prompt.sections if s.name == name), None)
        if told is not None:
            return self.request.available - told, told, "the matches of the sections"
        used = 0
        for section in self._data["sections"]:
            if section["name"] == name:
                break
            used += section["tokens"]
        return used, max(0, self.request.available - used), "the sections"

    def filling_stopped(self) -> tuple[str, int, str] | None:
        """Where filling stopped before the fact's section: the section, the rank of the
        match (or header) that did not fit, and why; ``None`` if it did not stop there."""
        name = None if self.section is None else self.section["name"]
        for section in self._data["sections"]:
            if section["name"] == name:
                return None
            for item in section["items"]:
                reason, detail = item["reason"], item["detail"] or ""
                if _fill_of(item) is None and (reason == "header_does_not_fit" or (
                        reason == "budget" and detail.startswith("needs "))):
                    return section["name"], int(item["rank"]), f"{reason}: {detail}"
        return None

    def answer(self, kind: Callable[..., _T], outcome: str, steps: list[Step]) -> _T:
        """The explanation of kind ``kind`` with its one-sentence summary."""
        return kind(fact=self.fact, request=self.request, outcome=outcome,
                    summary=self._summary(outcome, steps), steps=tuple(steps),
                    section=None if self.contributor is None else self.contributor.name,
                    prompt=self.prompt)

    def _summary(self, outcome: str, steps: list[Step]) -> str:
        fid, d, s = self.fact.id, self.decision, self.section
        if outcome == "kept" and d is not None and s is not None:
            how = (" as part of the profile" if d["profile"]
                   else " as fill, once the clear matches ran out" if _fill_of(d) else "")
            return f"Fact {fid} is in the prompt: {s['name']} keeps it at rank {d['rank']}{how}."
        if outcome == "dropped" and d is not None and s is not None:
            detail = f": {d['detail']}" if d["detail"] else ""
            return (f"Fact {fid} is not in the prompt: {s['name']} offered it at rank "
                    f"{d['rank']}, then it was dropped ({d['reason']}{detail}).")
        failing = next((step for step in steps if step.status == "fails"), steps[-1])
        return f"Fact {fid} is not in the prompt: {failing.text}."


def owner_step(facts: Facts) -> Step:
    """Whether the fact is live and its owners are the request's."""
    fact, request, store = facts.fact, facts.request, facts.store
    title = "live and visible"
    if fact.archived:
        return Step("owners", title, "fails", "it was forgotten (it is in the archive), and "
                    "searches leave the archive out", {"archived": True})
    if fact.expires_at is not None and fact.expires_at.timestamp() <= facts.now:
        return Step("owners", title, "fails",
                    f"it expired on {fact.expires_at:%Y-%m-%d %H:%M} UTC",
                    {"expires_at": fact.expires_at.isoformat()})
    if fact.superseded_by is not None:
        return Step("owners", title, "fails",
                    f"fact {fact.superseded_by}, a newer near-duplicate, hides it (consolidate)",
                    {"superseded_by": fact.superseded_by})
    said = fact.observed_at or fact.created_at  # what a replay's cut reads
    if request.now is not None and said is not None and said.timestamp() > request.now:
        moment = dt.datetime.fromtimestamp(request.now, dt.UTC)
        return Step("owners", title, "fails",
                    f"it was said on {said:%Y-%m-%d %H:%M} UTC, after the request's moment "
                    f"({moment:%Y-%m-%d %H:%M} UTC): a request read at a moment sees only "
                    "what was said by then", {"said_at": said.isoformat(),
                                              "now": moment.isoformat()})
    user = request.user or store.user
    agent = request.agent or store.agent
    scope = facts.search_scope
    if fact.user is not None and fact.user != user:
        return Step("owners", title, "fails", f"it is the memory of user {fact.user!r}, and "
                    f"the request is for user {user!r}", {"user": fact.user, "asked": user})
    if fact.agent is not None and fact.agent != agent:
        return Step("owners", title, "fails", f"it is a lesson of agent {fact.agent!r}, and "
                    f"the request is for agent {agent!r}", {"agent": fact.agent, "asked": agent})
    if fact.scope is not None and fact.scope != scope:
        where = "names no scope (global facts only)" if scope is None else f"is in {scope!r}"
        seen_by = "request" if facts.contributor is None else "search of its section"
        return Step("owners", title, "fails", f"it belongs to scope {fact.scope!r}, and the "
                    f"{seen_by} {where}", {"scope": fact.scope, "asked": scope})
    where = "no scope" if scope is None else f"scope {scope!r}"
    return Step("owners", title, "ok", f"live, and the request's user {user!r}, agent "
                f"{agent!r} and {where} see it", {"user": user, "agent": agent,
                                                           "scope": scope})


def section_step(facts: Facts) -> Step:
    """Which section reads the fact's slot, and whether it was searched."""
    c, slot = facts.contributor, facts.fact.slot
    if c is None:
        names = ", ".join(sorted(str(getattr(x, "name", "?")) for x in facts.contributors))
        return Step("section", "a section reads its slot", "fails",
                    f"no section reads slot {slot!r} (the sections are {names or 'none'})",
                    {"slot": slot})
    used, room, before = facts.room()
    data = {"section": c.name, "slot": slot, "scope": facts.search_scope, "used_before": used,
            "room": room, "available": facts.request.available}
    if facts.section is not None and facts.section["status"] == "error":
        # The contributor raised or did not answer in time: its section offered nothing,
        # whatever its search would have found.
        data["error"] = facts.section["error"]
        return Step("section", "its section was searched", "fails",
                    f"its section {c.name} failed ({facts.section['error']}), so it offered "
                    "nothing", data)
    stopped = None if facts.section is None else facts.section["stopped"]
    if stopped == NO_ROOM:
        stop = facts.filling_stopped()
        if stop is not None:
            data["stopped_in"] = stop[0]
            return Step("section", "its section was searched", "fails",
                        f"its section {c.name} was not searched: filling stopped in {stop[0]}, "
                        f"placed before it, where item {stop[1]} did not fit ({stop[2]}), and "
                        f"nothing placed after that is kept", data)
        return Step("section", "its section was searched", "fails",
                    f"its section {c.name} was not searched: {before} placed before it used "
                    f"{used} of the {facts.request.available} tokens available", data)
    where = f" in scope {facts.search_scope!r}" if facts.search_scope else ""
    return Step("section", "its section was searched", "ok",
                f"{c.name} searches slot {slot!r}{where}; {before} placed before it used "
                f"{used} of {facts.request.available} tokens, leaving it {room}", data)


def _stems(words: WordMatch, chosen: Sequence[str]) -> str:
    """``billing (as bill), shop``: each word, with its stem where the index changes it."""
    out = []
    for word in chosen:
        stems = [s for s in words.stems.get(word, ()) if s != word]
        out.append(f"{word} (as {'/'.join(stems)})" if stems else word)
    return ", ".join(out)


def _words_step(words: WordMatch, loc: Located) -> Step:
    data = words.to_dict()
    data.update(words_rank=loc.words_rank, bm25=loc.bm25)
    left = ""
    if words.common:
        left += f"; left out as common to much of the store: {', '.join(words.common)}"
    if words.left_out_shared:
        left += ("; it holds words the search leaves out: "
                 + ", ".join(repr(w) for w in words.left_out_shared))
    if not words.words:
        return Step("words", "matched by words", "fails", "the message has no word a search "
                    f"looks for (stop words: {', '.join(words.stop_words) or 'none'}){left}",
                    data)
    if not words.shared and not words.in_context:
        return Step("words", "matched by words", "fails", "it shares no word with the message: "
                    f"the search looks for {_stems(words, words.words)}{left}", data)
    parts = []
    if words.shared:
        parts.append(f"it holds {_stems(words, words.shared)}")
    if words.in_context:
        parts.append(f"its context holds {_stems(words, words.in_context)} (half weight)")
    rank = (f"words rank {loc.words_rank}" if loc.words_rank
            else f"not among the {loc.depth} best word matches")
    return Step("words", "matched by words", "ok", f"{'; '.join(parts)}: {rank}{left}", data)


def _vector_step(facts: Facts, loc: Located) -> Step:
    data = {"vector_rank": loc.vector_rank, "cosine": loc.cosine, "left_out": loc.left_out}
    title = "matched by meaning"
    if not loc.vector_searched:
        status = facts.store.vector_status(facts.fact.id)
        why = ("the store searches by words only" if not status.kept
               else status.describe())
        return Step("vector", title, "info", f"no vector leg: {why}", data)
    if loc.cosine is None:
        return Step("vector", title, "info", "it has no vector (run reindex)", data)
    policy = facts.store.ranking
    if loc.left_out == "vector_only":
        return Step("vector", title, "fails", f"found by meaning alone (rank {loc.vector_rank}, "
                    f"cosine {_g(loc.cosine)}), under the {_g(policy.vector_only_min_cosine)} a "
                    "fact that shares no word needs", data)
    if loc.left_out == "min_cosine":
        return Step("vector", title, "fails", f"cosine {_g(loc.cosine)}, at or under "
                    f"min_cosine {_g(policy.min_cosine)}", data)
    if loc.vector_rank is None:
        return Step("vector", title, "info", f"cosine {_g(loc.cosine)}, not among the "
                    f"{loc.depth} nearest", data)
    return Step("vector", title, "ok", f"vector rank {loc.vector_rank}, cosine "
                f"{_g(loc.cosine)}", data)


def _pool_step(loc: Located) -> Step | None:
    ranks = [r for r in (loc.words_rank, loc.vector_rank) if r is not None]
    if not ranks:
        return None
    data = {"pool": loc.pool, "words_rank": loc.words_rank, "vector_rank": loc.vector_rank}
    if min(ranks) <= loc.pool:
        return Step("pool", "in the candidate pool", "ok",
                    f"within the candidate pool of {loc.pool} (fusion reads that deep)", data)
    return Step("pool", "in the candidate pool", "info", f"deeper than the candidate pool of "
                f"{loc.pool} in every leg that found it: ranked after every fact within it",
                data)


def _rank_text(trace: HitTrace, loc: Located) -> str:
    parts = [f"decay {multiplier(trace.decay)} (said {days_in_words(trace.age_days)})",
             f"reinforcement {multiplier(trace.reinforcement)}",
             f"confidence {multiplier(trace.confidence)}"]
    parts += [f"{name.replace('_', ' ')} {multiplier(value)}"
              for name, value in sorted(trace.extra.items()) if name != "reranked_from"]
    best = f", scoring {share(trace.final / loc.best)} of the best match" if loc.best else ""
    text = f"rank {trace.rank} of {loc.hits}{best}; its relevance times " + ", ".join(parts)
    if "reranked_from" in trace.extra:
        text += f"; a reranker moved it from rank {int(trace.extra['reranked_from'])}"
    if trace.linked_from is not None:
        text += f"; pulled in by its co-recall link to fact {trace.linked_from}"
    return text


def located_steps(facts: Facts) -> tuple[list[Step], bool]:
    """The words, vector, pool and rank steps; whether the section's search finds the fact."""
    store, request, fact = facts.store, facts.request, facts.fact
    ranked = store.search_ranked(request.message, slots=[fact.slot], scope=facts.search_scope,
                                 user=request.user, agent=request.agent, now=request.now)
    loc = facts.located = ranked.locate(fact.id)
    words = facts.words = store.match_words(fact.id, request.message)
    steps = [_words_step(words, loc), _vector_step(facts, loc)]
    pool = _pool_step(loc)
    if pool is not None:
        steps.append(pool)
    if loc.hit is not None:
        # Found all the same (a co-recall link pulled it in, or the other leg found it):
        # a leg that missed it is a note, not where its path stops.
        steps = [attrs.evolve(s, status="info") if s.status == "fails" else s for s in steps]
        trace = loc.hit.trace
        steps.append(Step("rank", "ranked by the search", "ok", _rank_text(trace, loc),
                          {"trace": trace.to_dict(), "hits": loc.hits, "best": loc.best}))
        return steps, True
    if not any(s.status == "fails" for s in steps):
        reason = (f"no leg finds it among the {count(loc.depth, 'best match', 'best matches')}"
                  if pool is None else
                  f"it is not among the first {count(loc.depth, 'hit')}")
        steps.append(Step("search", "found by the search", "fails", reason, {}))
    if facts.decision is not None and (facts.decision["profile"] or _fill_of(facts.decision)):
        # A profile fact is shown whatever the message, and a relaxed search's find
        # fills room the matches left: the message's own search only informs.
        steps = [attrs.evolve(s, status="info") if s.status == "fails" else s for s in steps]
    return steps, False


def offered_steps(facts: Facts) -> list[Step]:
    """Whether the section offered the fact, and what the budget did with it."""
    d, c, loc = facts.decision, facts.contributor, facts.located
    if d is not None:
        data = {"rank": d["rank"], "tokens": d["tokens"], "reason": d["reason"],
                "detail": d["detail"], "profile": d["profile"], "warning": d["warning"]}
        fill = _fill_of(d)
        data["fill"] = fill
        offered = Step("offer", "offered by its section", "ok",
                       f"offered at rank {d['rank']} of its section"
                       + (" as part of the profile (shown whatever the message)"
                          if d["profile"] else _FILL_TEXT.get(fill or "", "")), data)
        if d["decision"] == "kept":
            return [offered, Step("budget", "kept by the budget", "ok",
                                  f"kept: its line costs {d['tokens']} tokens", data)]
        detail = f": {d['detail']}" if d["detail"] else ""
        return [offered, Step("budget", "kept by the budget", "fails",
                              f"dropped ({d['reason']}{detail})", data)]
    if loc is None or loc.hit is None:
        return []
    trace = loc.hit.trace
    items = [] if facts.section is None else [i for i in facts.section["items"]
                                               if i["trace"] is not None]
    found: dict[str, Any] = {"search_rank": trace.rank, "offered": len(items),
                             "stopped": None if facts.section is None
                             else facts.section["stopped"]}
    min_share = float(getattr(c, "min_share", 0.0) or 0.0)
    if getattr(c, "limit", None) is None and min_share and loc.best:
        ratio = trace.final / loc.best
        found.update(share_of_best=ratio, min_share=min_share)
        if ratio < min_share and not getattr(c, "fill", False):
            return [Step("offer", "offered by its section", "fails",
                         f"it scores {share(ratio)} of the best match, under the section's "
                         f"cut of {share(min_share)} (min_share), and the section does not "
                         "fill with such matches", found)]
        if ratio < min_share:
            note = found["stopped"] or "it stopped there"
            return [Step("offer", "offered by its section", "fails",
                         f"it scores {share(ratio)} of the best match, under the section's "
                         f"cut of {share(min_share)} (min_share), so it waits behind the clear "
                         f"matches as fill; the section offered {count(len(items), 'found fact')} "
                         f"before it stopped ({note})", found)]
    note = found["stopped"] or "it stopped there"
    return [Step("offer", "offered by its section", "fails",
                 f"its search ranks it {trace.rank}, and the section offered "
                 f"{count(len(items), 'found fact')} before it stopped ({note})", found)]
