"""locks/<env>.sources.toml: everything of a Lock that is not a package, written from and read back
through one schema (lockio/sources_schema.py): the writer dumps the schema's document through
tomli-w, the reader validates what tomllib parsed against it (a text read before: the document
kept in envgen's cache, lockio/lock_documents.py); every problem names file, line and key.
"""

from __future__ import annotations

import logging
import tomllib
from typing import Any

import msgspec

from envgen.errors import InputError, Problem
from envgen.inputs.files import bounded_nesting
from envgen.inputs.toml_reader import KeyPath, Problems, key_lines, syntax_problem, type_name
from envgen.inputs.untrusted import lock_problems
from envgen.lockio.input_hashes import LOCK_SCHEMA
from envgen.lockio.lock_documents import cached_document, keep_document
from envgen.lockio.seal import UNSEALED, file_hosts
from envgen.lockio.sources_schema import (
    ActivationRow,
    ArchiveRow,
    CannRow,
    ChannelRow,
    CheckRow,
    ExcludedRow,
    IndexRow,
    LinkRow,
    MemberRow,
    OverrideRow,
    PendingRow,
    PipIndexRow,
    ProfileRow,
    ReplacementRow,
    RequirementRow,
    SourceRow,
    SourcesDocument,
    SubmoduleRow,
)
from envgen.lockio.strict_schema import Refusal, converted
from envgen.model import (
    AppliedOverride,
    ArchiveMember,
    Cann,
    Channel,
    Exclusion,
    ImportCheck,
    Index,
    Link,
    Lock,
    LockedArchive,
    LockedSource,
    Origin,
    Override,
    Pending,
    Profile,
    Replacement,
    Source,
    Submodule,
    TracedRequirement,
)
from envgen.redact import strip_credentials, written_url

log = logging.getLogger(__name__)

HINT = "the file was edited by hand or tampered with: re-run `envgen lock` to rewrite it"

# --- writing: a Lock as the schema's document -----------------------------------------------------


def _requirement_row(req: TracedRequirement) -> RequirementRow:
    origin = req.origin
    return RequirementRow(
        text=req.text,
        file=origin.file,
        key=origin.key,
        line=origin.line,
        source=origin.source,
        constraint=req.constraint,
    )


def _source_row(locked: LockedSource) -> SourceRow:
    src = locked.source
    return SourceRow(
        name=src.name,
        url=strip_credentials(src.url),
        ref=src.ref,
        commit=locked.commit,
        distribution=src.distribution,
        cherry_picks=list(src.cherry_picks),
        picked=list(locked.picked),
        tree=locked.tree,
        editable=src.editable,
        pythonpath=src.pythonpath,
        env=dict(src.env),
        build_isolation=src.build_isolation,
        needs_cann=src.needs_cann,
        submodules=[
            SubmoduleRow(path=s.path, url=strip_credentials(s.url), commit=s.commit)
            for s in locked.submodules
        ],
        submodules_reason=None if src.submodules else src.submodules_reason,
        build_index=src.build_index,
        requirement_files=list(src.requirements),
        dependencies=src.dependencies,
        dependencies_reason=src.dependencies_reason,
        metadata_fallback=locked.metadata_fallback,
        origin=src.origin,
        digest=locked.digest,
        requirements=[_requirement_row(r) for r in locked.requirements],
        subdirectory=src.subdirectory,
        extras=list(src.extras),
        replace=[_replacement_row(r) for r in src.replacements],
    )


def _replacement_row(replacement: Replacement) -> ReplacementRow:
    return ReplacementRow(source=replacement.source, target=replacement.target)


def _archive_row(archive: LockedArchive) -> ArchiveRow:
    members = [
        MemberRow(
            path=m.path, name=m.name, version=m.version, sha256=m.sha256, requires=list(m.requires)
        )
        for m in archive.members
    ]
    return ArchiveRow(
        name=archive.name,
        platform=archive.platform,
        url=archive.url,
        sha256=archive.sha256,
        redirect_hosts=list(archive.redirect_hosts),
        members=members,
    )


def _index_row(lock: Lock, index: Index) -> IndexRow:
    """An index without credentials (a `${VAR}` reference to one is kept: it is no secret, and the
    derived requirements.txt, rendered again from the lock read back, names it too), with the other
    hosts its artifacts came from."""
    return IndexRow(
        name=index.name,
        url=written_url(index.url),
        explicit=index.explicit,
        trusted_host=index.trusted_host,
        file_hosts=list(file_hosts(lock, index)),
    )


def _override_row(applied: AppliedOverride) -> OverrideRow:
    override = applied.override
    return OverrideRow(
        name=override.name,
        requirement=override.requirement,
        reason=override.reason,
        transitive=override.transitive,
        replaced=[_requirement_row(r) for r in applied.replaced],
        violates=list(applied.violates),
    )


