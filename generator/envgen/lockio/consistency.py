"""Is a lock consistent? Every locked package's declared dependencies met by the locked versions
(pure).

Checked per platform, markers and extras already evaluated for that platform and python in each
entry's `depends`; the sources' requirements are evaluated here. The only contradictions a lock may
hold are those a `transitive = true` override makes on purpose, each recorded under that override
(`violates`). `lock` records them and fails on any other; `check` verifies a lock read from disk the
same way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

import msgspec
from packaging.requirements import Requirement as Pep508
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from envgen.model import Lock, PipEntry
from envgen.names import package_key, vcs_of
from envgen.platforms import marker_environment


@dataclass(frozen=True, order=True)
class Violation:
    """A requirement the lock does not meet on `platform`: `pair` says who needs what ("x==1 needs
    y>=2")."""

    name: str
    pair: str
    platform: str
    found: str

    def __str__(self) -> str:
        return f"{self.pair}, {self.platform} has {self.found}"


def _contains(specifier: str, version: str) -> bool:
    try:
        return SpecifierSet(specifier).contains(Version(version), prereleases=True)
    except (InvalidSpecifier, InvalidVersion):
        return False


def _unmet(
    who: str,
    name: str,
    specifier: str,
    platform: str,
    entries: Mapping[str, PipEntry],
    satisfied: AbstractSet[str],
) -> list[Violation]:
    key = package_key(name)
    if key in satisfied:
        return []
    entry = entries.get(key)
    pair = f"{who} needs {name}{specifier}"
    if entry is None:
        return [Violation(key, pair, platform, "none locked")]
    if specifier and not _contains(specifier, entry.version):
        return [Violation(key, pair, platform, entry.version)]
    return []


@dataclass(frozen=True)
class _Platform:
    """What one platform of a lock meets a requirement with: its entries (an archive's wheels among
    them), and the names met without one."""

    name: str
    entries: Mapping[str, PipEntry]
    satisfied: AbstractSet[str]

    def unmet(
        self,
        who: str,
        name: str,
        specifier: str,
        *,
        unless: AbstractSet[str] = frozenset(),
    ) -> list[Violation]:
        return _unmet(who, name, specifier, self.name, self.entries, self.satisfied - unless)


def violations(lock: Lock, python: Callable[[str], str]) -> list[Violation]:
    """Every requirement of a locked package, a source or an override that the lock does not meet.

    Names a source provides and pending packages are met by construction, and so are the packages
    the lock leaves out on purpose on their platforms; an archive's wheels are held to their
    versions, and their own requirements must be met. The sources' requirements on an overridden
    name were replaced by the override, whose own requirement must be met instead.
    """
    overridden = {package_key(o.override.name): o.override for o in lock.overrides}
    satisfied: set[str] = {package_key(s.source.distribution) for s in lock.sources}
    satisfied |= {package_key(p.name) for p in lock.pending}
    found: list[Violation] = []
    for platform in lock.platforms:
        environment = {**marker_environment(platform, python(platform)), "extra": ""}
        entries: dict[str, PipEntry] = {package_key(e.name): e for e in lock.pip_for(platform)}
        left = {package_key(e.name) for e in lock.exclusions if e.applies(platform)}
        here = _Platform(platform, entries | _wheels(lock, platform), satisfied | left)
        for entry in lock.pip_for(platform):
            for name, specifier in entry.depends:
                found += here.unmet(f"{entry.name}=={entry.version}", name, specifier)
        found += _archive_violations(lock, here)
        for locked in lock.sources:
            for req in locked.requirements:
                parsed = Pep508(req.text)
                skipped = req.constraint or vcs_of(parsed.url) is not None
                if skipped or package_key(parsed.name) in overridden:
                    continue
                if parsed.marker is None or parsed.marker.evaluate(environment):
                    found += here.unmet(str(req.origin), parsed.name, str(parsed.specifier))
        for name, override in sorted(overridden.items()):
            parsed = Pep508(override.requirement)
            if parsed.marker is None or parsed.marker.evaluate(environment):
                who = f"override {override.name}"
                found += here.unmet(who, parsed.name, str(parsed.specifier), unless={name})
    return sorted(set(found))


def _archive_violations(lock: Lock, here: _Platform) -> list[Violation]:
    """What the wheels of the platform's archives require (evaluated for it when locked) and the
    lock does not meet."""
    found = []
    for archive in lock.archives_for(here.name):
        for member in archive.members:
            who = f"{member.name}=={member.version} (archive {archive.name})"
            for text in member.requires:
                parsed = Pep508(text)
                found += here.unmet(who, parsed.name, str(parsed.specifier))
    return found


def _wheels(lock: Lock, platform: str) -> dict[str, PipEntry]:
    """The wheels of the platform's archives, as entries whose versions requirements are held to."""
    return {
        package_key(m.name): PipEntry(m.name, m.version, platform, a.url, m.sha256)
        for a in lock.archives_for(platform)
        for m in a.members
    }


def explained(lock: Lock, violation: Violation) -> bool:
    """Whether a transitive override on the violated name records this pair."""
    return any(
        o.override.transitive
        and package_key(o.override.name) == violation.name
        and violation.pair in o.violates
        for o in lock.overrides
    )


def record(lock: Lock, found: Sequence[Violation]) -> tuple[Lock, list[Violation]]:
    """`lock` with each violation a transitive override causes recorded under it; and the others."""
    transitive = {package_key(o.override.name) for o in lock.overrides if o.override.transitive}
    pairs: dict[str, set[str]] = {}
    others = []
    for violation in found:
        if violation.name in transitive and not violation.pair.startswith("override "):
            pairs.setdefault(violation.name, set()).add(violation.pair)
        else:
            others.append(violation)
    overrides = tuple(
        msgspec.structs.replace(
            o, violates=tuple(sorted(pairs.get(package_key(o.override.name), ())))
        )
        for o in lock.overrides
    )
    return msgspec.structs.replace(lock, overrides=overrides), others
