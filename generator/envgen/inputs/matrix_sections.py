"""The state a matrix is read with, and the lookups every section shares: tables, channels, pip
indexes, names taken once by their canonical form."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from envgen.inputs.toml_reader import (
    KeyPath,
    Problems,
    as_table,
    check_keys,
    did_you_mean,
    type_name,
)
from envgen.model import (
    Channel,
    Index,
)
from envgen.names import package_key

# An importable module's dotted name (an import check's module, where a build records its chip).
MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


class SectionReader:
    """What every section of a matrix is read with: the problems so far, the channels, the env's
    platforms and indexes as read so far."""

    def __init__(
        self,
        problems: Problems,
        path: Path,
        channels_dir: Path,
        channels: dict[str, Channel | Index],
        broken: set[str],
    ) -> None:
        self.p = problems
        self.path = path
        self.channels_dir = channels_dir
        self.channels = channels
        self.broken = broken
        self.platforms: tuple[str, ...] = ()
        self.default_indexes: tuple[Index, ...] = ()
        self.named_indexes: dict[str, Index] = {}

    def claim(self, seen: dict[str, str], name: str, path: KeyPath, what: str) -> bool:
        """Record `name` as taken by `what`; False (and a problem) when another entry took it
        already."""
        normal = package_key(name)
        if normal in seen:
            self.p.add(
                path, f"{what} is the same name as {seen[normal]} after normalisation ('{normal}')"
            )
            return False
        seen[normal] = what
        return True

    def section(
        self,
        data: dict[str, Any],
        path: KeyPath,
        allowed: tuple[str, ...],
        required: tuple[str, ...] = (),
    ) -> dict[str, Any] | None:
        """The table at `path` with its keys checked; None when absent (the parent reports a
        required one)."""
        if str(path[-1]) not in data:
            return None
        table = as_table(self.p, path, data[str(path[-1])])
        if table is not None:
            check_keys(self.p, path, table, allowed, required)
        return table

    def named(self, path: KeyPath, name: str, kind: str) -> Channel | Index | None:
        """The channel file `name` of `kind` ("conda" or "pip"), or None with a problem recorded."""
        if name in self.broken:
            return None  # its own file's problems are already reported
        what = "conda channel" if kind == "conda" else "pip index"
        wanted = Channel if kind == "conda" else Index
        same_kind = sorted(n for n, c in self.channels.items() if isinstance(c, wanted))
        found = self.channels.get(name)
        if found is None:
            plural = f"{what}es" if kind == "pip" else f"{what}s"
            self.p.add(
                path,
                f"unknown {what} '{name}' (no {self.channels_dir / (name + '.toml')})"
                f"{did_you_mean(name, same_kind)}; known {plural}: "
                f"{', '.join(same_kind) or 'none'}",
            )
            return None
        if not isinstance(found, wanted):
            other = "pip" if kind == "conda" else "conda"
            self.p.add(
                path,
                f"'{name}' is kind = \"{other}\" in "
                f"{self.channels_dir / (name + '.toml')}, not a {what}",
            )
            return None
        return found

    def pip_index(self, path: KeyPath, value: object) -> Index | None:
        """A pip index a package or a build names: it must be explicit or one of pip.indexes."""
        if not isinstance(value, str) or not value:
            self.p.add(path, f"expected an index name, got {type_name(value)}")
            return None
        index = self.named(path, value, "pip")
        if not isinstance(index, Index):
            return None
        if not index.explicit and index not in self.default_indexes:
            self.p.add(
                path,
                f"index '{value}' is neither explicit nor in pip.indexes; set explicit = true in "
                f"{self.channels_dir / (value + '.toml')} or list it in pip.indexes",
            )
            return None
        if index.explicit:
            self.named_indexes[index.name] = index
        return index


def dict_or_empty(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
