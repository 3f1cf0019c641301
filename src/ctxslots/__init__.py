"""ctxslots: decide what an LLM agent sees on each turn.

Memory slots (user, project, agent) live in a fact store (one SQLite file, or
PostgreSQL), belong to a user, an agent or a workspace, are searched by words
and meaning and ranked with decay and reinforcement. This module
re-exports the public API; everything else may change.
"""

from __future__ import annotations

from .assembler import PromptAssembler
from .contributors import (
    AgentMemoryContributor,
    Contributor,
    MemoryContributor,
    ProjectMemoryContributor,
    SearchableStore,
    StaticContributor,
    UserMemoryContributor,
)
from .errors import (
    BudgetExceededError,
    CtxslotsError,
    EmbedderError,
    EncodingError,
    FactNotFoundError,
    FlushError,
    InvalidArgumentError,
    InvalidFactError,
    InvalidRequestError,
    InvalidToolArgumentsError,
    LLMClientError,
    PluginError,
    ReadOnlyStoreError,
    StoreBusyError,
    StoreClosedError,
    StoreDamagedError,
    StoreError,
    StoreFullError,
    TemplateError,
)
from .flusher import FlushPolicy, FlushReport, MemoryFlusher, OpenAIChatClient
from .hookspecs import hookimpl
from .model import (
    AssembledPrompt,
    DropReason,
    Fact,
    Hit,
    HitTrace,
    Item,
    ItemDecision,
    Message,
    Section,
    SectionReport,
)
from .request import AssemblyRequest, ContextBlock
from .stores import (
    ANY,
    ErasureReport,
    FactStore,
    ImportReport,
    InvalidImportError,
    Limits,
    PrunePolicy,
    QueryPolicy,
    RankingPolicy,
    SlotOwners,
    sanitize_query,
)
from .tokens import HuggingFaceCounter, TokenCounter, TokenCounterProtocol, count_tokens
from .tools import MemoryTools

__version__ = "0.1.0"

__all__ = [
    "ANY",
    "AgentMemoryContributor",
    "AssembledPrompt",
    "AssemblyRequest",
    "BudgetExceededError",
    "ContextBlock",
    "Contributor",
    "CtxslotsError",
    "DropReason",
    "EmbedderError",
    "EncodingError",
    "ErasureReport",
    "Fact",
    "FactNotFoundError",
    "FactStore",
    "FlushError",
    "FlushPolicy",
    "FlushReport",
    "Hit",
    "HitTrace",
    "HuggingFaceCounter",
    "ImportReport",
    "InvalidArgumentError",
    "InvalidFactError",
    "InvalidImportError",
    "InvalidRequestError",
    "InvalidToolArgumentsError",
    "Item",
    "ItemDecision",
    "LLMClientError",
    "Limits",
    "MemoryContributor",
    "MemoryFlusher",
    "MemoryTools",
    "Message",
    "OpenAIChatClient",
    "PluginError",
    "ProjectMemoryContributor",
    "PromptAssembler",
    "PrunePolicy",
    "QueryPolicy",
    "RankingPolicy",
    "ReadOnlyStoreError",
    "SearchableStore",
    "Section",
    "SectionReport",
    "SlotOwners",
    "StaticContributor",
    "StoreBusyError",
    "StoreClosedError",
    "StoreDamagedError",
    "StoreError",
    "StoreFullError",
    "TemplateError",
    "TokenCounter",
    "TokenCounterProtocol",
    "UserMemoryContributor",
    "__version__",
    "count_tokens",
    "hookimpl",
    "sanitize_query",
]
