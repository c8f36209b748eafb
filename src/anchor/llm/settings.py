"""How to reach the LLM: flags and ``ANCHOR_*`` environment variables become one settings object,
and ``make_client`` turns it into the shared client."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, Field, SecretStr, ValidationError

from anchor.errors import ConfigurationError
from anchor.llm.base import Backend
from anchor.llm.cache import RESPONSES_FILE, VECTORS_FILE, ResponseCache, default_cache_dir
from anchor.llm.client import LLMClient
from anchor.llm.context import DEFAULT_SERVER_CONTEXT_TOKENS
from anchor.llm.endpoint import CredentialSource, HttpClient, settle_credentials
from anchor.llm.ledger import CostLedger
from anchor.llm.local_backend import LocalLlamaBackend
from anchor.llm.memory import SERVERS_FILE, ServerMemory
from anchor.secrets import display_url

ENV_BASE_URL = "ANCHOR_LLM_BASE_URL"
ENV_MODEL = "ANCHOR_LLM_MODEL"
ENV_API_KEY = "ANCHOR_LLM_API_KEY"
ENV_TIMEOUT = "ANCHOR_LLM_TIMEOUT"
ENV_CONCURRENCY = "ANCHOR_LLM_CONCURRENCY"
ENV_CACHE_DIR = "ANCHOR_CACHE_DIR"
ENV_RETRIES = "ANCHOR_LLM_RETRIES"
ENV_SAMPLES_PER_REQUEST = "ANCHOR_LLM_SAMPLES_PER_REQUEST"
ENV_CONTEXT_TOKENS = "ANCHOR_LLM_CONTEXT_TOKENS"
ENV_HTTP_CLIENT = "ANCHOR_LLM_HTTP_CLIENT"
ENV_EMBED_BASE_URL = "ANCHOR_EMBED_BASE_URL"
ENV_EMBED_MODEL = "ANCHOR_EMBED_MODEL"
ENV_EMBED_API_KEY = "ANCHOR_EMBED_API_KEY"
ENV_EMBED_MAX_BATCH = "ANCHOR_EMBED_MAX_BATCH"
ENV_EMBED_BATCH_WINDOW_MS = "ANCHOR_EMBED_WINDOW_MS"
#: n_ctx of the embedded model when no context size is set (SmolLM2-135M was trained for 8,192).
EMBEDDED_CONTEXT_TOKENS = 8192

#: The (base URL, API key) pairs of the settings, with their flags and variables (see settle_credentials).
CREDENTIAL_PAIRS = (("base_url", "api_key", "--base-url", "--api-key", ENV_BASE_URL, ENV_API_KEY),
                    ("embed_base_url", "embed_api_key", "--embed-base-url", "--embed-api-key", ENV_EMBED_BASE_URL,
                     ENV_EMBED_API_KEY))
#: Environment variable -> settings field.
ENV_FIELDS: dict[str, str] = {
    ENV_BASE_URL: "base_url",
    ENV_MODEL: "model",
    ENV_API_KEY: "api_key",
    ENV_TIMEOUT: "timeout",
    ENV_CONCURRENCY: "max_concurrency",
    ENV_RETRIES: "transport_retries",
    ENV_CACHE_DIR: "cache_dir",
    ENV_SAMPLES_PER_REQUEST: "samples_per_request",
    ENV_CONTEXT_TOKENS: "context_tokens",
    ENV_HTTP_CLIENT: "http_client",
    ENV_EMBED_BASE_URL: "embed_base_url",
    ENV_EMBED_MODEL: "embed_model",
    ENV_EMBED_API_KEY: "embed_api_key",
    ENV_EMBED_MAX_BATCH: "embed_max_batch",
    ENV_EMBED_BATCH_WINDOW_MS: "embed_batch_window_ms",
}


class LLMSettings(BaseModel):
    """Where the model lives and how hard to try. The API key is a secret: it never reaches
    logs, traces, caches or ``repr``."""

    base_url: str | None = Field(default=None, description="OpenAI-compatible server; None = embedded model.")
    model: str | None = None
    api_key: SecretStr | None = None
    timeout: float = Field(default=120.0, gt=0)
    max_concurrency: int = Field(default=16, ge=1, description=(
        "Requests in flight at once. A vLLM server batches them and stays efficient well beyond this; a "
        "hosted API's rate limit is the usual ceiling (HTTP 429 answers are retried after a back-off)."))
    samples_per_request: int = Field(default=16, ge=1, description=(
        "Most self-consistency samples of one prompt asked for in one request (the API's n), on servers "
        "that honour it; 1 sends one request per sample."))
    transport_retries: int = Field(default=6, ge=0)
    http_client: HttpClient = Field(default="aiohttp", description=(
        "The openai SDK's HTTP client for a server: aiohttp (less CPU a request when many are in flight) or "
        "httpx (the SDK's default). Answers do not depend on it."))
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
    # Embeddings (anchor.embedding.server): from an OpenAI-compatible /v1/embeddings server instead of the
    # bundled MiniLM. Same time-out and retries as the LLM's; the key is a secret like the LLM's.
    embed_base_url: str | None = Field(default=None, description="Embeddings server; None = the bundled MiniLM.")
    embed_model: str | None = None
    embed_api_key: SecretStr | None = None
    embed_max_batch: int | None = Field(default=None, ge=1, le=4096, description=(
        "Most texts of concurrent calls embedded in one model call (or one request to the embeddings server); "
        "None = the embedder's default (32 for the bundled MiniLM, a request's 128 for a server)."))
    embed_batch_window_ms: float = Field(default=0.0, ge=0, le=1000, description=(
        "Milliseconds a batch of texts may wait for more calls while calls keep arriving (a lone call never "
        "waits); 0 = gather only the calls that arrive while the embedder is busy."))

    @classmethod
    def from_env(cls, **overrides: object) -> LLMSettings:
        """Environment first, then explicit (non-None) overrides such as CLI flags.

        A malformed or out-of-range environment value raises ``ConfigurationError`` naming the
        variable and what it accepts. A base URL with ``user:password@`` and an API key from
        different places: the override (the flag) wins, as it does over its own variable.
        """
        values: dict[str, object] = {}
        for env, field in ENV_FIELDS.items():
            raw = os.environ.get(env)
            if raw is None or not raw.strip():
                continue
            values[field] = _env_value(cls, env, field, raw.strip())
        given = {k: v for k, v in overrides.items() if v is not None}
        values.update(given)
        for url_field, key_field, url_flag, key_flag, url_env, key_env in CREDENTIAL_PAIRS:
            url, key = values.get(url_field), values.get(key_field)
            if isinstance(url, str) and key is not None:
                source = CredentialSource(url_name=url_flag if url_field in given else url_env,
                                          key_name=key_flag if key_field in given else key_env,
                                          url_given=url_field in given, key_given=key_field in given)
                secret = key.get_secret_value() if isinstance(key, SecretStr) else str(key)
                values[url_field], kept = settle_credentials(url, secret, source)
                if kept is None:
                    values.pop(key_field)
        return cls.model_validate(values)

    @property
    def uses_server(self) -> bool:
        return bool(self.base_url)

    @property
    def shown_base_url(self) -> str | None:
        """The base URL as it may be printed or stored: without credentials or secret query values."""
        return display_url(self.base_url) if self.base_url else None

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
        return self.resolved_cache_dir() / RESPONSES_FILE

    @property
    def vector_cache_path(self) -> Path | None:
        """Where embedding vectors are cached; None when caching is off."""
        return self.resolved_cache_dir() / VECTORS_FILE if self.use_cache else None

    def describe(self) -> dict[str, object]:
        """Safe to print or store: no secrets."""
        return {
            "backend": "openai-compatible" if self.uses_server else "embedded",
            "base_url": self.shown_base_url,
            "model": self.model,
            "api_key": "set" if self.api_key else None,
            "cache": str(self.resolved_cache_dir()) if self.use_cache else None,
            "seed": self.seed,
            "max_concurrency": self.max_concurrency,
            "samples_per_request": self.samples_per_request,
            "context_tokens": self.effective_context_tokens,
            "embeddings": ({"base_url": display_url(self.embed_base_url), "model": self.embed_model,
                            "api_key": "set" if self.embed_api_key else None}
                           if self.embed_base_url else "bundled MiniLM"),
        }


#: What makes a client's backend from its settings: :func:`make_backend` unless a caller hands in its own
#: (a harness that answers in process, such as the simulated LLM of ``anchor.truth``).
BackendFactory = Callable[[LLMSettings], Backend]


def make_backend(settings: LLMSettings) -> Backend:
    """The backend the settings name: the OpenAI-compatible server at ``base_url``, else the embedded model."""
    if settings.uses_server:
        # Imported here: it loads the openai SDK (about 0.3 s), which the embedded model never needs.
        from anchor.llm.openai_backend import OpenAICompatibleBackend

        return OpenAICompatibleBackend(
            settings.base_url or "",
            settings.model,
            api_key=settings.api_key.get_secret_value() if settings.api_key else None,
            timeout=settings.timeout,
            max_parallel=settings.max_concurrency,
            context_tokens=settings.effective_context_tokens,
            memory=ServerMemory(settings.resolved_cache_dir() / SERVERS_FILE) if settings.use_cache else None,
            http_client=settings.http_client,
        )
    return LocalLlamaBackend(settings.local_model_path, n_ctx=settings.effective_context_tokens)


def make_client(settings: LLMSettings, *, ledger: CostLedger | None = None,
                backends: BackendFactory | None = None) -> LLMClient:
    """The shared client for ``settings``: its backend from ``backends`` (default :func:`make_backend`),
    with the settings' cache, seed, retries and concurrency."""
    cache = ResponseCache(settings.response_cache_path) if settings.use_cache else None
    return LLMClient(
        (backends or make_backend)(settings),
        cache=cache,
        ledger=ledger,
        seed=settings.seed,
        parse_retries=settings.parse_retries,
        transport_retries=settings.transport_retries,
        max_concurrency=settings.max_concurrency,
        samples_per_request=settings.samples_per_request,
    )


def _env_value(cls: type[LLMSettings], env: str, field: str, raw: str) -> object:
    """Validate one environment value against its settings field; say what is wrong in the variable's terms."""
    try:
        return getattr(cls.model_validate({field: raw}), field)
    except ValidationError as exc:
        err = exc.errors()[0]
        kind = err.get("type", "")
        ctx = err.get("ctx") or {}
        if kind in ("float_parsing", "int_parsing", "int_from_float"):
            what = "a whole number" if kind != "float_parsing" else "a number"
            reason = f"is not {what}"
        elif "ge" in ctx:
            reason = f"must be at least {ctx['ge']}"
        elif "gt" in ctx:
            reason = f"must be greater than {ctx['gt']}"
        elif kind == "literal_error":
            reason = f"must be {ctx.get('expected', 'one of the accepted values')}"
        else:
            reason = str(err.get("msg", "is invalid")).lower()
        shown = "(hidden)" if field == "api_key" else repr(raw)
        raise ConfigurationError(f"environment variable {env}={shown} {reason}") from None
