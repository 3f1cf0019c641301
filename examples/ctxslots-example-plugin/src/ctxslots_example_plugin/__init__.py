"""An example ctxslots plugin: a glossary contributor and a template filter."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from ctxslots import AssemblyRequest, Item, Section, hookimpl

__all__ = ["GLOSSARY", "GlossaryContributor"]

#: Terms the team uses, with what they mean.
GLOSSARY: Mapping[str, str] = {
    "canary": "The canary is the 5% deploy that runs for 30 minutes before the full rollout.",
    "freeze": "The freeze stops all deploys from Friday 15:00 to Monday 09:00.",
    "runbook": "Runbooks live in docs/runbooks/, one file per alert.",
}


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
def register_contributors(register: Callable[[Any], None]) -> None:
    """Offer the glossary contributor to every PromptAssembler."""
    register(GlossaryContributor())


@hookimpl
def prepare_jinja2_environment(env: Any) -> None:
    """Add an ``upper_first`` filter that templates may use."""
    env.filters["upper_first"] = lambda text: str(text)[:1].upper() + str(text)[1:]
