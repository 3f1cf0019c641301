"""Hook specifications: how plugins extend ctxslots.

A plugin is any object (often a module) with functions marked ``@hookimpl``
whose names match the specs below. Implementations may accept fewer arguments
than the spec, and must not give parameters defaults. Plugins are found through
the ``ctxslots`` entry-point group or passed to ``PromptAssembler(plugins=...)``.

Each ``register_*`` hook receives a ``register`` callback: call it once per
object you provide. The host checks names, rejects duplicates and remembers
which plugin registered what.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pluggy

__all__ = ["PROJECT_NAME", "hookimpl", "hookspec"]

#: The pluggy project name and the entry-point group plugins are found under.
PROJECT_NAME = "ctxslots"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


@hookspec
def register_contributors(register: Callable[[Any], None], store: Any) -> None:
    """Register contributors: objects that offer one section of context per turn.

    Called once per :class:`~ctxslots.PromptAssembler` that is not given an
    explicit list of contributors.

    :param register: Call ``register(contributor)`` for each contributor. A
        contributor has ``name`` (unique), ``priority`` (higher is kept longer),
        ``sticky`` (always placed first) and ``contribute(request) -> Section | None``
        (a plain or ``async`` method).
    :param store: The assembler's :class:`~ctxslots.FactStore`, or ``None``
        when it has none.
    """


@hookspec
def register_slots(register: Callable[..., None]) -> None:
    """Register memory slots, so a store opened by the command line accepts them.

    A store refuses slots it does not know (a mistyped ``projects`` would otherwise
    be stored where no contributor looks). The built-in ``user``, ``project`` and
    ``agent`` are registered this way, with ``trylast=True``.

    :param register: Call ``register(name, description, owners="scope")``: the
        slot name (a lower-case letter, then lower-case letters, digits, ``_`` or
        ``-``), one sentence on what it holds, and whose facts it holds:
        ``"user"`` (each fact is a user's), ``"agent"``, ``"scope"`` (a
        workspace's, or global: the default), or a ``+``-joined mix such as
        ``"agent+scope"`` (see :class:`ctxslots.SlotOwners`).
    """


@hookspec
def register_embedders(register: Callable[[str, Callable[[str], Any]], None]) -> None:
    """Register embedders by name, for ``--embedder NAME:ARG`` and ``CTXSLOTS_EMBEDDER``.

    :param register: Call ``register(name, factory)``; ``factory(arg)`` returns an
        embedder (``model_id``, ``dimension``, ``embed(texts)``).
    """


@hookspec
def register_llm_clients(register: Callable[[str, Callable[..., Any]], None]) -> None:
    """Register LLM client factories by name, for the flusher.

    :param register: Call ``register(name, factory)``; ``factory(**options)``
        returns an object with ``complete(messages, *, json_schema=None,
        temperature=0.0) -> ChatResult``.
    """


@hookspec
def rerank_hits(query: str, hits: Sequence[Any]) -> Sequence[Any] | None:
    """Reorder the fused candidates of a search before the limit is applied.

    :param query: The user's query text, as given.
    :param hits: The candidate hits, best first.
    :return: The hits in a new order (a subset is allowed), or ``None`` to
        leave them as they are. Each implementation sees the previous one's
        output.
    """


@hookspec
def prepare_jinja2_environment(env: Any) -> None:
    """Adjust the jinja2 environment used for every template (filters, globals).

    :param env: The ``jinja2.Environment`` (``StrictUndefined``, no autoescape).

    An implementation that raises is a :class:`~ctxslots.plugins.PluginError` naming
    its plugin.
    """
