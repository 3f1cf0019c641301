"""Which embedder a store uses, and whether the vectors it holds are that embedder's.

A store records the embedder that built its vectors: its model id, its
dimension and the spec that makes it again (the spec it was named by, or, for
an object, a spec read from its model id). Opening a store resolves the
``embedder`` setting into an embedder and binds it: a store without vectors is
bound to it; a store whose vectors another embedder built keeps them, searches
by words only and says so, until ``reindex`` rebuilds them. Opened with no
setting, a store is made again with the embedder it records; when that cannot
be made here (a package missing, a plugin not installed), the store searches by
words only, says so in one warning line, and ``doctor`` names the embedder
its vectors need.
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Mapping, Sequence
from typing import Literal

import attrs

from ...errors import CtxslotsError, EmbedderError
from ..backend import META_EMBEDDER_DIMENSION, META_EMBEDDER_MODEL, Backend
from ._base import Embedder, Vectors, embed_checked
from ._hashing import HashingEmbedder
from ._openai import OpenAIEmbedder
from .specs import EMBEDDER_ENV, EmbedderFactory, embedder_from_spec

__all__ = [
    "META_SPEC",
    "EmbedderBinding",
    "EmbedderChoice",
    "EmbedderSetting",
    "bind_embedder",
    "given_embedder",
    "spec_of",
    "spec_of_model",
]

#: Store setting naming the embedder that built the vectors (a spec string).
META_SPEC = "embedder.spec"

_HASH_MODEL = re.compile(r"hash-v1-(\d+)")


@attrs.frozen
class EmbedderChoice:
    """An embedder named by a spec and made with a caller's factories (the command
    line's ``--embedder``, with the plugins' ``register_embedders``).

    Attributes:
        spec: The spec string; ``None``: ``$CTXSLOTS_EMBEDDER``, else the one the
            store records.
        base_url: The API root for an ``openai:MODEL`` spec.
        factories: The embedder kinds plugins registered, by name.
    """

    spec: str | None = None
    base_url: str | None = None
    # Compared, not hashed (a dict has no hash): equal choices still hash alike.
    factories: Mapping[str, EmbedderFactory] = attrs.field(factory=dict, hash=False)

    def make(self, spec: str) -> Embedder:
        """The embedder ``spec`` names, made with this choice's base URL and factories.

        :raises EmbedderSpecError: The spec is malformed or names an unknown kind.
        :raises EmbedderError: The embedder cannot be made.
        """
        return embedder_from_spec(spec, base_url=self.base_url, factories=self.factories)


#: What a store may be given as its ``embedder``: an object, a spec string, an
#: :class:`EmbedderChoice`, ``None`` (the environment's, else the one that built
#: the store, else hashing) or ``False`` (no vector leg at all).
EmbedderSetting = Embedder | str | EmbedderChoice | None | Literal[False]


def spec_of(embedder: Embedder) -> str:
    """The spec an embedder object is recorded by: ``hash`` or ``hash:DIM`` for a
    hashing embedder with the default settings, else its model id (the built-in
    ``st:MODEL`` and ``openai:MODEL`` ids are specs of the same embedder)."""
    if isinstance(embedder, HashingEmbedder) \
            and HashingEmbedder(embedder.dimension).model_id == embedder.model_id:
        return spec_of_model(embedder.model_id)
    return embedder.model_id


def spec_of_model(model: str) -> str:
    """The spec that makes the embedder of model id ``model`` (its model id, or
    ``hash:DIM`` for a hashing one)."""
    match = _HASH_MODEL.fullmatch(model)
    if match is None:
        return model
    return "hash" if int(match[1]) == HashingEmbedder().dimension else f"hash:{match[1]}"


@attrs.define
class EmbedderBinding:
    """The embedder a store uses and the state of its vectors.

    Attributes:
        embedder: The embedder, or ``None`` for a store with no vector leg.
        spec: The spec that makes it again (for an object, see :func:`spec_of`).
        usable: Whether the stored vectors were built by this embedder (a
            search may read them, a write adds to them).
        missing: When the store was opened without the embedder that built its
            vectors because it cannot be made here: one line saying which it is
            and why (``None`` otherwise).
    """

    embedder: Embedder | None
    spec: str | None
    usable: bool = False
    missing: str | None = None

    @property
    def is_model(self) -> bool:
        """Whether the embedder is a real model (not the hashing embedder, not none)."""
        return self.embedder is not None and not isinstance(self.embedder, HashingEmbedder)

    def embed(self, texts: Sequence[str]) -> Vectors:
        """The embedder's vectors of ``texts``, checked (see
        :func:`~ctxslots.stores.embedders._base.embed_checked`): every vector a store
        keeps or searches with is made here."""
        assert self.embedder is not None
        return embed_checked(self.embedder, texts)

    def reset_vectors(self, backend: Backend) -> None:
        """Drop every vector and bind the store to this embedder, recording its spec."""
        assert self.embedder is not None
        with backend.transaction():
            backend.reset_vectors(self.embedder.model_id, self.embedder.dimension)
            backend.set_meta(META_SPEC, self.spec or spec_of(self.embedder))
        self.usable = True


def _recorded(backend: Backend, choice: EmbedderChoice) -> EmbedderBinding:
    """The embedder the store records, made again; ``hash`` for a store that records
    none; no embedder (and why, in ``missing``) when it cannot be made here."""
    model = backend.get_meta(META_EMBEDDER_MODEL)
    recorded = backend.get_meta(META_SPEC) or None
    if model is None:
        spec = recorded or "hash"
        return EmbedderBinding(choice.make(spec), spec)
    # A spec recorded before the store remembered the one given on the command
    # line may name another embedder (``hash``): the model id is tried next.
    specs = dict.fromkeys(s for s in (recorded, spec_of_model(model)) if s)
    reasons = []
    for spec in specs:
        try:
            embedder = choice.make(spec)
        except CtxslotsError as exc:
            reasons.append(str(exc))
            continue
        if embedder.model_id == model:
            return EmbedderBinding(embedder, spec)
        reasons.append(f"{spec} makes {embedder.model_id}")
    shown = " or ".join(specs)
    missing = (f"this store's vectors were built by {model}, which cannot be made here "
               f"({'; '.join(reasons)}): searches use words only and new facts get no vector; "
               f"open it with that embedder (--embedder {shown}, or embedder=) to search "
               "by meaning")
    return EmbedderBinding(None, None, missing=missing)


def given_embedder(setting: EmbedderSetting) -> EmbedderBinding | None:
    """The embedder ``setting`` names, unbound (see :data:`EmbedderSetting`), made before
    the store opens, so that a bad spec creates no store file; ``None`` when the store's
    own record decides (no spec and no ``$CTXSLOTS_EMBEDDER``).

    :raises EmbedderSpecError: The spec is malformed or names an unknown kind.
    :raises EmbedderError: The embedder cannot be made.
    """
    if setting is False:
        return EmbedderBinding(None, None)
    if setting is not None and not isinstance(setting, (str, EmbedderChoice)):
        return EmbedderBinding(setting, spec_of(setting))
    choice = _choice(setting)
    spec = choice.spec or os.environ.get(EMBEDDER_ENV, "").strip() or None
    if spec is not None:
        return EmbedderBinding(choice.make(spec), spec)
    return None


def _choice(setting: str | EmbedderChoice | None) -> EmbedderChoice:
    return setting if isinstance(setting, EmbedderChoice) else EmbedderChoice(setting)


def bind_embedder(setting: EmbedderSetting, backend: Backend, *, searched: bool,
                  given: EmbedderBinding | None) -> EmbedderBinding:
    """Resolve ``setting`` and bind the store behind ``backend`` to it.

    With no spec and no ``$CTXSLOTS_EMBEDDER``, a store reopens with the
    embedder that built its vectors, as recorded in the store.

    :param searched: Whether searches read vectors (a vector weight above 0):
        only then is a mismatch, or an embedder that cannot be made, worth a warning.
    :param given: What :func:`given_embedder` made of ``setting`` (``None``: the store's
        record decides).
    :raises EmbedderSpecError: A spec given is malformed or names an unknown kind.
    :raises EmbedderError: An embedder given cannot be loaded. An embeddings server that
        does not answer is no error: the store opens by words, with a warning.
    """
    binding = given
    if binding is None:
        assert setting is None or isinstance(setting, (str, EmbedderChoice))
        binding = _recorded(backend, _choice(setting))
    if binding.embedder is not None:
        embedder = binding.embedder = _with_recorded_dimension(binding.embedder, backend)
        try:
            binding = _bind(binding, backend, searched)
        except EmbedderError as exc:
            if not isinstance(embedder, OpenAIEmbedder):
                raise  # a model that cannot be loaded here is the caller's to fix
            # A server that does not answer now: the store opens by words.
            binding = EmbedderBinding(None, None, missing=(
                f"the embedder {binding.spec or spec_of(embedder)} cannot be used "
                f"now ({exc}): searches use words only and new facts get no vector; open "
                "the store again once it answers (`reindex` then embeds those facts)"))
    if binding.embedder is None and binding.missing is not None and searched:
        warnings.warn(binding.missing, RuntimeWarning, stacklevel=5)
    return binding


def _with_recorded_dimension(embedder: Embedder, backend: Backend) -> Embedder:
    """An embeddings client that has yet to learn its vector length, told the length
    the store records for its model: opening the store then asks the server nothing."""
    if not isinstance(embedder, OpenAIEmbedder) or embedder.known_dimension is not None:
        return embedder
    recorded = backend.get_meta(META_EMBEDDER_DIMENSION)
    if backend.get_meta(META_EMBEDDER_MODEL) != embedder.model_id or not recorded:
        return embedder
    try:
        return attrs.evolve(embedder, dimension=int(recorded))
    except ValueError:
        return embedder


def _bind(binding: EmbedderBinding, backend: Backend, searched: bool) -> EmbedderBinding:
    """Bind the store to ``binding``'s embedder (reading its dimension may ask a server).

    :raises EmbedderError: The embedder cannot tell its dimension.
    """
    embedder = binding.embedder
    assert embedder is not None
    model = backend.get_meta(META_EMBEDDER_MODEL)
    if model is None:
        with backend.transaction():  # several processes opening a new store bind it once
            if backend.get_meta(META_EMBEDDER_MODEL) is None:
                binding.reset_vectors(backend)
                return binding
            model = backend.get_meta(META_EMBEDDER_MODEL)
    dimension = backend.get_meta(META_EMBEDDER_DIMENSION)
    binding.usable = (model, dimension) == (embedder.model_id, str(embedder.dimension))
    if not binding.usable and backend.vector_state().vectors == 0:
        # Nothing built by the old embedder to lose (a store that kept no
        # vectors): bind it to this one; `reindex` embeds the facts it has.
        binding.reset_vectors(backend)
    elif not binding.usable and searched:
        warnings.warn(
            f"this store's vectors were built by {model}, not by {embedder.model_id}: "
            "searches use words only and new facts get no vector until `reindex` rebuilds "
            "them with this embedder", RuntimeWarning, stacklevel=6)
    return binding
