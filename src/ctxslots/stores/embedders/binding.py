"""Which embedder a store uses, and whether the vectors it holds are that embedder's.

A store records the embedder that built its vectors (model id, dimension and,
when known, the spec string it was made from). Opening a store resolves the
``embedder`` setting into an embedder and binds it: a store without vectors is
bound to it; a store whose vectors another embedder built keeps them, searches
by words only and says so, until ``reindex`` rebuilds them.
"""

from __future__ import annotations

import os
import warnings
from typing import Literal

import attrs

from ...errors import CtxslotsError
from ..backend import META_EMBEDDER_DIMENSION, META_EMBEDDER_MODEL, Backend
from ._base import Embedder
from ._hashing import HashingEmbedder
from .specs import EMBEDDER_ENV, embedder_from_spec

__all__ = ["META_SPEC", "EmbedderBinding", "EmbedderSetting", "bind_embedder"]

#: Store setting naming the embedder that built the vectors (a spec string).
META_SPEC = "embedder.spec"

#: What a store may be given as its ``embedder``: an object, a spec string, ``None``
#: (the environment's, else the one that built the store, else hashing) or ``False``
#: (no vector leg at all).
EmbedderSetting = Embedder | str | None | Literal[False]


@attrs.define
class EmbedderBinding:
    """The embedder a store uses and the state of its vectors.

    Attributes:
        embedder: The embedder, or ``None`` for a store with no vector leg.
        spec: The spec string it was made from (``None`` for an object).
        usable: Whether the stored vectors were built by this embedder (a
            search may read them, a write adds to them).
    """

    embedder: Embedder | None
    spec: str | None
    usable: bool = False

    @property
    def is_model(self) -> bool:
        """Whether the embedder is a real model (not the hashing embedder, not none)."""
        return self.embedder is not None and not isinstance(self.embedder, HashingEmbedder)

    def reset_vectors(self, backend: Backend) -> None:
        """Drop every vector and bind the store to this embedder, recording its spec."""
        assert self.embedder is not None
        with backend.transaction():
            backend.reset_vectors(self.embedder.model_id, self.embedder.dimension)
            if self.spec is not None:
                backend.set_meta(META_SPEC, self.spec)
        self.usable = True


def _resolve(setting: EmbedderSetting, backend: Backend) -> tuple[Embedder | None, str | None]:
    """The embedder ``setting`` names and its spec (see :data:`EmbedderSetting`).

    With no setting and no ``$CTXSLOTS_EMBEDDER``, a store reopens with the
    embedder that built its vectors, as recorded in the store.
    """
    if setting is False:
        return None, None
    if setting is not None and not isinstance(setting, str):
        return setting, None
    spec = setting or os.environ.get(EMBEDDER_ENV, "").strip() or None
    if spec is not None:
        return embedder_from_spec(spec), spec
    spec = backend.get_meta(META_SPEC) or "hash"
    try:
        return embedder_from_spec(spec), spec
    except CtxslotsError as exc:
        warnings.warn(f"the embedder that built this store's vectors ({spec}) cannot be "
                      f"loaded ({exc}); searching by words only", RuntimeWarning, stacklevel=6)
        return embedder_from_spec("hash"), "hash"


def bind_embedder(setting: EmbedderSetting, backend: Backend, *, searched: bool
                  ) -> EmbedderBinding:
    """Resolve ``setting`` and bind the store behind ``backend`` to it.

    :param searched: Whether searches read vectors (a vector weight above 0):
        only then is a mismatch worth a warning.
    :raises EmbedderSpecError: A spec is malformed or names an unknown kind.
    :raises EmbedderError: The embedder cannot be loaded.
    """
    embedder, spec = _resolve(setting, backend)
    binding = EmbedderBinding(embedder, spec)
    if embedder is None:
        return binding
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
            "them with this embedder", RuntimeWarning, stacklevel=5)
    return binding
