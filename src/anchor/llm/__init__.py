"""The LLM layer: one client, three backends (OpenAI-compatible server, embedded llama.cpp, scripted)."""

from anchor.llm.base import Backend, RawCompletion, TokenLogprob
from anchor.llm.cache import ResponseCache
from anchor.llm.client import Answer, LLMClient
from anchor.llm.errors import (
    AnchorError,
    BackendError,
    ConfigurationError,
    FatalBackendError,
    LLMOutputError,
    LogprobsUnavailable,
    RequestRejected,
    RetryBudgetExhausted,
    TransientBackendError,
)
from anchor.llm.ledger import CallRecord, CostLedger
from anchor.llm.prompt import Example, PromptSpec
from anchor.llm.settings import LLMSettings, make_backend, make_client

__all__ = [
    "AnchorError", "Answer", "Backend", "BackendError", "CallRecord", "ConfigurationError", "CostLedger",
    "Example", "FatalBackendError", "LLMClient", "LLMOutputError", "LLMSettings", "LogprobsUnavailable",
    "PromptSpec", "RawCompletion", "RequestRejected", "ResponseCache", "RetryBudgetExhausted", "TokenLogprob",
    "TransientBackendError", "make_backend", "make_client",
]
