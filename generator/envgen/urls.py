"""Which index a URL belongs to, the one rule for every stage: the host it is on (`url_host`; its
name alone, `url_host_name`, where a tool knows no port), whether it is on an index's host, so the
index's credentials apply to it (`same_host`), and the index whose URL it lies under (`index_of`,
`under`, `path_under`). Credentials in either URL never count; scheme and host compare in any
case. And a forge's page of the commits between two commits of a repository (`compare_url`: the
lock diff's links, and `status`'s, which loads no lock diff)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TypeVar
from urllib.parse import urlsplit

Key = TypeVar("Key")


def url_host(url: str) -> str:
    """The host (and port, when given) of a URL, lower-cased and without credentials; '' when it has
    none."""
    return urlsplit(url).netloc.rpartition("@")[2].lower()


def url_host_name(url: str) -> str:
    """The host name of a URL alone: no port, no credentials, lower-cased; '' when it has none (what
    rattler's header callback is given, what a netrc's `machine` and pip's --trusted-host name)."""
    return urlsplit(url).hostname or ""


def same_host(url: str, other: str) -> bool:
    """Whether both URLs are on one host (and port)."""
    return url_host(url) == url_host(other)


def under(url: str, base: str) -> bool:
    """Whether `url` is `base` or lies below it: same scheme and host, and its path is `base`'s path
    or goes on from it after a `/` (`/whl/cpu2/` is not under `/whl/cpu`); a query or fragment (a
    file's `#sha256=`) does not count."""
    mine, theirs = urlsplit(url), urlsplit(base)
    if (mine.scheme.lower(), url_host(url)) != (theirs.scheme.lower(), url_host(base)):
        return False
    return path_under(mine.path, theirs.path)


def path_under(path: str, base: str) -> bool:
    """Whether the URL path `path` is `base` or goes on from it after a `/` (any path is under
    `/`)."""
    prefix = base.rstrip("/")
    return not prefix or path == prefix or path.startswith(prefix + "/")


def index_of(url: str, indexes: Iterable[tuple[Key, str]]) -> Key | None:
    """The key of the first index (key, its URL) that `url` lies under, or None."""
    return next((key for key, base in indexes if under(url, base)), None)


_FORGES = {"github.com": "https://github.com", "gitcode.com": "https://gitcode.com"}
# Owner and repository as the forges allow them: the link goes into markdown, where `)` or `<` would
# end it.
FORGE_URL = re.compile(
    r"^(?:https?://(?:[^/@]+@)?|ssh://(?:[^/@]+@)?|[^/@:]+@)(?P<host>github\.com|gitcode\.com)[:/]"
    r"(?P<owner>[A-Za-z0-9_.-]+)/(?P<repo>[A-Za-z0-9_.-]+?)(?:\.git)?/?$"
)


def compare_url(url: str, old_commit: str, new_commit: str) -> str | None:
    """The forge's compare page between two commits of `url`, for GitHub and GitCode
    repositories."""
    match = FORGE_URL.match(url)
    if not match:
        return None
    base = _FORGES[match["host"]]
    return f"{base}/{match['owner']}/{match['repo']}/compare/{old_commit}...{new_commit}"
