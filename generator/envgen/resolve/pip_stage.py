"""PyPI resolution for one platform: matrix pins + source requirements -> uv -> one pinned artifact each."""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import re
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import requests
import uv
from packaging.requirements import InvalidRequirement
from packaging.requirements import Requirement as Pep508
from packaging.utils import canonicalize_name

from envgen import platforms
from envgen.errors import EnvgenError, InputError, ResolutionError, ToolError, VerificationError
from envgen.inputs.channels import IndexAccess, access_index, expand_url
from envgen.model import AppliedOverride, LockedSource, Matrix, Origin, PipEntry, Requirement
from envgen.process import run, tail
from envgen.redact import redact_text, redact_url, strip_credentials
from envgen.resolve import uv_pylock
from envgen.resolve.preferences import render_pylock

log = logging.getLogger(__name__)

UV_TIMEOUT = 1800.0
HTTP_TIMEOUT = 60.0
PROJECT_NAME = "envgen-inputs"
# Variables uv may need to reach an index (TLS roots, proxies); nothing else of the caller's env is passed.
_PROXY_ENV = ("ALL_PROXY", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY")
_PASSED_ENV = ("PATH", "HOME", "TMPDIR", "SSL_CERT_FILE", "SSL_CERT_DIR", *_PROXY_ENV, *(v.lower() for v in _PROXY_ENV))
_URL = re.compile(r"[a-z][a-z0-9+.-]*://[^\s`'\")]+")
_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")


@dataclass(frozen=True)
class PypiLock:
    """The pip side of one platform: entries sorted by name, the overrides as applied, the requirements given uv."""

    entries: tuple[PipEntry, ...]
    overrides: tuple[AppliedOverride, ...] = ()
    requirements: tuple[Requirement, ...] = ()


@dataclass(frozen=True)
class Inputs:
    """What goes to uv for one platform.

    `requirements` are PEP 508 strings with origins (those flagged `constraint` only limit versions);
    `pins` maps a package to the index it must come from; `excluded` are names uv must not resolve (provided
    by a source, or pending); `direct` are packages locked by URL, and `hashes` maps those the matrix locks
    to the sha256 it gives.
    """

    requirements: tuple[Requirement, ...]
    pins: tuple[tuple[str, str], ...] = ()
    excluded: tuple[str, ...] = ()
    direct: tuple[str, ...] = ()
    hashes: tuple[tuple[str, tuple[str, Origin]], ...] = ()


def _parse(text: str, origin: Origin) -> Pep508:
    try:
        return Pep508(text)
    except InvalidRequirement as exc:
        raise InputError(f"{origin}: {text!r} is not a PEP 508 requirement: {exc}") from exc


def gather_inputs(matrix: Matrix, platform: str, sources: Sequence[LockedSource], environ: Mapping[str, str]) -> Inputs:
    """The requirements uv resolves for `platform`: matrix pins and source requirements, with origins.

    Requirements on a name a source provides or on a pending package are dropped (and excluded from the
    resolution), and so are git requirements: those are sources, locked by commit elsewhere.
    """
    provided = {canonicalize_name(s.distribution) for s in matrix.sources}
    provided |= {canonicalize_name(ls.source.distribution) for ls in sources}
    pending = {canonicalize_name(p.name) for p in matrix.packages if p.pending is not None}
    excluded = provided | pending
    requirements: list[Requirement] = []
    pins: dict[str, str] = {}
    hashes: dict[str, tuple[str, Origin]] = {}
    direct: set[str] = set()
    for package in matrix.packages:
        name = canonicalize_name(package.name)
        if package.pending is not None or name in excluded:
            continue
        key = f"pip.packages.{package.name}"
        if package.url:
            origin = Origin(file=matrix.path, key=f"{key}.url")
            url = expand_url(package.url, f"{matrix.path}: {key}.url", environ)
            extras = f"[{','.join(package.extras)}]" if package.extras else ""
            marker = f" ; {package.marker}" if package.marker else ""
            requirements.append(Requirement(f"{package.name}{extras} @ {url}{marker}", origin))
            direct.add(name)
            if package.sha256:
                hashes[name] = (package.sha256.lower(), Origin(file=matrix.path, key=f"{key}.sha256"))
        else:
            origin = Origin(file=matrix.path, key=f"{key}.version")
            requirements.append(Requirement(str(_parse(package.requirement, origin)), origin))
        index = package.index_for(platform)
        if index:
            pins[name] = index
    for locked in sources:
        for req in locked.requirements:
            parsed = _parse(req.text, req.origin)
            if uv_pylock.is_vcs(parsed):
                log.debug("%s: %s is a git requirement, locked as a source", req.origin, parsed.name)
                continue
            if canonicalize_name(parsed.name) in excluded:
                continue
            if parsed.url and not req.constraint:
                direct.add(canonicalize_name(parsed.name))
            requirements.append(Requirement(str(parsed), req.origin, constraint=req.constraint))
    return Inputs(
        requirements=tuple(requirements),
        pins=tuple(sorted(pins.items())),
        excluded=tuple(sorted(excluded)),
        direct=tuple(sorted(direct)),
        hashes=tuple(sorted(hashes.items())),
    )


def _toml_str(value: str) -> str:
    # A JSON string (ASCII, escaped) is a valid TOML basic string.
    return json.dumps(value)


def render_pyproject(inputs: Inputs, indexes: Sequence[IndexAccess], python_version: str) -> str:
    """The generated project uv resolves: dependencies, and per-package index pins for this platform."""
    deps = "".join(f"    {_toml_str(r.text)},\n" for r in inputs.requirements if not r.constraint)
    lines = [
        "[project]",
        f"name = {_toml_str(PROJECT_NAME)}",
        'version = "0"',
        f"requires-python = {_toml_str('>=' + python_version)}",
        f"dependencies = [\n{deps}]",
        "",
        "[tool.uv.sources]",
    ]
    lines += [f"{_toml_str(name)} = {{ index = {_toml_str(index)} }}" for name, index in inputs.pins]
    lines.append("")
    # uv checks the names a source pins against the project's own index list, so it is repeated here.
    lines += _render_indexes(indexes, "tool.uv.index")
    return "\n".join(lines)


def _render_indexes(indexes: Sequence[IndexAccess], table: str) -> list[str]:
    lines: list[str] = []
    first_default = next((i.name for i in indexes if not i.explicit), None)
    for index in indexes:
        lines += [f"[[{table}]]", f"name = {_toml_str(index.name)}", f"url = {_toml_str(index.url)}"]
        if index.explicit:
            lines.append("explicit = true")
        elif index.name == first_default:
            lines.append("default = true")
        lines.append("")
    return lines


def render_uv_config(indexes: Sequence[IndexAccess], overrides: Sequence[str]) -> str:
    """The uv.toml given with --config-file: the matrix's indexes, overrides and trusted hosts, nothing else."""
    trusted = sorted({i.trusted_host for i in indexes if i.trusted_host})
    lines = [
        f"override-dependencies = [{', '.join(_toml_str(o) for o in overrides)}]",
        f"allow-insecure-host = [{', '.join(_toml_str(h) for h in trusted)}]",
        "",
    ]
    return "\n".join(lines + _render_indexes(indexes, "index"))


def _ordered(matrix: Matrix, accesses: Mapping[str, IndexAccess]) -> list[IndexAccess]:
    """Default indexes first in matrix order (the first one is uv's default), then explicit ones."""
    return [accesses[i.name] for i in matrix.default_indexes] + [accesses[i.name] for i in matrix.indexes if i.explicit]


def uv_environment(indexes: Sequence[IndexAccess], cache: Path, environ: Mapping[str, str]) -> dict[str, str]:
    """uv's environment: its cache, TLS and proxy settings, index credentials; no UV_*/PIP_* of the caller."""
    env = {k: environ[k] for k in _PASSED_ENV if k in environ}
    env["UV_CACHE_DIR"] = str(cache / "uv")
    env["UV_NO_PROGRESS"] = "1"
    for index in indexes:
        env.update(index.env)
    return env


def _mentioned(text: str) -> set[str]:
    return {canonicalize_name(m.group(0)) for m in _NAME.finditer(text)}


def _index_for_url(url: str, indexes: Sequence[IndexAccess]) -> IndexAccess | None:
    return next((i for i in indexes if url.startswith(i.url.rstrip("/") + "/") or url == i.url), None)


def explain_failure(
    stderr: str, inputs: Inputs, indexes: Sequence[IndexAccess], matrix: Matrix, platform: str, offline: bool
) -> EnvgenError:
    """Turn uv's failure into an error naming the platform, the requirements involved and their origins."""
    secrets = tuple(s for i in indexes for s in i.secrets)
    said = redact_text(tail(stderr), secrets)
    urls = [m.group(0).rstrip(".,:;") for m in _URL.finditer(stderr)]
    reached = [i for i in (_index_for_url(u, indexes) for u in urls) if i is not None]
    if reached and re.search(r"\b(401|403)\b|[Uu]nauthorized|[Ff]orbidden|authentication", stderr):
        index = reached[0]
        return ResolutionError(
            f"index {index.name} at {index.shown} refused access while locking {platform}\n{said}",
            hint=f"check the credentials of index {index.name} (user:token@ or ${{VAR}} in its URL)",
        )
    if "No solution found" in stderr:
        if offline and ("offline" in stderr or "cache" in stderr):
            return ResolutionError(
                f"cannot lock PyPI packages for {platform} offline: uv's cache lacks what they need\n{said}",
                hint="run once without --offline to fill the cache",
            )
        names = _mentioned(stderr)
        involved = [r for r in inputs.requirements if canonicalize_name(_name_of(r.text)) in names]
        listed = "".join(f"\n  {r.text}  ({r.origin})" for r in involved) or "\n  (none of the inputs named)"
        wanted: list[str] = sorted({canonicalize_name(_name_of(r.text)) for r in involved}) or ["<name>"]
        overrides = ", ".join(f"[overrides.{n}]" for n in wanted)
        return ResolutionError(
            f"no PyPI resolution for {platform}; these requirements conflict:{listed}\nuv says:\n{said}",
            hint=f"relax one of them, or add {overrides} (requirement + reason) to {matrix.path}",
        )
    if reached:
        index = reached[0]
        trust = (
            f"if you trust the host, set trusted_host in channels/{index.name}.toml; "
            if re.search(r"certificate|ssl|tls", stderr, re.IGNORECASE) and not index.trusted_host
            else ""
        )
        return ResolutionError(
            f"cannot reach index {index.name} at {index.shown} while locking {platform}\n{said}",
            hint=f"check the URL in channels/{index.name}.toml, the network or proxy; {trust}"
            "or re-lock from cache with --offline",
        )
    if urls:
        shown_urls = ", ".join(sorted({redact_url(u) for u in urls}))
        return ResolutionError(
            f"uv could not fetch {shown_urls} while locking {platform}\n{said}",
            hint="check the URLs in the matrix and the network",
        )
    return ToolError(f"uv pip compile failed for {platform}:\n{said}", hint="read uv's message above")


def _name_of(text: str) -> str:
    return Pep508(text).name


def resolve(
    matrix: Matrix,
    platform: str,
    python_version: str,
    inputs: Inputs,
    indexes: Sequence[IndexAccess],
    *,
    cache: Path,
    offline: bool,
    environ: Mapping[str, str],
    preferred: Sequence[PipEntry] = (),
) -> str:
    """Run `uv pip compile` on the generated project; returns the pylock.toml text uv wrote.

    `preferred` (the previous lock's pins) is written as the existing output file, which uv keeps where the
    inputs allow.
    """
    overrides = [o.requirement for o in matrix.overrides]
    secrets = tuple(s for i in indexes for s in i.secrets)
    with tempfile.TemporaryDirectory(prefix="envgen-uv-") as tmp:
        work = Path(tmp)
        (work / "pyproject.toml").write_text(render_pyproject(inputs, indexes, python_version))
        (work / "uv.toml").write_text(render_uv_config(indexes, overrides))
        if preferred:
            (work / "pylock.toml").write_text(render_pylock(preferred))
        cmd = [uv.find_uv_bin(), "pip", "compile", "pyproject.toml"]
        # --config-file replaces every config uv would discover (user, system, project): only ours counts.
        cmd += ["--config-file", "uv.toml"]
        if inputs.excluded:
            (work / "excludes.txt").write_text("".join(f"{name}\n" for name in inputs.excluded))
            cmd += ["--excludes", "excludes.txt"]
        constraints = [r.text for r in inputs.requirements if r.constraint]
        if constraints:
            # `-c` files of the sources limit versions without requiring anything.
            (work / "constraints.txt").write_text("".join(f"{text}\n" for text in constraints))
            cmd += ["--constraints", "constraints.txt"]
        cmd += ["--python-version", python_version]
        cmd += ["--python-platform", platforms.uv_python_platform(platform, matrix.glibc)]
        cmd += ["--format", "pylock.toml", "--output-file", "pylock.toml", "--no-header"]
        # The interpreter running envgen builds any sdist; --python-version alone decides the resolution.
        cmd += ["--python", sys.executable, "--no-python-downloads", "--color", "never"]
        if offline:
            cmd.append("--offline")
        env = uv_environment(indexes, cache, environ)
        proc = run(cmd, cwd=work, env=env, timeout=UV_TIMEOUT, check=False, secrets=secrets)
        if proc.returncode != 0:
            raise explain_failure(proc.stderr, inputs, indexes, matrix, platform, offline)
        return (work / "pylock.toml").read_text()


def _metadata_from_archive(data: bytes, filename: str) -> str:
    if filename.endswith(".whl"):
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA") and n.count("/") == 1)
            return zf.read(name).decode()
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tar:
        member = next(m for m in tar.getmembers() if m.name.count("/") == 1 and m.name.endswith("/PKG-INFO"))
        handle = tar.extractfile(member)
        if handle is None:
            raise ValueError("PKG-INFO is not a file")
        return handle.read().decode()


def _get(session: requests.Session, url: str, indexes: Sequence[IndexAccess]) -> requests.Response:
    """GET `url` with the credentials of the index on its host; a trusted host's certificate is not verified."""
    index = next((i for i in indexes if i.authenticates(url)), None)
    auth = (index.username or "", index.password or "") if index and index.secrets else None
    return session.get(url, auth=auth, timeout=HTTP_TIMEOUT, verify=not any(i.trusts(url) for i in indexes))


def fetch_metadata(
    choice: uv_pylock.Choice,
    indexes: Sequence[IndexAccess],
    cache: Path,
    offline: bool,
    session: requests.Session,
) -> str:
    """The core metadata of a chosen artifact: from envgen's cache (by sha256), PEP 658, or the file itself.

    A whole file is downloaded only when the index serves no `.metadata`, and its sha256 is checked.
    """
    artifact = choice.artifact
    cached = cache / "pypi-metadata" / f"{artifact.sha256}.METADATA"
    if cached.exists():
        return cached.read_text()
    url = strip_credentials(artifact.url)
    if offline:
        raise ResolutionError(
            f"offline: the metadata of {artifact.filename} ({redact_url(url)}) is not in {cached.parent}",
            hint="run once without --offline to fill the cache",
        )
    text = None
    try:
        if artifact.is_wheel:
            response = _get(session, url + ".metadata", indexes)
            if response.status_code == 200:
                text = response.text
        if text is None:
            response = _get(session, url, indexes)
            response.raise_for_status()
            digest = hashlib.sha256(response.content).hexdigest()
            if digest != artifact.sha256:
                raise VerificationError(
                    f"{artifact.filename} from {redact_url(url)} has sha256 {digest}, but uv locked {artifact.sha256}",
                    hint="the index changed a published file; re-lock, and report it to the index owner",
                )
            text = _metadata_from_archive(response.content, artifact.filename)
    except requests.RequestException as exc:
        secrets = tuple(s for i in indexes for s in i.secrets)
        raise ResolutionError(
            f"cannot read the metadata of {artifact.filename} at {redact_url(url)}: {redact_text(str(exc), secrets)}",
            hint="check the network or the index; the resolution itself succeeded",
        ) from exc
    except (zipfile.BadZipFile, tarfile.TarError, StopIteration, ValueError) as exc:
        raise ResolutionError(f"{artifact.filename} at {redact_url(url)} has no readable metadata: {exc}") from exc
    cached.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=cached.parent, suffix=".part", delete=False) as partial:
        partial.write(text)
    Path(partial.name).replace(cached)
    return text


