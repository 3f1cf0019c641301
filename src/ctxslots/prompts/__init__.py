"""The jinja2 templates and the one environment that renders them.

The built-in templates sit next to this module: the extraction prompt
(``extract.jinja2``), a section's header and item (``section_header.md.j2``,
``item.md.j2``) and the dump pages (``dump.md.j2``, ``dump.html.j2``). A
template of the same name given by the caller (a mapping of name to source, a
directory, or any jinja2 loader) wins over the built-in one. Every template
sees the filters ``bullet``, ``md_cell`` and ``fence_for``
(:mod:`ctxslots.prompts.escape`), and plugins adjust the environment through
the ``prepare_jinja2_environment`` hook.

The assembler and the flusher both render through this module; neither knows
the other.
"""

from __future__ import annotations

import functools
import importlib.resources
import os
from collections.abc import Callable, Mapping
from typing import Any

import jinja2

from ..errors import InvalidRequestError, TemplateError
from .escape import bullet, fence_for, md_cell

__all__ = [
    "SHIPPED_TEMPLATES",
    "Templates",
    "bullet",
    "default_environment",
    "fence_for",
    "make_environment",
    "md_cell",
    "render_template",
]

#: What ``templates=`` accepts: template sources by name, or a directory.
Templates = Mapping[str, str] | str | os.PathLike[str]

#: The names of the templates this package ships (the last loader of every environment).
SHIPPED_TEMPLATES = frozenset(
    entry.name for entry in importlib.resources.files(__package__).iterdir()
    if entry.name.endswith((".j2", ".jinja2")))


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
    prepare: Callable[[jinja2.Environment], None] | None = None,
) -> jinja2.Environment:
    """The environment every prompt and dump template is rendered with.

    ``StrictUndefined`` (a missing variable is an error), no autoescaping (a
    prompt is not HTML; the HTML dump turns escaping on in its own template),
    trailing newlines kept.

    :param templates: Overrides by name: a mapping of name to source, or a directory.
    :param loader: Another jinja2 loader, tried after ``templates``.
    :param prepare: Called with the environment before it is used (the assembler
        passes its plugins' ``prepare_jinja2_environment`` hook).
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
    if prepare is not None:
        prepare(env)
    return env


@functools.lru_cache(maxsize=1)
def default_environment() -> jinja2.Environment:
    """The environment with only the built-in templates and no plugins (shared)."""
    return make_environment()


def render_template(env: jinja2.Environment, name: str, **context: Any) -> str:
    """Render template ``name`` with ``context``.

    :raises TemplateError: The template, or one it includes, is missing, or it fails to
        render (whatever it raised: a division by zero in an expression too).
    """
    try:
        return env.get_template(name).render(**context)
    except jinja2.TemplateNotFound as exc:
        missing = exc.name if isinstance(exc.name, str) else name
        where = "" if missing == name else f" (included by {name!r})"
        raise TemplateError(f"template {missing!r} not found{where}", template=name) from exc
    except TemplateError:
        raise
    except Exception as exc:  # any failure of a user's template is that template's error
        raise TemplateError(f"template {name!r} failed: {type(exc).__name__}: {exc}",
                            template=name) from exc
