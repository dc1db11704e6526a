"""The re-lock core in process (resolve/pipeline.py), through fakes of its effects: a uv runner that
resolves from a table of releases the way uv does (a preference is kept while the inputs allow it),
git and the conda solve answered from the test, index metadata from a table. The core keeps what
its inputs allow, moves what they require and says why, and the command
(commands/lock/command.py) writes what it returns, or nothing when it fails."""

from __future__ import annotations

import dataclasses
import os
import stat
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType

import msgspec
import pytest
import tomli_w
from envgen.commands.lock.changes import EDITED
from envgen.commands.lock.command import LockOptions, relock_files
from envgen.errors import ConflictError, InputError, NetworkError, ResolutionError, Unreached
from envgen.inputs.channels import IndexAccess
from envgen.lockio.store import LockTexts, read_files, read_lock
from envgen.model import CondaEntry, Index, LockedSource, Matrix, PipEntry, PipPackage, Source
from envgen.model_steps import Archive, ArchiveMember, LockedArchive
from envgen.network import Limits
from envgen.project import Project
from envgen.resolve.conda.stage import CondaSolve
from envgen.resolve.movable import NOTHING, Movable
from envgen.resolve.pipeline import Relocked, relock
from envgen.resolve.pypi import index_client
from envgen.resolve.pypi.offered import Offer, Offers
from envgen.resolve.pypi.uv_compile import UvJob, UvOutcome
from envgen.resolve.pypi.uv_pylock import Choice
from envgen.resolve.request import Relock
from envgen.resolve.resolvers import Resolvers
from envgen.resolve.settings import Settings
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests.support.builders import conda_entry, digest, make_matrix

PLATFORM = "linux-64"
INDEX = "https://pypi.example/simple"
FILES = "https://pypi.example/files"
# What the fake index offers, and what each release requires (its metadata's Requires-Dist).
RELEASES = {"demo-torch": ("2.10.0", "2.10.1"), "demo-numpy": ("1.26.4", "2.0.0")}
REQUIRES = {"demo-torch": ("demo-numpy>=1.26",)}
TRAINER = Source("trainer", "https://git.example/trainer.git", "main", "demo-trainer")
SETTINGS = Settings(MappingProxyType({}), Limits(), Path("/nonexistent/cache"), uv="uv")


def wheel(name: str, version: str) -> str:
    return f"{FILES}/{name.replace('-', '_')}-{version}-py3-none-any.whl"


class FakeUv:
    """A `UvRunner` resolving the job's project from RELEASES as uv does: each requirement gets the
    version the job's pylock.toml prefers when it is allowed, else the newest allowed; what a chosen
    release requires is resolved too. `fail` answers every job with uv's failure instead."""

    def __init__(self, fail: str = "") -> None:
        self.jobs: list[UvJob] = []
        self.fail = fail

    def run(self, job: UvJob) -> UvOutcome:
        self.jobs.append(job)
        if self.fail:
            return UvOutcome(2, self.fail)
        files = dict(job.files)
        project = tomllib.loads(files["pyproject.toml"])["project"]
        wanted = [Requirement(r) for r in project["dependencies"]]
        preferred = {p["name"]: p["version"] for p in preferences(job)}
        chosen: dict[str, str] = {}
        specs: dict[str, SpecifierSet] = {}
        while wanted:
            req = wanted.pop()
            name = canonicalize_name(req.name)
            # Every requirement on a name holds at once.
            spec = specs.get(name, SpecifierSet()) & req.specifier
            if name in specs and spec == specs[name]:
                continue
            specs[name] = spec
            allowed = [v for v in RELEASES[name] if spec.contains(v)]
            kept = preferred.get(name)
            chosen[name] = kept if kept in allowed else max(allowed, key=Version)
            wanted += [Requirement(r) for r in REQUIRES.get(name, ())]
        packages = [_package(n, v) for n, v in sorted(chosen.items())]
        return UvOutcome(0, "", tomli_w.dumps({"lock-version": "1.0", "packages": packages}))


def _package(name: str, version: str) -> dict[str, object]:
    """A `[[packages]]` table of uv's pylock.toml: one wheel, by URL and sha256."""
    url = wheel(name, version)
    file = {"url": url, "hashes": {"sha256": digest(url)}}
    return {"name": name, "version": version, "wheels": [file]}


def preferences(job: UvJob) -> list[dict[str, str]]:
    """The pins a job hands uv as its previous output."""
    text = dict(job.files).get("pylock.toml")
    return tomllib.loads(text)["packages"] if text else []


