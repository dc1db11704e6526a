"""The data envgen works on: a Matrix (what is wanted) and a Lock (what was resolved); frozen, no
I/O."""

from __future__ import annotations

import functools
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

import msgspec

# model_steps.py holds the install steps' data, model_entries.py a lock's entries: both are model.
from envgen.errors import InputError
from envgen.model_entries import CondaEntry as CondaEntry
from envgen.model_entries import PipEntry as PipEntry
from envgen.model_entries import python_versions as python_versions
from envgen.model_steps import Archive as Archive
from envgen.model_steps import ArchiveMember as ArchiveMember
from envgen.model_steps import Exclusion as Exclusion
from envgen.model_steps import Link as Link
from envgen.model_steps import LockedArchive as LockedArchive
from envgen.model_steps import Replacement as Replacement
from envgen.names import package_key

if TYPE_CHECKING:  # a Matrix's NPU: the readers of a Lock need none of the NPU generations' data
    from envgen.npu import Npu

# How a source's requirements are read: a file path inside the tree, or this word for PEP 621
# dependencies.
PYPROJECT = "pyproject"

# Which of a source's requirements count (its `dependencies`): what `pip install -e .` would install
# (its declared metadata, plus the listed files), only the listed requirement files, or nothing.
METADATA, FILES, NONE = "metadata", "files", "none"
DEPENDENCY_MODES = (METADATA, FILES, NONE)

# Where CANN's environment script lives unless a matrix says otherwise (the install guide's path).
DEFAULT_CANN_SET_ENV = "/usr/local/Ascend/cann/set_env.sh"

# Several CANN scripts (the toolkit's, then NNAL's) are one value, as in ASCEND_SET_ENV and PATH.
CANN_SCRIPT_SEPARATOR = ":"

# Levels of hardware an import check needs; "none" runs anywhere.
NEEDS = ("none", "cann", "npu")

Env = tuple[tuple[str, str], ...]


def env_dict(env: Env) -> dict[str, str]:
    return dict(env)


# --- inputs: channels/
# ---------------------------------------------------------------------------------


class Channel(msgspec.Struct, frozen=True):
    """A conda channel named in channels/*.toml."""

    name: str
    url: str


class Index(msgspec.Struct, frozen=True):
    """A PEP 503 pip index named in channels/*.toml.

    `url` is as written: it may carry `${VAR}` references or credentials and is expanded only when
    used; nothing written to disk carries it unredacted. An explicit index serves only the packages
    that name it.
    """

    name: str
    url: str
    explicit: bool = False
    trusted_host: str | None = None


# --- inputs: env-templates/<env>.toml
# ------------------------------------------------------------------


class Cann(msgspec.Struct, frozen=True):
    """CANN, a system toolkit rather than a package: a version or "pending", and where its env
    scripts are.

    `set_env` is one script, or several separated by ':' (sourced in that order), exactly as the
    recipe's ASCEND_SET_ENV takes them, so the matrix, the lock and the override share one spelling.
    """

    version: str
    set_env: str
    note: str | None = None

    @property
    def pending(self) -> bool:
        return self.version == "pending"

    @property
    def scripts(self) -> tuple[str, ...]:
        return tuple(self.set_env.split(CANN_SCRIPT_SEPARATOR))


class PipPackage(msgspec.Struct, frozen=True):
    """One pip requirement of the matrix.

    `specifier` is a PEP 440 specifier set; "" means unpinned but locked to whatever resolves.
    `index` maps platform -> index name for a package pinned to an explicit index (empty: default
    indexes). `pending` holds the note of a package not yet published: it is recorded, never
    resolved. `url` + `sha256` lock a privately shipped wheel as given.
    """

    name: str
    specifier: str = ""
    extras: tuple[str, ...] = ()
    marker: str | None = None
    index: tuple[tuple[str, str], ...] = ()
    pending: str | None = None
    url: str | None = None
    sha256: str | None = None

    def index_for(self, platform: str) -> str | None:
        return dict(self.index).get(platform)

    @property
    def requirement(self) -> str:
        """The PEP 508 string of this package (without any URL)."""
        extras = f"[{','.join(self.extras)}]" if self.extras else ""
        marker = f" ; {self.marker}" if self.marker else ""
        return f"{self.name}{extras}{self.specifier}{marker}"


