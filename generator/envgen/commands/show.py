"""Render a Matrix for `envgen show`: a JSON-ready document and readable text (credentials
redacted)."""

from __future__ import annotations

import json
import shlex
from typing import Any

from envgen.commands.show_system import system_document, system_rows
from envgen.model import (
    METADATA,
    NONE,
    Archive,
    Exclusion,
    ImportCheck,
    Link,
    Lock,
    Matrix,
    PipPackage,
    Source,
)
from envgen.redact import redact_url


def matrix_document(matrix: Matrix, lock: Lock | None = None) -> dict[str, Any]:
    """The normalised matrix as plain data (no file path, so it is the same on every machine).

    With the env's `lock`, each transitive override also lists what it makes that lock contradict.
    """
    return {
        "env": {
            "name": matrix.name,
            "description": matrix.description,
            "platforms": list(matrix.platforms),
            "python": matrix.python,
            "notes": dict(matrix.notes),
            # The envs merged in beneath this one, nearest first; the rest of the document is the
            # merged result.
            "extends": list(matrix.extends),
        },
        "system": system_document(matrix),
        "conda": {
            "channels": [{"name": c.name, "url": redact_url(c.url)} for c in matrix.channels],
            "specs": list(matrix.conda_specs),
        },
        "pip": _pip(matrix),
        "sources": [_source(s) for s in matrix.sources],
        "install": {
            "order": [s.name for s in matrix.sources],
            "links": [_link(link) for link in matrix.links],
        },
        "archives": {a.name: _archive(matrix, a) for a in matrix.archives},
        "overrides": {
            o.name: {
                "requirement": o.requirement,
                "reason": o.reason,
                "transitive": o.transitive,
                "violates": list(_violates(o.name, lock)),
            }
            for o in matrix.overrides
        },
        "activation": {
            "env": dict(matrix.activation_env),
            "profiles": {
                p.name: {"description": p.description, "env": dict(p.env)} for p in matrix.profiles
            },
        },
        "checks": {
            "imports": [
                {
                    "module": c.module,
                    "distribution": c.distribution,
                    "version": c.version,
                    "needs": c.needs,
                }
                for c in matrix.checks
            ]
        },
        "pending": _pending(matrix),
        "watch": _watch(matrix),
    }


def _watch(matrix: Matrix) -> dict[str, Any]:
    """What `status --watch` follows: the pages the matrix encodes, its sources' release refs."""
    watch = matrix.watch
    pages = [
        {"url": redact_url(p.url), "ref": p.ref, "path": p.path, "blob": p.blob, "commit": p.commit}
        for p in watch.pages
    ]
    return {"pages": pages, "releases": {name: list(patterns) for name, patterns in watch.releases}}


def _pip(matrix: Matrix) -> dict[str, Any]:
    indexes = [
        {
            "name": i.name,
            "url": redact_url(i.url),
            "explicit": i.explicit,
            "trusted_host": i.trusted_host,
        }
        for i in matrix.indexes
    ]
    return {
        "indexes": indexes,
        "default_indexes": [i.name for i in matrix.default_indexes],
        "packages": {p.name: _package(matrix, p) for p in matrix.packages},
        # Left out on purpose: name -> the reason and the platforms it is left out on.
        "exclude": {e.name: _exclusion(matrix, e) for e in matrix.exclusions},
    }


def _exclusion(matrix: Matrix, exclusion: Exclusion) -> dict[str, Any]:
    return {"reason": exclusion.reason, "platforms": list(exclusion.platforms or matrix.platforms)}


def _link(link: Link) -> dict[str, str]:
    return {"target": link.target, "directory": link.directory, "reason": link.reason}


def _archive(matrix: Matrix, archive: Archive) -> dict[str, Any]:
    return {
        # platform -> its URL and the sha256 the matrix pins (None: the lock pins what it fetched)
        "url": {p: archive.url_for(p) for p in matrix.platforms},
        "sha256": {p: archive.sha256_for(p) for p in matrix.platforms},
        "wheels": list(archive.wheels),
        "redirect_hosts": list(archive.redirect_hosts),
        "note": archive.note,
    }


def render_json(matrix: Matrix, lock: Lock | None = None) -> str:
    """The document as stable JSON: sorted keys, two-space indent, trailing newline."""
    return (
        json.dumps(matrix_document(matrix, lock), sort_keys=True, indent=2, ensure_ascii=False)
        + "\n"
    )


def _violates(name: str, lock: Lock | None) -> tuple[str, ...]:
    """What the lock records an override contradicting (transitive overrides only)."""
    return next((o.violates for o in lock.overrides if o.override.name == name), ()) if lock else ()


