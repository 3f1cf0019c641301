"""The plugin manager: built-in plugins, entry-point loading, registration.

Entry points (group ``ctxslots``) are loaded explicitly by :func:`load_plugins`,
never at import time and never while the test suite runs (``CTXSLOTS_LOAD_PLUGINS``
set to an empty string disables them; a comma-separated list allows only those
names). ``CTXSLOTS_TRACE_PLUGINS=1`` prints every hook call to stderr.
"""

from __future__ import annotations

import importlib.metadata
import logging
import os
import re
import sys
from collections.abc import Callable, Iterable
from typing import Any

import pluggy

from . import hookspecs
from .errors import InvalidArgumentError, InvalidFactError, PluginError
from .stores.owners import SlotOwners

__all__ = ["DEFAULT_PLUGINS", "PluginError", "check_manager", "collect", "describe_plugins",
           "embedder_factories", "known_slots", "llm_client_factories", "load_plugins",
           "make_plugin_manager", "prepare_environment", "registered_slots",
           "reranker_from_plugins", "slot_owners"]

logger = logging.getLogger("ctxslots.plugins")

# Allow-lists already warned about (CTXSLOTS_LOAD_PLUGINS values).
_WARNED: set[str] = set()

_SLOT_NAME = re.compile(r"[a-z][a-z0-9_\-]{0,63}")

#: Modules holding ctxslots' own hook implementations, registered first.
DEFAULT_PLUGINS: tuple[str, ...] = ("ctxslots.contributors.builtin", "ctxslots.flusher.builtin",
                                    "ctxslots.stores.embedders.builtin")


def make_plugin_manager(
    plugins: Iterable[object] = (), *, builtins: bool = True, entry_points: bool = False
) -> pluggy.PluginManager:
    """A fresh plugin manager with the specs, the built-ins and the given plugins.

    :param plugins: Objects or modules with ``@hookimpl`` functions.
    :param builtins: Register :data:`DEFAULT_PLUGINS`.
    :param entry_points: Also load the ``ctxslots`` entry-point group
        (see :func:`load_plugins`).
    :raises PluginError: A plugin implements a hook that does not exist (a
        misspelled name) or with arguments the spec does not have.
    """
    pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
    pm.add_hookspecs(hookspecs)
    if builtins:
        import importlib

        for name in DEFAULT_PLUGINS:
            pm.register(importlib.import_module(name), name=name)
    for plugin in plugins:
        _register(pm, plugin)
    if entry_points:
        load_plugins(pm)
    _check_pending(pm)
    if os.environ.get("CTXSLOTS_TRACE_PLUGINS", "").strip().lower() not in _OFF:
        pm.trace.root.setwriter(lambda text: sys.stderr.write(text))
        pm.enable_tracing()
    return pm


#: Values of ``CTXSLOTS_TRACE_PLUGINS`` that leave tracing off (click's false words, as
#: ``CTXSLOTS_FREE_SLOTS`` reads them): ``0`` turned it on.
_OFF = frozenset({"", "0", "false", "f", "no", "n", "off"})


#: The hooks ctxslots calls (the functions of :mod:`ctxslots.hookspecs` marked as specs).
_HOOKS: tuple[str, ...] = tuple(
    name for name, spec in vars(hookspecs).items()
    if callable(spec) and hasattr(spec, f"{hookspecs.PROJECT_NAME}_spec"))


def check_manager(pm: object) -> None:
    """Refuse a plugin manager that does not know ctxslots' hooks.

    A bare ``pluggy.PluginManager`` (or one made for another project) has no
    spec for them: its hook callers are missing, and a plugin's implementations
    would be refused as unknown hooks. :func:`make_plugin_manager` makes one that
    has them.

    :raises InvalidArgumentError: ``pm`` has no spec for one of ctxslots' hooks.
    """
    hook = getattr(pm, "hook", None)
    missing = [name for name in _HOOKS if getattr(getattr(hook, name, None), "spec", None) is None]
    if missing:
        raise InvalidArgumentError(
            f"the plugin manager has no spec for the ctxslots hook {missing[0]!r}: make it "
            "with ctxslots.plugins.make_plugin_manager(), which adds ctxslots' hook specs "
            "and the built-in plugins", field="pm", value=pm)


def _register(pm: pluggy.PluginManager, plugin: object, name: str | None = None) -> None:
    """Register ``plugin`` under ``name`` (else a name of its own); one already
    registered (given twice, or given in code and installed too) is left as it is."""
    if pm.is_registered(plugin):
        return
    try:
        pm.register(plugin, name=name or _free_name(pm, plugin))
    except (pluggy.PluginValidationError, ValueError) as exc:
        raise PluginError(str(exc), plugin=name or _plugin_name(plugin)) from exc


