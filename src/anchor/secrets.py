"""Keeping secrets out of everything anchor writes or prints.

An API key is registered when a backend is created; ``scrub`` then replaces it (and the password
part of a URL) in any text before that text is stored: error messages, ledger details, prediction
records. ``redact_argv`` removes secret flag values from a recorded command line.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence

REDACTED = "***"
#: Flags whose value is a secret.
SECRET_FLAGS = ("--api-key", "--estimator-api-key", "--embed-api-key")
_MIN_SECRET_CHARS = 4  # shorter strings would mangle ordinary words when replaced

_secrets: set[str] = set()
_lock = threading.Lock()
_URL_PASSWORD = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<user>[^/\s:@]+):(?P<password>[^/\s@]+)@")


def register(secret: str | None) -> None:
    """Remember ``secret`` so that ``scrub`` removes it from any text from now on."""
    if secret and len(secret) >= _MIN_SECRET_CHARS:
        with _lock:
            _secrets.add(secret)


def scrub(text: str) -> str:
    """``text`` with every registered secret and any password in a URL replaced by ``***``."""
    if not text:
        return text
    with _lock:
        secrets = sorted(_secrets, key=len, reverse=True)
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, REDACTED)
    return _URL_PASSWORD.sub(lambda m: f"{m['scheme']}{m['user']}:{REDACTED}@", text)


def redact_argv(argv: Sequence[str]) -> list[str]:
    """A copy of ``argv`` with the values of secret flags (``--api-key X``, ``--api-key=X``) hidden."""
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append(REDACTED)
            hide_next = False
            continue
        flag, eq, _ = arg.partition("=")
        if flag in SECRET_FLAGS:
            if eq:
                out.append(f"{flag}={REDACTED}")
            else:
                out.append(arg)
                hide_next = True
            continue
        out.append(scrub(arg))
    return out
