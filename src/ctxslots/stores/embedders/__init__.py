"""Embedders: turn texts into unit-length float32 vectors for the vector leg.

Three built in, chosen by a spec string (:func:`embedder_from_spec`), by
``CTXSLOTS_EMBEDDER`` (:func:`default_embedder`) or passed as objects:

- ``hash`` / ``hash:DIM``: :class:`HashingEmbedder`, deterministic feature
  hashing, no model, no network. The default.
- ``sentence-transformers:PATH_OR_PACKAGE`` (alias ``st:``):
  :class:`SentenceTransformersEmbedder`, a local model folder or an installed
  package that ships one; never downloads.
- ``openai:MODEL``: :class:`OpenAIEmbedder`, any OpenAI-compatible
  ``/v1/embeddings`` endpoint (OpenAI, Ollama, llama.cpp, vLLM, TEI), with the
  base URL from ``base_url=`` or ``CTXSLOTS_EMBED_BASE_URL``.

Plugins add kinds through the ``register_embedders`` hook; pass what it
collected as ``factories={name: factory}``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from ...errors import EmbedderError
from ._base import Embedder, EmbedderSpecError, Vectors
from ._hashing import HashingEmbedder
from ._openai import OpenAIEmbedder
from ._sentence_transformers import INSTALL_HINT, SentenceTransformersEmbedder

__all__ = [
    "BASE_URL_ENV",
    "EMBEDDER_ENV",
    "INSTALL_HINT",
    "Embedder",
    "EmbedderSpecError",
    "HashingEmbedder",
    "OpenAIEmbedder",
    "SentenceTransformersEmbedder",
    "Vectors",
    "default_embedder",
    "embedder_from_spec",
]

#: Environment variable holding the default embedder spec.
EMBEDDER_ENV = "CTXSLOTS_EMBEDDER"
#: Environment variable holding the base URL for ``openai:MODEL``.
BASE_URL_ENV = "CTXSLOTS_EMBED_BASE_URL"

_KNOWN_KINDS = "hash[:DIM], sentence-transformers:PATH_OR_PACKAGE (or st:...), openai:MODEL"


def embedder_from_spec(
    spec: str,
    *,
    base_url: str | None = None,
    factories: Mapping[str, Callable[[str], Any]] | None = None,
) -> Embedder:
    """Build an embedder from ``KIND`` or ``KIND:ARG``.

    Built-in kinds (matched first, case-insensitively): ``hash``, ``hash:DIM``,
    ``sentence-transformers:PATH_OR_PACKAGE`` (alias ``st:``), ``openai:MODEL``
    (base URL from ``base_url`` or ``CTXSLOTS_EMBED_BASE_URL``). Any other kind
    is looked up in ``factories`` (such as the names collected from the
    ``register_embedders`` hook) and called with ``ARG`` (``""`` when absent).

    :raises EmbedderSpecError: The spec is empty, malformed, names an unknown
        kind or lacks its argument or base URL.
    :raises EmbedderError: The model cannot be found, or a factory returned
        something that is not an embedder.
    """
    name, _, arg = spec.strip().partition(":")
    name, arg = name.strip(), arg.strip()
    kind = name.lower()
    extra = sorted(factories or {})
    known = _KNOWN_KINDS + (f"; registered: {', '.join(extra)}" if extra else "")
    if not name:
        raise EmbedderSpecError(f"empty embedder spec; known kinds: {known}", spec=spec)
    if kind == "hash":
        if not arg:
            return HashingEmbedder()
        if not (arg.isascii() and arg.isdigit()) or int(arg) < 2:
            raise EmbedderSpecError(f"hash:DIM needs a whole number of at least 2, got {arg!r}", spec=spec)
        return HashingEmbedder(int(arg))
    if kind in ("sentence-transformers", "st", "openai") and not arg:
        what = "MODEL" if kind == "openai" else "PATH_OR_PACKAGE"
        raise EmbedderSpecError(f"{kind} needs an argument: {kind}:{what}", spec=spec)
    if kind in ("sentence-transformers", "st"):
        return SentenceTransformersEmbedder(arg)
    if kind == "openai":
        url = base_url or os.environ.get(BASE_URL_ENV)
        if not url:
            raise EmbedderSpecError(
                f"openai:{arg} needs a base URL: pass --embed-base-url (base_url=) or set {BASE_URL_ENV}",
                spec=spec,
            )
        return OpenAIEmbedder(arg, url)
    if factories and name in factories:
        embedder = factories[name](arg)
        if not (callable(getattr(embedder, "embed", None)) and hasattr(embedder, "model_id")):
            raise EmbedderError(f"the factory registered as {name!r} returned {embedder!r}, not an embedder")
        return embedder  # type: ignore[no-any-return]
    raise EmbedderSpecError(f"unknown embedder kind {name!r} in {spec!r}; known kinds: {known}", spec=spec)


def default_embedder(*, factories: Mapping[str, Callable[[str], Any]] | None = None) -> Embedder:
    """The embedder named by ``CTXSLOTS_EMBEDDER``, or a :class:`HashingEmbedder`."""
    spec = os.environ.get(EMBEDDER_ENV, "").strip()
    return embedder_from_spec(spec, factories=factories) if spec else HashingEmbedder()