def _check_pending(pm: pluggy.PluginManager) -> None:
    try:
        pm.check_pending()
    except pluggy.PluginValidationError as exc:
        raise PluginError(str(exc), plugin=_plugin_name(exc.plugin)) from exc


def _plugin_name(plugin: object) -> str:
    return str(getattr(plugin, "__name__", None) or type(plugin).__name__)


def _free_name(pm: pluggy.PluginManager, plugin: object) -> str:
    """The name a plugin given without one is registered under, which warnings and errors
    about it show: its module's or class's name, numbered when another plugin has it
    (pluggy's own name for an object is its ``id()``, a number that says nothing)."""
    base = name = _plugin_name(plugin)
    number = 1
    while pm.has_plugin(name):
        number += 1
        name = f"{base}-{number}"
    return name


def load_plugins(pm: pluggy.PluginManager) -> list[str]:
    """Load the ``ctxslots`` entry points into ``pm`` (idempotent); return their names.

    ``CTXSLOTS_LOAD_PLUGINS`` unset loads all; set to a comma-separated list it
    loads only those; set to an empty string it loads none.

    :raises InvalidArgumentError: ``pm`` lacks ctxslots' hook specs (see :func:`check_manager`).
    :raises PluginError: A plugin failed to load or implements a hook that does not exist.
    """
    check_manager(pm)
    allow = os.environ.get("CTXSLOTS_LOAD_PLUGINS")
    if allow is not None and not allow.strip():
        return []
    allowed = {n.strip() for n in allow.split(",") if n.strip()} if allow else None
    installed = list(importlib.metadata.entry_points(group=hookspecs.PROJECT_NAME))
    unknown = (allowed or set()) - {ep.name for ep in installed}
    if unknown and allow not in _WARNED:
        _WARNED.add(allow or "")  # once per process: a command may load the plugins twice
        logger.warning("CTXSLOTS_LOAD_PLUGINS names %s, which no installed plugin provides "
                       "(installed: %s)", ", ".join(sorted(unknown)),
                       ", ".join(sorted(ep.name for ep in installed)) or "none")
    loaded = []
    for ep in installed:
        if allowed is not None and ep.name not in allowed:
            continue
        if pm.get_plugin(ep.name) is not None:
            loaded.append(ep.name)
            continue
        try:
            module = ep.load()
        except Exception as exc:
            raise PluginError(
                f"plugin {ep.name} ({ep.value}) failed to load: {type(exc).__name__}: {exc} "
                "(CTXSLOTS_LOAD_PLUGINS lists the plugins to load; an empty value loads none)",
                plugin=ep.name) from exc
        _register(pm, module, ep.name)
        loaded.append(ep.name)
    _check_pending(pm)
    return loaded


def reranker_from_plugins(pm: pluggy.PluginManager) -> Callable[[str, list[Any]], list[Any]] | None:
    """One reranker chaining every ``rerank_hits`` implementation of a plugin manager.

    Each implementation sees the previous one's output; one that raises, returns no
    list of hits, repeats a hit or returns one it was not given is left out with a
    warning naming its plugin.
    ``None`` when no plugin implements the hook.

    :raises InvalidArgumentError: ``pm`` lacks ctxslots' hook specs (see :func:`check_manager`).
    """
    check_manager(pm)
    if not pm.hook.rerank_hits.get_hookimpls():
        return None

    def rerank(query: str, hits: list[Any]) -> list[Any]:
        for impl in pm.hook.rerank_hits.get_hookimpls():
            try:  # a reranker that fails is left out, named; the others and the hits stay
                results = _caller_for(pm, "rerank_hits", impl)(query=query, hits=hits)
                if results:
                    hits = _reranked(impl.plugin_name, hits, results[0])
            except Exception:
                logger.warning("rerank_hits of plugin %s failed; the hits keep the order "
                               "before it", impl.plugin_name, exc_info=True)
        return hits

    return rerank