def _package(matrix: Matrix, package: PipPackage) -> dict[str, Any]:
    return {
        "specifier": package.specifier,
        "extras": list(package.extras),
        "marker": package.marker,
        # platform -> the explicit index it comes from; None: the default indexes
        "index": {platform: package.index_for(platform) for platform in matrix.platforms},
        "pending": package.pending,
        "url": redact_url(package.url) if package.url else None,
        "sha256": package.sha256,
        # What the lock holds instead of the pin above ([overrides.NAME]); None: the pin itself
        "override": o.requirement if (o := matrix.override_of(package.name)) else None,
    }


def _source(source: Source) -> dict[str, Any]:
    return {
        "name": source.name,
        "url": redact_url(source.url),
        "ref": source.ref,
        "distribution": source.distribution,
        "install": "editable" if source.editable else "plain",
        "pythonpath": source.pythonpath,
        "env": dict(source.env),
        "build_isolation": source.build_isolation,
        "needs_cann": source.needs_cann,
        "submodules": source.submodules,
        "submodules_reason": source.submodules_reason,
        "build_index": source.build_index,
        "requirements": list(source.requirements),
        "dependencies": source.dependencies,
        "dependencies_reason": source.dependencies_reason,
        "cherry_picks": list(source.cherry_picks),
        "subdirectory": source.subdirectory,
        "extras": list(source.extras),
        "replace": [{"from": r.source, "to": r.target} for r in source.replacements],
    }


def _pending(matrix: Matrix) -> list[dict[str, str]]:
    """Everything without a public release yet: CANN when pending, then pending packages."""
    cann = matrix.cann
    items = [{"name": "CANN", "note": cann.note or ""}] if cann and cann.pending else []
    items += [{"name": p.name, "note": p.pending} for p in matrix.packages if p.pending is not None]
    return items


# --- text
# ------------------------------------------------------------------------------------------------


def render_text(matrix: Matrix, lock: Lock | None = None) -> str:
    """Every section of the matrix as aligned, readable text (with the lock's recorded
    contradictions)."""
    lines: list[str] = [
        f"{matrix.name}: {matrix.description}" if matrix.description else matrix.name,
        "",
    ]
    lines += _rows(system_rows(matrix))
    lines += _section(
        "conda channels", _rows([(c.name, redact_url(c.url)) for c in matrix.channels])
    )
    lines += _section("conda specs", [f"  {spec}" for spec in matrix.conda_specs])
    lines += _section(
        "pip indexes", _rows([(i.name, _index_text(matrix, i.name)) for i in matrix.indexes])
    )
    lines += _section(
        "pip packages", _rows([(p.name, _package_text(matrix, p)) for p in matrix.packages])
    )
    lines += _steps_text(matrix)
    lines += _section(
        "sources (in install order)",
        [line for s in matrix.sources for line in _source_text(s, matrix.cann is not None)],
    )
    order = " -> ".join(s.name for s in matrix.sources)
    lines += _section("install order", [f"  {order}"] if order else [])
    links = [f"  {x.directory or '.'}: -> {x.target}  (reason: {x.reason})" for x in matrix.links]
    lines += _section("links in site-packages (after the install)", links) if links else []
    lines += _section("overrides", _overrides_text(matrix, lock))
    lines += _activation_text(matrix)
    lines += _section("import checks", _rows([(c.module, _check_text(c)) for c in matrix.checks]))
    lines += _section("notes", _rows(list(matrix.notes)))
    lines += _section("pending", _rows([(item["name"], item["note"]) for item in _pending(matrix)]))
    lines += _watch_text(matrix)
    # An empty value (a profile without a description, no CANN scripts) must not leave a line ending
    # in spaces.
    return "\n".join(line.rstrip() for line in lines) + "\n"


def _overrides_text(matrix: Matrix, lock: Lock | None) -> list[str]:
    """Each override with its reason, and what it makes `lock` contradict."""
    overrides: list[str] = []
    for override in matrix.overrides:
        scope = "  transitive: replaces third-party metadata too" if override.transitive else ""
        overrides += _rows(
            [(override.name, f"{override.requirement}  (reason: {override.reason}){scope}")]
        )
        overrides += [
            f"    violates (in the lock): {pair}" for pair in _violates(override.name, lock)
        ]
    return overrides


def _activation_text(matrix: Matrix) -> list[str]:
    """The activation env's section, then the profiles'."""
    lines = _section(
        "activation env",
        [f"  {name}={shlex.quote(value)}" for name, value in matrix.activation_env],
    )
    profiles: list[str] = []
    for profile in matrix.profiles:
        profiles.append(f"  {profile.name}: {profile.description}")
        profiles += [f"    {name}={shlex.quote(value)}" for name, value in profile.env]
    return lines + _section("activation profiles", profiles)


def _watch_text(matrix: Matrix) -> list[str]:
    """What `status --watch` follows upstream (no section when nothing)."""
    watch = matrix.watch
    if not (watch.pages or watch.releases):
        return []
    watched = [f"  page {p.path} at {p.ref} of {redact_url(p.url)}" for p in watch.pages]
    watched += [f"  release refs of {name}: {', '.join(refs)}" for name, refs in watch.releases]
    return _section("watched upstream (status --watch)", watched)


