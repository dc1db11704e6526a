"""Keep credentials out of every message and written file."""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

_REFERENCE = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*\}")
# Up to the last `@` of the authority, as urlsplit splits it (`https://a@b:secret@host` is user
# `a@b`).
_USERINFO = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]{0,31}://)(?P<userinfo>[^/?#\s]+)@")


def _with_userinfo(url: str, userinfo: str) -> str:
    """`url` with its userinfo replaced by `userinfo` ("" drops it)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    # not a URL urlsplit can take apart (a bad port or IPv6 bracket): by its text
    except ValueError:
        return _USERINFO.sub(
            lambda m: m.group("scheme") + (f"{userinfo}@" if userinfo else ""), url, count=1
        )
    host = parts.hostname or ""
    if port:
        host = f"{host}:{port}"
    netloc = f"{userinfo}@{host}" if userinfo else host
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def has_credentials(url: str) -> bool:
    if "@" not in url:  # no userinfo without its "@": most URLs of a lock, no urlsplit needed
        return False
    try:
        parts = urlsplit(url)
    except ValueError:
        return _USERINFO.match(url) is not None
    return parts.username is not None or parts.password is not None


def masked_url(url: str) -> str:
    """`url` shown as carrying credentials: `scheme://***@host/...` (for a URL whose credentials are
    kept apart)."""
    return _with_userinfo(url, "***")


def redact_url(url: str) -> str:
    """The URL with any `user:password@` replaced by `***@`."""
    return masked_url(url) if has_credentials(url) else url


def strip_credentials(url: str) -> str:
    """The URL without its userinfo: what a lock may record."""
    return _with_userinfo(url, "") if has_credentials(url) else url


def written_url(url: str) -> str:
    """`url` as a lock or an export may record it: credentials given as `${VAR}` are kept (pip
    expands them when it reads a requirements file; envgen when it uses the lock), literal ones are
    dropped, so no secret is ever written."""
    parts = urlsplit(url)
    secret = parts.password if parts.password is not None else parts.username
    keep = secret is not None and _REFERENCE.fullmatch(secret) is not None
    return url if keep else strip_credentials(url)


def redact_text(text: str, secrets: tuple[str, ...] = ()) -> str:
    """Text with URL userinfo and the given secret strings masked."""
    text = _USERINFO.sub(lambda m: f"{m.group('scheme')}***@", text)
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text
