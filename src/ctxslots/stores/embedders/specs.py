"""Embedders named by a spec string: ``KIND`` or ``KIND:ARG``.

The built-in kinds are ordinary factories (registered through the
``register_embedders`` hook like any plugin's, see :mod:`.builtin`); a spec is
looked up among the factories a caller collected from its plugins, else among
the built-in ones.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from ...errors import EmbedderError
from ._base import Embedder, EmbedderSpecError
from ._hashing import HashingEmbedder
from ._openai import OpenAIEmbedder
from ._sentence_transformers import SentenceTransformersEmbedder

__all__ = ["BASE_URL_ENV", "BUILTIN_FACTORIES", "EMBEDDER_ENV", "MAX_HASH_DIMENSION",
           "EmbedderFactory", "default_embedder", "embedder_from_spec"]

#: Environment variable holding the default embedder spec.
EMBEDDER_ENV = "CTXSLOTS_EMBEDDER"
#: Environment variable holding the base URL for ``openai:MODEL``.
BASE_URL_ENV = "CTXSLOTS_EMBED_BASE_URL"

#: ``factory(arg, **options) -> embedder``: ``arg`` is what follows ``KIND:`` (``""``
#: when nothing does); options are the caller's (``base_url``), only when set.
EmbedderFactory = Callable[..., Any]


#: The most dimensions ``hash:DIM`` makes: what a PostgreSQL store keeps (pgvector's
#: ``vector`` type). Each vector takes four bytes a dimension, in memory and in the file:
#: ``hash:99999999`` made 400 MB of every fact and failed its first search in SQLite.
MAX_HASH_DIMENSION = 16_000


def hash_embedder(arg: str) -> HashingEmbedder:
    """``hash`` or ``hash:DIM``: feature hashing, no model, no network."""
    if not arg:
        return HashingEmbedder()
    if not (arg.isascii() and arg.isdigit()) or not 2 <= int(arg) <= MAX_HASH_DIMENSION:
        raise EmbedderSpecError(f"hash:DIM needs a whole number from 2 to {MAX_HASH_DIMENSION}, "
                                f"got {arg!r}", spec=f"hash:{arg}")
    return HashingEmbedder(int(arg))


def sentence_transformers_embedder(arg: str) -> SentenceTransformersEmbedder:
    """``sentence-transformers:PATH_OR_PACKAGE``: a local model; never downloads."""
    if not arg:
        raise EmbedderSpecError("sentence-transformers needs an argument: "
                                "sentence-transformers:PATH_OR_PACKAGE",
                                spec="sentence-transformers")
    return SentenceTransformersEmbedder(arg)


def openai_embedder(arg: str, *, base_url: str | None = None) -> OpenAIEmbedder:
    """``openai:MODEL``: an OpenAI-compatible ``/embeddings`` endpoint at ``base_url``
    (else ``$CTXSLOTS_EMBED_BASE_URL``)."""
    if not arg:
        raise EmbedderSpecError("openai needs an argument: openai:MODEL", spec="openai")
    url = base_url or os.environ.get(BASE_URL_ENV)
    if not url:
        raise EmbedderSpecError(f"openai:{arg} needs a base URL: pass --embed-base-url "
                                f"(base_url=) or set {BASE_URL_ENV}", spec=f"openai:{arg}")
    return OpenAIEmbedder(arg, url)


#: The built-in kinds (names are matched case-insensitively); ``st`` is short for
#: ``sentence-transformers``.
BUILTIN_FACTORIES: Mapping[str, EmbedderFactory] = {
    "hash": hash_embedder,
    "sentence-transformers": sentence_transformers_embedder,
    "st": sentence_transformers_embedder,
    "openai": openai_embedder,
}

#: The built-in kinds that need an argument, and what it is.
_ARGUMENT = {"sentence-transformers": "PATH_OR_PACKAGE", "st": "PATH_OR_PACKAGE", "openai": "MODEL"}

_KNOWN_KINDS = "hash[:DIM], sentence-transformers:PATH_OR_PACKAGE (or st:...), openai:MODEL"


def _factory(name: str, factories: Mapping[str, EmbedderFactory]) -> EmbedderFactory | None:
    if name.lower() in BUILTIN_FACTORIES:  # built-in kinds ignore case
        return factories.get(name.lower(), BUILTIN_FACTORIES[name.lower()])
    return factories.get(name)


def embedder_from_spec(spec: str, *, base_url: str | None = None,
                       factories: Mapping[str, EmbedderFactory] | None = None) -> Embedder:
    """Build an embedder from ``KIND`` or ``KIND:ARG``.

    Built-in kinds (matched case-insensitively): ``hash``, ``hash:DIM``,
    ``sentence-transformers:PATH_OR_PACKAGE`` (alias ``st:``), ``openai:MODEL``
    (base URL from ``base_url`` or ``CTXSLOTS_EMBED_BASE_URL``). Any other kind
    is looked up in ``factories`` (the names collected from the
    ``register_embedders`` hook) and called with ``ARG`` (``""`` when absent).

    :raises EmbedderSpecError: The spec is empty, malformed, names an unknown
        kind or lacks its argument or base URL.
    :raises EmbedderError: The model cannot be found, or a factory returned
        something that is not an embedder.
    """
    name, _, arg = spec.strip().partition(":")
    name, arg = name.strip(), arg.strip()
    registered = dict(factories or {})
    extra = sorted(n for n in registered if n.lower() not in BUILTIN_FACTORIES)
    known = _KNOWN_KINDS + (f"; registered: {', '.join(extra)}" if extra else "")
    if not name:
        raise EmbedderSpecError(f"empty embedder spec; known kinds: {known}", spec=spec)
    factory = _factory(name, registered)
    if factory is None:
        raise EmbedderSpecError(f"unknown embedder kind {name!r} in {spec!r}; known kinds: "
                                f"{known}", spec=spec)
    kind = name.lower()
    if not arg and kind in _ARGUMENT and factory is BUILTIN_FACTORIES[kind]:
        raise EmbedderSpecError(f"{kind} needs an argument: {kind}:{_ARGUMENT[kind]}", spec=spec)
    options = {} if base_url is None or factory is not openai_embedder else {"base_url": base_url}
    try:
        embedder = factory(arg, **options)
    except EmbedderSpecError as exc:
        raise EmbedderSpecError(str(exc), spec=spec) from None
    if not (callable(getattr(embedder, "embed", None)) and hasattr(embedder, "model_id")):
        raise EmbedderError(f"the factory registered as {name!r} returned {embedder!r}, "
                            "not an embedder")
    return embedder  # type: ignore[no-any-return]


def default_embedder(*, factories: Mapping[str, EmbedderFactory] | None = None) -> Embedder:
    """The embedder named by ``CTXSLOTS_EMBEDDER``, or a :class:`HashingEmbedder`."""
    spec = os.environ.get(EMBEDDER_ENV, "").strip()
    return embedder_from_spec(spec, factories=factories) if spec else HashingEmbedder()
