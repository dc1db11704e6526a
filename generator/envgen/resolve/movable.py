"""What a re-lock may move beyond what its inputs require: one value for `--update`/`--update-all`
(sources) and `--upgrade-package`/`--upgrade` (packages and sources), and its rules (pure; light,
since every `envgen lock` imports it)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from envgen.names import package_key

if TYPE_CHECKING:
    from envgen.model import Matrix


@dataclass(frozen=True)
class Movable:
    """Every name, or the named ones, that a re-lock may move beyond what its inputs require.

    A name is matched by its one spelling (`package_key`), as pip and conda match package names;
    `flag` and `every_flag` are the options that said so, which name the reason a package moved.
    """

    everything: bool = False
    names: frozenset[str] = field(default_factory=frozenset)
    flag: str = field(default="--upgrade-package", compare=False)
    every_flag: str = field(default="--upgrade", compare=False)

    @classmethod
    def sources(cls, everything: bool = False, names: Iterable[str] = ()) -> Movable:
        """The sources moved to their ref's current commit: `--update NAME`, `--update-all`."""
        return cls(everything, _keys(names), "--update", "--update-all")

    @classmethod
    def packages(cls, everything: bool = False, names: Iterable[str] = ()) -> Movable:
        """The packages (pip or conda) and sources moved to the newest their inputs allow:
        `--upgrade-package NAME`, `--upgrade`."""
        return cls(everything, _keys(names), "--upgrade-package", "--upgrade")

    def __bool__(self) -> bool:
        """Whether anything may move."""
        return self.everything or bool(self.names)

    def covers(self, name: str) -> bool:
        """Whether `name` is free to move."""
        return self.everything or package_key(name) in self.names

    def describe(self, name: str) -> str:
        """The flag that let `name` move."""
        return self.every_flag if self.everything else f"{self.flag} {package_key(name)}"

    def including(self, names: Iterable[str]) -> Movable:
        """These names free to move too."""
        return replace(self, names=self.names | _keys(names))

    def unknown(self, known: Iterable[str]) -> list[str]:
        """The names given that are none of `known`, sorted."""
        return sorted(self.names - _keys(known))


def sources_to_update(matrix: Matrix, update: Movable, upgrade: Movable) -> Movable:
    """The sources of `matrix` that move to their ref's current commit: `--update`'s, and those
    `--upgrade` covers."""
    if update.everything or upgrade.everything:
        return Movable.sources(everything=True)
    return update.including(s.name for s in matrix.sources if upgrade.covers(s.name))


def _keys(names: Iterable[str]) -> frozenset[str]:
    return frozenset(package_key(name) for name in names)


# A re-lock that moves only what its inputs require.
NOTHING = Movable()
