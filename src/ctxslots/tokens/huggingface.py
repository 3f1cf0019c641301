"""Token counts from a HuggingFace ``tokenizer.json`` file, through the ``tokenizers`` package.

Only a local file is read: there is no hub download, so a prompt is counted with
exactly the tokenizer the user put on disk. Install with ``pip install
'ctxslots[tokenizers]'``.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import attrs

from ..errors import EncodingError, InvalidRequestError
from ._tiktoken import MAX_CACHE_SIZE

__all__ = ["HuggingFaceCounter"]


def _as_path(value: str | Path) -> Path:
    return Path(value).expanduser()


def _load(path: Path) -> Any:
    try:
        from tokenizers import Tokenizer
    except ImportError as exc:
        raise EncodingError("counting with a tokenizer.json file needs the 'tokenizers' "
                            "extra: pip install 'ctxslots[tokenizers]'", encoding=str(path)) from exc
    if not path.is_file():
        raise EncodingError(f"no tokenizer file at {path}", encoding=str(path))
    try:
        tokenizer = Tokenizer.from_file(str(path))
    except Exception as exc:  # the Rust side raises a bare Exception for a bad file
        raise EncodingError(f"{path} is not a tokenizer.json file the tokenizers package can "
                            f"read: {exc}", encoding=str(path)) from exc
    # A file may set truncation or padding (for a model's fixed input length): a count
    # would then be capped at, or raised to, that length instead of the text's own.
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


@attrs.define
class HuggingFaceCounter:
    """Counts tokens with a HuggingFace ``tokenizer.json`` (Qwen, Llama, Mistral, Gemma...).

    Special tokens the tokenizer would add around a sequence (BOS, EOS) are not
    counted: the prompt's text is counted as the chat template will embed it. The
    truncation and padding a file may set are not applied: every token of the text
    is counted, and none that is not in it. A lone surrogate (which no UTF-8 text
    holds, so the tokenizer refuses it) is counted as U+FFFD, as tiktoken counts it.
    Text that looks like a special token (``<|im_start|>``) is data in a prompt;
    the tokenizer may still read it as one token, so such text can count lower
    than its characters suggest.

    Attributes:
        path: The ``tokenizer.json`` file.
        name: How prompts and dumps name this counter (default ``hf:<file's folder>/<file>``).
        cache_size: How many distinct pieces' counts are remembered.
    """

    path: Path = attrs.field(converter=_as_path)
    name: str = attrs.field(default="", kw_only=True)
    cache_size: int = attrs.field(default=65536, kw_only=True)
    _tokenizer: Any = attrs.field(init=False, repr=False, eq=False)
    _cached: functools._lru_cache_wrapper[int] = attrs.field(init=False, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        if isinstance(self.cache_size, bool) or not isinstance(self.cache_size, int) \
                or not 0 <= self.cache_size <= MAX_CACHE_SIZE:
            raise InvalidRequestError(f"cache_size must be an integer from 0 to {MAX_CACHE_SIZE:,}",
                                      field="cache_size", value=self.cache_size)
        self._tokenizer = _load(self.path)
        if not self.name:
            self.name = f"hf:{self.path.parent.name}/{self.path.name}" if self.path.parent.name \
                else f"hf:{self.path.name}"
        self._cached = functools.lru_cache(maxsize=self.cache_size)(self.count_exact)

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled as its settings (a process pool's argument): the copy loads the file
        # again; the remembered counts are this process's, and a bound cache does not pickle.
        return functools.partial(HuggingFaceCounter, name=self.name,
                                 cache_size=self.cache_size), (self.path,)

    def count(self, text: str) -> int:
        """Tokens of ``text``; a piece seen before is not encoded again.

        :raises InvalidRequestError: ``text`` is not a string.
        """
        if not isinstance(text, str):
            raise InvalidRequestError(f"text must be a string, not {type(text).__name__}",
                                      field="text", value=text)
        return self._cached(text)

    def count_exact(self, text: str) -> int:
        """Tokens of ``text``, always encoded.

        :raises InvalidRequestError: ``text`` is not a string.
        """
        if not isinstance(text, str):
            raise InvalidRequestError(f"text must be a string, not {type(text).__name__}",
                                      field="text", value=text)
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:  # the tokenizer takes UTF-8 text only (so does tiktoken)
            text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        return len(self._tokenizer.encode(text, add_special_tokens=False).ids)
