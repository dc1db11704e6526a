"""The direct layer's conflicts: packages whose requirements, from every origin, no offered release meets together.

Pure: the requirements come with their origins (the matrix's pins, the sources' files, the overrides), the
releases each package's index offers come from the caller, and markers are evaluated in the platform's marker
environment. uv names one conflict per run; this names every one the direct layer holds, before uv is asked.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from envgen.model import TracedRequirement


@dataclass(frozen=True)
class Conflict:
    """A package no offered release of which meets every requirement on it (`demands`, with their origins)."""

    name: str
    demands: tuple[TracedRequirement, ...]
    offered: tuple[Version, ...]

    @property
    def specifier(self) -> SpecifierSet:
        """What the demands ask for together (possibly nothing any version meets)."""
        return _joint(self.demands)


def _joint(demands: Iterable[TracedRequirement]) -> SpecifierSet:
    joint = SpecifierSet()
    for demand in demands:
        joint &= Requirement(demand.text).specifier
    return joint


def applies(requirement: Requirement, environment: Mapping[str, str]) -> bool:
    """Whether a requirement counts on the platform whose marker environment is `environment`."""
    return requirement.marker is None or requirement.marker.evaluate({**environment, "extra": ""})


def by_name(
    requirements: Iterable[TracedRequirement], environment: Mapping[str, str]
) -> dict[str, tuple[TracedRequirement, ...]]:
    """The requirements that count on the platform, grouped by canonical name, in their given order."""
    grouped: dict[str, list[TracedRequirement]] = {}
    for traced in requirements:
        parsed = Requirement(traced.text)
        if parsed.url or not applies(parsed, environment):
            continue
        grouped.setdefault(canonicalize_name(parsed.name), []).append(traced)
    return {name: tuple(demands) for name, demands in grouped.items()}


def met_by(demands: Sequence[TracedRequirement], offered: Iterable[Version]) -> list[Version]:
    """The offered releases that meet every demand, as a resolver filters them (pre-releases only where the
    demands name one, or where nothing else is offered)."""
    return list(_joint(demands).filter(sorted(offered)))


def find_conflicts(
    requirements: Iterable[TracedRequirement],
    offered: Callable[[str], Sequence[Version] | None],
    environment: Mapping[str, str],
) -> list[Conflict]:
    """Every package whose requirements no offered release meets together, by name.

    `offered(name)` is the releases the package's index offers, or None where that is not known (the package is
    then left to the resolver).
    """
    conflicts = []
    for name, demands in sorted(by_name(requirements, environment).items()):
        releases = offered(name)
        if releases is not None and not met_by(demands, releases):
            conflicts.append(Conflict(name, demands, tuple(sorted(releases))))
    return conflicts