def _channel_row(channel: Channel) -> ChannelRow:
    return ChannelRow(name=channel.name, url=written_url(channel.url))


def _activation_row(lock: Lock) -> ActivationRow | None:
    profiles = [
        ProfileRow(name=p.name, description=p.description, env=dict(p.env))
        for p in sorted(lock.profiles, key=lambda p: p.name)
    ]
    if not lock.activation_env and not profiles:
        return None
    return ActivationRow(env=dict(lock.activation_env), profiles=profiles)


def sources_document(lock: Lock) -> SourcesDocument:
    """The document of `lock`, its strings as they are (the reader, not the writer, judges them)."""
    cann = lock.cann
    pinned = sorted((e.platform, e.name, e.index) for e in lock.pip if e.index)
    pip_indexes = [PipIndexRow(platform=p, package=n, index=i) for p, n, i in pinned]
    channels = [_channel_row(c) for c in lock.channels]
    return SourcesDocument(
        schema_version=LOCK_SCHEMA,
        env=lock.env,
        input_hash=lock.input_hash,
        python=lock.python or None,
        content_hash=UNSEALED,
        derived_hash=UNSEALED,
        inputs=dict(sorted(lock.inputs)),
        channels=channels,
        indexes=[_index_row(lock, i) for i in lock.indexes],
        cann=None if cann is None else CannRow(**msgspec.structs.asdict(cann)),
        activation=_activation_row(lock),
        sources=[_source_row(s) for s in lock.sources],
        pip_indexes=pip_indexes,
        overrides=[_override_row(o) for o in sorted(lock.overrides, key=lambda o: o.override.name)],
        pending=[PendingRow(name=p.name, note=p.note) for p in lock.pending],
        checks=[CheckRow(**msgspec.structs.asdict(c)) for c in lock.checks],
        archives=[_archive_row(a) for a in lock.archives],
        links=[LinkRow(**msgspec.structs.asdict(link)) for link in lock.links],
        excluded=[
            ExcludedRow(name=e.name, reason=e.reason, platforms=list(e.platforms))
            for e in lock.exclusions
        ],
    )


def render_sources_toml(lock: Lock) -> str:
    """locks/<env>.sources.toml: everything of a Lock that is not a package, canonical and
    commented; what a field holds by default is left out. The content hash and the derived hash
    are UNSEALED until `seal.with_derived` and `seal.seal` fill them in."""
    import tomli_w  # imported here: the readers of a lock write none

    document = msgspec.to_builtins(sources_document(lock))
    comment = f"Generated by `envgen lock {lock.env}`: do not edit. The recipe is built from it."
    return f"# {comment}\n{tomli_w.dumps(document)}"


# --- reading: the document validated, then a Lock -------------------------------------------------


class SourcesToml(msgspec.Struct, frozen=True):
    """What locks/<env>.sources.toml holds: the Lock without its packages and platforms."""

    lock: Lock
    # (platform, package) -> index name of the pip entries pinned to a named index.
    pip_indexes: tuple[tuple[tuple[str, str], str], ...]
    # index name -> the hosts other than its own its artifacts came from when locked.
    file_hosts: tuple[tuple[str, tuple[str, ...]], ...] = ()


# What msgspec calls a type, in the terms of the matrix reader's messages.
_EXPECTED = {
    "str": "a string",
    "bool": "true or false",
    "int": "an integer",
    "array": "an array",
    "object": "a table",
}


def _message(refusal: Refusal) -> str:
    if refusal.kind == "type" and refusal.expected in _EXPECTED:
        return f"expected {_EXPECTED[refusal.expected]}, got {type_name(refusal.found)}"
    return refusal.message


def _located(where: str, text: str, path: KeyPath, message: str) -> InputError:
    """An InputError naming the file, the line `path` is written on (or its table's) and the key."""
    with bounded_nesting(where):
        problems = Problems(where, key_lines(text))
    problems.add(path, message)
    return problems.items[0].error(HINT)


def _validated(text: str, where: str) -> SourcesDocument:
    """The schema's document of the sources.toml `text`. The TOML of a text read before is read back
    from envgen's cache instead of parsed again (lockio/lock_documents.py), and validated all the
    same."""
    kept = cached_document("sources", text)
    if kept is not None:
        try:
            return _schema_document(kept, text, where)
        except InputError as exc:
            log.debug("%s: its kept document does not validate (%s): parsed again", where, exc)
    try:
        with bounded_nesting(where):
            data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise syntax_problem(where, text, exc).error(HINT) from exc
    document = _schema_document(data, text, where)
    keep_document("sources", text, data)
    return document


