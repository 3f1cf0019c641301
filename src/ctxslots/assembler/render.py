"""The jinja2 environment, and rendering of section headers and items.

Templates live in ``ctxslots/prompts/``. A template of the same name given by
the caller (a mapping of name to source, a directory, or any jinja2 loader)
wins over the built-in one. Every template sees the filters ``bullet``,
``md_cell`` and ``fence_for`` (:mod:`ctxslots.assembler.escape`), and plugins
adjust the environment through the ``prepare_jinja2_environment`` hook.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from typing import Any

import jinja2
import pluggy

from ..errors import TemplateError
from ..model import Item, Section
from .errors import InvalidRequestError
from .escape import bullet, fence_for, md_cell

__all__ = [
    "SECTION_SEPARATOR",
    "Templates",
    "default_environment",
    "make_environment",
    "render_template",
]

#: Put between two sections in the prompt.
SECTION_SEPARATOR = "\n"

#: What ``templates=`` accepts: template sources by name, or a directory.
Templates = Mapping[str, str] | str | os.PathLike[str]


def _user_loader(templates: Templates | None, loader: jinja2.BaseLoader | None) -> list[Any]:
    loaders: list[jinja2.BaseLoader] = []
    if templates is not None:
        if isinstance(templates, Mapping):
            if not all(isinstance(k, str) and isinstance(v, str) for k, v in templates.items()):
                raise InvalidRequestError("templates must map names to template source strings",
                                          field="templates", value=templates)
            loaders.append(jinja2.DictLoader(dict(templates)))
        elif isinstance(templates, (str, os.PathLike)):
            if not os.path.isdir(templates):
                raise InvalidRequestError(f"templates directory {os.fspath(templates)!r} not found",
                                          field="templates", value=templates)
            loaders.append(jinja2.FileSystemLoader(os.fspath(templates)))
        else:
            raise InvalidRequestError(
                "templates must be a mapping of name to source or a directory path",
                field="templates", value=templates,
            )
    if loader is not None:
        if not isinstance(loader, jinja2.BaseLoader):
            raise InvalidRequestError("loader must be a jinja2 loader", field="loader", value=loader)
        loaders.append(loader)
    return loaders


def make_environment(
    *,
    templates: Templates | None = None,
    loader: jinja2.BaseLoader | None = None,
    plugin_manager: pluggy.PluginManager | None = None,
) -> jinja2.Environment:
    """The environment every prompt and dump template is rendered with.

    ``StrictUndefined`` (a missing variable is an error), no autoescaping (a
    prompt is not HTML; the HTML dump turns escaping on in its own template),
    trailing newlines kept.

    :param templates: Overrides by name: a mapping of name to source, or a directory.
    :param loader: Another jinja2 loader, tried after ``templates``.
    :param plugin_manager: Its ``prepare_jinja2_environment`` hook is called.
    :raises InvalidRequestError: ``templates`` or ``loader`` is malformed.
    """
    loaders = _user_loader(templates, loader)
    loaders.append(jinja2.PackageLoader("ctxslots", "prompts"))
    env = jinja2.Environment(
        loader=jinja2.ChoiceLoader(loaders),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        auto_reload=False,
    )
    env.filters.update(bullet=bullet, md_cell=md_cell, fence_for=fence_for)
    if plugin_manager is not None:
        plugin_manager.hook.prepare_jinja2_environment(env=env)
    return env


@functools.lru_cache(maxsize=1)
def default_environment() -> jinja2.Environment:
    """The environment with only the built-in templates and no plugins (shared)."""
    return make_environment()


def render_template(env: jinja2.Environment, name: str, **context: Any) -> str:
    """Render template ``name`` with ``context``.

    :raises TemplateError: The template is missing or fails to render.
    """
    try:
        return env.get_template(name).render(**context)
    except jinja2.TemplateNotFound as exc:
        raise TemplateError(f"template {name!r} not found", template=name) from exc
    except jinja2.TemplateError as exc:
        raise TemplateError(f"template {name!r} failed: {exc}", template=name) from exc


def render_header(env: jinja2.Environment, section: Section) -> str:
    """The heading (and intro) of ``section``."""
    return render_template(env, section.header_template, section=section)


def render_item(env: jinja2.Environment, section: Section, item: Item, rank: int) -> str:
    """One item's line."""
    return render_template(env, section.item_template, section=section, item=item, rank=rank)