def _reranked(plugin: str, hits: list[Any], result: Any) -> list[Any]:
    """A reranker's result as a list of the hits it was given, each once.

    :raises PluginError: It is no sequence, names a hit twice, or one it was not given.
    """
    if isinstance(result, (str, bytes)) or not isinstance(result, Iterable):
        raise PluginError(f"rerank_hits of plugin {plugin} returned "
                          f"{type(result).__name__}, not a list of hits", plugin=plugin)
    reranked = list(result)
    ids = [id(h) for h in reranked]
    if len(set(ids)) != len(ids):
        raise PluginError(f"rerank_hits of plugin {plugin} returned a hit twice; a "
                          "reranker may reorder or drop hits, not repeat them", plugin=plugin)
    given = {_fact_id(h) for h in hits}
    if any(_fact_id(h) not in given for h in reranked):
        # One kept from another search (a cache by query) would be another user's fact.
        raise PluginError(f"rerank_hits of plugin {plugin} returned a hit it was not given; "
                          "a reranker may reorder or drop hits, not add new ones", plugin=plugin)
    return reranked


def _fact_id(hit: Any) -> Any:
    """The id of the fact of ``hit`` (``None`` for what is no hit)."""
    return getattr(getattr(hit, "fact", None), "id", None)


def prepare_environment(pm: pluggy.PluginManager, env: Any) -> None:
    """Call every ``prepare_jinja2_environment`` implementation with ``env``, one plugin
    at a time, in pluggy's order (the last registered first).

    :raises PluginError: An implementation raised; names its plugin.
    :raises InvalidArgumentError: ``pm`` lacks ctxslots' hook specs (see :func:`check_manager`).
    """
    check_manager(pm)
    for impl in reversed(pm.hook.prepare_jinja2_environment.get_hookimpls()):
        try:
            _caller_for(pm, "prepare_jinja2_environment", impl)(env=env)
        except Exception as exc:
            raise PluginError(f"prepare_jinja2_environment of plugin {impl.plugin_name} "
                              f"failed: {type(exc).__name__}: {exc}",
                              plugin=impl.plugin_name) from exc


def _caller_for(pm: pluggy.PluginManager, hook_name: str, impl: Any) -> Any:
    """pluggy's hook caller for ``hook_name`` restricted to the plugin of ``impl``."""
    others = [p for p in pm.get_plugins() if p is not impl.plugin]
    return pm.subset_hook_caller(hook_name, remove_plugins=others)


def collect(pm: pluggy.PluginManager, hook_name: str, **kwargs: Any) -> dict[str, tuple[Any, str]]:
    """Call a ``register_*`` hook and return ``{name: (object, plugin_name)}``.

    Registered objects need a ``name`` attribute (contributors) or are passed as
    ``register(name, factory)`` (embedders, LLM clients). ``kwargs`` are the
    hook's other arguments (``store=`` for ``register_contributors``); each
    implementation gets those it names.

    :raises PluginError: A name is empty, not a string, or registered twice; a
        plugin's implementation raised or returned a value.
    :raises InvalidArgumentError: ``pm`` lacks ctxslots' hook specs (see :func:`check_manager`).
    """
    check_manager(pm)
    found: dict[str, tuple[Any, str]] = {}
    current = [""]

    def register(*args: Any) -> None:
        plugin = current[0]
        if len(args) == 1:
            obj = args[0]
            name = getattr(obj, "name", None)
        elif len(args) == 2:
            name, obj = args
            own = getattr(obj, "name", name)
            if isinstance(own, str) and own != name:  # a contributor goes by its own name
                raise PluginError(f"plugin {plugin} registered {own!r} as {name!r}; register "
                                  "it under its own name (register(obj))", plugin=plugin)
        else:
            raise PluginError(f"register() takes 1 or 2 arguments, got {len(args)}", plugin=plugin)
        if not isinstance(name, str) or not name:
            raise PluginError(f"plugin {plugin} registered an object without a name", plugin=plugin)
        if name in found:
            raise PluginError(
                f"{name!r} registered by {plugin} is already registered by {found[name][1]}",
                plugin=plugin,
            )
        found[name] = (obj, plugin)

    register_fn: Callable[..., None] = register
    # Registration order (trylast built-ins first), so a later duplicate is the one named.
    for impl in getattr(pm.hook, hook_name).get_hookimpls():
        current[0] = impl.plugin_name
        _call_registration(pm, hook_name, impl, register=register_fn, **kwargs)
    return found


def _call_registration(pm: pluggy.PluginManager, hook_name: str, impl: Any,
                       **kwargs: Any) -> None:
    """Call one plugin's ``register_*`` hook implementation.

    :raises PluginError: It raised, or returned a value instead of calling
        ``register`` (which would otherwise be ignored); names the plugin.
    """
    try:
        returned = _caller_for(pm, hook_name, impl)(**kwargs)
    except PluginError:
        raise
    except Exception as exc:
        raise PluginError(f"{hook_name} of plugin {impl.plugin_name} failed: "
                          f"{type(exc).__name__}: {exc}", plugin=impl.plugin_name) from exc
    if any(r is not None for r in returned or ()):
        raise PluginError(f"{hook_name} of plugin {impl.plugin_name} returned a value; "
                          "it registers each object by calling register(...) and returns "
                          "nothing", plugin=impl.plugin_name)


