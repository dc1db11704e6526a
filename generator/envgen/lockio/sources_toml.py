"""locks/<env>.sources.toml: everything of a Lock that is not a package; the renderer and its strict parser."""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import tomli_w

from envgen.errors import InputError
from envgen.inputs.files import bounded_nesting
from envgen.inputs.toml_reader import KeyPath, StrictReader
from envgen.inputs.untrusted import (
    commit_problem,
    git_url_problem,
    lock_problems,
    name_problem,
    ref_problem,
    submodule_path_problem,
)
from envgen.lockio.input_hashes import LOCK_SCHEMA
from envgen.lockio.seal import UNSEALED, file_hosts
from envgen.model import (
    DEPENDENCY_MODES,
    METADATA,
    AppliedOverride,
    Cann,
    Channel,
    Env,
    ImportCheck,
    Index,
    Lock,
    LockedSource,
    Origin,
    Override,
    Pending,
    Profile,
    Source,
    Submodule,
    TracedRequirement,
)
from envgen.redact import strip_credentials, written_url


def _table(items: Mapping[str, Any]) -> dict[str, Any]:
    """A TOML table of the items that are set (None and empty collections are left out)."""
    return {k: v for k, v in items.items() if v is not None and v != () and v != [] and v != {}}


def _origin(origin: Origin) -> dict[str, Any]:
    return _table({"file": origin.file, "key": origin.key, "line": origin.line, "source": origin.source})


def _requirement(req: TracedRequirement) -> dict[str, Any]:
    return _table({"text": req.text, **_origin(req.origin), "constraint": True if req.constraint else None})


def _source(locked: LockedSource) -> dict[str, Any]:
    src = locked.source
    return _table(
        {
            "name": src.name,
            "url": strip_credentials(src.url),
            "ref": src.ref,
            "commit": locked.commit,
            "cherry-picks": list(src.cherry_picks),
            "picked": list(locked.picked),
            "tree": locked.tree or None,
            "distribution": src.distribution,
            "editable": src.editable,
            "pythonpath": src.pythonpath,
            "env": dict(src.env) if src.env else None,
            "build-isolation": src.build_isolation,
            "needs-cann": src.needs_cann,
            # Written only for a source that opts out, so the locks of sources without submodules keep their bytes.
            "submodules-reason": src.submodules_reason if not src.submodules else None,
            "build-index": src.build_index,
            "requirement-files": list(src.requirements),
            "dependencies": src.dependencies,
            "dependencies-reason": src.dependencies_reason,
            "metadata-fallback": locked.metadata_fallback,
            "origin": src.origin,
            "digest": locked.digest or None,
            "requirements": [_requirement(r) for r in locked.requirements],
            "submodules": [
                {"path": sub.path, "url": strip_credentials(sub.url), "commit": sub.commit} for sub in locked.submodules
            ],
        }
    )


def _places(lock: Lock) -> dict[str, Any]:
    """The channels and indexes, without credentials (a `${VAR}` reference to one is kept: it is no secret, and
    the derived requirements.txt, rendered again from the lock read back, names it too); per index the other
    hosts its artifacts came from."""
    indexes = [
        _table(
            {
                "name": i.name,
                "url": written_url(i.url),
                "explicit": i.explicit,
                "trusted-host": i.trusted_host,
                "file-hosts": list(file_hosts(lock, i)),
            }
        )
        for i in lock.indexes
    ]
    return _table(
        {"channels": [{"name": c.name, "url": written_url(c.url)} for c in lock.channels], "indexes": indexes}
    )


def _override(applied: AppliedOverride) -> dict[str, Any]:
    override = applied.override
    return _table(
        {
            "name": override.name,
            "requirement": override.requirement,
            "reason": override.reason,
            "transitive": True if override.transitive else None,
            "replaced": [_requirement(r) for r in applied.replaced],
            "violates": list(applied.violates),
        }
    )