def _steps_text(matrix: Matrix) -> list[str]:
    """The packages left out on purpose, and the archives whose wheels are installed (when any)."""
    lines: list[str] = []
    if matrix.exclusions:
        rows = []
        for e in matrix.exclusions:
            where = f" (on {', '.join(e.platforms)})" if e.platforms else ""
            rows.append((e.name, f"left out{where}: {e.reason}"))
        lines += _section("pip packages left out on purpose", _rows(rows))
    archives: list[str] = []
    for archive in matrix.archives:
        archives.append(f"  {archive.name}: wheels {', '.join(archive.wheels)}")
        for platform, url in archive.urls:
            expected = archive.sha256_for(platform)
            sha = f"sha256:{expected}" if expected else "sha256 pinned by the lock"
            archives.append(f"    {platform}: {redact_url(url)}  {sha}")
        archives += [f"    note: {archive.note}"] if archive.note else []
    if archives:
        lines += _section("archives (wheels from release archives)", archives)
    return lines


def _section(title: str, body: list[str]) -> list[str]:
    return ["", f"{title}:", *(body or ["  (none)"])]


def _rows(pairs: list[tuple[str, str]]) -> list[str]:
    width = max((len(name) for name, _ in pairs), default=0)
    return [f"  {name.ljust(width)}  {value}" for name, value in pairs]


def _index_text(matrix: Matrix, name: str) -> str:
    index = matrix.index(name)
    defaults = [i.name for i in matrix.default_indexes]
    flags = [
        f"default #{defaults.index(name) + 1}"
        if name in defaults
        else "explicit (only packages naming it)"
    ]
    if index.trusted_host:
        flags.append(f"trusted host {index.trusted_host}")
    return f"{redact_url(index.url)}  [{', '.join(flags)}]"


def _package_text(matrix: Matrix, package: PipPackage) -> str:
    if package.pending is not None:
        return f"pending: {package.pending}"
    parts = [package.specifier or "unpinned (locked to what resolves)"]
    if package.url:
        parts = [f"{redact_url(package.url)} sha256:{package.sha256}"]
    if override := matrix.override_of(package.name):
        parts[0] = f"{override.requirement}  (the override, over the matrix's {parts[0]}; "
        parts[0] += f"reason: {override.reason})"
    if package.extras:
        parts.append(f"extras [{','.join(package.extras)}]")
    if package.marker:
        parts.append(f"marker {package.marker}")
    if package.index:
        defaults = ", ".join(i.name for i in matrix.default_indexes)
        where = [f"{p}: {package.index_for(p) or defaults}" for p in matrix.platforms]
        parts.append(f"index {'; '.join(where)}")
    return "  ".join(parts)


def _source_text(source: Source, cann: bool) -> list[str]:
    """A source's rows; "needs CANN" only in an env that has CANN."""
    replaced = source.replacements
    rows = [
        ("url", redact_url(source.url)),
        ("ref", source.ref),
        ("distribution", source.distribution),
        ("install", "editable (pip install -e)" if source.editable else "plain"),
        (
            "pythonpath",
            "yes (tree on sys.path, ahead of site-packages)" if source.pythonpath else "no",
        ),
        ("env", " ".join(f"{k}={shlex.quote(v)}" for k, v in source.env) or "-"),
        ("build isolation", "yes" if source.build_isolation else "no (--no-build-isolation)"),
        *(
            [("needs CANN", "yes (set_env sourced first)" if source.needs_cann else "no")]
            if cann
            else []
        ),
        (
            "submodules",
            "yes (those its tree records, at their gitlink commits)"
            if source.submodules
            else f"no (reason: {source.submodules_reason})",
        ),
        ("build index", source.build_index or "-"),
        ("requirements", ", ".join(source.requirements) or "-"),
        ("dependencies", _dependencies_text(source)),
        ("cherry-picks", ", ".join(source.cherry_picks) or "-"),
        *([("subdirectory", source.subdirectory)] if source.subdirectory else []),
        *([("extras", ", ".join(source.extras))] if source.extras else []),
        *(("replace", f"{r.source} over {r.target} (before it builds)") for r in replaced),
    ]
    return [f"  {source.name}", *(f"  {row}" for row in _rows(rows))]


def _dependencies_text(source: Source) -> str:
    if source.dependencies == NONE:
        return f"none (reason: {source.dependencies_reason})"
    if source.dependencies == METADATA:
        return "metadata (what pip install -e . installs) and the requirement files"
    return "the requirement files only"


def _check_text(check: ImportCheck) -> str:
    parts = [
        f"distribution {check.distribution}" if check.distribution else "",
        f"version {check.version}" if check.version else "",
        f"needs {check.needs}",
    ]
    return "  ".join(p for p in parts if p)
