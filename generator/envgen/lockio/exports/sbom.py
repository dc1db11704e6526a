"""Lock → a CycloneDX 1.6 SBOM (JSON) written with cyclonedx-python-lib: every artifact and git
source (pure)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from posixpath import basename
from urllib.parse import unquote, urlsplit

from cyclonedx.model import (
    ExternalReference,
    ExternalReferenceType,
    HashAlgorithm,
    HashType,
    Property,
    XsUri,
)
from cyclonedx.model.bom import Bom, BomMetaData
from cyclonedx.model.component import Component, ComponentType
from cyclonedx.model.dependency import Dependency
from cyclonedx.output.json import JsonV1Dot6
from packageurl import PackageURL

from envgen.digests import short_digest
from envgen.lockio.exports.common import bare_url
from envgen.model import CondaEntry, Lock, LockedArchive, LockedSource, PipEntry
from envgen.names import package_key

# Properties are namespaced as CycloneDX asks
# (https://cyclonedx.github.io/cyclonedx-property-taxonomy/).
NS = "envgen"


def _filename(url: str) -> str:
    return unquote(basename(urlsplit(url).path))


def _distribution(url: str, hashes: Sequence[HashType]) -> ExternalReference:
    return ExternalReference(
        type=ExternalReferenceType.DISTRIBUTION, url=XsUri(bare_url(url)), hashes=hashes
    )


def _conda(entry: CondaEntry, channel: str | None) -> Component:
    filename = _filename(entry.url)
    kind = "conda" if filename.endswith(".conda") else "tar.bz2"
    qualifiers = {"build": entry.build, "subdir": entry.url.rsplit("/", 2)[-2], "type": kind}
    if channel:
        qualifiers["channel"] = channel
    hashes = [
        HashType(alg=HashAlgorithm.SHA_256, content=entry.sha256),
        HashType(alg=HashAlgorithm.MD5, content=entry.md5),
    ]
    return Component(
        name=entry.name,
        version=entry.version,
        bom_ref=f"conda:{entry.platform}:{entry.name}",
        purl=PackageURL(
            type="conda", name=entry.name, version=entry.version, qualifiers=qualifiers
        ),
        hashes=hashes,
        external_references=[_distribution(entry.url, hashes)],
        properties=[Property(name=f"{NS}:platform", value=entry.platform)],
    )


def _pip(entry: PipEntry) -> Component:
    name = package_key(entry.name)
    hashes = [HashType(alg=HashAlgorithm.SHA_256, content=entry.sha256)]
    properties = [Property(name=f"{NS}:platform", value=entry.platform)]
    if entry.index:
        properties.append(Property(name=f"{NS}:index", value=entry.index))
    return Component(
        name=name,
        version=entry.version,
        bom_ref=f"pip:{entry.platform}:{name}",
        purl=PackageURL(
            type="pypi",
            name=name,
            version=entry.version,
            qualifiers={"file_name": _filename(entry.url)},
        ),
        hashes=hashes,
        external_references=[_distribution(entry.url, hashes)],
        properties=properties,
    )


def _wheel_purl(name: str, version: str, filename: str) -> PackageURL:
    qualifiers = {"file_name": filename}
    name = package_key(name)
    return PackageURL(type="pypi", name=name, version=version, qualifiers=qualifiers)


def _archive(archive: LockedArchive) -> Component:
    """A release archive as a file component, the wheels taken from it as its parts (each a PyPI
    package by name and version, with the wheel's own sha256)."""
    hashes = [HashType(alg=HashAlgorithm.SHA_256, content=archive.sha256)]
    platform = Property(name=f"{NS}:platform", value=archive.platform)
    wheels = [
        Component(
            name=package_key(m.name),
            version=m.version,
            bom_ref=f"archive:{archive.platform}:{archive.name}:{package_key(m.name)}",
            purl=_wheel_purl(m.name, m.version, m.filename),
            hashes=[HashType(alg=HashAlgorithm.SHA_256, content=m.sha256)],
            properties=[platform, Property(name=f"{NS}:archive-member", value=m.path)],
        )
        for m in archive.members
    ]
    return Component(
        type=ComponentType.FILE,
        name=archive.name,
        version=short_digest(archive.sha256),
        bom_ref=f"archive:{archive.platform}:{archive.name}",
        hashes=hashes,
        external_references=[_distribution(archive.url, hashes)],
        properties=[platform, Property(name=f"{NS}:archive", value=archive.name)],
        components=wheels,
    )


def _source(locked: LockedSource) -> Component:
    source = locked.source
    properties = [
        Property(name=f"{NS}:source", value=source.name),
        Property(name=f"{NS}:ref", value=source.ref),
        Property(name=f"{NS}:commit", value=locked.commit),
        *(Property(name=f"{NS}:cherry-pick", value=pick) for pick in source.cherry_picks),
    ]
    if locked.tree:
        properties.append(Property(name=f"{NS}:tree", value=locked.tree))
    # A source's submodules are parts of it: each a component of its own, at its gitlink commit.
    submodules = [
        _git(
            sub.path,
            sub.url,
            sub.commit,
            f"source:{source.name}:{sub.path}",
            [Property(name=f"{NS}:submodule", value=sub.path)],
        )
        for sub in locked.submodules
    ]
    return _git(
        package_key(source.distribution),
        source.url,
        locked.commit,
        f"source:{source.name}",
        properties,
        submodules,
    )


def _git(
    name: str,
    url: str,
    commit: str,
    ref: str,
    properties: list[Property],
    components: Sequence[Component] = (),
) -> Component:
    """A git repository at `commit` as a component: its purl and SCM reference name the URL and the
    commit."""
    url = bare_url(url)
    return Component(
        type=ComponentType.LIBRARY,
        name=name,
        version=commit,
        bom_ref=ref,
        purl=PackageURL(
            type="generic", name=name, version=commit, qualifiers={"vcs_url": f"git+{url}@{commit}"}
        ),
        external_references=[
            ExternalReference(type=ExternalReferenceType.SCM, url=XsUri(url), comment=commit)
        ],
        properties=properties,
        components=components,
    )


def _lock_properties(lock: Lock) -> list[Property]:
    properties = [Property(name=f"{NS}:input-hash", value=lock.input_hash)]
    properties += [Property(name=f"{NS}:platform", value=p) for p in lock.platforms]
    for applied in lock.overrides:
        override = applied.override
        value = f"{override.requirement}: {override.reason}"
        properties.append(Property(name=f"{NS}:override:{override.name}", value=value))
    properties += [Property(name=f"{NS}:pending:{p.name}", value=p.note) for p in lock.pending]
    for exclusion in lock.exclusions:
        where = f" ({', '.join(exclusion.platforms)})" if exclusion.platforms else ""
        key = f"{NS}:excluded:{exclusion.name}"
        properties.append(Property(name=key, value=f"{exclusion.reason}{where}"))
    for link in lock.links:
        at = link.directory or "."
        properties.append(Property(name=f"{NS}:link:{at}", value=f"{link.target}: {link.reason}"))
    return properties


def _component_order(component: Component) -> tuple[str, str, str, str]:
    """The order cyclonedx-python-lib sorts components in, for the components made here (no group;
    the bom-ref, unique, decides the rest). Only a hint: a component out of place is inserted where
    it belongs."""
    return (component.type, component.name, component.version or "", str(component.bom_ref))


def _ref_order(item: Component | Dependency) -> str:
    return str(item.ref if isinstance(item, Dependency) else item.bom_ref)


def build_bom(lock: Lock, platforms: Sequence[str] | None = None) -> Bom:
    """The SBOM of `lock` (or of some of its platforms): one component per artifact per platform and
    per source."""
    chosen = [p for p in lock.platforms if platforms is None or p in platforms]
    channel = bare_url(lock.channels[0].url) if len(lock.channels) == 1 else None
    components = [_conda(e, channel) for e in lock.conda if e.platform in chosen]
    components += [_pip(e) for e in lock.pip if e.platform in chosen]
    components += [_archive(a) for a in lock.archives if a.platform in chosen]
    components += [_source(s) for s in lock.sources]
    root = Component(
        type=ComponentType.APPLICATION,
        name=lock.env,
        version=short_digest(lock.input_hash),
        bom_ref=f"env:{lock.env}",
        description=f"the locked environment {lock.env} (envgen)",
    )
    bom = Bom(
        # Derived from the input hash, so the same lock always gives the same document.
        serial_number=uuid.uuid5(
            uuid.NAMESPACE_URL, f"envgen:{lock.env}:{lock.input_hash}:{','.join(chosen)}"
        ),
        metadata=BomMetaData(component=root, properties=_lock_properties(lock)),
    )
    # The components, and the graph `Bom.register_dependency(root, components)` builds (the root
    # depends on every component, each of which has an entry of its own), added one at a time in
    # the library's own order: a SortedSet given a whole collection sorts it from a set's order, at
    # n log n comparisons of components that each build two tuples of some thirty fields (about
    # 0.15 s for a real-sized lock); one added after its predecessor costs one.
    for component in sorted(components, key=_component_order):
        bom.components.add(component)
    root_entry = Dependency(ref=root.bom_ref)
    entries = [root_entry]
    for component in sorted(components, key=_ref_order):
        root_entry.dependencies.add(Dependency(ref=component.bom_ref))
        entries.append(Dependency(ref=component.bom_ref))
    for entry in sorted(entries, key=_ref_order):
        bom.dependencies.add(entry)
    # No creation time: the document describes the lock, and the same lock gives the same bytes.
    bom.metadata.timestamp = None  # type: ignore[assignment]
    return bom


def render_cyclonedx(lock: Lock, platforms: Sequence[str] | None = None) -> str:
    """The SBOM as CycloneDX 1.6 JSON."""
    return JsonV1Dot6(build_bom(lock, platforms)).output_as_string(indent=2) + "\n"
