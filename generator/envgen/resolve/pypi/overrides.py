"""Overrides, scoped: the direct layer replaced in envgen itself, third-party metadata only when
`transitive` (pure).

uv's `override-dependencies` rewrite a requirement in every package's metadata, and ignore the index
a package is pinned to. By default an override here replaces only the requirements of the direct
layer (the matrix's pins, the sources' files and declared metadata): the override's requirement then
stays a direct requirement carrying its index pin, and third-party packages' own requirements keep
constraining the resolution, so the resolver backtracks to releases that agree with it. `transitive
= true` also hands the requirement to uv's global override; what that makes the lock contradict is
recorded (see consistency.py).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from packaging.requirements import Requirement as Pep508
from packaging.version import InvalidVersion, Version

from envgen.model import AppliedOverride, Matrix, Origin, Override, TracedRequirement
from envgen.names import package_key


def _name(text: str) -> str:
    return package_key(Pep508(text).name)


def override_origin(matrix: Matrix, override: Override) -> Origin:
    return matrix.origin("overrides", override.name, "requirement")


def scope(
    matrix: Matrix, requirements: Sequence[TracedRequirement], excluded: Collection[str]
) -> tuple[TracedRequirement, ...]:
    """`requirements` with every one on a name `matrix` overrides replaced by the override's
    requirement.

    The override is a requirement where the direct layer required the name, and a constraint where
    only a `-c` file or third-party metadata brings it (an override limits versions; it never adds a
    package). Names a source provides or a pending package holds stay out, as every requirement on
    them does.
    """
    overrides = matrix.overrides
    by_name = {package_key(o.name): o for o in overrides if package_key(o.name) not in excluded}
    kept: list[TracedRequirement] = []
    required: set[str] = set()
    for req in requirements:
        name = _name(req.text)
        if name not in by_name:
            kept.append(req)
        elif not req.constraint:
            required.add(name)
    for name, override in sorted(by_name.items()):
        origin = override_origin(matrix, override)
        kept.append(
            TracedRequirement(override.requirement, origin, constraint=name not in required)
        )
    return tuple(kept)


def global_overrides(overrides: Sequence[Override]) -> list[str]:
    """What goes to uv's `override-dependencies`: the transitive overrides only."""
    return [o.requirement for o in overrides if o.transitive]


def replaced(
    override: Override, requirements: Sequence[TracedRequirement], environment: Mapping[str, str]
) -> tuple[TracedRequirement, ...]:
    """The requirements of the direct layer on the override's name that apply here: the matrix's
    own pin (the override takes its place, as it does the sources'), and the sources'
    requirements."""
    name = package_key(override.name)
    out = []
    for req in requirements:
        parsed = Pep508(req.text)
        if package_key(parsed.name) != name:
            continue
        if parsed.marker is None or parsed.marker.evaluate({**environment, "extra": ""}):
            out.append(req)
    return tuple(out)


@dataclass(frozen=True)
class Verdict:
    """The replaced requirements split by the locked version: those it contradicts, and how many it
    meets."""

    conflicted: tuple[TracedRequirement, ...]
    satisfied: int


def judge(replaced_here: Sequence[TracedRequirement], version: str | None) -> Verdict:
    """Which replaced requirements the locked version of the name (None: not locked here)
    contradicts."""
    conflicted = []
    for req in replaced_here:
        specifier = Pep508(req.text).specifier
        try:
            met = version is not None and specifier.contains(Version(version), prereleases=True)
        except InvalidVersion:
            met = False
        if not met:
            conflicted.append(req)
    return Verdict(tuple(conflicted), len(replaced_here) - len(conflicted))


def describe(platform: str, override: Override, verdict: Verdict, version: str | None) -> str:
    """The one warning line of an override on a platform: what it overrules (shown), what it meets
    (counted)."""
    scope_word = " (transitive: third-party metadata too)" if override.transitive else ""
    locked = f"locked {version}" if version else "not locked here"
    head = f"{platform}: override {override.requirement}{scope_word}, {locked}"
    satisfied = f"{verdict.satisfied} already satisfied" if verdict.satisfied else ""
    if verdict.conflicted:
        shown = "; ".join(f"{r.text} ({r.origin})" for r in verdict.conflicted)
        tail = f"; {satisfied}" if satisfied else ""
        return f"{head}: replaces {shown}{tail} (reason: {override.reason})"
    if satisfied:
        return f"{head}: overrules nothing here, {satisfied} (reason: {override.reason})"
    nobody = f"nothing of the matrix or its sources requires {override.name} here"
    return f"{head}: {nobody} (reason: {override.reason})"


def applied(override: Override, replaced_here: Sequence[TracedRequirement]) -> AppliedOverride:
    return AppliedOverride(
        override, tuple(sorted(set(replaced_here), key=lambda r: (r.text, str(r.origin))))
    )
