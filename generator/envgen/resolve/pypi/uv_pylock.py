"""uv's pylock.toml for one platform -> PipEntry: one artifact per package by tag priority, with
depends."""

from __future__ import annotations

import functools
import logging
import re
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from packaging.markers import Marker
from packaging.requirements import InvalidRequirement
from packaging.requirements import Requirement as Pep508
from packaging.tags import Tag
from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from envgen.errors import ResolutionError, ToolError
from envgen.model import PipEntry
from envgen.names import package_key
from envgen.redact import strip_credentials

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Artifact:
    """One file of a locked package: URL (as uv wrote it) and sha256."""

    url: str
    sha256: str

    @property
    def filename(self) -> str:
        return unquote(urlsplit(self.url).path.rsplit("/", 1)[-1])

    @property
    def is_wheel(self) -> bool:
        return self.filename.endswith(".whl")


@dataclass(frozen=True)
class LockedPackage:
    """One `[[packages]]` table of a pylock.toml."""

    name: str
    version: str
    marker: str | None
    wheels: tuple[Artifact, ...]
    sdist: Artifact | None


@dataclass(frozen=True)
class Choice:
    """The artifact chosen for a package on a platform."""

    package: LockedPackage
    artifact: Artifact

    @property
    def sdist(self) -> bool:
        return not self.artifact.is_wheel


def _artifact(table: Mapping[str, object], where: str) -> Artifact:
    url = table.get("url")
    hashes = table.get("hashes")
    sha256 = hashes.get("sha256") if isinstance(hashes, dict) else None
    if not isinstance(url, str) or not isinstance(sha256, str):
        raise ToolError(
            f"uv's pylock.toml lists a file of {where} without url and sha256: {table!r}"
        )
    return Artifact(url=url, sha256=sha256)


def parse_pylock(text: str) -> tuple[LockedPackage, ...]:
    """The packages of a pylock.toml (PEP 751) as uv writes it, sorted by name."""
    data = tomllib.loads(text)
    packages = []
    for table in data.get("packages", []):
        name, version = package_key(table["name"]), str(table.get("version", ""))
        if "vcs" in table or "directory" in table:
            raise ToolError(
                f"uv locked {name} from a VCS or directory, which envgen only takes as a source",
                package=name,
            )
        wheels = tuple(_artifact(w, name) for w in table.get("wheels", ()))
        sdist = _artifact(table["sdist"], name) if "sdist" in table else None
        if "archive" in table:
            archive = _artifact(table["archive"], name)
            if archive.is_wheel:
                wheels += (archive,)
            else:
                sdist = archive
        packages.append(LockedPackage(name, version, table.get("marker"), wheels, sdist))
    return tuple(sorted(packages, key=lambda p: p.name))


def _wheel_rank(artifact: Artifact, priority: Mapping[Tag, int]) -> tuple[int, int, str] | None:
    """Sort key of a wheel (lower is better): tag priority, then highest build tag, then file name.

    As in pip, a wheel with a build tag (a rebuild, like torch's `-3`) beats the same wheel without
    one.
    """
    try:
        _, _, build, tags = parse_wheel_filename(artifact.filename)
    except InvalidWheelFilename:
        return None
    ranks = [priority[t] for t in tags if t in priority]
    if not ranks:
        return None
    number = build[0] if build else -1
    return (min(ranks), -number, artifact.filename)


def tag_priority(tags: Sequence[Tag]) -> dict[Tag, int]:
    """Each of a platform's tags by rank (lower is better), as `choose_artifact` takes them."""
    return {tag: i for i, tag in enumerate(tags)}


def choose_artifact(package: LockedPackage, priority: Mapping[Tag, int], platform: str) -> Choice:
    """The one wheel of `package` best for the platform's tags (`tag_priority`), else its sdist;
    never a wheel of another platform."""
    ranked = sorted(
        (rank, wheel)
        for wheel in package.wheels
        if (rank := _wheel_rank(wheel, priority)) is not None
    )
    if ranked:
        return Choice(package, ranked[0][1])
    if package.sdist is not None:
        return Choice(package, package.sdist)
    offered = ", ".join(w.filename for w in package.wheels) or "no files"
    raise ResolutionError(
        f"{package.name} {package.version} has no wheel for {platform} and no sdist "
        f"(offered: {offered})",
        hint=f"pin another version of {package.name} in the matrix, or lower the platforms "
        "it is locked for",
        package=package.name,
        platform=platform,
    )


def applies(marker: str | None, environment: Mapping[str, str]) -> bool:
    """Whether a package marker of uv's pylock holds on the target."""
    return marker is None or Marker(marker).evaluate(dict(environment))


