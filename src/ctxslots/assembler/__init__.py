"""The PromptAssembler: sections from contributors, fitted to a token budget.

Budget fitting (:mod:`.fit`), section rendering (:mod:`.render`) and dumps
(:mod:`.dump`) each live in their own module. Token counting
(:mod:`ctxslots.tokens`), the jinja2 environment and the escaping filters
(:mod:`ctxslots.prompts`) and the request (:mod:`ctxslots.request`) are shared
with the other parts; their names stay importable from here.
"""

from __future__ import annotations

from ..errors import EncodingError, InvalidRequestError
from ..prompts.escape import bullet
from ..request import DEFAULT_BUDGET, AssemblyRequest, ContextBlock
from ..tokens import (
    DEFAULT_ENCODING,
    ENCODINGS,
    TokenCounter,
    count_tokens,
    get_encoding,
)
from .assembler import PromptAssembler
from .dump import DUMP_FORMATS, DUMP_SCHEMA_VERSION, dump_prompt, prompt_to_dict
from .render import SECTION_SEPARATOR, make_environment

__all__ = [
    "DEFAULT_BUDGET",
    "DEFAULT_ENCODING",
    "DUMP_FORMATS",
    "DUMP_SCHEMA_VERSION",
    "ENCODINGS",
    "SECTION_SEPARATOR",
    "AssemblyRequest",
    "ContextBlock",
    "EncodingError",
    "InvalidRequestError",
    "PromptAssembler",
    "TokenCounter",
    "bullet",
    "count_tokens",
    "dump_prompt",
    "get_encoding",
    "make_environment",
    "prompt_to_dict",
]
