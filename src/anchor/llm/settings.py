"""How to reach the LLM: flags and ``ANCHOR_*`` environment variables become one settings object,
and ``make_client`` turns it into the shared client."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel, Field, SecretStr

from anchor.llm.cache import ResponseCache, default_cache_dir
from anchor.llm.client import LLMClient
from anchor.llm.context import DEFAULT_SERVER_CONTEXT_TOKENS
from anchor.llm.errors import ConfigurationError
from anchor.llm.ledger import CostLedger

ENV_BASE_URL = "ANCHOR_LLM_BASE_URL"
ENV_MODEL = "ANCHOR_LLM_MODEL"
ENV_API_KEY = "ANCHOR_LLM_API_KEY"
ENV_TIMEOUT = "ANCHOR_LLM_TIMEOUT"
ENV_CONCURRENCY = "ANCHOR_LLM_CONCURRENCY"
ENV_CACHE_DIR = "ANCHOR_CACHE_DIR"
ENV_RETRIES = "ANCHOR_LLM_RETRIES"
ENV_CONTEXT_TOKENS = "ANCHOR_LLM_CONTEXT_TOKENS"
#: n_ctx of the embedded model when no context size is set (SmolLM2-135M was trained for 8,192).
EMBEDDED_CONTEXT_TOKENS = 8192


class LLMSettings(BaseModel):
    """Where the model lives and how hard to try. The API key is a secret: it never reaches
    logs, traces, caches or ``repr``."""

    base_url: str | None = Field(default=None, description="OpenAI-compatible server; None = embedded model.")
    model: str | None = None
    api_key: SecretStr | None = None
    timeout: float = Field(default=120.0, gt=0)
    max_concurrency: int = Field(default=8, ge=1)
    transport_retries: int = Field(default=6, ge=0)
    parse_retries: int = Field(default=20, ge=0)
    use_cache: bool = True
    cache_dir: Path | None = None
    seed: int = 0
    local_model_path: Path | None = None
    context_tokens: int | None = Field(
        default=None, ge=256,
        description="The model's context window in tokens. Prompts with a long condition are fitted to it "
                    f"(see anchor.llm.context). Default: {DEFAULT_SERVER_CONTEXT_TOKENS} for a server, "
                    f"n_ctx={EMBEDDED_CONTEXT_TOKENS} for the embedded model (where it also sets n_ctx).")

    @classmethod
    def from_env(cls, **overrides: object) -> LLMSettings:
        """Environment first, then explicit (non-None) overrides such as CLI flags."""
        values: dict[str, object] = {}
        if os.environ.get(ENV_BASE_URL):
            values["base_url"] = os.environ[ENV_BASE_URL]
        if os.environ.get(ENV_MODEL):
            values["model"] = os.environ[ENV_MODEL]
        if os.environ.get(ENV_API_KEY):
            values["api_key"] = os.environ[ENV_API_KEY]
        if os.environ.get(ENV_TIMEOUT):
            values["timeout"] = float(os.environ[ENV_TIMEOUT])
        if os.environ.get(ENV_CONCURRENCY):
            values["max_concurrency"] = int(os.environ[ENV_CONCURRENCY])
        if os.environ.get(ENV_RETRIES):
            values["transport_retries"] = int(os.environ[ENV_RETRIES])
        if os.environ.get(ENV_CACHE_DIR):
            values["cache_dir"] = Path(os.environ[ENV_CACHE_DIR])
        if os.environ.get(ENV_CONTEXT_TOKENS):
            raw = os.environ[ENV_CONTEXT_TOKENS].strip()
            if not raw.isdigit():
                raise ConfigurationError(f"{ENV_CONTEXT_TOKENS} must be a whole number of tokens, got {raw!r}")
            values["context_tokens"] = int(raw)
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls.model_validate(values)

    @property
    def uses_server(self) -> bool:
        return bool(self.base_url)

    @property
    def effective_context_tokens(self) -> int:
        """The context window prompts are fitted to: the setting, or the backend's default."""
        if self.context_tokens is not None:
            return self.context_tokens
        return DEFAULT_SERVER_CONTEXT_TOKENS if self.uses_server else EMBEDDED_CONTEXT_TOKENS

    def resolved_cache_dir(self) -> Path:
        return Path(self.cache_dir).expanduser() if self.cache_dir else default_cache_dir()

    @property
    def response_cache_path(self) -> Path:
        return self.resolved_cache_dir() / "responses.sqlite"

    @property
    def vector_cache_path(self) -> Path | None:
        """Where MiniLM vectors are cached; None when caching is off."""
        return self.resolved_cache_dir() / "vectors.sqlite" if self.use_cache else None

    def describe(self) -> dict[str, object]:
        """Safe to print or store: no secrets."""
        return {
            "backend": "openai-compatible" if self.uses_server else "embedded",
            "base_url": self.base_url,
            "model": self.model,
            "api_key": "set" if self.api_key else None,
            "cache": str(self.resolved_cache_dir()) if self.use_cache else None,
            "seed": self.seed,
            "context_tokens": self.effective_context_tokens,
        }


def make_backend(settings: LLMSettings):  # noqa: ANN201 - returns a Backend
    if settings.uses_server:
        from anchor.llm.openai_backend import OpenAICompatibleBackend

        return OpenAICompatibleBackend(
            settings.base_url or "",
            settings.model,
            api_key=settings.api_key.get_secret_value() if settings.api_key else None,
            timeout=settings.timeout,
            max_parallel=settings.max_concurrency,
            context_tokens=settings.effective_context_tokens,
        )
    from anchor.llm.local_backend import LocalLlamaBackend

    return LocalLlamaBackend(settings.local_model_path, n_ctx=settings.effective_context_tokens)


def make_client(settings: LLMSettings, *, ledger: CostLedger | None = None) -> LLMClient:
    cache = ResponseCache(settings.response_cache_path) if settings.use_cache else None
    return LLMClient(
        make_backend(settings),
        cache=cache,
        ledger=ledger,
        seed=settings.seed,
        parse_retries=settings.parse_retries,
        transport_retries=settings.transport_retries,
        max_concurrency=settings.max_concurrency,
    )
