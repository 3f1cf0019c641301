"""An example ctxslots plugin, one use of every hook: a glossary contributor, a slot of
a workspace's own terms (``glossary``) with its memory section, a template filter, a toy
embedder (``--embedder letters``), an offline LLM client (``--client example-offline``)
and a reranker that puts facts naming a glossary term first."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ctxslots import AssemblyRequest, InvalidFactError, Item, MemoryContributor, Section, hookimpl
from ctxslots.flusher import ChatResult

__all__ = ["GLOSSARY", "GLOSSARY_SLOT", "GlossaryContributor", "LetterEmbedder", "OfflineClient"]

#: Terms the team uses, with what they mean.
GLOSSARY: Mapping[str, str] = {
    "canary": "The canary is the 5% deploy that runs for 30 minutes before the full rollout.",
    "freeze": "The freeze stops all deploys from Friday 15:00 to Monday 09:00.",
    "runbook": "Runbooks live in docs/runbooks/, one file per alert.",
}

#: The slot of the terms a workspace defines itself
#: (``ctxslots remember glossary "..." --scope shop-api``).
GLOSSARY_SLOT = "glossary"


class GlossaryContributor:
    """Explains each glossary term the user's message names, in the order they appear."""

    name = "glossary"
    priority = 60
    sticky = False

    def __init__(self, glossary: Mapping[str, str] = GLOSSARY) -> None:
        self.glossary = dict(glossary)

    def contribute(self, request: AssemblyRequest) -> Section | None:
        """A "Glossary" section with the terms found in ``request.message``, or ``None``."""
        words = re.findall(r"[a-z]+", request.message.lower())
        terms = [w for w in dict.fromkeys(words) if w in self.glossary]
        if not terms:
            return None
        return Section(
            title="Glossary",
            items=[Item(text=self.glossary[t], key=f"glossary:{t}") for t in terms],
            priority=self.priority,
        )


@hookimpl
def register_slots(register: Callable[..., None]) -> None:
    """The ``glossary`` slot: each workspace's own terms (or global ones), so a store the
    ``ctxslots`` command opens accepts its facts."""
    register(GLOSSARY_SLOT, "Terms a workspace uses, and what they mean.", "scope")


def _knows_glossary(store: Any) -> bool:
    """Whether ``store`` keeps the glossary slot (one opened with the plugins' slots)."""
    try:
        store.limits.slot(GLOSSARY_SLOT)
    except (AttributeError, InvalidFactError):
        return False
    return True


@hookimpl
def register_contributors(register: Callable[[Any], None], store: Any) -> None:
    """Offer the glossary contributor to every PromptAssembler, and the workspace's own
    terms from the ``glossary`` slot of a store that keeps it."""
    register(GlossaryContributor())
    if store is not None and _knows_glossary(store):
        register(MemoryContributor(store, slot=GLOSSARY_SLOT, name="glossary_memory",
                                   title="Terms of this workspace", priority=60))


@hookimpl
def prepare_jinja2_environment(env: Any) -> None:
    """Add an ``upper_first`` filter that templates may use."""
    env.filters["upper_first"] = lambda text: str(text)[:1].upper() + str(text)[1:]


class LetterEmbedder:
    """A toy embedder: how often each letter a-z occurs, scaled to unit length. No model."""

    dimension = 26

    def __init__(self, arg: str = "") -> None:
        self.model_id = f"letters:{arg or 'v1'}"

    def embed(self, texts: Sequence[str]) -> Any:
        """One unit-length float32 row per text."""
        rows = np.zeros((len(texts), 26), dtype=np.float32)
        for i, text in enumerate(texts):
            for char in text.lower():
                if "a" <= char <= "z":
                    rows[i, ord(char) - 97] += 1.0
        norms = np.linalg.norm(rows, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return rows / norms


class OfflineClient:
    """An LLM client that never calls a model: it answers that there is nothing to remember."""

    name = "example-offline"

    def __init__(self, **options: Any) -> None:
        self.options = options

    def complete(self, messages: Sequence[Any], *, json_schema: Any = None,
                 temperature: float = 0.0) -> ChatResult:
        """No operations, whatever the conversation."""
        return ChatResult(text='{"operations": []}', model="example-offline")


@hookimpl
def register_embedders(register: Callable[[str, Callable[[str], Any]], None]) -> None:
    """``--embedder letters`` (or ``letters:NAME``)."""
    register("letters", LetterEmbedder)


@hookimpl
def register_llm_clients(register: Callable[[str, Callable[..., Any]], None]) -> None:
    """``ctxslots flush --client example-offline``."""
    register("example-offline", OfflineClient)


@hookimpl
def rerank_hits(hits: Sequence[Any]) -> list[Any]:
    """Facts that name a glossary term first; otherwise the order stays."""
    return sorted(hits, key=lambda hit: not any(term in hit.fact.value.lower()
                                                 for term in GLOSSARY))
