"""The direct layer's conflicts: packages whose requirements no offered release meets together.

Pure: the requirements come with their origins (the matrix's pins, the sources' files, the
overrides), the releases each package's index offers come from the caller, and markers are
evaluated in the platform's marker environment. uv names one conflict per run; this names every
one the direct layer holds, each with the override that would settle it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from envgen.model import TracedRequirement
from envgen.names import package_key

# How many offered releases a message shows (the JSON has them all).
_SHOWN = 6


@dataclass(frozen=True)
class Conflict:
    """A package no offered release of which meets every requirement on it (`demands`, with their
    origins)."""

    name: str
    demands: tuple[TracedRequirement, ...]
    offered: tuple[Version, ...]

    @property
    def specifier(self) -> SpecifierSet:
        """What the demands ask for together (possibly nothing any version meets)."""
        return _joint(self.demands)

    def meets(self, version: Version) -> tuple[TracedRequirement, ...]:
        """The demands `version` meets."""
        return tuple(d for d in self.demands if _specifier(d).contains(version, prereleases=True))

    def settlement(self) -> Version | None:
        """The offered release meeting the most demands: the newest of those, a final release before
        a pre-release (None when nothing is offered)."""
        if not self.offered:
            return None
        return max(self.offered, key=lambda v: (len(self.meets(v)), not v.is_prerelease, v))


def _specifier(demand: TracedRequirement) -> SpecifierSet:
    return Requirement(demand.text).specifier


def _joint(demands: Iterable[TracedRequirement]) -> SpecifierSet:
    joint = SpecifierSet()
    for demand in demands:
        joint &= _specifier(demand)
    return joint


def applies(requirement: Requirement, environment: Mapping[str, str]) -> bool:
    """Whether a requirement counts on the platform whose marker environment is `environment`."""
    return requirement.marker is None or requirement.marker.evaluate({**environment, "extra": ""})


def by_name(
    requirements: Iterable[TracedRequirement], environment: Mapping[str, str]
) -> dict[str, tuple[TracedRequirement, ...]]:
    """The requirements that count on the platform, grouped by canonical name, in their given
    order."""
    grouped: dict[str, list[TracedRequirement]] = {}
    for traced in requirements:
        parsed = Requirement(traced.text)
        if parsed.url or not applies(parsed, environment):
            continue
        grouped.setdefault(package_key(parsed.name), []).append(traced)
    return {name: tuple(demands) for name, demands in grouped.items()}


def met_by(demands: Sequence[TracedRequirement], offered: Iterable[Version]) -> list[Version]:
    """The offered releases that meet every demand, as a resolver filters them (pre-releases only
    where the demands name one, or where nothing else is offered)."""
    return list(_joint(demands).filter(sorted(offered)))


def asked(requirements: Iterable[TracedRequirement], environment: Mapping[str, str]) -> list[str]:
    """The names whose requirements could conflict: required (not only constrained) and limited to
    some versions; only their releases need asking."""
    return sorted(
        name
        for name, demands in by_name(requirements, environment).items()
        if any(not d.constraint for d in demands) and str(_joint(demands))
    )


def find_conflicts(
    requirements: Iterable[TracedRequirement],
    offered: Callable[[str], Sequence[Version] | None],
    environment: Mapping[str, str],
) -> list[Conflict]:
    """Every package whose requirements no offered release meets together, by name.

    `offered(name)` is the releases the package's index offers, or None where that is not known (the
    package is then left to the resolver). A name only constraints bring is no conflict: nothing
    requires it.
    """
    conflicts = []
    for name, demands in sorted(by_name(requirements, environment).items()):
        if all(d.constraint for d in demands):
            continue
        releases = offered(name)
        if releases is not None and not met_by(demands, releases):
            conflicts.append(Conflict(name, demands, tuple(sorted(releases))))
    return conflicts


# --- what the user is shown ---------------------------------------------------------------------


def override_snippet(conflict: Conflict) -> str | None:
    """The `[overrides.<name>]` that would settle the conflict, as TOML to paste: the release
    meeting the most demands, what it meets and overrules as comments, and the reason left to
    fill (an empty one is refused)."""
    version = conflict.settlement()
    if version is None:
        return None
    met = conflict.meets(version)
    requirement = json.dumps(f"{conflict.name}=={version}")
    lines = [f"[overrides.{conflict.name}]", f"requirement = {requirement}"]
    lines += [f"# meets {d.text} ({d.origin})" for d in met]
    lines += [f"# overrules {d.text} ({d.origin})" for d in conflict.demands if d not in met]
    lines.append('reason = ""  # say why, naming what it overrules')
    return "\n".join(lines)


def _shown_versions(offered: Sequence[Version]) -> str:
    newest = sorted(offered, reverse=True)
    shown = ", ".join(str(v) for v in newest[:_SHOWN])
    return f"{shown} and {len(newest) - _SHOWN} older" if len(newest) > _SHOWN else shown


def describe_conflicts(
    conflicts: Sequence[Conflict],
    platform: str,
    indexes: Mapping[str, str],
) -> str:
    """Every conflict with its origins, what its index offers, the override that would settle it.

    `indexes` names the index each package's releases came from."""
    names = ", ".join(c.name for c in conflicts)
    lines = [f"no PyPI resolution for {platform}: no release meets every requirement on {names}"]
    for conflict in conflicts:
        offered = _shown_versions(conflict.offered) or "no release"
        index = indexes.get(conflict.name, "its index")
        lines.append(f"  {conflict.name} ({index} offers {offered}):")
        lines += [f"    {d.text}  ({d.origin})" for d in conflict.demands]
    snippets = [s for s in map(override_snippet, conflicts) if s]
    if snippets:
        lines.append("an override in the matrix settles each (or relax one of its requirements):")
        shown = [f"  {line}" for snippet in snippets for line in (*snippet.splitlines(), "")][:-1]
        lines += [line.rstrip() for line in shown]
    return "\n".join(lines)


def conflict_record(conflict: Conflict, platform: str, index: str | None) -> dict[str, object]:
    """One conflict as `--json` shows it (docs/cli-json.md)."""
    version = conflict.settlement()
    met = conflict.meets(version) if version is not None else ()
    override = None
    if version is not None:
        override = {
            "requirement": f"{conflict.name}=={version}",
            "meets": [str(d.origin) for d in met],
            "overrules": [str(d.origin) for d in conflict.demands if d not in met],
            "toml": override_snippet(conflict),
        }
    return {
        "platform": platform,
        "name": conflict.name,
        "index": index,
        "origins": [_origin_record(d) for d in conflict.demands],
        "offered": [str(v) for v in conflict.offered],
        "override": override,
    }


def _origin_record(demand: TracedRequirement) -> dict[str, object]:
    origin = demand.origin
    return {
        "requirement": demand.text,
        "origin": str(origin),
        "file": origin.file,
        "line": origin.line,
        "key": origin.key,
        "source": origin.source,
        "constraint": demand.constraint,
    }