class FakeIndexes:
    """An `IndexReader` answering from RELEASES and REQUIRES (`requires` replaces the latter);
    `asked` records the packages whose offers were asked, per ask."""

    def __init__(self, requires: Mapping[str, Sequence[str]] = REQUIRES) -> None:
        self.requires = requires
        self.asked: list[list[str]] = []

    def metadata(
        self,
        choices: Sequence[Choice],
        indexes: Sequence[IndexAccess],
    ) -> dict[Choice, str]:
        def text(choice: Choice) -> str:
            name = choice.package.name
            lines = [f"Name: {name}", f"Version: {choice.package.version}"]
            lines += [f"Requires-Dist: {r}" for r in self.requires.get(name, ())]
            return "\n".join(["Metadata-Version: 2.1", *lines]) + "\n"

        return {c: text(c) for c in choices}

    def offered(self, entries: Sequence[PipEntry], indexes: Mapping[str, IndexAccess]) -> set[str]:
        return {e.name for e in entries if e.version in RELEASES.get(e.name, ())}

    def offers(
        self, wanted: Mapping[str, Sequence[IndexAccess]], indexes: Sequence[IndexAccess]
    ) -> Offers:
        self.asked.append(sorted(wanted))
        found = {
            name: Offer(candidates[0].name, tuple(Version(v) for v in RELEASES[name]))
            for name, candidates in wanted.items()
            if name in RELEASES and candidates
        }
        return Offers(found)


class FakeConda:
    """A `CondaSolver` choosing python 3.11.9 (or raising `error`), recording what it was to
    prefer."""

    def __init__(self, error: Exception | None = None) -> None:
        self.preferred: list[tuple[CondaEntry, ...]] = []
        self.error = error

    def solve(self, matrix: Matrix, platform: str, preferred: Sequence[CondaEntry]) -> CondaSolve:
        self.preferred.append(tuple(preferred))
        if self.error is not None:
            raise self.error
        return CondaSolve((conda_entry("python", "3.11.9", platform),))


class FakeGit:
    """A `SourcePinner`: a kept source keeps its commit unless `update` covers it, the others get
    `commit`."""

    def __init__(self, commit: str = "b" * 40) -> None:
        self.commit = commit
        self.asked: list[tuple[dict[str, str], Movable]] = []

    def pin(
        self,
        matrix: Matrix,
        kept: Mapping[str, LockedSource],
        update: Movable,
    ) -> tuple[LockedSource, ...]:
        self.asked.append(({n: s.commit for n, s in kept.items()}, update))
        pinned = [None if update.covers(s.name) else kept.get(s.name) for s in matrix.sources]
        pairs = zip(pinned, matrix.sources, strict=True)
        return tuple(p or LockedSource(s, self.commit) for p, s in pairs)


def fakes(**given: object) -> Resolvers:
    parts: dict[str, object] = {
        "sources": FakeGit(),
        "conda": FakeConda(),
        "uv": FakeUv(),
        "indexes": FakeIndexes(),
    }
    return Resolvers(**{**parts, **given})  # type: ignore[arg-type]


def demo(torch: str = "==2.10.0") -> Matrix:
    return make_matrix(
        indexes=(Index("pypi", INDEX),),
        conda_specs=("python 3.11.*",),
        packages=(PipPackage("demo-torch", torch), PipPackage("demo-numpy")),
        sources=(TRAINER,),
    )


# uv's word for an index that did not answer.
REFUSED = "  Caused by: connection refused\n"
FILE_DIGESTS = {"matrix": "1" * 64, "channel:pypi": "2" * 64}


def first_lock() -> Relocked:
    """The demo locked afresh: the newest numpy torch allows, a new commit of trainer."""
    return relock(Relock(demo(), files=FILE_DIGESTS), SETTINGS, fakes())


def versions(relocked: Relocked) -> dict[str, str]:
    return {e.name: e.version for e in relocked.lock.pip}


def test_a_lock_from_nothing_takes_the_newest_allowed() -> None:
    done = first_lock()
    assert versions(done) == {"demo-numpy": "2.0.0", "demo-torch": "2.10.0"}
    assert [(s.source.name, s.commit) for s in done.lock.sources] == [("trainer", "b" * 40)]
    assert done.moves == ()
    assert done.lock.python_for(PLATFORM) == "3.11.9"
    assert dict(done.derived).keys() == {
        f"demo.{PLATFORM}.requirements.txt",
        f"pylock.demo-{PLATFORM}.toml",
        "demo.nix",
    }
    assert "demo-torch==2.10.0" in dict(done.derived)[f"demo.{PLATFORM}.requirements.txt"]
    assert "trainer" in done.recipe


