"""ctxslots' own contributors, registered like any plugin's."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..hookspecs import hookimpl
from .memory import (
    AgentMemoryContributor,
    ProjectMemoryContributor,
    UserMemoryContributor,
)


@hookimpl(trylast=True)
def register_slots(register: Callable[..., None]) -> None:
    """Register the built-in slots, with whose facts each holds."""
    register("user", "Who the user is: name, role, preferences, habits, tools.", "user")
    register("project", "Facts about the current workspace: commands, conventions, decisions.",
             "scope")
    register("agent", "Lessons the agent learned about doing its work.", "agent+scope")


@hookimpl(trylast=True)
def register_contributors(register: Callable[[Any], None], store: Any) -> None:
    """Register the user, project and agent memory contributors over ``store``."""
    if store is None:
        return
    register(UserMemoryContributor(store))
    register(ProjectMemoryContributor(store))
    register(AgentMemoryContributor(store))
