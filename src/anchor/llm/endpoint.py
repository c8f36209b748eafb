"""What the openai SDK is given to reach a base URL: the URL without its query, the query as
parameters sent with every request, and the API key.

The SDK appends each route to the base URL's text, so ``http://h/v1?key=k`` would become
``http://h/v1/?key=kchat/completions``; the query is therefore taken off the URL and sent as the
SDK's ``default_query`` instead. Credentials in the URL (``user:password@``) become HTTP Basic
auth, which replaces the ``Authorization: Bearer`` header that carries an API key: with both, the
key would silently never reach the server. They are taken off the URL too and sent as that header
(``Endpoint.headers``): the SDK's aiohttp client refuses a URL with credentials beside an
``Authorization`` header, and its httpx client turned them into the same header.
:func:`settle_credentials` applies the rule that a flag wins over its variable (credentials on the
command line beat the other ones from the environment); both from the command line, or both from the
environment, are refused, naming the two.

Also what a server's answer says about waiting: :func:`retry_after_seconds` (for the LLM and the
embeddings server alike).
"""

from __future__ import annotations

import email.utils
import time
from dataclasses import dataclass, field
from typing import Any, Literal, get_args
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from anchor.errors import ConfigurationError
from anchor.secrets import basic_auth, display_url

#: The SDK's HTTP clients a request can go through: its aiohttp one (anchor's default) or its httpx one.
HttpClient = Literal["aiohttp", "httpx"]
HTTP_CLIENTS: tuple[str, ...] = get_args(HttpClient)


@dataclass(frozen=True)
class Endpoint:
    base_url: str
    """The base URL as given, less its credentials, query and fragment."""
    query: dict[str, str] = field(default_factory=dict)
    """Parameters of the base URL's query, sent with every request."""
    api_key: str | None = None
    headers: dict[str, str] = field(default_factory=dict, repr=False)
    """Headers sent with every request: the Basic auth of the URL's credentials, if it had any (a secret)."""


def has_credentials(url: str) -> bool:
    """Does ``url`` carry ``user:password@`` (or ``user@``)?"""
    return "@" in urlsplit(url).netloc


def without_credentials(url: str) -> str:
    """``url`` less its ``user:password@``."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


@dataclass(frozen=True)
class CredentialSource:
    """Where a base URL and an API key came from, to name them in an error: the flag or variable, and
    whether it was the command line (a flag) rather than the environment."""

    url_name: str
    key_name: str
    url_given: bool
    key_given: bool


def settle_credentials(url: str | None, api_key: str | None, source: CredentialSource) -> tuple[str | None, str | None]:
    """The base URL and the key to use when the URL may carry credentials.

    A request carries one ``Authorization`` header, so the URL's ``user:password@`` and an API key cannot
    both be sent. The one given on the command line wins over the one from the environment (a flag wins
    over its variable): a key from the environment is left out, or the URL's credentials are. Both from
    the same place are refused, naming them."""
    if not url or not api_key or not has_credentials(url):
        return url, api_key
    if source.url_given and not source.key_given:
        return url, None
    if source.key_given and not source.url_given:
        return without_credentials(url), api_key
    raise ConfigurationError(
        f"{source.url_name} {display_url(url)} carries credentials (user:password@) and {source.key_name} is set "
        "too; a request has one Authorization header, so one of them would never be sent: give only one")


def sdk_endpoint(url: str, api_key: str | None, *, url_flag: str, key_flag: str) -> Endpoint:
    """``url`` and ``api_key`` as the SDK needs them; ``url_flag``/``key_flag`` name the options in errors."""
    parts = urlsplit(url)
    if "@" in parts.netloc and api_key:
        raise ConfigurationError(
            f"{url_flag} {display_url(url)} carries credentials (user:password@) and {key_flag} is set too; a "
            f"request has one Authorization header, so one of them would never be sent: give only one")
    userinfo, at, host = parts.netloc.rpartition("@")
    headers = {"Authorization": "Basic " + basic_auth(userinfo)} if at else {}  # a secret register_url knows
    base = urlunsplit((parts.scheme, host, parts.path, "", "")).rstrip("/")
    return Endpoint(base, dict(parse_qsl(parts.query, keep_blank_values=True)), api_key, headers)


def retry_after_seconds(headers: Any) -> float | None:
    """Read ``Retry-After`` (seconds or an HTTP date) or ``retry-after-ms`` from response headers."""
    if headers is None:
        return None
    try:
        ms = headers.get("retry-after-ms")
        if ms is not None:
            return max(0.0, float(ms) / 1000.0)
        value = headers.get("retry-after")
    except Exception:  # headers of an unexpected type: no hint
        return None
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
