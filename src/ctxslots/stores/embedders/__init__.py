"""Embedders: turn texts into unit-length float32 vectors for the vector leg.

Three built in, chosen by a spec string (:func:`embedder_from_spec`), by
``CTXSLOTS_EMBEDDER`` (:func:`default_embedder`) or passed as objects:

- ``hash`` / ``hash:DIM`` (DIM from 2 to 16,000): :class:`HashingEmbedder`, deterministic feature
  hashing, no model, no network. The default.
- ``sentence-transformers:PATH_OR_PACKAGE`` (alias ``st:``):
  :class:`SentenceTransformersEmbedder`, a local model folder or an installed
  package that ships one; never downloads.
- ``openai:MODEL``: :class:`OpenAIEmbedder`, any OpenAI-compatible
  ``/v1/embeddings`` endpoint (OpenAI, Ollama, llama.cpp, vLLM, TEI), with the
  base URL from ``base_url=`` or ``CTXSLOTS_EMBED_BASE_URL``.

They are registered through the ``register_embedders`` hook like a plugin's
(:mod:`.builtin`); pass what a plugin manager collected as
``factories={name: factory}``, or as an :class:`EmbedderChoice` to a store.
"""

from __future__ import annotations

from ._base import Embedder, EmbedderSpecError, Vectors
from ._hashing import HashingEmbedder
from ._openai import OpenAIEmbedder
from ._sentence_transformers import INSTALL_HINT, SentenceTransformersEmbedder
from .binding import EmbedderChoice
from .specs import BASE_URL_ENV, EMBEDDER_ENV, default_embedder, embedder_from_spec

__all__ = [
    "BASE_URL_ENV",
    "EMBEDDER_ENV",
    "INSTALL_HINT",
    "Embedder",
    "EmbedderChoice",
    "EmbedderSpecError",
    "HashingEmbedder",
    "OpenAIEmbedder",
    "SentenceTransformersEmbedder",
    "Vectors",
    "default_embedder",
    "embedder_from_spec",
]