class Source(msgspec.Struct, frozen=True):
    """A git source: where, which ref, and how it installs.

    `requirements` names the files whose requirements enter the resolution (paths in the tree, or
    PYPROJECT). `distribution` is the name it installs as, so requirements on it are satisfied by
    the source itself. `origin` is set for a source discovered inside another source's requirement
    file ("verl:file:line"). `dependencies` says which requirements count (METADATA, FILES or NONE);
    NONE carries `dependencies_reason`.
    """

    name: str
    url: str
    ref: str
    distribution: str
    cherry_picks: tuple[str, ...] = ()
    editable: bool = True
    pythonpath: bool = False
    env: Env = ()
    build_isolation: bool = True
    needs_cann: bool = False
    build_index: str | None = None
    requirements: tuple[str, ...] = ()
    origin: str | None = None
    # Check out its git submodules recursively, at the commits the source's own tree records
    # (gitlinks); a source that opts out (False) says why in `submodules_reason`.
    submodules: bool = True
    dependencies: str = METADATA
    dependencies_reason: str | None = None
    submodules_reason: str | None = None
    # Where the project lies in the tree ("" for its root) and the extras its install asks
    # (`pip install -e "python[srt_npu]"`), and the files copied within the tree before it builds.
    subdirectory: str = ""
    extras: tuple[str, ...] = ()
    replacements: tuple[Replacement, ...] = ()


class Override(msgspec.Struct, frozen=True):
    """A deliberate replacement of upstream requirements on `name` by `requirement`, with its
    reason.

    It replaces the direct layer (the matrix's pins, the sources' requirements); third-party
    packages' own requirements on the name still constrain the resolution unless `transitive` (uv's
    global override).
    """

    name: str
    requirement: str
    reason: str
    transitive: bool = False


class Profile(msgspec.Struct, frozen=True):
    """A named, optional set of activation variables (e.g. the HCCL whitelist for the checkpoint
    engine)."""

    name: str
    description: str
    env: Env


class ImportCheck(msgspec.Struct, frozen=True):
    """A smoke import after install: module, the distribution whose version is compared, what it
    needs."""

    module: str
    distribution: str | None = None
    version: str | None = None
    needs: str = "none"


class Page(msgspec.Struct, frozen=True):
    """An upstream page the matrix encodes (an install guide, a script): its repository, the branch
    or tag it is read on, its path, the blob the matrix was written from and a commit holding that
    blob (where a compare link starts)."""

    url: str
    ref: str
    path: str
    blob: str
    commit: str


class Watch(msgspec.Struct, frozen=True):
    """What `envgen status --watch` follows besides the lock: the pages the matrix encodes, and per
    source the patterns of its release refs (`releases/v*`)."""

    pages: tuple[Page, ...] = ()
    releases: tuple[tuple[str, tuple[str, ...]], ...] = ()