def render_sources_toml(lock: Lock) -> str:
    """locks/<env>.sources.toml: everything of a Lock that is not a package, canonical and commented."""
    # The content hash is filled in by `seal` once the three files are rendered (lockio/seal.py).
    top = _table({"schema": LOCK_SCHEMA, "env": lock.env, "input-hash": lock.input_hash, "content-hash": UNSEALED})
    if lock.inputs:
        top["inputs"] = dict(sorted(lock.inputs))
    top.update(_places(lock))
    if lock.cann is not None:
        top["cann"] = _table({"version": lock.cann.version, "set-env": lock.cann.set_env, "note": lock.cann.note})
    activation = _table(
        {
            "env": dict(lock.activation_env) if lock.activation_env else None,
            "profiles": [
                {"name": p.name, "description": p.description, "env": dict(p.env)}
                for p in sorted(lock.profiles, key=lambda p: p.name)
            ],
        }
    )
    if activation:
        top["activation"] = activation
    pip_indexes = sorted((e.platform, e.name, e.index) for e in lock.pip if e.index)
    top.update(
        _table(
            {
                "sources": [_source(s) for s in lock.sources],
                "pip-indexes": [{"platform": p, "package": n, "index": i} for p, n, i in pip_indexes],
                "overrides": [_override(o) for o in sorted(lock.overrides, key=lambda o: o.override.name)],
                "pending": [{"name": p.name, "note": p.note} for p in lock.pending],
                "checks": [
                    _table({"module": c.module, "distribution": c.distribution, "version": c.version, "needs": c.needs})
                    for c in lock.checks
                ],
            }
        )
    )
    comment = f"Generated by `envgen lock {lock.env}`: do not edit. The recipe is built from it."
    return f"# {comment}\n{tomli_w.dumps(top)}"


_ORIGIN_KEYS = ("key", "line", "source")


def _read_requirement(r: StrictReader, data: object, key: KeyPath) -> TracedRequirement:
    row = r.table(data, key, ("text", "file"), (*_ORIGIN_KEYS, "constraint"))
    origin = Origin(
        file=r.text(row, "file", key),
        key=r.maybe(row, "key", key),
        line=r.number(row, "line", key),
        source=r.maybe(row, "source", key),
    )
    return TracedRequirement(r.text(row, "text", key), origin, constraint=r.flag(row, "constraint", key, False))


_SOURCE_KEYS = ("name", "url", "ref", "commit", "distribution")
_SOURCE_OPTIONAL = (
    "cherry-picks",
    "picked",
    "tree",
    "editable",
    "pythonpath",
    "env",
    "build-isolation",
    "needs-cann",
    "submodules",
    "submodules-reason",
    "build-index",
    "requirement-files",
    "dependencies",
    "dependencies-reason",
    "metadata-fallback",
    "origin",
    "digest",
    "requirements",
)


def _read_commits(r: StrictReader, row: dict[str, Any], key: KeyPath) -> dict[str, tuple[str, ...]]:
    """The commit, tree, cherry-picks and picked commits of a source row, each a full 40-hex commit."""
    shas: dict[str, tuple[str, ...]] = {"commit": (r.text(row, "commit", key),), "tree": (r.text(row, "tree", key),)}
    shas.update({k: r.strings(row, k, key) for k in ("cherry-picks", "picked")})
    for field, values in shas.items():
        for value in values:
            if value or field != "tree":
                r.check((*key, field), commit_problem(value))
    return shas


