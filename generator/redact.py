"""Keep credentials out of every message and written file."""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

_USERINFO = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<userinfo>[^/@\s]+)@")


def redact_url(url: str) -> str:
    """The URL with any `user:password@` replaced by `***@`."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, f"***@{host}", parts.path, parts.query, parts.fragment))


def strip_credentials(url: str) -> str:
    """The URL without its userinfo: what a lock may record."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))


def redact_text(text: str, secrets: tuple[str, ...] = ()) -> str:
    """Text with URL userinfo and the given secret strings masked."""
    text = _USERINFO.sub(lambda m: f"{m.group('scheme')}***@", text)
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text