def _file_url(url: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))


def entry_index(choice: uv_pylock.Choice, inputs: Inputs, indexes: Sequence[IndexAccess]) -> str | None:
    """The index an artifact came from: the one its URL lies under, the pinned one, or the sole default one.

    uv's pylock.toml does not say; PyPI's files live on another host than its index, hence the fallbacks.
    """
    name = choice.package.name
    if name in inputs.direct:
        return None
    found = uv_pylock.index_of(_file_url(choice.artifact.url), [(i.name, i.url) for i in indexes])
    if found:
        return found
    pinned = dict(inputs.pins).get(name)
    if pinned:
        return pinned
    defaults = [i.name for i in indexes if not i.explicit]
    return defaults[0] if len(defaults) == 1 else None


def apply_overrides(
    matrix: Matrix, inputs: Inputs, metadata: Mapping[uv_pylock.Choice, uv_pylock.Metadata], platform: str
) -> tuple[AppliedOverride, ...]:
    """Each matrix override with the upstream requirements on its name it replaced: sources' and packages'."""
    applied = []
    # Upstream requirements only: the matrix's own pin on the name is what the override restates.
    upstream = [r for r in inputs.requirements if r.origin.source is not None]
    for override in matrix.overrides:
        name = canonicalize_name(override.name)
        replaced = [r for r in upstream if canonicalize_name(_name_of(r.text)) == name]
        for choice, meta in sorted(metadata.items(), key=lambda item: item[0].package.name):
            origin = Origin(file=f"{choice.package.name}=={choice.package.version}", key="Requires-Dist")
            replaced += [Requirement(str(r), origin) for r in meta.requires if canonicalize_name(r.name) == name]
        shown = "; ".join(f"{r.text} ({r.origin})" for r in replaced) or "no requirement upstream"
        log.warning("%s: override %s replaces %s (%s)", platform, override.requirement, shown, override.reason)
        applied.append(AppliedOverride(override, tuple(replaced)))
    return tuple(applied)


