"""What the openai SDK is given to reach a base URL: the URL without its query, the query as
parameters sent with every request, and the API key.

The SDK appends each route to the base URL's text, so ``http://h/v1?key=k`` would become
``http://h/v1/?key=kchat/completions``; the query is therefore taken off the URL and sent as the
SDK's ``default_query`` instead. Credentials in the URL (``user:password@``) become HTTP Basic
auth, which replaces the ``Authorization: Bearer`` header that carries an API key: with both, the
key would silently never reach the server, so that combination is refused.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from anchor.llm.errors import ConfigurationError
from anchor.secrets import display_url


@dataclass(frozen=True)
class Endpoint:
    base_url: str
    """The base URL as given, less its query and fragment (credentials kept: the connection's Basic auth)."""
    query: dict[str, str] = field(default_factory=dict)
    """Parameters of the base URL's query, sent with every request."""
    api_key: str | None = None


def sdk_endpoint(url: str, api_key: str | None, *, url_flag: str, key_flag: str) -> Endpoint:
    """``url`` and ``api_key`` as the SDK needs them; ``url_flag``/``key_flag`` name the options in errors."""
    parts = urlsplit(url)
    if "@" in parts.netloc and api_key:
        raise ConfigurationError(
            f"{url_flag} {display_url(url)} carries credentials (user:password@) and {key_flag} is set too; a "
            f"request has one Authorization header, so one of them would never be sent: give only one")
    base = urlunsplit((parts.scheme, parts.netloc, parts.path, "", "")).rstrip("/")
    return Endpoint(base, dict(parse_qsl(parts.query, keep_blank_values=True)), api_key)
