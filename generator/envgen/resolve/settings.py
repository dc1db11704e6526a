"""What resolving takes from the process that runs it, read once by the command: the variables
(`${VAR}` in channel and index URLs, the user's git, TLS and proxy settings), the network limits,
the cache directory, whether to stay offline, and where uv is. No stage reads the process itself."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from types import MappingProxyType

import msgspec

from envgen import network
from envgen.errors import InputError
from envgen.inputs.channels import IndexAccess, access_index, expand_url
from envgen.model import Index
from envgen.platforms import host_platform
from envgen.resolve.git.remote import GitEnv


class Settings(msgspec.Struct, frozen=True):
    """The environment a re-lock (or a re-solve, or the watch) resolves in, or an install (or a
    check's env) installs in."""

    variables: Mapping[str, str]
    limits: network.Limits
    cache: Path
    offline: bool = False
    uv: str = "uv"
    # The platform of this machine, when a lock is made for one (a build here takes the packages
    # the matrix takes from an index on it from there).
    host: str | None = None

    @classmethod
    def read(cls, environ: Mapping[str, str], *, cache: Path, offline: bool = False) -> Settings:
        """The settings of a command run in `environ` (a malformed `ENVGEN_*` limit is bad
        input)."""
        # Imported here: locating uv reads sysconfig, which a no-op lock never needs. Located once:
        # sysconfig's first read is not thread-safe, and the platforms are planned concurrently.
        from uv import find_uv_bin

        variables = MappingProxyType(dict(environ))
        limits = network.limits(variables)
        return cls(variables, limits, cache, offline, find_uv_bin(), _host())

    @classmethod
    def live(cls, environ: Mapping[str, str], *, cache: Path) -> Settings:
        """The settings of an install: its tools and recipe run in `environ` as it is when each
        starts (the scratch TMPDIR of the command included), within the limits read now."""
        return cls(environ, network.limits(environ), cache)

    @property
    def git(self) -> GitEnv:
        """What every git call runs with."""
        return GitEnv(self.variables, self.limits)

    def access(self, index: Index) -> IndexAccess:
        """`index` with its `${VAR}` expanded from the variables, credentials apart."""
        return access_index(index, self.variables)

    def accesses(self, indexes: Iterable[Index]) -> dict[str, IndexAccess]:
        """Each of `indexes` as `access` gives it, by name."""
        return {index.name: self.access(index) for index in indexes}

    def expand(self, url: str, what: str) -> str:
        """`url` with every `${VAR}` expanded from the variables (`what` it is, for the message)."""
        return expand_url(url, what, self.variables)


def _host() -> str | None:
    """This machine's platform; None on one no lock is made for."""
    try:
        return host_platform()
    except InputError:
        return None
