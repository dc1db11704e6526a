"""Credentials of channels, indexes and git remotes, handed to each tool through its own mechanism,
never a file.

A URL's `user:password@` is split off where the URL is used: the bare URL goes to the tool (and so
into its caches and config files), the credential travels apart — to rattler as a header its client
adds in memory, to git as `http.<url>.extraHeader` in the environment (`GIT_CONFIG_*`), to pip and
uv as a netrc that lives in an anonymous in-memory file (`memfd`) the child reads through `/dev/fd`.
A credential goes to its own host only: by scheme, host and port where the tool lets us say so (git,
`for_url`), by host name where it knows no more (rattler's callback is given no port; a netrc names
machines).
"""

from __future__ import annotations

import base64
import os
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from urllib.parse import unquote, urlsplit

import msgspec

from envgen.redact import strip_credentials
from envgen.urls import path_under, same_host, url_host_name

_HTTP = ("http", "https")


class Credential(msgspec.Struct, frozen=True):
    """A user name and password for the URLs under `url` (a bare http(s) URL: no userinfo)."""

    url: str
    username: str
    password: str

    @property
    def header(self) -> str:
        """The value of an HTTP Basic Authorization header."""
        return "Basic " + base64.b64encode(f"{self.username}:{self.password}".encode()).decode()

    @property
    def secret(self) -> str:
        """What to mask in output: the password, or a lone token given as the user name."""
        return self.password or self.username

    def on_host(self, url: str) -> bool:
        """Whether `url` is on this credential's scheme, host and port (an index serves its files
        from other paths than its own, so a path is only a preference: `_best`)."""
        return urlsplit(self.url).scheme.lower() == urlsplit(url).scheme.lower() and same_host(
            self.url, url
        )


def _best(found: list[Credential], path: str) -> Credential | None:
    """Of the credentials of one host, the first whose URL path `path` is under, else the first."""
    return next(
        (c for c in found if path_under(path, urlsplit(c.url).path)), found[0] if found else None
    )


def split_credential(url: str) -> tuple[str, Credential | None]:
    """An http(s) `url` without its userinfo, and the credential it carried (None when it carried
    none).

    Other schemes are returned as they are: `ssh://git@host/...` names a login, not a secret."""
    parts = urlsplit(url)
    if parts.scheme.lower() not in _HTTP or (parts.username is None and parts.password is None):
        return url, None
    bare = strip_credentials(url)
    return bare, Credential(bare, unquote(parts.username or ""), unquote(parts.password or ""))


class Credentials(msgspec.Struct, frozen=True):
    """The credentials one command may send; the first that covers a URL is used."""

    items: tuple[Credential, ...] = ()

    @classmethod
    def of(cls, urls: Iterable[str]) -> Credentials:
        """The credentials carried by `urls` (`${VAR}` already expanded), in order, without
        repeats."""
        found = (split_credential(url)[1] for url in urls)
        return cls(tuple(dict.fromkeys(c for c in found if c is not None)))

    def __add__(self, other: Credentials) -> Credentials:
        return Credentials(tuple(dict.fromkeys((*self.items, *other.items))))

    def __bool__(self) -> bool:
        return bool(self.items)

    @property
    def secrets(self) -> tuple[str, ...]:
        return tuple(c.secret for c in self.items if c.secret)

    def for_url(self, url: str) -> Credential | None:
        """The credential of `url`'s host (scheme, host and port), if any."""
        return _best([c for c in self.items if c.on_host(url)], urlsplit(url).path)

    def headers(self, host: str, path: str) -> dict[str, str] | None:
        """rattler's AddHeadersMiddleware callback (it is given the host without its port): the
        Authorization header of the request, if any."""
        found = _best([c for c in self.items if url_host_name(c.url) == host.lower()], path)
        return {"Authorization": found.header} if found else None

    def git_environment(self, environ: Mapping[str, str]) -> dict[str, str]:
        """`environ` plus `http.<url>.extraHeader` for each credential, after any GIT_CONFIG_* it
        already has."""
        env = dict(environ)
        count = int(env.get("GIT_CONFIG_COUNT") or 0)
        for number, credential in enumerate(self.items, start=count):
            env[f"GIT_CONFIG_KEY_{number}"] = f"http.{credential.url}.extraHeader"
            env[f"GIT_CONFIG_VALUE_{number}"] = f"Authorization: {credential.header}"
        if self.items:
            env["GIT_CONFIG_COUNT"] = str(count + len(self.items))
        return env

    def netrc(self) -> str:
        """A netrc of the credentials: one `machine` per host (netrc knows no port or path; the
        first wins)."""
        machines: dict[str, Credential] = {}
        for credential in self.items:
            machines.setdefault(url_host_name(credential.url), credential)
        return "".join(
            f"machine {host}\nlogin {_netrc_word(c.username)}\npassword {_netrc_word(c.password)}\n"
            for host, c in machines.items()
            if host
        )


# Nothing to send: the default of a `credentials` parameter.
NO_CREDENTIALS = Credentials()


class LockCredentials(msgspec.Struct, frozen=True):
    """What installing a lock may send, by the tool that sends it: rattler the conda channels', pip
    and uv the indexes', git the sources' (a netrc knows hosts only, so pip never sees a channel's
    credential)."""

    conda: Credentials = NO_CREDENTIALS
    pip: Credentials = NO_CREDENTIALS
    git: Credentials = NO_CREDENTIALS

    @property
    def secrets(self) -> tuple[str, ...]:
        return (*self.conda.secrets, *self.pip.secrets, *self.git.secrets)


NO_LOCK_CREDENTIALS = LockCredentials()


def _netrc_word(value: str) -> str:
    # netrc words are whitespace-separated; a quoted word keeps a space or quote in a token
    # readable.
    if value and not any(char.isspace() or char in "\"'\\#" for char in value):
        return value
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


@contextmanager
def netrc_in_memory(credentials: Credentials) -> Iterator[tuple[dict[str, str], tuple[int, ...]]]:
    """`NETRC` for a child (pip, uv) and the descriptor to pass it: the netrc lives in an anonymous
    memory file, so the credentials are on no disk; nothing when there are none."""
    if not credentials:
        yield {}, ()
        return
    fd = os.memfd_create("envgen-netrc")
    try:
        os.write(fd, credentials.netrc().encode())
        yield {"NETRC": f"/dev/fd/{fd}"}, (fd,)
    finally:
        os.close(fd)