def _read_source(r: StrictReader, data: object, key: KeyPath) -> LockedSource:
    row = r.table(data, key, _SOURCE_KEYS, _SOURCE_OPTIONAL)
    # Every string that reaches git or the recipe is checked here, as the matrix loader checks it: a lock
    # edited in a pull request must not smuggle an option or a command in.
    name, url, ref = r.text(row, "name", key), r.text(row, "url", key), r.text(row, "ref", key)
    r.check((*key, "name"), name_problem(name, "source name"))
    r.check((*key, "url"), git_url_problem(url))
    r.check((*key, "ref"), ref_problem(ref))
    shas = _read_commits(r, row, key)
    dependencies = r.text(row, "dependencies", key, METADATA)
    if dependencies not in DEPENDENCY_MODES:
        raise r.fail((*key, "dependencies"), f"must be one of {', '.join(DEPENDENCY_MODES)}")
    source = Source(
        name=name,
        url=url,
        ref=ref,
        distribution=r.text(row, "distribution", key),
        cherry_picks=shas["cherry-picks"],
        editable=r.flag(row, "editable", key, True),
        pythonpath=r.flag(row, "pythonpath", key, False),
        env=r.env(row, "env", key),
        build_isolation=r.flag(row, "build-isolation", key, True),
        needs_cann=r.flag(row, "needs-cann", key, False),
        submodules="submodules-reason" not in row,
        submodules_reason=r.maybe(row, "submodules-reason", key),
        build_index=r.maybe(row, "build-index", key),
        requirements=r.strings(row, "requirement-files", key),
        origin=r.maybe(row, "origin", key),
        dependencies=dependencies,
        dependencies_reason=r.maybe(row, "dependencies-reason", key),
    )
    return LockedSource(
        source=source,
        commit=shas["commit"][0],
        requirements=tuple(_read_requirement(r, v, k) for k, v in r.rows(row, "requirements", key)),
        digest=r.text(row, "digest", key),
        tree=shas["tree"][0],
        picked=shas["picked"],
        metadata_fallback=r.maybe(row, "metadata-fallback", key),
        submodules=_read_submodules(r, row, key),
    )


def _read_submodules(r: StrictReader, row: dict[str, Any], key: KeyPath) -> tuple[Submodule, ...]:
    """The recorded submodules: each path, URL and commit checked as the recipe will use it (paths inside the
    tree, URLs git cannot read as an option, full commits), since a lock arrives as untrusted as a matrix."""
    found = []
    for k, sub in r.table_rows(row, "submodules", key, ("path", "url", "commit")):
        path, url, commit = r.text(sub, "path", k), r.text(sub, "url", k), r.text(sub, "commit", k)
        r.check((*k, "path"), submodule_path_problem(path))
        r.check((*k, "url"), git_url_problem(url))
        r.check((*k, "commit"), commit_problem(commit))
        found.append(Submodule(path, url, commit))
    if found and "submodules-reason" in row:
        raise r.fail((*key, "submodules"), "a source with submodules-reason checks out no submodules")
    return tuple(found)


@dataclass(frozen=True)
class SourcesToml:
    """What locks/<env>.sources.toml holds: the Lock without its packages and platforms."""

    lock: Lock
    # (platform, package) -> index name of the pip entries pinned to a named index.
    pip_indexes: tuple[tuple[tuple[str, str], str], ...]
    # index name -> the hosts other than its own its artifacts came from when locked.
    file_hosts: tuple[tuple[str, tuple[str, ...]], ...] = ()


_TOP_KEYS = ("schema", "env", "input-hash")
_TOP_OPTIONAL = (
    "content-hash",
    "inputs",
    "channels",
    "indexes",
    "cann",
    "activation",
    "sources",
    "pip-indexes",
    "overrides",
    "pending",
    "checks",
)


_Places = tuple[tuple[Channel, ...], tuple[Index, ...], tuple[tuple[str, tuple[str, ...]], ...], Cann | None]


def _read_places(r: StrictReader, top: dict[str, Any]) -> _Places:
    """The channels, indexes (and the other hosts each served artifacts from) and CANN a lock was made with."""
    channels = tuple(
        Channel(r.text(row, "name", k), r.text(row, "url", k))
        for k, row in r.table_rows(top, "channels", (), ("name", "url"))
    )
    rows = r.table_rows(top, "indexes", (), ("name", "url"), ("explicit", "trusted-host", "file-hosts"))
    indexes = tuple(
        Index(
            name=r.text(row, "name", k),
            url=r.text(row, "url", k),
            explicit=r.flag(row, "explicit", k, False),
            trusted_host=r.maybe(row, "trusted-host", k),
        )
        for k, row in rows
    )
    hosts = tuple((r.text(row, "name", k), r.strings(row, "file-hosts", k)) for k, row in rows)
    cann = None
    if "cann" in top:
        path: KeyPath = ("cann",)
        row = r.table(top["cann"], path, ("version", "set-env"), ("note",))
        cann = Cann(r.text(row, "version", path), r.text(row, "set-env", path), r.maybe(row, "note", path))
    return channels, indexes, hosts, cann