class Matrix(msgspec.Struct, frozen=True, dict=True):  # dict: where _key_files is cached
    """A whole environment template, validated and normalised. Sources are in install order."""

    name: str
    description: str
    path: str
    platforms: tuple[str, ...]
    python: str
    glibc: str
    # [system.cann]; None for an env without CANN (CPU only): nothing of CANN is locked or written.
    cann: Cann | None
    channels: tuple[Channel, ...]
    conda_specs: tuple[str, ...]
    indexes: tuple[Index, ...]
    packages: tuple[PipPackage, ...]
    sources: tuple[Source, ...]
    overrides: tuple[Override, ...] = ()
    activation_env: Env = ()
    profiles: tuple[Profile, ...] = ()
    checks: tuple[ImportCheck, ...] = ()
    # Free-form notes of [env.notes] (name -> text), sorted by name.
    notes: tuple[tuple[str, str], ...] = ()
    # The hardware targeted ([system.npu]); None when the matrix names none.
    npu: Npu | None = None
    # The matrix files this one extends (`extends = "a3"`), nearest first; their keys are merged in.
    bases: tuple[str, ...] = ()
    watch: Watch = Watch()
    archives: tuple[Archive, ...] = ()
    links: tuple[Link, ...] = ()
    exclusions: tuple[Exclusion, ...] = ()
    # [audit.ignore]: the advisories `envgen audit` counts as accepted (id, reason), sorted by id.
    audit_ignores: tuple[tuple[str, str], ...] = ()
    # For a matrix that extends another: the file of the chain that wrote each key (its path as a
    # tuple: `("overrides", "numpy", "requirement")`), tables and array positions included. Empty
    # otherwise.
    key_files: tuple[tuple[tuple[str | int, ...], str], ...] = ()
    # Whether it has [conda]; without, the lock holds pip entries only, for a venv of `python`.
    has_conda: bool = True

    @property
    def extends(self) -> tuple[str, ...]:
        """The envs this one extends, nearest first (`("a3",)` for a2)."""
        return tuple(PurePosixPath(p).stem for p in self.bases)

    @functools.cached_property
    def _key_files(self) -> dict[tuple[str | int, ...], str]:
        return dict(self.key_files)

    def file_of(self, *key: str | int) -> str:
        """The file that wrote `key` (or the nearest enclosing key it wrote): the base's for a key
        the matrix inherits through `extends`, its own file for the rest."""
        for end in range(len(key), 0, -1):
            found = self._key_files.get(key[:end])
            if found is not None:
                return found
        return self.path

    def origin(self, *key: str) -> Origin:
        """Where the matrix says `key` (`origin("pip", "packages", "torch", "version")`): the file
        that wrote it, and the key dotted."""
        return Origin(file=self.file_of(*key), key=".".join(key))

    def index(self, name: str) -> Index:
        return next(i for i in self.indexes if i.name == name)

    def override_of(self, name: str) -> Override | None:
        """The override of the pip package `name` (any spelling of it), or None."""
        key = package_key(name)
        return next((o for o in self.overrides if package_key(o.name) == key), None)

    @property
    def default_indexes(self) -> tuple[Index, ...]:
        """Indexes every package may come from, first one first (uv's first-index strategy)."""
        return tuple(i for i in self.indexes if not i.explicit)


# --- outputs: locks/<env>.yml and locks/<env>.sources.toml
# ---------------------------------------------


class Origin(msgspec.Struct, frozen=True):
    """Where a requirement came from: the matrix (file + key) or a source's file and line."""

    file: str
    key: str | None = None
    line: int | None = None
    source: str | None = None

    def __str__(self) -> str:
        if self.source:
            where = f"{self.file}:{self.line}" if self.line else self.file
            return (
                f"source {self.source}: {where} {self.key}"
                if self.key
                else f"source {self.source}: {where}"
            )
        return f"{self.file}: {self.key}" if self.key else self.file

    def error(self, reason: str) -> InputError:
        """`reason` as an error about this place (a matrix's key as data, a source's as text)."""
        said, line = (f"{self}: {reason}", self.line) if self.source else (None, None)
        return InputError(said, file=self.file, line=line, key=self.key, reason=reason)


class TracedRequirement(msgspec.Struct, frozen=True):
    """A PEP 508 requirement string and where it came from."""

    text: str
    origin: Origin
    # A `-c` line of a requirement file: it limits versions but requires nothing.
    constraint: bool = False


