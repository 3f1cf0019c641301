"""The inspector: why a fact is in a prompt or not, and a local web app over a store.

:func:`explain` answers "why is this fact (not) in the prompt for this message?"
(``ctxslots why``); :mod:`ctxslots.inspector.app` is the web app ``ctxslots ui``
serves (it needs the ``ui`` extra). Both go through :class:`~ctxslots.FactStore`
and :class:`~ctxslots.PromptAssembler` like any caller.
"""

from __future__ import annotations

from .why import OUTCOMES, Explanation, Step, explain

__all__ = ["OUTCOMES", "Explanation", "Step", "explain"]
