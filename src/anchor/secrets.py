"""Keeping secrets out of everything anchor writes or prints.

An API key, and the credentials and secret query values of a base URL, are registered when a
backend is created; ``scrub`` then replaces them (and any user name or password part of a URL, and
the value of a query parameter named like a secret) in any text before that text is stored: error
messages, ledger details, prediction records, tracebacks. Where anchor itself shows or stores a URL
it renders it with ``display_url`` first, so that the credentials are never there to scrub.
``redact_argv`` removes secret flag values from a recorded command line.
"""

from __future__ import annotations

import base64
import re
import threading
from collections.abc import Sequence
from urllib.parse import unquote, unquote_plus, urlsplit, urlunsplit

REDACTED = "***"
#: Flags whose value is a secret.
SECRET_FLAGS = ("--api-key", "--estimator-api-key", "--embed-api-key")
_MIN_SECRET_CHARS = 4  # shorter strings would mangle ordinary words when replaced

_secrets: set[str] = set()
_lock = threading.Lock()
#: Query parameters whose value is a credential (``?key=``, ``api_key``, ``access_token``, ``sig``...).
_SECRET_PARAM = re.compile(r"key|token|secret|pass|pwd|auth|sig|credential", re.IGNORECASE)
_URL_USERINFO = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<userinfo>[^/\s@?#]+)@")
_SECRET_QUERY_VALUE = re.compile(
    r"(?P<name>[?&][\w.-]*(?:key|token|secret|pass|pwd|auth|sig|credential)[\w.-]*=)(?P<value>[^&\s#\"'<>]+)",
    re.IGNORECASE)


def register(secret: str | None) -> None:
    """Remember ``secret`` so that ``scrub`` removes it from any text from now on."""
    if secret and len(secret) >= _MIN_SECRET_CHARS:
        with _lock:
            _secrets.add(secret)


def basic_auth(userinfo: str) -> str:
    """The Basic auth token HTTP clients send for a URL's ``user:password`` (percent-decoded; a lone user
    name with an empty password): base64 of ``user:password``."""
    user, _, password = userinfo.partition(":")
    return base64.b64encode(f"{unquote(user)}:{unquote(password)}".encode()).decode("ascii")


def register_url(url: str | None) -> None:
    """Register the secrets a URL carries: its password (or a lone user name, usually a token) and
    the values of secret-named query parameters, both as written and percent-decoded."""
    if not url:
        return
    try:
        parts = urlsplit(url)
    except ValueError:
        return
    found: list[str] = []
    if "@" in parts.netloc:
        userinfo = parts.netloc.rpartition("@")[0]
        user, colon, password = userinfo.partition(":")
        found.append(password if colon else user)
        # Sent as Basic auth (anchor.llm.endpoint), which a server may quote back in an error.
        register(basic_auth(userinfo))
    for param in parts.query.split("&"):
        name, _, value = param.partition("=")
        if value and _SECRET_PARAM.search(unquote_plus(name)):
            found.append(value)
    for value in found:
        register(value)
        register(unquote(value))
        register(unquote_plus(value))


def display_url(url: str) -> str:
    """``url`` as it may be shown or stored: without user name and password (``***@host``) and
    with the value of every secret-named query parameter (``?key=``, ``token=``...) replaced by
    ``***``. The connection itself uses the URL as given."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return scrub(url)
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{REDACTED}@{netloc.rpartition('@')[2]}"
    query = "&".join(_shown_param(param) for param in parts.query.split("&")) if parts.query else ""
    return scrub(urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment)))


def _shown_param(param: str) -> str:
    name, eq, value = param.partition("=")
    return f"{name}={REDACTED}" if eq and value and _SECRET_PARAM.search(unquote_plus(name)) else param


def scrub(text: str) -> str:
    """``text`` with every registered secret, the credentials of any URL and the values of
    secret-named query parameters replaced by ``***``."""
    if not text:
        return text
    with _lock:
        secrets = sorted(_secrets, key=len, reverse=True)
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, REDACTED)
    text = _URL_USERINFO.sub(lambda m: f"{m['scheme']}{REDACTED}@", text)
    return _SECRET_QUERY_VALUE.sub(lambda m: f"{m['name']}{REDACTED}", text)


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