def test_a_relock_keeps_every_version_and_commit_its_inputs_allow() -> None:
    before = first_lock()
    uv, git, conda = FakeUv(), FakeGit(commit="c" * 40), FakeConda()
    resolvers = fakes(uv=uv, sources=git, conda=conda)
    again = relock(Relock(demo(), before.lock, FILE_DIGESTS), SETTINGS, resolvers)
    # uv was given the previous pins as its previous output, rattler the previous records, git the
    # commits.
    given = sorted((p["name"], p["version"]) for p in preferences(uv.jobs[0]))
    assert given == sorted(versions(before).items())
    assert conda.preferred == [before.lock.conda_for(PLATFORM)]
    assert git.asked == [({"trainer": "b" * 40}, NOTHING)]
    assert again.moves == ()
    assert again.lock == before.lock
    assert (again.derived, again.recipe) == (before.derived, before.recipe)


def test_a_moved_pin_moves_that_package_alone_and_says_why() -> None:
    before = first_lock()
    bumped = demo("==2.10.1")
    again = relock(Relock(bumped, before.lock, FILE_DIGESTS), SETTINGS, fakes())
    assert versions(again) == {"demo-numpy": "2.0.0", "demo-torch": "2.10.1"}
    (move,) = again.moves
    assert (move.platform, move.manager, move.name, move.old, move.new) == (
        PLATFORM,
        "pip",
        "demo-torch",
        "2.10.0",
        "2.10.1",
    )
    assert move.reason.startswith("required by ") and "(==2.10.1)" in move.reason
    # The file digests are the command's to read: unchanged here.
    assert again.lock.input_hash == before.lock.input_hash


def test_an_upgrade_moves_only_what_it_names_and_the_sources_it_covers() -> None:
    newest = first_lock().lock
    numpy = next(e for e in newest.pip if e.name == "demo-numpy")
    pip = [
        msgspec.structs.replace(numpy, version="1.26.4"),
        *(e for e in newest.pip if e is not numpy),
    ]
    older = msgspec.structs.replace(newest, pip=tuple(pip))
    kept = relock(Relock(demo(), older, FILE_DIGESTS), SETTINGS, fakes())
    assert versions(kept)["demo-numpy"] == "1.26.4"
    git = FakeGit(commit="c" * 40)
    upgrade = Movable.packages(names=["Demo_Numpy", "trainer"])
    asked = Relock(demo(), older, FILE_DIGESTS, upgrade=upgrade)
    again = relock(asked, SETTINGS, fakes(sources=git))
    assert versions(again) == {"demo-numpy": "2.0.0", "demo-torch": "2.10.0"}
    assert git.asked == [({"trainer": "b" * 40}, Movable.sources(names=["trainer"]))]
    reasons = {m.name: m.reason for m in again.moves}
    assert reasons == {
        "demo-numpy": "--upgrade-package demo-numpy",
        "trainer": "--upgrade-package trainer",
    }


@pytest.fixture
def project(tmp_path: Path) -> Project:
    """A project with the demo's matrix and channel files, locked once through the command with the
    fakes."""
    project = Project(tmp_path)
    for path in (project.template("demo"), project.channel("pypi")):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# {path.name}\n")
    relock_files(project, demo(), read_files(project, "demo"), OPTIONS, fakes())
    return project


OPTIONS = LockOptions(NOTHING, NOTHING, SETTINGS, relocking=True)


def files(project: Project) -> LockTexts:
    """The demo's lock files as the command reads them."""
    return read_files(project, "demo")


def lock_files(project: Project) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(project.locks_dir.iterdir())}


def test_the_command_writes_what_the_core_returns(project: Project) -> None:
    written = read_lock(project, "demo")
    assert written is not None
    assert {e.name: e.version for e in written.pip} == {
        "demo-numpy": "2.0.0",
        "demo-torch": "2.10.0",
    }
    assert sorted(lock_files(project)) == sorted(
        ["demo.yml", "demo.sources.toml", "demo.install.sh", "demo.nix"]
        + [f"demo.{PLATFORM}.requirements.txt", f"pylock.demo-{PLATFORM}.toml"]
    )
    result = relock_files(project, demo("==2.10.1"), read_files(project, "demo"), OPTIONS, fakes())
    assert [(m.name, m.old, m.new) for m in result.moves] == [("demo-torch", "2.10.0", "2.10.1")]
    relocked = read_lock(project, "demo")
    assert relocked is not None
    assert {e.name: e.version for e in relocked.pip}["demo-torch"] == "2.10.1"