@dataclass(frozen=True)
class Metadata:
    """What envgen reads from a distribution's core metadata."""

    requires: tuple[Pep508, ...]


# Parsing the metadata of a few hundred packages is most of a re-lock's work after uv: what a head
# start parsed while uv ran (index_client.warm_metadata) is not parsed again. The texts are the
# keys: enough for every platform of a few envs locked together, not every text a long-lived process
# ever read.
@functools.lru_cache(maxsize=1024)
def parse_metadata(text: str, where: str) -> Metadata:
    """The Requires-Dist lines of a METADATA / PKG-INFO file (pure)."""
    # not before uv has started: a re-lock parses metadata while uv runs
    from email.parser import HeaderParser

    # The headers end at the first empty line: the long description after it is not read at all.
    headers = HeaderParser().parsestr(text.split("\n\n", 1)[0])
    requires = []
    for line in headers.get_all("Requires-Dist") or ():
        try:
            requires.append(Pep508(line))
        except InvalidRequirement as exc:
            log.warning("%s: ignoring unparsable Requires-Dist %r: %s", where, line, exc)
    return Metadata(tuple(requires))


# A marker's text as packaging writes it: values quoted, variables bare.
_QUOTED = re.compile(r"\"[^\"]*\"|'[^']*'")
_EXTRA = re.compile(r"\bextra\b")


def needs_extra(req: Pep508) -> bool:
    """Whether a requirement applies only as some extra decides: its marker names the `extra`
    variable (on either side, with any operator), not merely a value spelled so."""
    return req.marker is not None and _EXTRA.search(_QUOTED.sub("", str(req.marker))) is not None


class Target:
    """A platform's marker environment, and whether a requirement is active in it for an extra: each
    verdict is evaluated once (the extras' fixed point and every package's dependencies ask the same
    markers again)."""

    def __init__(self, environment: Mapping[str, str]) -> None:
        self.environment = dict(environment)
        # id of a requirement -> (the requirement, kept so its id stays its own; its marker's text)
        self._markers: dict[int, tuple[Pep508, str]] = {}
        # (a marker's text, extra) -> verdict: packages share markers (`extra == "test"`, a python
        # bound)
        self._verdicts: dict[tuple[str, str], bool] = {}

    def active(self, req: Pep508, extras: Iterable[str]) -> bool:
        marker = req.marker
        if marker is None:
            return True
        known = self._markers.get(id(req))
        if known is None:
            known = self._markers[id(req)] = (req, str(marker))
        text = known[1]
        for extra in ("", *extras):
            verdict = self._verdicts.get((text, extra))
            if verdict is None:
                verdict = self._verdicts[(text, extra)] = marker.evaluate(
                    {**self.environment, "extra": extra}
                )
            if verdict:
                return True
        return False


def requested_extras(
    roots: Iterable[Pep508], metadata: Mapping[str, Metadata], target: Target
) -> dict[str, frozenset[str]]:
    """Which extras of each package are asked for, by the inputs or by active dependencies (a fixed
    point)."""
    extras: dict[str, set[str]] = {}
    for req in roots:
        if target.active(req, ()):
            extras.setdefault(package_key(req.name), set()).update(
                package_key(e) for e in req.extras
            )
    changed = True
    while changed:
        changed = False
        for name, meta in metadata.items():
            for req in meta.requires:
                if not target.active(req, extras.get(name, ())):
                    continue
                wanted = extras.setdefault(package_key(req.name), set())
                new = {package_key(e) for e in req.extras} - wanted
                if new:
                    wanted.update(new)
                    changed = True
    return {name: frozenset(values) for name, values in extras.items() if values}


def depends(meta: Metadata, target: Target, extras: Iterable[str]) -> tuple[tuple[str, str], ...]:
    """Active dependencies of a package on the target: (name, specifier), sorted, one per name."""
    specs: dict[str, set[str]] = {}
    for req in meta.requires:
        if target.active(req, tuple(extras)):
            specs.setdefault(package_key(req.name), set()).update(str(s) for s in req.specifier)
    return tuple((name, ",".join(sorted(parts))) for name, parts in sorted(specs.items()))


def to_entry(
    choice: Choice, platform: str, deps: tuple[tuple[str, str], ...], index: str | None
) -> PipEntry:
    """The PipEntry of a chosen artifact (URL without credentials)."""
    return PipEntry(
        name=choice.package.name,
        version=choice.package.version,
        platform=platform,
        url=strip_credentials(choice.artifact.url),
        sha256=choice.artifact.sha256,
        depends=deps,
        index=index,
        sdist=choice.sdist,
    )
