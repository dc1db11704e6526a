"""Why a re-lock moved each package: per platform, what changed against the previous lock and the
reason (pure).

A re-lock keeps every previous version its inputs still allow, so a version moves only because an
input requires it, an upgrade flag allowed it, or the index no longer offers it; a package appears
because an input or another package needs it, and disappears when nothing does any more.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from packaging.requirements import InvalidRequirement
from packaging.requirements import Requirement as Pep508
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from envgen.model import CondaEntry, LockedSource, PipEntry, TracedRequirement
from envgen.names import package_key
from envgen.resolve.movable import Movable

_E = TypeVar("_E", PipEntry, CondaEntry)

UNAVAILABLE = "the previous version is no longer offered by the index; resolved afresh"
# A previous version the index still offers, that no requirement refuses, moved only to let the
# solve succeed.
SOLVER = "moved by the solver to fit the other changes"
# Whether a conda requirement (`name`, `spec` as in a depends string) admits an entry.
CondaMatch = Callable[[str, str, CondaEntry], bool]


@dataclass(frozen=True)
class Move:
    """One package that changed on one platform; `old`/`new` are None when it
    appeared/disappeared."""

    platform: str
    manager: str
    name: str
    old: str | None
    new: str | None
    reason: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "manager": self.manager,
            "name": self.name,
            "old": self.old,
            "new": self.new,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class Required:
    """A requirement on a package in the new lock: who asks (an input's origin, or `name version`)
    and the spec."""

    by: str
    spec: str
    root: bool


def _pip_version(entry: PipEntry) -> str:
    return entry.version


def _conda_version(entry: CondaEntry) -> str:
    return f"{entry.version} {entry.build}"


def pip_requirements(
    roots: Sequence[TracedRequirement], entries: Sequence[PipEntry]
) -> dict[str, list[Required]]:
    """Every requirement on each package of one platform's pip lock: the inputs', then the
    packages'."""
    found: dict[str, list[Required]] = {}
    for root in roots:
        try:
            parsed = Pep508(root.text)
        except InvalidRequirement:
            continue
        spec = f"@ {parsed.url}" if parsed.url else str(parsed.specifier)
        found.setdefault(package_key(parsed.name), []).append(
            Required(f"{root.origin}", spec, root=True)
        )
    for entry in entries:
        for name, spec in entry.depends:
            found.setdefault(package_key(name), []).append(
                Required(f"{entry.name} {entry.version}", spec, False)
            )
    return found


def conda_requirements(
    specs: Sequence[str], entries: Sequence[CondaEntry]
) -> dict[str, list[Required]]:
    """Every requirement on each package of one platform's conda lock: the matrix's specs, then the
    packages'."""
    found: dict[str, list[Required]] = {}
    for text in specs:
        name, _, spec = text.strip().partition(" ")
        found.setdefault(package_key(name), []).append(
            Required("[conda] specs", spec.strip(), root=True)
        )
    for entry in entries:
        for name, spec in entry.depends:
            found.setdefault(package_key(name), []).append(
                Required(f"{entry.name} {entry.version}", spec, False)
            )
    return found


def _pip_admits(spec: str, entry: PipEntry) -> bool:
    if spec.startswith("@"):
        return spec[1:].strip() == entry.url
    try:
        return SpecifierSet(spec).contains(Version(entry.version), prereleases=True)
    except (InvalidSpecifier, InvalidVersion):
        return True


def _reason(
    old: PipEntry | CondaEntry | None,
    required: Sequence[Required],
    upgrade: Movable,
    name: str,
    admits: Callable[[str, PipEntry | CondaEntry], bool],
    otherwise: str,
    after: Mapping[str, PipEntry | CondaEntry],
) -> str:
    if old is None:
        roots = [r for r in required if r.root]
        if roots:
            return "new input " + "; ".join(f"{r.by} ({r.spec or 'any'})" for r in roots)
        return (
            "new dependency of " + ", ".join(sorted({r.by for r in required}))
            if required
            else "new dependency"
        )
    refusing = [r for r in required if not admits(r.spec, old)]
    if refusing:
        return "required by " + "; ".join(f"{r.by} ({r.spec})" for r in refusing)
    if upgrade.covers(name):
        return upgrade.describe(name)
    # The previous version's own requirements no longer fit what moved (e.g. it pins a bumped
    # package).
    outgrown = []
    for dep, spec in old.depends:
        now = after.get(package_key(dep))
        if now is not None and not admits(spec, now):
            outgrown.append(f"{dep} {spec} (the lock now has {now.version})")
    if outgrown:
        return f"its previous version {old.version} needs " + "; ".join(outgrown)
    return otherwise


def explain_pip(
    platform: str,
    previous: Sequence[PipEntry],
    new: Sequence[PipEntry],
    roots: Sequence[TracedRequirement],
    upgrade: Movable,
) -> list[Move]:
    """The pip packages of one platform whose version changed, appeared or disappeared, with their
    reasons."""
    required = pip_requirements(roots, new)

    def admits(spec: str, entry: PipEntry | CondaEntry) -> bool:
        return isinstance(entry, PipEntry) and _pip_admits(spec, entry)

    # uv does not say why it left a preference; with no requirement refusing it, the version is
    # gone.
    return _explain(
        platform,
        "pip",
        previous,
        new,
        required,
        upgrade,
        admits,
        _pip_version,
        lambda key: UNAVAILABLE,
    )


def explain_conda(
    platform: str,
    previous: Sequence[CondaEntry],
    new: Sequence[CondaEntry],
    specs: Sequence[str],
    upgrade: Movable,
    matches: CondaMatch,
    gone: Collection[str] = (),
) -> list[Move]:
    """The conda packages of one platform whose version or build changed, appeared or disappeared,
    and why.

    `gone` names the packages whose previous record the channels no longer offer (the solve knows).
    """
    required = conda_requirements(specs, new)

    def admits(spec: str, entry: PipEntry | CondaEntry) -> bool:
        return isinstance(entry, CondaEntry) and matches(entry.name, spec, entry)

    gone_keys = {package_key(name) for name in gone}

    def otherwise(key: str) -> str:
        return UNAVAILABLE if key in gone_keys else SOLVER

    return _explain(
        platform, "conda", previous, new, required, upgrade, admits, _conda_version, otherwise
    )


def _explain(
    platform: str,
    manager: str,
    previous: Sequence[_E],
    new: Sequence[_E],
    required: Mapping[str, Sequence[Required]],
    upgrade: Movable,
    admits: Callable[[str, PipEntry | CondaEntry], bool],
    version: Callable[[_E], str],
    otherwise: Callable[[str], str],
) -> list[Move]:
    before = {package_key(e.name): e for e in previous}
    after = {package_key(e.name): e for e in new}
    moves = []
    for key in sorted(before.keys() | after.keys()):
        old, now = before.get(key), after.get(key)
        if now is None:
            assert old is not None
            moves.append(Move(platform, manager, old.name, version(old), None, "no longer needed"))
        elif old is None or version(old) != version(now):
            reason = _reason(
                old, required.get(key, ()), upgrade, key, admits, otherwise(key), after
            )
            moves.append(
                Move(
                    platform, manager, now.name, version(old) if old else None, version(now), reason
                )
            )
        elif old.sha256 != now.sha256:
            # A rebuilt wheel (build tag) or a replaced file: the version stays, the bytes do not.
            file = now.url.rsplit("/", 1)[-1]
            moves.append(
                Move(
                    platform,
                    manager,
                    now.name,
                    version(old),
                    version(now),
                    f"same version, other file {file}",
                )
            )
    return moves


def _source_reason(old: LockedSource, new: LockedSource, update: Movable, upgrade: Movable) -> str:
    was, now = old.source, new.source
    if was.url != now.url:
        return f"new input sources.{now.name}.url ({now.url})"
    if was.ref != now.ref:
        return f"new input sources.{now.name}.ref ({was.ref} -> {now.ref})"
    if upgrade.covers(now.name):
        return upgrade.describe(now.name)
    if update.covers(now.name):
        return update.describe(now.name)
    return "the recorded commit is no longer reachable from its ref; re-pinned"


def explain_sources(
    previous: Sequence[LockedSource],
    new: Sequence[LockedSource],
    update: Movable,
    upgrade: Movable,
) -> list[Move]:
    """The sources whose commit changed, appeared or disappeared, and why (platform "": every
    platform)."""
    before = {s.source.name: s for s in previous}
    after = {s.source.name: s for s in new}
    moves = []
    for name in sorted(before.keys() | after.keys()):
        old, now = before.get(name), after.get(name)
        if now is None:
            assert old is not None
            moves.append(Move("", "source", name, old.commit, None, "no longer a source"))
        elif old is None:
            moves.append(Move("", "source", name, None, now.commit, f"new input sources.{name}"))
        else:
            if old.commit != now.commit:
                reason = _source_reason(old, now, update, upgrade)
                moves.append(Move("", "source", name, old.commit, now.commit, reason))
            moves += _submodule_moves(old, now)
    return moves


def _submodule_moves(old: LockedSource, now: LockedSource) -> list[Move]:
    """The submodules of a source that changed commit, appeared or disappeared (named
    `source/path`): they move only with the source's commit, or when the source opts in or out of
    them."""
    before = {s.path: s.commit for s in old.submodules}
    after = {s.path: s.commit for s in now.submodules}
    name = now.source.name
    if old.source.submodules != now.source.submodules:
        reason = f"new input sources.{name}.submodules ({str(now.source.submodules).lower()})"
    elif old.commit != now.commit:
        reason = f"the gitlink at {name}'s new commit"
    else:
        reason = f"read from {name}'s tree"
    return [
        Move("", "submodule", f"{name}/{path}", before.get(path), after.get(path), reason)
        for path in sorted(before.keys() | after.keys())
        if before.get(path) != after.get(path)
    ]


def unavailable(moves: Collection[Move]) -> list[Move]:
    """The moves that fell back because their previous version is gone from the index."""
    return [m for m in moves if m.reason == UNAVAILABLE]