class Submodule(msgspec.Struct, frozen=True):
    """A git submodule of a locked source (nested ones too): its path from the source's root, its
    canonical URL (a relative URL of `.gitmodules` resolved against the URL of the repository naming
    it) and the commit the tree records for it (the gitlink), never a branch."""

    path: str
    url: str
    commit: str


class LockedSource(msgspec.Struct, frozen=True):
    """A source pinned to a commit, with the requirements read from its tree at that commit."""

    source: Source
    commit: str
    requirements: tuple[TracedRequirement, ...] = ()
    digest: str = ""
    # `git rev-parse HEAD^{tree}` after the cherry-picks: what the recipe verifies (HEAD itself
    # differs from `commit` once commits are picked on top). "" when unknown: the recipe then
    # verifies `commit` only.
    tree: str = ""
    # The commit each cherry-pick produced on top of `commit`, in order; the last one is the
    # installed tree.
    picked: tuple[str, ...] = ()
    # Why the declared metadata of a METADATA source could not be read (its listed files counted
    # alone).
    metadata_fallback: str | None = None
    # Every submodule the installed tree records, recursively, parents before their own submodules;
    # empty when the source has none or opts out.
    submodules: tuple[Submodule, ...] = ()


class AppliedOverride(msgspec.Struct, frozen=True):
    """An override as applied: the direct-layer requirements it replaced, and for a transitive
    override the third-party requirements the lock contradicts because of it ("pkg-b==3.0 needs
    base>=2")."""

    override: Override
    replaced: tuple[TracedRequirement, ...] = ()
    violates: tuple[str, ...] = ()


class Pending(msgspec.Struct, frozen=True):
    """Something the matrix wants that has no public release yet (torch_npu, CANN)."""

    name: str
    note: str


class Lock(msgspec.Struct, frozen=True):
    """Everything resolved for one env. Tuples are kept in canonical order (see
    lockio/conda_lock_yml.py)."""

    env: str
    platforms: tuple[str, ...]
    input_hash: str
    conda: tuple[CondaEntry, ...]
    pip: tuple[PipEntry, ...]
    sources: tuple[LockedSource, ...]
    overrides: tuple[AppliedOverride, ...] = ()
    pending: tuple[Pending, ...] = ()
    channels: tuple[Channel, ...] = ()
    indexes: tuple[Index, ...] = ()
    cann: Cann | None = None
    activation_env: Env = ()
    profiles: tuple[Profile, ...] = ()
    checks: tuple[ImportCheck, ...] = ()
    # The digests behind input_hash, by component ("matrix", "channel:<name>", "source:<name>",
    # ...), so a stale lock can say what changed.
    inputs: tuple[tuple[str, str], ...] = ()
    # Wheels from release archives (per platform), links made after the install, packages left out.
    archives: tuple[LockedArchive, ...] = ()
    links: tuple[Link, ...] = ()
    exclusions: tuple[Exclusion, ...] = ()
    # The major.minor python of a lock without a conda part (its venv's interpreter); "" when the
    # conda part holds the python.
    python: str = ""

    @property
    def has_conda(self) -> bool:
        """Whether the lock has a conda part (a lock without one installs into a venv only)."""
        return not self.python

    def archives_for(self, platform: str) -> tuple[LockedArchive, ...]:
        return tuple(a for a in self.archives if a.platform == platform)

    def conda_for(self, platform: str) -> tuple[CondaEntry, ...]:
        return tuple(e for e in self.conda if e.platform == platform)

    def pip_for(self, platform: str) -> tuple[PipEntry, ...]:
        return tuple(e for e in self.pip if e.platform == platform)

    def python_for(self, platform: str) -> str | None:
        """The exact python version the conda part holds for `platform`; None unless it holds
        exactly one. A lock without a conda part gives its major.minor python."""
        if self.python:
            return self.python
        versions = python_versions(self.conda_for(platform))
        return versions[0] if len(versions) == 1 else None
