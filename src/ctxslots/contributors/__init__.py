"""Contributors: each offers one section of context per turn."""

from __future__ import annotations

from .base import Contributor, SearchableStore, StaticContributor, check_contributor
from .memory import (
    AgentMemoryContributor,
    MemoryContributor,
    ProjectMemoryContributor,
    UserMemoryContributor,
)

__all__ = [
    "AgentMemoryContributor",
    "Contributor",
    "MemoryContributor",
    "ProjectMemoryContributor",
    "SearchableStore",
    "StaticContributor",
    "UserMemoryContributor",
    "check_contributor",
]
