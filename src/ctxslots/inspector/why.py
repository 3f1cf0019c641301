"""Why a fact is in a prompt, or why not: one readable answer, and the data behind it.

:func:`explain` assembles the prompt for a message as the assembler would (no
fact counts as accessed), finds the fact among the items every section
offered, and when it is not there, asks the store where the fact stands in its
section's search (:meth:`RankedSearch.locate
<ctxslots.stores.search.RankedSearch.locate>`) and which words of the message it
holds (:meth:`FactStore.match_words <ctxslots.FactStore.match_words>`). The
answer follows the path a fact takes, and stops at the first step it fails:

1. the fact exists, is live, and its owners are the request's;
2. a section reads its slot, and was searched (the sections before it left room);
3. the search finds it: by words (which query words, which stems, or none
   shared), or by meaning (vector rank and cosine);
4. its rank: the candidate pool, relevance, decay, reinforcement, confidence,
   a boost, a reranker's move;
5. the section offers it: the ``min_share`` cut, the limit, as many as fill its room;
6. the budget keeps it.

Nothing here ranks or fits: the numbers are the store's and the assembler's.
"""

from __future__ import annotations

from typing import Any

import attrs

from ..errors import BudgetExceededError, FactNotFoundError, InvalidRequestError
from ..model import AssembledPrompt, Fact
from ..request import AssemblyRequest
from ..stores import FactStore
from ._steps import Facts, Step, located_steps, offered_steps, owner_step, section_step

__all__ = ["Explanation", "Step", "explain"]

#: Outcomes of an explanation, from the fact's point of view.
OUTCOMES = ("kept", "dropped", "not_offered", "not_found", "not_searched", "not_visible",
            "no_section")


@attrs.frozen
class Explanation:
    """Why one fact is or is not in the prompt for one message.

    Attributes:
        fact: The fact, as stored now.
        request: The request explained (message, owners, budget).
        outcome: One of :data:`OUTCOMES`: ``kept`` (in the prompt), ``dropped``
            (offered, then dropped: budget, limit, threshold, duplicate),
            ``not_offered`` (found by its section's search, not offered),
            ``not_found`` (its section's search does not find it),
            ``not_searched`` (its section was not searched), ``not_visible``
            (archived, expired, hidden, or another owner's), ``no_section`` (no
            section reads its slot).
        summary: The answer in one sentence.
        steps: Each step of the path, with what it said of the fact.
        section: The name of the section that reads its slot, or ``None``.
        prompt: The prompt assembled for the request.
    """

    fact: Fact
    request: AssemblyRequest
    outcome: str
    summary: str
    steps: tuple[Step, ...]
    section: str | None
    prompt: AssembledPrompt

    @property
    def in_prompt(self) -> bool:
        """Whether the fact's text is in the prompt."""
        return self.outcome == "kept"

    def lines(self) -> list[str]:
        """The answer for a person: the summary, then one line per step."""
        marks = {"ok": "+", "fails": "x", "info": "-"}
        return [self.summary, "", *(f"{marks[s.status]} {s.title}: {s.text}"
                                    for s in self.steps)]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data: the answer, each step with its numbers, the fact and the request."""
        request = self.request
        return {
            "fact_id": self.fact.id,
            "outcome": self.outcome,
            "in_prompt": self.in_prompt,
            "summary": self.summary,
            "section": self.section,
            "request": {"message": request.message, "user": request.user,
                        "agent": request.agent, "scope": request.scope,
                        "budget": request.budget, "available": request.available,
                        "now": request.now},
            "steps": [s.to_dict() for s in self.steps],
            "fact": self.fact.to_dict(),
        }


def _assemble(assembler: Any, request: AssemblyRequest) -> AssembledPrompt:
    try:
        prompt: AssembledPrompt = assembler.assemble(request, record_shown=False)
    except BudgetExceededError as exc:  # the prompt with the sticky sections cut to fit
        prompt = exc.prompt
    return prompt


def explain(assembler: Any, request: AssemblyRequest, fact_id: int, *,
            prompt: AssembledPrompt | None = None) -> Explanation:
    """Why the fact ``fact_id`` is, or is not, in the prompt ``assembler`` makes for ``request``.

    :param assembler: A :class:`~ctxslots.PromptAssembler` over a
        :class:`~ctxslots.FactStore`.
    :param prompt: The prompt already assembled for ``request`` by ``assembler``
        (assembled here when not given, without counting any fact as accessed).
    :raises FactNotFoundError: No fact (live, archived or expired) has this id.
    :raises InvalidRequestError: ``request`` is not an :class:`~ctxslots.AssemblyRequest`,
        or the assembler has no :class:`~ctxslots.FactStore`.
    :raises InvalidFactError: ``fact_id`` is not an id.
    """
    store = getattr(assembler, "store", None)
    if not isinstance(store, FactStore):
        raise InvalidRequestError("explaining a fact needs a PromptAssembler over a FactStore",
                                  field="assembler", value=assembler)
    if not isinstance(request, AssemblyRequest):
        raise InvalidRequestError("request must be an AssemblyRequest", field="request",
                                  value=request)
    fact = store.get(fact_id, include_archive=True, include_expired=True)
    if fact is None:
        raise FactNotFoundError(fact_id)
    if prompt is None:
        prompt = _assemble(assembler, request)
    facts = Facts(store, fact, request, prompt, assembler.contributors or ())
    steps: list[Step] = [owner_step(facts)]
    if steps[-1].status == "fails":
        return facts.answer(Explanation, "not_visible", steps)
    section = section_step(facts)
    steps.append(section)
    if facts.contributor is None:
        if facts.decision is None or facts.section is None:
            return facts.answer(Explanation, "no_section", steps)
        # No memory section reads its slot, but a plugin's section offered it its own way.
        steps[-1] = Step("section", "a section offered it", "ok",
                         f"section {facts.section['name']} offered it at rank "
                         f"{facts.decision['rank']} (it reads slot {fact.slot!r} its own way)",
                         {"section": facts.section["name"], "slot": fact.slot})
        outcome = "kept" if facts.decision["decision"] == "kept" else "dropped"
        return facts.answer(Explanation, outcome, steps)
    if section.status == "fails":
        return facts.answer(Explanation, "not_searched", steps)
    found, searched = located_steps(facts)
    steps += found
    if facts.decision is None and not searched:
        return facts.answer(Explanation, "not_found", steps)
    steps += offered_steps(facts)
    outcome = ("not_offered" if facts.decision is None
               else "kept" if facts.decision["decision"] == "kept" else "dropped")
    return facts.answer(Explanation, outcome, steps)
