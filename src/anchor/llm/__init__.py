"""The LLM layer: one client, three backends (OpenAI-compatible server, embedded llama.cpp, scripted).

Its errors (``BackendError``, ``LLMOutputError``, ...) are ``anchor.errors``'s, shared by every layer."""

from anchor.llm.base import Backend, RawCompletion, TokenLogprob
from anchor.llm.cache import ResponseCache
from anchor.llm.client import Answer, LLMClient
from anchor.llm.ledger import CallRecord, CostLedger
from anchor.llm.prompt import Example, PromptSpec
from anchor.llm.settings import LLMSettings, make_backend, make_client

__all__ = [
    "Answer", "Backend", "CallRecord", "CostLedger", "Example", "LLMClient", "LLMSettings", "PromptSpec",
    "RawCompletion", "ResponseCache", "TokenLogprob", "make_backend", "make_client",
]