def lock_pypi(
    matrix: Matrix,
    platform: str,
    python_version: str,
    sources: Sequence[LockedSource],
    *,
    cache: Path,
    offline: bool = False,
    preferred: Sequence[PipEntry] = (),
) -> PypiLock:
    """Resolve the matrix's pip packages and the sources' requirements for `platform` with uv.

    Only the matrix's indexes are used (never the machine's pip/uv config); every package gets exactly one
    artifact for the platform, pinned by URL and sha256. `preferred` versions are kept where the inputs allow.
    """
    environ = os.environ
    accesses = {i.name: access_index(i, environ) for i in matrix.indexes}
    indexes = _ordered(matrix, accesses)
    inputs = gather_inputs(matrix, platform, sources, environ)
    for name, index in inputs.pins:
        if index not in accesses:
            raise InputError(f"{matrix.path}: pip.packages.{name}.index names {index!r}, which is not an index")
    log.info("%s: resolving %d PyPI requirements with uv", platform, len(inputs.requirements))
    text = resolve(
        matrix,
        platform,
        python_version,
        inputs,
        indexes,
        cache=cache,
        offline=offline,
        environ=environ,
        preferred=preferred,
    )
    environment = platforms.marker_environment(platform, python_version)
    tags = platforms.platform_tags(platform, python_version, matrix.glibc)
    packages = [p for p in uv_pylock.parse_pylock(text) if uv_pylock.applies(p.marker, environment)]
    choices = [uv_pylock.choose_artifact(p, tags, platform) for p in packages]
    hashes = dict(inputs.hashes)
    for choice in choices:
        expected = hashes.get(choice.package.name)
        if expected and expected[0] != choice.artifact.sha256:
            raise VerificationError(
                f"{redact_url(strip_credentials(choice.artifact.url))} has sha256 {choice.artifact.sha256}, "
                f"but {expected[1]} says {expected[0]}",
                hint="fix the sha256 in the matrix if the file was replaced on purpose",
            )
    with requests.Session() as session, ThreadPoolExecutor(max_workers=8) as pool:
        texts = list(pool.map(lambda c: fetch_metadata(c, indexes, cache, offline, session), choices))
    metadata = {c: uv_pylock.parse_metadata(t, c.artifact.filename) for c, t in zip(choices, texts, strict=True)}
    roots = [Pep508(r.text) for r in inputs.requirements if not r.constraint]
    roots += [Pep508(o.requirement) for o in matrix.overrides]
    extras = uv_pylock.requested_extras(roots, {c.package.name: m for c, m in metadata.items()}, environment)
    entries = []
    for choice in choices:
        if choice.sdist:
            log.warning(
                "%s: %s %s has no wheel for this platform and builds from source (%s)",
                platform,
                choice.package.name,
                choice.package.version,
                redact_url(strip_credentials(choice.artifact.url)),
            )
        deps = uv_pylock.depends(metadata[choice], environment, extras.get(choice.package.name, frozenset()))
        entries.append(uv_pylock.to_entry(choice, platform, deps, entry_index(choice, inputs, indexes)))
    overrides = apply_overrides(matrix, inputs, metadata, platform)
    return PypiLock(
        entries=tuple(sorted(entries, key=lambda e: e.name)),
        overrides=overrides,
        requirements=inputs.requirements
        + tuple(
            Requirement(o.requirement, Origin(file=matrix.path, key=f"overrides.{o.name}")) for o in matrix.overrides
        ),
    )