@pytest.mark.parametrize(
    ("failing", "error"),
    [
        # What torch's metadata declares now contradicts the numpy uv chose: a failed resolution.
        ({"indexes": FakeIndexes({"demo-torch": ("demo-numpy>=3",)})}, ResolutionError),
        (
            {"uv": FakeUv(fail=f"error: Failed to fetch: `{INDEX}/demo-torch/`\n{REFUSED}")},
            NetworkError,
        ),
        (
            {
                "conda": FakeConda(
                    NetworkError("cannot fetch repodata", hosts=[Unreached(INDEX, "refused")])
                )
            },
            NetworkError,
        ),
    ],
    ids=["inconsistent", "uv-failed", "conda-failed"],
)
def test_a_relock_that_fails_writes_nothing(
    project: Project,
    failing: dict[str, object],
    error: type,
) -> None:
    before = lock_files(project)
    with pytest.raises(error):
        relock_files(project, demo("==2.10.1"), files(project), OPTIONS, fakes(**failing))
    assert lock_files(project) == before


def test_a_gate_that_refuses_writes_nothing(project: Project) -> None:
    """The preflight's verdict comes after the core returned: an unreachable host still stops the
    write."""
    before = lock_files(project)

    def unreachable() -> None:
        raise NetworkError.listing(
            "1 host that the lock needs did not answer; nothing was locked:",
            [Unreached("127.0.0.1:9", "connection refused")],
        )

    with pytest.raises(NetworkError):
        relock_files(project, demo("==2.10.1"), files(project), OPTIONS, fakes(), unreachable)
    assert lock_files(project) == before


def test_a_mode_that_writes_nothing_says_what_the_write_would_change(project: Project) -> None:
    """The core returns what it would write and the command compares it with locks/ instead:
    the files that would differ, the inputs that changed, the moves; an identical result is up
    to date."""
    before = lock_files(project)
    dry = dataclasses.replace(OPTIONS, mode="dry-run")
    same = relock_files(project, demo(), files(project), dry, fakes())
    assert (same.status, same.unwritten, same.lock) == ("up-to-date", None, None)
    project.template("demo").write_text("# demo.toml, edited\n")
    (project.locks_dir / "demo.nix").unlink()
    result = relock_files(project, demo("==2.10.1"), files(project), dry, fakes())
    assert result.status == "would-lock" and result.unwritten is not None
    assert result.unwritten.files == (
        ("locks/demo.yml", "changed"),
        ("locks/demo.sources.toml", "changed"),
        (f"locks/demo.{PLATFORM}.requirements.txt", "changed"),
        (f"locks/pylock.demo-{PLATFORM}.toml", "changed"),
        ("locks/demo.nix", "added"),
    )
    assert result.unwritten.reasons == ("matrix env-templates/demo.toml changed",)
    assert [(m.name, m.old, m.new) for m in result.moves] == [("demo-torch", "2.10.0", "2.10.1")]
    assert lock_files(project) == {k: v for k, v in before.items() if k != "demo.nix"}


def test_a_mode_that_writes_nothing_refuses_what_the_write_refuses(project: Project) -> None:
    """A FIFO where a derived file goes: the write would refuse it (exit 2), so the check does."""
    nix = project.locks_dir / "demo.nix"
    nix.unlink()
    os.mkfifo(nix)
    check = dataclasses.replace(OPTIONS, mode="check")
    with pytest.raises(InputError, match="demo.nix is not a regular file"):
        relock_files(project, demo(), files(project), check, fakes())
    assert stat.S_ISFIFO(nix.lstat().st_mode)


def test_a_hand_edited_lock_with_its_inputs_unchanged_is_one_a_re_lock_would_change(
    project: Project,
) -> None:
    recipe = project.install_sh("demo")
    recipe.write_text(recipe.read_text() + "echo edited\n")
    before = lock_files(project)
    check = dataclasses.replace(OPTIONS, mode="check")
    result = relock_files(project, demo(), files(project), check, fakes())
    assert result.status == "would-lock" and result.unwritten is not None
    assert result.unwritten.files == (("locks/demo.install.sh", "changed"),)
    assert result.unwritten.reasons == (EDITED,)
    assert result.moves == ()
    assert lock_files(project) == before


# uv's word for a resolution that does not exist, naming the package it stopped at.
NO_SOLUTION = """  x No solution found when resolving dependencies:
  `-> Because there is no version of demo-torch==9.9 and envgen-inputs depends on demo-torch==9.9,
      we can conclude that your requirements are unsatisfiable.
"""


