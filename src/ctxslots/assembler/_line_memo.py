"""Rendered item lines remembered by text, for item templates that read nothing else.

An assembly renders every item a memory section offers (a hundred or more
at a 2,000-token budget) through jinja2, about 35 microseconds each, and the
same facts come back turn after turn. The built-in item template reads only
``item.text`` and ``item.when``; for such a template the line is a function of
those two, so it is rendered once and remembered (per environment and template).

A template qualifies when its only variable is ``item``, read only as
``item.text`` or ``item.when`` (:data:`LINE_FIELDS`), through no filters but the
pure ones listed here, and it includes, imports or extends nothing. Anything
else (``rank``, ``section``, the trace, a plugin's filter or global) renders
every time.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Hashable

import jinja2
from jinja2 import nodes

__all__ = ["LineMemo", "memo_for"]

#: Filters whose output depends on their input alone.
PURE_FILTERS = frozenset({
    "bullet", "md_cell", "fence_for", "capitalize", "center", "e", "escape", "indent", "lower",
    "replace", "string", "striptags", "title", "trim", "truncate", "upper", "wordwrap",
})
#: Lines kept per template before the memo starts over.
MAX_LINES = 50_000
#: The item fields a remembered line may depend on (the memo's key).
LINE_FIELDS = frozenset({"text", "when"})


def _pure_tree(env: jinja2.Environment, name: str) -> nodes.Template | None:
    """Template ``name`` parsed, when it includes, imports, extends and calls nothing
    and uses only pure filters; else ``None``."""
    if env.loader is None:
        return None
    try:
        source, _, _ = env.loader.get_source(env, name)
        tree = env.parse(source)
    except jinja2.TemplateError:
        return None
    if any(True for _ in tree.find_all((nodes.Include, nodes.Import, nodes.FromImport,
                                        nodes.Extends, nodes.Call))):
        return None
    if any(f.name not in PURE_FILTERS for f in tree.find_all(nodes.Filter)):
        return None
    return tree


def reads_only_item_text(env: jinja2.Environment, name: str) -> bool:
    """Whether template ``name`` reads nothing but ``item.text`` and ``item.when``
    (see the module's notes)."""
    tree = _pure_tree(env, name)
    if tree is None:
        return False
    texts = {id(g.node) for g in tree.find_all(nodes.Getattr)
             if g.attr in LINE_FIELDS and isinstance(g.node, nodes.Name)
             and g.node.name == "item"}
    return all(id(n) in texts for n in tree.find_all(nodes.Name))


def reads_only_when(env: jinja2.Environment, name: str) -> bool:
    """Whether group heading template ``name`` reads nothing but ``when``, through
    pure filters (its heading is then a function of ``when`` alone)."""
    tree = _pure_tree(env, name)
    return tree is not None and all(n.name == "when" for n in tree.find_all(nodes.Name))


class LineMemo:
    """The lines of one environment's item templates that read only ``item.text``
    and ``item.when``, and the headings of its group templates that read only
    ``when``."""

    def __init__(self, env: jinja2.Environment) -> None:
        self._env = weakref.ref(env)
        self._qualifies: dict[tuple[str, Callable[..., bool]], bool] = {}
        self._lines: dict[tuple[str, Callable[..., bool]], dict[Hashable, str]] = {}

    def line(self, name: str, text: Hashable, render: Callable[[], str]) -> str:
        """The line of ``text`` (the item's text, or its text and ``when`` as a
        tuple) through template ``name``: remembered, or ``render()``."""
        return self._remembered(name, text, render, reads_only_item_text)

    def heading(self, name: str, when: str, render: Callable[[], str]) -> str:
        """The group heading of ``when`` through template ``name``: remembered
        when the template reads nothing else, or ``render()``."""
        return self._remembered(name, when, render, reads_only_when)

    def _remembered(self, name: str, key: Hashable, render: Callable[[], str],
                    qualifier: Callable[[jinja2.Environment, str], bool]) -> str:
        which = (name, qualifier)
        qualifies = self._qualifies.get(which)
        if qualifies is None:
            env = self._env()
            qualifies = self._qualifies[which] = env is not None and qualifier(env, name)
        if not qualifies:
            return render()
        lines = self._lines.setdefault(which, {})
        found = lines.get(key)
        if found is None:
            found = render()
            if len(lines) >= MAX_LINES:
                lines.clear()
            lines[key] = found
        return found


_lock = threading.Lock()
_memos: weakref.WeakKeyDictionary[jinja2.Environment, LineMemo] = weakref.WeakKeyDictionary()


def memo_for(env: jinja2.Environment) -> LineMemo:
    """The memo of ``env`` (one per environment, dropped with it)."""
    memo = _memos.get(env)
    if memo is None:
        with _lock:
            memo = _memos.get(env)
            if memo is None:
                memo = _memos[env] = LineMemo(env)
    return memo
