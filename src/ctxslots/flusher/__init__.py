"""Writing memory back: the LLM client interface and its HTTP client."""

from __future__ import annotations

from .llm_client import ChatResult, LLMClient
from .openai_client import OpenAIChatClient

__all__ = ["ChatResult", "LLMClient", "OpenAIChatClient"]