def test_a_conflict_is_explained_from_the_index_reader_the_core_is_given(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """uv finds no resolution: the releases that name the direct layer's conflicts are asked of the
    core's index reader (here the fake's), never of an index client the core would open itself."""

    def no_request(*args: object, **kwargs: object) -> None:
        raise AssertionError("the re-lock core opened an index client of its own")

    monkeypatch.setattr(index_client, "IndexClient", no_request)
    indexes = FakeIndexes()
    resolvers = fakes(uv=FakeUv(fail=NO_SOLUTION), indexes=indexes)
    with pytest.raises(ConflictError) as raised:
        relock(Relock(demo("==9.9"), files=FILE_DIGESTS), SETTINGS, resolvers)
    assert indexes.asked == [["demo-torch"]]
    message = raised.value.message
    assert "no release meets every requirement on demo-torch" in message
    assert "demo-torch (pypi offers 2.10.1, 2.10.0)" in message
    (conflict,) = raised.value.conflicts
    assert (conflict["name"], conflict["index"]) == ("demo-torch", "pypi")
    assert conflict["offered"] == ["2.10.0", "2.10.1"]
    assert "then uv says:" in message and "No solution found" in message


def test_each_platform_is_resolved_on_its_own_and_a_relock_keeps_each_ones_versions() -> None:
    """Two platforms: uv runs once for each with that platform's inputs, rattler is asked per
    platform, and a re-lock prefers each platform's own previous versions."""
    both = msgspec.structs.replace(demo(), platforms=("linux-64", "linux-aarch64"))
    uv, conda = FakeUv(), FakeConda()
    first = relock(Relock(both, files=FILE_DIGESTS), SETTINGS, fakes(uv=uv, conda=conda))
    assert sorted(first.lock.platforms) == ["linux-64", "linux-aarch64"]
    assert len(uv.jobs) == 2 and len(conda.preferred) == 2
    assert {e.platform for e in first.lock.pip} == {"linux-64", "linux-aarch64"}
    # The aarch64 half was locked with numpy 1.26.4 (as if before its 2.0.0 was chosen): kept there.
    url = wheel("demo-numpy", "1.26.4")
    older = tuple(
        msgspec.structs.replace(e, version="1.26.4", url=url, sha256=digest(url))
        if (e.platform, e.name) == ("linux-aarch64", "demo-numpy")
        else e
        for e in first.lock.pip
    )
    previous = msgspec.structs.replace(first.lock, pip=older)
    again = relock(Relock(both, previous, FILE_DIGESTS), SETTINGS, fakes())
    found = {(e.platform, e.name): e.version for e in again.lock.pip}
    assert found[("linux-aarch64", "demo-numpy")] == "1.26.4"
    assert found[("linux-64", "demo-numpy")] == "2.0.0"
    assert again.moves == ()


class FakeArchives:
    """An `ArchiveLocker`: each archive locked with one wheel whose metadata requires demo-numpy<2,
    recording the sha256s it was handed from the previous lock."""

    def __init__(self) -> None:
        self.recorded: list[tuple[LockedArchive, ...]] = []

    def lock(self, matrix: Matrix, previous: Sequence[LockedArchive]) -> tuple[LockedArchive, ...]:
        self.recorded.append(tuple(previous))
        member = ArchiveMember(
            "kernels/demo_kernel-1.0-py3-none-any.whl",
            "demo-kernel",
            "1.0",
            "d" * 64,
            requires=("demo-numpy<2",),
        )
        return tuple(
            LockedArchive(a.name, p, url, "a" * 64, (member,))
            for a in matrix.archives
            for p, url in a.urls
        )


def test_an_archives_wheels_are_locked_through_the_archive_resolver_and_constrain_pip() -> None:
    """The matrix's release archive: locked by the core's archive resolver, its wheel's
    requirements resolved with the pip part (numpy held below 2), the previous lock's archives
    handed back on a re-lock."""
    archive = Archive(
        "kernels", ((PLATFORM, "https://files.example/kernels.zip"),), ("demo-kernel",)
    )
    matrix = msgspec.structs.replace(demo(), archives=(archive,))
    archives = FakeArchives()
    first = relock(Relock(matrix, files=FILE_DIGESTS), SETTINGS, fakes(archives=archives))
    (locked,) = first.lock.archives
    assert (locked.name, locked.platform, locked.sha256) == ("kernels", PLATFORM, "a" * 64)
    assert versions(first)["demo-numpy"] == "1.26.4"
    assert archives.recorded == [()]
    relock(Relock(matrix, first.lock, FILE_DIGESTS), SETTINGS, fakes(archives=archives))
    assert archives.recorded[-1] == (locked,)