def embedder_factories(pm: pluggy.PluginManager) -> dict[str, Callable[[str], Any]]:
    """``{name: factory}`` from every plugin's ``register_embedders``."""
    return {name: obj for name, (obj, _plugin) in collect(pm, "register_embedders").items()}


def llm_client_factories(pm: pluggy.PluginManager) -> dict[str, Callable[..., Any]]:
    """``{name: factory}`` from every plugin's ``register_llm_clients``."""
    return {name: obj for name, (obj, _plugin) in collect(pm, "register_llm_clients").items()}


def describe_plugins(pm: pluggy.PluginManager) -> list[dict[str, Any]]:
    """Every registered plugin with the hooks it implements, built-ins first, then by name:
    ``{"name", "builtin", "hooks", "version"}`` (the distribution's version for an
    entry-point plugin, else ``None``)."""
    versions = {name: dist.version for dist, name in _entry_point_dists(pm)}
    out = []
    for name, plugin in pm.list_name_plugin():
        if plugin is None:  # blocked
            continue
        hooks = sorted(caller.name for caller in pm.get_hookcallers(plugin) or [])
        out.append({"name": name, "builtin": name in DEFAULT_PLUGINS, "hooks": hooks,
                    "version": versions.get(name)})
    return sorted(out, key=lambda p: (not p["builtin"], p["name"]))


def _entry_point_dists(pm: pluggy.PluginManager) -> list[tuple[Any, str]]:
    found = []
    for dist in importlib.metadata.distributions():
        for ep in dist.entry_points:
            if ep.group == hookspecs.PROJECT_NAME and pm.get_plugin(ep.name) is not None:
                found.append((dist, ep.name))
    return found


def registered_slots(pm: pluggy.PluginManager) -> dict[str, tuple[str, SlotOwners]]:
    """``{name: (description, owners)}`` of every slot registered through
    ``register_slots``, built-ins first, then plugins' slots by name.

    :raises PluginError: A slot name is malformed or registered twice, or its
        owners are not owner kinds; a plugin's ``register_slots`` raised or returned
        a value.
    :raises InvalidArgumentError: ``pm`` lacks ctxslots' hook specs (see :func:`check_manager`).
    """
    check_manager(pm)
    found: dict[str, tuple[str, SlotOwners, str]] = {}
    current = [""]

    def register(name: str, description: str, owners: str | SlotOwners = "scope") -> None:
        plugin = current[0]
        if not isinstance(name, str) or not _SLOT_NAME.fullmatch(name):
            raise PluginError(f"plugin {plugin} registered a malformed slot name {name!r}",
                              plugin=plugin)
        if name in found:
            raise PluginError(f"{name!r} registered by {plugin} is already registered by "
                              f"{found[name][2]}", plugin=plugin)
        try:
            whose = owners if isinstance(owners, SlotOwners) else SlotOwners.parse(owners)
        except (InvalidFactError, AttributeError, TypeError):
            raise PluginError(f"plugin {plugin} registered slot {name!r} with owners "
                              f"{owners!r}: give '+'-joined user, agent, scope",
                              plugin=plugin) from None
        found[name] = (str(description), whose, plugin)

    for impl in pm.hook.register_slots.get_hookimpls():
        current[0] = impl.plugin_name
        _call_registration(pm, "register_slots", impl, register=register)
    builtin = DEFAULT_PLUGINS[0]
    ordered = sorted(found.items(), key=lambda item: (
        item[1][2] != builtin, "" if item[1][2] == builtin else item[0]))
    return {name: (description, whose) for name, (description, whose, _) in ordered}


def known_slots(pm: pluggy.PluginManager) -> dict[str, str]:
    """The slots registered through ``register_slots`` (the built-ins with a manager
    made with ``builtins=True``), each with its description, built-ins first.

    Give the names to a store as ``Limits(slots=...)`` so it accepts them.

    :raises PluginError: A slot name is malformed or registered twice.
    """
    return {name: description for name, (description, _) in registered_slots(pm).items()}


def slot_owners(pm: pluggy.PluginManager) -> dict[str, SlotOwners]:
    """Whose facts each registered slot holds, for ``Limits(slot_owners=...)``.

    :raises PluginError: As :func:`registered_slots`.
    """
    return {name: whose for name, (_, whose) in registered_slots(pm).items()}
