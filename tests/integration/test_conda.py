"""solve_conda and install_conda against a channel of real packages served on 127.0.0.1."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import subprocess
import urllib.request
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from envgen.errors import InputError, ResolutionError, VerificationError
from envgen.example.condapkgs import (
    CondaPackage,
    HostPython,
    PackageFile,
    demo_packages,
    host_python,
    package_bytes,
    pip_package,
    write_channel,
)
from envgen.example.http import serve_directory
from envgen.example.wheels import FixtureDist, build_wheel
from envgen.installer.conda import install_conda
from envgen.model import Channel, Matrix
from envgen.network import limits
from envgen.platforms import virtual_packages
from envgen.resolve.conda.stage import python_version, solve_conda

from tests.support.builders import at, make_matrix
from tests.support.closed import closed_url


@pytest.fixture(scope="module")
def packages() -> tuple[CondaPackage, ...]:
    return demo_packages()


def pip_file(packages: tuple[CondaPackage, ...]) -> str:
    """The name of the channel's pip package: its version is that of this host's pip wheel."""
    return next(p.filename for p in packages if p.name == "pip")


@pytest.fixture(scope="module")
def channel_url(
    tmp_path_factory: pytest.TempPathFactory, packages: tuple[CondaPackage, ...]
) -> Iterator[str]:
    root = tmp_path_factory.mktemp("conda-served")
    write_channel(root / "demo", packages)
    with serve_directory(root) as base:
        yield f"{base}/demo"


def matrix(
    channel: str, specs: tuple[str, ...] = ("python 3.11.*", "pip"), glibc: str = "2.28"
) -> Matrix:
    channels = (Channel("demo", channel),)
    return make_matrix(
        platforms=("linux-64", "linux-aarch64"), glibc=glibc, channels=channels, conda_specs=specs
    )


@pytest.mark.parametrize("platform", ["linux-64", "linux-aarch64"])
def test_solve_for_each_platform_from_this_host(
    channel_url: str, platform: str, tmp_path: Path, packages: tuple[CondaPackage, ...]
) -> None:
    entries = solve_conda(matrix(channel_url), platform, at(tmp_path))

    by_name = {e.name: e for e in entries}
    assert sorted(by_name) == ["demo-data", "libdemo", "pip", "python"]
    assert [e.name for e in entries] == sorted(by_name)
    assert {e.platform for e in entries} == {platform}
    # libdemo 2.0 needs __glibc >=2.34: the 2.28 floor keeps 1.0
    assert by_name["libdemo"].version == "1.0"
    assert by_name["libdemo"].url == f"{channel_url}/{platform}/libdemo-1.0-h0_0.tar.bz2"
    assert by_name["pip"].url == f"{channel_url}/noarch/{pip_file(packages)}"
    assert [name for name, _ in by_name["pip"].depends] == ["python"]
    assert by_name["python"].depends == (
        ("__glibc", ">=2.17"),
        ("demo-data", ""),
        ("libdemo", ">=1.0"),
    )
    assert python_version(entries) == "3.11.9"


def test_hashes_are_those_of_the_served_bytes(channel_url: str, tmp_path: Path) -> None:
    for entry in solve_conda(matrix(channel_url), "linux-aarch64", at(tmp_path)):
        with urllib.request.urlopen(entry.url) as response:
            data = response.read()
        assert hashlib.sha256(data).hexdigest() == entry.sha256
        assert hashlib.md5(data).hexdigest() == entry.md5


def test_a_channel_url_with_a_variable_is_expanded_from_the_environment(
    channel_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    packages: tuple[CondaPackage, ...],
) -> None:
    port = channel_url.split(":")[2].split("/")[0]
    written = channel_url.replace(f":{port}/", ":${DEMO_PORT}/")
    monkeypatch.setenv("DEMO_PORT", port)
    entries = solve_conda(matrix(written), "linux-64", at(tmp_path))
    assert {e.name: e.url for e in entries}["pip"] == f"{channel_url}/noarch/{pip_file(packages)}"
    monkeypatch.delenv("DEMO_PORT")
    with pytest.raises(
        InputError, match=r"conda channel demo: .*\$\{DEMO_PORT\}, which is not set"
    ):
        solve_conda(matrix(written), "linux-64", at(tmp_path / "other"))


def test_newer_glibc_floor_picks_the_newer_build(channel_url: str, tmp_path: Path) -> None:
    entries = solve_conda(matrix(channel_url, glibc="2.34"), "linux-64", at(tmp_path))
    assert {e.name: e.version for e in entries}["libdemo"] == "2.0"


def test_virtual_packages_are_explicit_per_platform() -> None:
    assert virtual_packages(matrix("unused"), "linux-aarch64") == (
        "__archspec=1=aarch64",
        "__glibc=2.28=0",
        "__linux=4.19=0",
        "__unix=0=0",
    )
    assert virtual_packages(matrix("unused", glibc="2.31"), "linux-64")[:2] == (
        "__archspec=1=x86_64",
        "__glibc=2.31=0",
    )


def test_unknown_platform_is_an_input_error(channel_url: str, tmp_path: Path) -> None:
    with pytest.raises(InputError, match="'osx-arm64'"):
        solve_conda(matrix(channel_url), "osx-arm64", at(tmp_path))


def test_unsatisfiable_spec_names_platform_and_spec(channel_url: str, tmp_path: Path) -> None:
    with pytest.raises(ResolutionError) as info:
        unsatisfiable = matrix(channel_url, specs=("python 3.12.*", "pip"))
        solve_conda(unsatisfiable, "linux-aarch64", at(tmp_path))
    message = str(info.value)
    assert "linux-aarch64" in message
    assert "python 3.12.*" in message
    assert info.value.exit_code == 3


def test_only_too_new_candidates_is_unsatisfiable(channel_url: str, tmp_path: Path) -> None:
    with pytest.raises(ResolutionError, match="libdemo >=2"):
        solve_conda(matrix(channel_url, specs=("libdemo >=2",)), "linux-64", at(tmp_path))


def test_unreachable_channel_names_the_url(tmp_path: Path) -> None:
    url = closed_url("/conda-forge")
    with pytest.raises(ResolutionError) as info:
        solve_conda(matrix(url), "linux-64", at(tmp_path))
    assert url in str(info.value)
    assert "linux-64" in str(info.value)


def test_python_version_needs_exactly_one_python(channel_url: str, tmp_path: Path) -> None:
    entries = solve_conda(matrix(channel_url, specs=("demo-data",)), "linux-64", at(tmp_path))
    with pytest.raises(ResolutionError, match="no python package"):
        python_version(entries)


def _prefix_files(prefix: Path) -> set[str]:
    return {str(p.relative_to(prefix)) for p in prefix.rglob("*") if p.is_file()}


def test_install_creates_a_prefix_over_http(
    channel_url: str, tmp_path: Path, packages: tuple[CondaPackage, ...]
) -> None:
    entries = solve_conda(matrix(channel_url), "linux-64", at(tmp_path / "cache"))
    prefix = tmp_path / "env"

    install_conda(entries, prefix, cache=tmp_path / "cache", limits=limits())

    files = _prefix_files(prefix)
    assert {"bin/python", "bin/pip", "bin/pip3", "pyvenv.cfg", "lib/libdemo.txt"} <= files
    assert "share/demo-data/README" in files
    # noarch: python payloads land in the prefix's site-packages for the locked python
    site = prefix / "lib/python3.11/site-packages"
    pip = next(p for p in packages if p.name == "pip")
    assert f'__version__ = "{pip.version}"' in (site / "pip/__init__.py").read_text()
    assert (prefix / "lib/libdemo.txt").read_text() == "libdemo 1.0 for linux-64\n"
    assert (prefix / "bin/python").stat().st_mode & 0o111
    records = {json.loads(p.read_text())["name"] for p in (prefix / "conda-meta").glob("*.json")}
    assert records == {"demo-data", "libdemo", "pip", "python"}


def test_the_prefix_python_is_its_own_and_its_pip_installs_into_it(
    channel_url: str,
    tmp_path: Path,
) -> None:
    """The example's python launches this host's interpreter with the prefix as sys.prefix
    (pyvenv.cfg), so the prefix's pip, an entry point of the noarch package, installs there and
    never into the host's python."""
    entries = solve_conda(matrix(channel_url), "linux-64", at(tmp_path / "cache"))
    prefix = tmp_path / "env"
    install_conda(entries, prefix, cache=tmp_path / "cache", limits=limits())
    clean = {"PATH": os.environ["PATH"], "PIP_CONFIG_FILE": os.devnull}
    clean["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"

    def run(*argv: str | Path) -> str:
        done = subprocess.run(argv, env=clean, capture_output=True, text=True, check=True)
        return done.stdout.strip()

    probe = "import sys, sysconfig; print(sys.prefix); print(sysconfig.get_path('purelib'))"
    assert run(prefix / "bin/python", "-c", probe).splitlines() == [
        str(prefix),
        str(prefix / "lib/python3.11/site-packages"),
    ]
    pip = next(e.version for e in entries if e.name == "pip")
    site = prefix / "lib/python3.11/site-packages"
    assert run(prefix / "bin/pip3", "--version").startswith(f"pip {pip} from {site}/pip ")
    wheel = build_wheel(FixtureDist("landing-probe", "1.0"), "py3-none-any", tmp_path / "wheels")
    run(prefix / "bin/pip", "install", "--no-index", "--no-deps", wheel)
    assert (site / "landing_probe" / "__init__.py").is_file()
    probe = "import importlib.util; print(importlib.util.find_spec('landing_probe'))"
    assert run(host_python().executable, "-I", "-c", probe) == "None"


def test_install_fails_when_a_served_artifact_was_tampered(
    tmp_path: Path, packages: tuple[CondaPackage, ...]
) -> None:
    write_channel(tmp_path / "served" / "demo", packages)
    with serve_directory(tmp_path / "served") as base:
        url = f"{base}/demo"
        entries = solve_conda(matrix(url), "linux-64", at(tmp_path / "cache"))
        # Same name, version and build, a valid archive, other bytes: only the hash check can tell.
        libdemo = next(
            p
            for p in packages
            if p.name == "libdemo" and p.version == "1.0" and p.subdir == "linux-64"
        )
        evil = dataclasses.replace(libdemo, files=(PackageFile("lib/libdemo.txt", b"tampered\n"),))
        (tmp_path / "served/demo/linux-64" / libdemo.filename).write_bytes(package_bytes(evil))

        with pytest.raises(VerificationError) as info:
            install_conda(
                entries, tmp_path / "env", cache=tmp_path / "fresh-cache", limits=limits()
            )

    assert "libdemo-1.0-h0_0.tar.bz2" in str(info.value)
    assert info.value.exit_code == 4
    assert not (tmp_path / "env/lib/libdemo.txt").exists()


def test_install_rejects_entries_of_two_platforms(channel_url: str, tmp_path: Path) -> None:
    both = solve_conda(matrix(channel_url), "linux-64", at(tmp_path)) + solve_conda(
        matrix(channel_url), "linux-aarch64", at(tmp_path)
    )
    with pytest.raises(InputError, match="one platform"):
        install_conda(both, tmp_path / "env", cache=tmp_path, limits=limits())


def test_packages_are_reproducible(packages: tuple[CondaPackage, ...]) -> None:
    """The same inputs give the same bytes: each package twice, and pip's package made again from
    its wheel."""
    for pkg in packages:
        assert package_bytes(pkg) == package_bytes(pkg)
    wheel = host_python().pip_wheel
    assert package_bytes(pip_package.__wrapped__(wheel)) == package_bytes(pip_package(wheel))


def test_only_python_varies_with_the_interpreter_and_only_pip_with_the_wheel(
    tmp_path: Path,
) -> None:
    """What a host changes in the example's channel: its interpreter's path and version only the
    python packages, its pip wheel only the pip package (whose version is the wheel's)."""
    here = host_python()
    other = dataclasses.replace(here, executable=Path("/opt/py/bin/python3.11"), version="3.11.4")
    old = FixtureDist("pip", "9.0.1", requires_python=">=3.6")
    older = build_wheel(old, "py3-none-any", tmp_path)
    scripts = "[console_scripts]\npip = pip:main\npip3.6 = pip:main\n"
    with zipfile.ZipFile(older, "a") as wheel:
        wheel.writestr("pip-9.0.1.dist-info/entry_points.txt", scripts)

    def built(host: HostPython) -> dict[str, bytes]:
        return {f"{p.subdir}/{p.filename}": package_bytes(p) for p in demo_packages(host=host)}

    def without_pip(packages: dict[str, bytes]) -> dict[str, bytes]:
        return {k: v for k, v in packages.items() if not k.startswith("noarch/pip-")}

    base, moved = built(here), built(other)
    pythons = [f"{p}/python-3.11.9-h0_0_cpython.conda" for p in ("linux-64", "linux-aarch64")]
    assert sorted(name for name in base if base[name] != moved[name]) == pythons
    pip = pip_package(older)
    assert (pip.version, pip.depends) == ("9.0.1", ("python >=3.6",))
    assert pip.entry_points == ("pip = pip:main",)
    rewheeled = built(dataclasses.replace(here, pip_wheel=older))
    assert without_pip(rewheeled) == without_pip(base) and f"noarch/{pip.filename}" in rewheeled