def _read_activation(r: StrictReader, top: dict[str, Any]) -> tuple[Env, tuple[Profile, ...]]:
    path: KeyPath = ("activation",)
    activation = r.table(top.get("activation", {}), path, (), ("env", "profiles"))
    profiles = tuple(
        Profile(r.text(row, "name", k), r.text(row, "description", k), r.env(row, "env", k))
        for k, row in r.table_rows(activation, "profiles", path, ("name", "description"), ("env",))
    )
    return r.env(activation, "env", path), profiles


def _read_decisions(
    r: StrictReader, top: dict[str, Any]
) -> tuple[tuple[AppliedOverride, ...], tuple[Pending, ...], tuple[ImportCheck, ...]]:
    """The overrides as applied, the pending items and the import checks."""
    overrides = tuple(
        AppliedOverride(
            Override(
                r.text(row, "name", k),
                r.text(row, "requirement", k),
                r.text(row, "reason", k),
                transitive=r.flag(row, "transitive", k, False),
            ),
            tuple(_read_requirement(r, rv, rk) for rk, rv in r.rows(row, "replaced", k)),
            r.strings(row, "violates", k),
        )
        for k, row in r.table_rows(
            top, "overrides", (), ("name", "requirement", "reason"), ("replaced", "transitive", "violates")
        )
    )
    pending = tuple(
        Pending(r.text(row, "name", k), r.text(row, "note", k))
        for k, row in r.table_rows(top, "pending", (), ("name", "note"))
    )
    checks = tuple(
        ImportCheck(
            module=r.text(row, "module", k),
            distribution=r.maybe(row, "distribution", k),
            version=r.maybe(row, "version", k),
            needs=r.text(row, "needs", k, "none"),
        )
        for k, row in r.table_rows(top, "checks", (), ("module",), ("distribution", "version", "needs"))
    )
    return overrides, pending, checks


def parse_sources_toml(text: str, where: str = "sources.toml") -> SourcesToml:
    """Read locks/<env>.sources.toml back; the mirror of render_sources_toml."""
    r = StrictReader(where, text, hint="re-run `envgen lock` to rewrite the file")
    try:
        with bounded_nesting(where):
            data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{where}: not valid TOML: {exc}", hint="re-run `envgen lock`") from exc
    top = r.table(data, (), _TOP_KEYS, _TOP_OPTIONAL)
    if top["schema"] != LOCK_SCHEMA:
        raise r.fail(("schema",), f"this envgen reads schema {LOCK_SCHEMA}, the file has {top['schema']!r}")
    channels, indexes, hosts, cann = _read_places(r, top)
    activation_env, profiles = _read_activation(r, top)
    overrides, pending, checks = _read_decisions(r, top)
    pip_indexes = tuple(
        ((r.text(row, "platform", k), r.text(row, "package", k)), r.text(row, "index", k))
        for k, row in r.table_rows(top, "pip-indexes", (), ("platform", "package", "index"))
    )
    lock = Lock(
        env=r.text(top, "env", ()),
        platforms=(),
        input_hash=r.text(top, "input-hash", ()),
        conda=(),
        pip=(),
        sources=tuple(_read_source(r, v, k) for k, v in r.rows(top, "sources", ())),
        overrides=overrides,
        pending=pending,
        channels=channels,
        indexes=indexes,
        cann=cann,
        activation_env=activation_env,
        profiles=profiles,
        checks=checks,
        inputs=r.string_table(top, "inputs", ()),
    )
    # The rules the recipe renderer applies, over the whole lock (names of the env and its profiles too).
    unsafe = lock_problems(lock)
    if unsafe:
        raise InputError(
            f"{where}: {unsafe[0]}", hint="the file was edited by hand or tampered with: re-run `envgen lock`"
        )
    return SourcesToml(lock, pip_indexes, tuple((name, found) for name, found in hosts if found))
