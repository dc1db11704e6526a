"""What a re-lock may move beyond what its inputs require (`--upgrade`, `--upgrade-package`), and the one
spelling of a package name across pip and conda (pure; light, since every `envgen lock` imports it)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field


def package_key(name: str) -> str:
    """One spelling per package across pip (PEP 503) and conda (lower case) names."""
    # Imported here: packaging.utils loads packaging.tags and sysconfig, which a no-op lock never needs.
    from packaging.utils import canonicalize_name

    return str(canonicalize_name(name))


@dataclass(frozen=True)
class Upgrade:
    """What a re-lock may move beyond what its inputs require: everything, or the named packages."""

    everything: bool = False
    packages: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def of(cls, everything: bool = False, packages: Iterable[str] = ()) -> Upgrade:
        return cls(everything, frozenset(package_key(p) for p in packages))

    def covers(self, name: str) -> bool:
        """Whether `name` is free to move to its newest allowed version."""
        return self.everything or package_key(name) in self.packages

    def describe(self, name: str) -> str:
        """The flag that let `name` move."""
        return "--upgrade" if self.everything else f"--upgrade-package {package_key(name)}"


# A re-lock that keeps every previous version its inputs allow.
NO_UPGRADE = Upgrade()
