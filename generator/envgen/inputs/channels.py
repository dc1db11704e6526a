"""channels/<name>.toml -> the named conda channels (Channel) and pip indexes (Index) matrices refer
to."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import unquote, urlsplit

import msgspec

from envgen.errors import InputError, MatrixError, Problem
from envgen.inputs.toml_reader import check_keys, get_bool, get_str, read_toml
from envgen.inputs.untrusted import host_problem, index_url_problem
from envgen.model import Channel, Index
from envgen.names import is_plain_name
from envgen.redact import masked_url, redact_url, strip_credentials
from envgen.urls import url_host

KINDS = ("conda", "pip")
_KEYS = {"conda": ("kind", "url"), "pip": ("kind", "url", "trusted_host", "explicit")}


def load_channels(channels_dir: Path) -> dict[str, Channel | Index]:
    """Every channel file in `channels_dir`, by name (the file stem); MatrixError lists every
    problem."""
    channels, problems = read_channels(channels_dir)
    if problems:
        raise MatrixError(problems)
    return channels


def read_channels(channels_dir: Path) -> tuple[dict[str, Channel | Index], list[Problem]]:
    """The channels that are valid, and the problems of those that are not (a bad file yields no
    entry)."""
    if not channels_dir.is_dir():
        raise InputError(
            f"no channels directory at {channels_dir}",
            hint="create it with one <name>.toml per conda channel or pip index (kind = "
            '"conda" | "pip")',
            file=str(channels_dir),
        )
    channels: dict[str, Channel | Index] = {}
    problems: list[Problem] = []
    for path in sorted(channels_dir.glob("*.toml")):
        channel, found = read_channel(path)
        problems.extend(found)
        if channel is not None:
            channels[channel.name] = channel
    return channels, problems


def read_channel(path: Path) -> tuple[Channel | Index | None, list[Problem]]:
    """One channel file: the Channel or Index it declares, or None with its problems."""
    data, problems = read_toml(path)
    if problems.items:
        return None, problems.items
    name = path.stem
    if not is_plain_name(name):
        problems.add(
            (), f"channel name '{name}' (the file name) must be letters, digits, '.', '_' or '-'"
        )
    kind = get_str(problems, data, ("kind",))
    if "kind" not in data:
        problems.add(("kind",), 'missing required key (kind = "conda" or kind = "pip")')
    elif kind is not None and kind not in KINDS:
        problems.add(("kind",), f"'{kind}' is not a kind; expected one of: {', '.join(KINDS)}")
        kind = None
    allowed = _KEYS.get(kind or "pip", _KEYS["pip"])
    check_keys(problems, (), data, allowed, required=("url",))
    url = get_str(problems, data, ("url",))
    if url is not None and any(char.isspace() for char in url):
        problems.add(("url",), "must not contain whitespace")
    elif url is not None and (problem := index_url_problem(url)):
        problems.add(("url",), problem)
    trusted_host = get_str(problems, data, ("trusted_host",))
    if trusted_host is not None and (problem := host_problem(trusted_host)):
        problems.add(("trusted_host",), problem)
    explicit = get_bool(problems, data, ("explicit",), default=False)
    if problems.items or kind is None or url is None:
        return None, problems.items
    if kind == "conda":
        return Channel(name=name, url=url.rstrip("/")), []
    return Index(name=name, url=url, explicit=explicit, trusted_host=trusted_host), []


# --- using an index: `${VAR}` expanded, credentials apart
# ----------------------------------------------------

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class IndexAccess(msgspec.Struct, frozen=True):
    """An index ready to use: its URL expanded and without credentials, and the credentials
    apart."""

    name: str
    url: str
    explicit: bool
    username: str | None = None
    password: str | None = None
    # pip's --trusted-host: this host (or host:port) is reached even over plain HTTP or an
    # unverified certificate.
    trusted_host: str | None = None

    @property
    def shown(self) -> str:
        """The URL for messages: credentials, if any, as `***@`."""
        return self.url if self.username is None and self.password is None else masked_url(self.url)

    @property
    def secrets(self) -> tuple[str, ...]:
        """What to mask in output: the password, or a lone token given as the user name."""
        secret = self.password if self.password is not None else self.username
        return (secret,) if secret else ()

    @property
    def env(self) -> dict[str, str]:
        """uv's per-index credential variables, so no credential is written into a file."""
        if self.username is None and self.password is None:
            return {}
        key = re.sub(r"[^A-Z0-9]", "_", self.name.upper())
        return {
            f"UV_INDEX_{key}_USERNAME": self.username or "",
            f"UV_INDEX_{key}_PASSWORD": self.password or "",
        }


def expand_url(url: str, what: str, environ: Mapping[str, str]) -> str:
    """`url` with every `${VAR}` replaced from `environ`; a missing variable is an InputError."""

    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in environ:
            raise InputError(
                f"{what}: its URL {redact_url(url)} refers to ${{{name}}}, which is not set",
                hint=f"export {name} (e.g. the index token) and run again",
                host=url_host(url),
                reason=f"${{{name}}} is not set",
            )
        return environ[name]

    return _VAR.sub(value, url)


def access_index(index: Index, environ: Mapping[str, str]) -> IndexAccess:
    """The index with `${VAR}` expanded and its `user:password@` split off the URL."""
    url = expand_url(index.url, f"index {index.name}", environ)
    parts = urlsplit(url)
    username = unquote(parts.username) if parts.username is not None else None
    password = unquote(parts.password) if parts.password is not None else None
    return IndexAccess(
        index.name, strip_credentials(url), index.explicit, username, password, index.trusted_host
    )
