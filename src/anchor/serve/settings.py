"""How the service is run: where it listens, its state folder, its keys and its limits, checked before it
starts (``ServeSettings``), and the API keys read from a file or the environment."""

from __future__ import annotations

import ipaddress
import os
import re
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from anchor.errors import ConfigurationError
from anchor.secrets import register

#: API keys, comma- or whitespace-separated (a file given with --api-key-file wins).
ENV_API_KEYS = "ANCHOR_SERVE_API_KEYS"
#: The shortest API key accepted: a short key is guessed, and scrubbing it from text would mangle words.
MIN_KEY_CHARS = 16
#: What an id the service is given (a prediction's, a job's, a space's, a calibrator's name) may hold:
#: letters, digits, '.', '_' and '-', starting with a letter or digit; never a path.
ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
LOOPBACK_NAMES = ("localhost",)


def valid_id(value: str) -> bool:
    """Whether ``value`` is an id the service accepts (:data:`ID_PATTERN`, and no '..')."""
    return bool(ID_PATTERN.fullmatch(value)) and ".." not in value


def is_loopback(host: str) -> bool:
    """Whether ``host`` is reachable from this machine only."""
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve anywhere


class ServeSettings(BaseModel):
    """The service's own settings (the LLM's and the method's are the predict engine's)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=0, le=65535)
    state: Path = Field(description="The state folder: jobs (each a predict run directory), online answers, the store.")
    store: Path | None = Field(default=None, description="The space store shared with `anchor predict --spaces` "
                                                         "(default: STATE/store).")
    calibrators: Path | None = Field(default=None, description="A folder of calibrator files, asked for by name.")
    api_keys: tuple[SecretStr, ...] = ()
    insecure: bool = False
    cors_origins: tuple[str, ...] = ()
    max_body_bytes: int = Field(default=1 << 20, ge=1024, description="Largest JSON body.")
    max_upload_bytes: int = Field(default=256 << 20, ge=1024, description="Largest cases file sent to POST /v1/jobs.")
    max_cases: int = Field(default=100, ge=1, description="Most cases in one POST /v1/predictions.")
    max_queue: int = Field(default=1024, ge=1, description="Most online cases admitted and not yet answered.")
    batch_share: float = Field(default=0.25, gt=0, le=1, description="The share of the LLM budget jobs may hold "
                                                                      "while online answers are in progress.")
    max_running_jobs: int = Field(default=1, ge=1)
    max_queued_jobs: int = Field(default=100, ge=1)
    default_wait: float = Field(default=30.0, ge=0, description="Seconds a prediction request is held open by default.")
    max_wait: float = Field(default=600.0, ge=0)
    kept_answers: int = Field(default=1000, ge=1, description="Online answers kept in memory (the rest on disk).")
    shutdown_seconds: float = Field(default=30.0, ge=0, description="After SIGTERM, how long requests in flight get.")
    page_refresh: float = Field(default=2.0, gt=0, description="Seconds between the live page's refreshes.")
    workers: int = Field(default=1, ge=1, description="Service processes behind the one address, sharing the state "
                                                      "folder (--workers).")

    @property
    def store_dir(self) -> Path:
        return self.store if self.store is not None else self.state / "store"

    def check_exposure(self) -> None:
        """Refuse to listen beyond this machine without API keys, unless ``--insecure`` says so."""
        if not is_loopback(self.host) and not self.api_keys and not self.insecure:
            raise ConfigurationError(
                f"--host {self.host} listens beyond this machine: give API keys (--api-key-file FILE or "
                f"{ENV_API_KEYS}), or --insecure to serve without them")

    def key_matches(self, given: str) -> bool:
        """Whether ``given`` is one of the keys (compared in constant time)."""
        import hmac

        wanted = given.encode("utf-8")
        return any(hmac.compare_digest(wanted, k.get_secret_value().encode("utf-8")) for k in self.api_keys)


def read_api_keys(file: Path | None, environ: dict[str, str] | None = None) -> tuple[SecretStr, ...]:
    """The API keys: one a line in ``file`` (blank lines and ``#`` comments skipped), else from
    :data:`ENV_API_KEYS`. Each is registered as a secret, so that no message or log shows it."""
    environ = dict(os.environ) if environ is None else environ
    if file is not None:
        try:
            text = file.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigurationError(f"--api-key-file {file}: {exc.strerror or exc}") from None
        keys = [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]
        where = f"--api-key-file {file}"
        if not keys:
            raise ConfigurationError(f"{where}: the file holds no key")
    else:
        keys = [k for k in re.split(r"[\s,]+", environ.get(ENV_API_KEYS, "")) if k]
        where = ENV_API_KEYS
    for key in keys:
        register(key)
        if len(key) < MIN_KEY_CHARS:
            raise ConfigurationError(f"{where}: a key has {len(key)} characters; use at least {MIN_KEY_CHARS}")
        if not key.isprintable() or any(c.isspace() for c in key):
            raise ConfigurationError(f"{where}: a key holds spaces or control characters")
    return tuple(SecretStr(k) for k in dict.fromkeys(keys))