def _schema_document(data: dict[str, Any], text: str, where: str) -> SourcesDocument:
    """The TOML document `data` of `text` as the schema reads it; InputError naming the line of
    what it refuses."""
    try:
        with bounded_nesting(where):
            document = converted(data, SourcesDocument)
    except Refusal as refusal:
        raise _located(where, text, refusal.path, _message(refusal)) from refusal
    if document.schema_version != LOCK_SCHEMA:
        found = document.schema_version
        raise _located(
            where,
            text,
            ("schema",),
            f"this envgen reads schema {LOCK_SCHEMA}, the file has {found}",
        )
    return document


def parse_sources_toml(text: str, where: str = "sources.toml") -> SourcesToml:
    """Read locks/<env>.sources.toml back; the mirror of render_sources_toml."""
    document = _validated(text, where)
    lock = _lock(document)
    # The rules the recipe renderer applies, over the whole lock: the schema holds them all, this is
    # the renderer's own guard.
    unsafe = lock_problems(lock)
    if unsafe:
        raise Problem(where, "", unsafe[0]).error(HINT)
    pip_indexes = tuple(((r.platform, r.package), r.index) for r in document.pip_indexes)
    hosts = tuple((i.name, tuple(i.file_hosts)) for i in document.indexes if i.file_hosts)
    return SourcesToml(lock, pip_indexes, hosts)


def _lock(document: SourcesDocument) -> Lock:
    excluded = document.excluded
    activation = document.activation or ActivationRow()
    profiles = [Profile(p.name, p.description, tuple(p.env.items())) for p in activation.profiles]
    return Lock(
        env=document.env,
        platforms=(),
        input_hash=document.input_hash,
        conda=(),
        pip=(),
        sources=tuple(map(_locked_source, document.sources)),
        overrides=tuple(map(_applied_override, document.overrides)),
        pending=tuple(Pending(p.name, p.note) for p in document.pending),
        channels=tuple(Channel(c.name, c.url) for c in document.channels),
        indexes=tuple(Index(i.name, i.url, i.explicit, i.trusted_host) for i in document.indexes),
        cann=None if document.cann is None else Cann(**msgspec.structs.asdict(document.cann)),
        activation_env=tuple(activation.env.items()),
        profiles=tuple(profiles),
        checks=tuple(ImportCheck(**msgspec.structs.asdict(c)) for c in document.checks),
        inputs=tuple(sorted(document.inputs.items())),
        archives=tuple(map(_locked_archive, document.archives)),
        links=tuple(Link(row.target, row.reason, row.directory) for row in document.links),
        exclusions=tuple(Exclusion(x.name, x.reason, tuple(x.platforms)) for x in excluded),
        python=document.python or "",
    )


def _member(row: MemberRow) -> ArchiveMember:
    return ArchiveMember(row.path, row.name, row.version, row.sha256, tuple(row.requires))


def _locked_archive(row: ArchiveRow) -> LockedArchive:
    members = tuple(_member(m) for m in row.members)
    hosts = tuple(row.redirect_hosts)
    return LockedArchive(row.name, row.platform, row.url, row.sha256, members, hosts)


def _requirement(row: RequirementRow) -> TracedRequirement:
    origin = Origin(file=row.file, key=row.key, line=row.line, source=row.source)
    return TracedRequirement(row.text, origin, constraint=row.constraint)


def _locked_source(row: SourceRow) -> LockedSource:
    source = Source(
        name=row.name,
        url=row.url,
        ref=row.ref,
        distribution=row.distribution,
        cherry_picks=tuple(row.cherry_picks),
        editable=row.editable,
        pythonpath=row.pythonpath,
        env=tuple(row.env.items()),
        build_isolation=row.build_isolation,
        needs_cann=row.needs_cann,
        submodules=row.submodules_reason is None,
        submodules_reason=row.submodules_reason,
        build_index=row.build_index,
        requirements=tuple(row.requirement_files),
        origin=row.origin,
        dependencies=row.dependencies,
        dependencies_reason=row.dependencies_reason,
        subdirectory=row.subdirectory,
        extras=tuple(row.extras),
        replacements=tuple(Replacement(r.source, r.target) for r in row.replace),
    )
    return LockedSource(
        source=source,
        commit=row.commit,
        requirements=tuple(map(_requirement, row.requirements)),
        digest=row.digest,
        tree=row.tree,
        picked=tuple(row.picked),
        metadata_fallback=row.metadata_fallback,
        submodules=tuple(Submodule(s.path, s.url, s.commit) for s in row.submodules),
    )


def _applied_override(row: OverrideRow) -> AppliedOverride:
    override = Override(row.name, row.requirement, row.reason, transitive=row.transitive)
    return AppliedOverride(override, tuple(map(_requirement, row.replaced)), tuple(row.violates))
