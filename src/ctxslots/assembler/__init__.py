"""The PromptAssembler: sections from contributors, fitted to a token budget.

Asking the contributors (:mod:`._run`, :mod:`._plan`), rendering their lines
(:mod:`._lines`), placing sections (:mod:`._placer`) and fitting the budget
(:mod:`.fit`) each live in their own module. Token counting
(:mod:`ctxslots.tokens`), the templates and dumps (:mod:`ctxslots.prompts`) and
the request (:mod:`ctxslots.request`) are shared with the other parts.
"""

from __future__ import annotations

from .assembler import PromptAssembler

__all__ = ["PromptAssembler"]
