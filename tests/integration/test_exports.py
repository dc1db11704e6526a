"""The files `envgen lock` derives for pip, uv and PEP 751 readers, proven by the real consumers on
the example."""

from __future__ import annotations

import functools
import json
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from envgen.commands.check import command as check
from envgen.commands.check.throwaway import installed_set_step
from envgen.example.project import Example
from envgen.installer.core import Destination, Installer, Request, Source
from envgen.installer.tools import tool_environment
from envgen.lockio.exports.pylock import parse_pylock
from envgen.lockio.exports.requirements_txt import parse_requirements
from envgen.lockio.store import read_lock
from envgen.model import Lock
from envgen.project import Project
from packaging.markers import Marker
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from uv import find_uv_bin

from tests.support.builders import tools_at
from tests.support.chk_venv import shared_venv
from tests.support.example import run_envgen, use_git_config
from tests.support.venvs import fresh_venv

ENV = "demo"
HOST = (
    "linux-64"
    if sys.platform == "linux" and __import__("platform").machine() == "x86_64"
    else "linux-aarch64"
)


@pytest.fixture(scope="module")
def served(read_only_served: Example) -> Example:
    """The worker's served example, a copy of its project for this module
    (tests/integration/conftest.py): the module edits its project (channel files, locks/), each
    test putting it back; what is served it reads, but for one served wheel that a test alters and
    puts back before it ends (a worker runs one test at a time)."""
    return read_only_served


@pytest.fixture(scope="module")
def written(served: Example, worker_first_lock: dict[str, bytes]) -> dict[Path, bytes]:
    """The module's example locked (the worker's first lock): what `envgen lock` wrote in locks/."""
    for name, data in worker_first_lock.items():
        (served.root / "locks" / name).write_bytes(data)
    return {p: p.read_bytes() for p in (served.root / "locks").iterdir()}


@pytest.fixture
def example(
    served: Example, written: dict[Path, bytes], monkeypatch: pytest.MonkeyPatch
) -> Iterator[Example]:
    """The served example with its git mirror config active and the module's lock; its channels and
    locks/ put back as they were afterwards."""
    use_git_config(served.gitconfig, monkeypatch)
    channels = {p: p.read_text() for p in (served.root / "channels").glob("*.toml")}
    yield served
    for path, text in channels.items():
        path.write_text(text)
    for path in (served.root / "locks").iterdir():
        path.unlink()
    for path, data in written.items():
        path.write_bytes(data)


envgen = run_envgen


def locked(example: Example) -> Lock:
    """The lock of the example as its matrix and channels are now: `envgen lock` writes it only when
    they changed (the module's lock is up to date otherwise, and the lock a no-op)."""
    code, _, err = envgen(example, "lock", ENV, "-q")
    assert code == 0, err
    lock = read_lock(Project(example.root), ENV)
    assert lock is not None
    return lock


def derived_names(lock: Lock) -> list[str]:
    names = []
    for platform in lock.platforms:
        names += [f"{ENV}.{platform}.requirements.txt", f"pylock.{ENV}-{platform}.toml"]
    return [*names, f"{ENV}.nix"]


@pytest.fixture
def new_venv(pip_site_packages: Path) -> Callable[[Path], Path]:
    """Makes a fresh venv with pip at a path and returns its python."""
    return lambda where: fresh_venv(where, pip_site_packages) / "bin" / "python"


def installed(python: Path) -> dict[str, str]:
    proc = subprocess.run(
        [str(python), "-m", "pip", "list", "--format", "json"],
        capture_output=True,
        text=True,
        check=True,
        env=tool_environment(tools_at(python.parent)),
    )
    skip = {"pip", "setuptools", "wheel"}
    return {
        canonicalize_name(p["name"]): p["version"]
        for p in json.loads(proc.stdout)
        if p["name"] not in skip
    }


def pip_install(python: Path, requirements: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    cmd = [
        str(python),
        "-m",
        "pip",
        "install",
        "--cache-dir",
        str(cache),
        "--no-deps",
        "--require-hashes",
    ]
    return subprocess.run(
        [*cmd, "-r", str(requirements)],
        capture_output=True,
        text=True,
        env=tool_environment(tools_at(cache)),
    )


def test_lock_writes_every_derived_file_with_exactly_the_yml_artifacts(example: Example) -> None:
    lock = locked(example)
    locks = example.root / "locks"
    for platform in lock.platforms:
        entries = lock.pip_for(platform)
        text = (locks / f"{ENV}.{platform}.requirements.txt").read_text()
        pinned = parse_requirements(text, "requirements")
        assert {(p.name, p.hashes) for p in pinned} == {
            (canonicalize_name(e.name), (e.sha256,)) for e in entries
        }
        assert {p.name: p.url for p in pinned if p.url} == {
            "demo-triton": next(e.url for e in entries if e.name == "demo-triton")
        }
        assert text.count("--hash=sha256:") == len(entries)
        assert f"--index-url {example.pypi_url}/simple\n" in text
        assert example.extra_url + "/simple" not in text  # the explicit index is never searched
        # several origins: one per line
        assert "# via source rollout: requirements.txt:1" not in text
        assert "#   source rollout: requirements.txt:1" in text

        files = parse_pylock((locks / f"pylock.{ENV}-{platform}.toml").read_text(), "pylock")
        assert {(f.name, f.version, f.url, f.sha256) for f in files} == {
            (canonicalize_name(e.name), e.version, e.url, e.sha256) for e in entries
        }


def test_a_second_lock_writes_the_same_bytes(example: Example) -> None:
    lock = locked(example)
    files = {name: (example.root / "locks" / name).read_bytes() for name in derived_names(lock)}
    assert envgen(example, "lock", ENV, "--force", "-q")[0] == 0
    assert {name: (example.root / "locks" / name).read_bytes() for name in files} == files


def _check_pep751(data: dict[str, object], platform: str) -> None:
    """The rules of PEP 751 a reader relies on, for a file envgen writes."""
    assert data["lock-version"] == "1.0"
    assert isinstance(data["created-by"], str)
    SpecifierSet(str(data["requires-python"]))
    environments = data["environments"]
    assert isinstance(environments, list)
    machine = "x86_64" if platform == "linux-64" else "aarch64"
    for marker in environments:
        assert Marker(marker).evaluate({"sys_platform": "linux", "platform_machine": machine})
        assert not Marker(marker).evaluate({"sys_platform": "linux", "platform_machine": "ppc64le"})
    packages = data["packages"]
    assert isinstance(packages, list) and packages
    names = [p["name"] for p in packages]
    assert names == sorted(names) and len(set(names)) == len(names)
    for package in packages:
        assert package["name"] == canonicalize_name(package["name"])
        sources = [k for k in ("vcs", "directory", "archive", "sdist", "wheels") if k in package]
        assert sources and (sources in (["wheels"], ["sdist"], ["sdist", "wheels"], ["archive"]))
        for wheel in package.get("wheels", []):
            assert wheel["hashes"] and all(len(v) == 64 for v in wheel["hashes"].values())
            assert wheel["url"].startswith("http://127.0.0.1:")
            assert wheel["name"].endswith(".whl") and wheel["url"].endswith(wheel["name"])
        if "wheels" in package or "sdist" in package:
            assert package["index"].endswith("/simple")
        for dependency in package.get("dependencies", []):
            assert dependency["name"] in names
    assert set(data) <= {
        "lock-version",
        "environments",
        "requires-python",
        "extras",
        "dependency-groups",
        "default-groups",
        "created-by",
        "packages",
        "tool",
    }


def test_pylock_follows_pep751(example: Example) -> None:
    lock = locked(example)
    for platform in lock.platforms:
        data = tomllib.loads((example.root / "locks" / f"pylock.{ENV}-{platform}.toml").read_text())
        _check_pep751(data, platform)
        triton = next(p for p in data["packages"] if p["name"] == "demo-triton")
        assert triton["index"] == f"{example.extra_url}/simple"


def test_pip_installs_the_requirements_with_hashes_and_refuses_a_tampered_wheel(
    example: Example, tmp_path: Path, new_venv: Callable[[Path], Path]
) -> None:
    lock = locked(example)
    requirements = example.root / "locks" / f"{ENV}.{HOST}.requirements.txt"
    python = new_venv(tmp_path / "venv")
    proc = pip_install(python, requirements, tmp_path / "cache")
    assert proc.returncode == 0, proc.stderr
    assert installed(python) == {canonicalize_name(e.name): e.version for e in lock.pip_for(HOST)}
    # demo-triton 3.2.2 came from its pinned index, though "pypi" offers a decoy 9.9.9 of the same
    # name.
    assert f"{example.extra_url}/files/demo_triton-3.2.2-" in proc.stdout
    assert "9.9.9" not in proc.stdout

    wheel = next(e for e in lock.pip_for(HOST) if e.name == "demo-torch")
    served = example.root.parent / "pypi" / "files" / wheel.url.rsplit("/", 1)[1]
    original = served.read_bytes()
    served.write_bytes(original[:-1] + bytes([original[-1] ^ 1]))
    try:
        proc = pip_install(new_venv(tmp_path / "venv2"), requirements, tmp_path / "cache2")
    finally:
        served.write_bytes(original)
    assert proc.returncode != 0
    assert "DO NOT MATCH THE HASHES" in proc.stderr
    assert wheel.sha256 in proc.stderr


def test_uv_installs_the_pylock_with_the_locked_versions(
    example: Example, tmp_path: Path, new_venv: Callable[[Path], Path]
) -> None:
    lock = locked(example)
    pylock = example.root / "locks" / f"pylock.{ENV}-{HOST}.toml"
    python = new_venv(tmp_path / "venv")
    cmd = [
        find_uv_bin(),
        "pip",
        "install",
        "--python",
        str(python),
        "--cache-dir",
        str(tmp_path / "uv"),
        "-r",
    ]
    proc = subprocess.run(
        [*cmd, str(pylock)],
        capture_output=True,
        text=True,
        env=tool_environment(tools_at(tmp_path)),
    )
    assert proc.returncode == 0, proc.stderr
    assert installed(python) == {canonicalize_name(e.name): e.version for e in lock.pip_for(HOST)}


def test_index_credentials_stay_references_in_every_written_file(
    example: Example,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    new_venv: Callable[[Path], Path],
) -> None:
    secret = "s3cr3t-t0ken-value"
    monkeypatch.setenv("DEMO_TOKEN", secret)
    host = example.pypi_url.removeprefix("http://")
    (example.root / "channels" / "pypi.toml").write_text(
        f'kind = "pip"\nurl = "http://${{DEMO_TOKEN}}@{host}/simple"\n'
    )
    lock = locked(example)
    written = {p.name: p.read_bytes() for p in (example.root / "locks").iterdir() if p.is_file()}
    assert set(derived_names(lock)) <= set(written)
    assert all(secret.encode() not in data for data in written.values()), [
        name for name, data in written.items() if secret.encode() in data
    ]
    for fmt in ("cyclonedx", "nix", "pylock", "requirements"):
        code, exported, err = envgen(example, "export", ENV, "--format", fmt)
        assert code == 0 and secret not in exported, (fmt, err)
    requirements = f"{ENV}.{HOST}.requirements.txt"
    assert f"--index-url http://${{DEMO_TOKEN}}@{host}/simple" in written[requirements].decode()
    # pip expands the reference from the environment when it reads the file.
    python = new_venv(tmp_path / "venv")
    proc = pip_install(python, example.root / "locks" / requirements, tmp_path / "cache")
    assert proc.returncode == 0, proc.stderr
    assert secret not in proc.stdout + proc.stderr
    assert installed(python)["demo-torch"] == "2.10.0"


def test_check_fails_on_a_hand_edited_or_missing_derived_file(example: Example) -> None:
    lock = locked(example)
    requirements = example.root / "locks" / f"{ENV}.{HOST}.requirements.txt"
    numpy = next(e for e in lock.pip_for(HOST) if e.name == "demo-numpy")
    original = requirements.read_text()
    requirements.write_text(original.replace(numpy.sha256, "0" * 64))
    code, out, _ = envgen(example, "check", ENV, "--venv", "--no-solve")
    assert code == 4
    # What differs, in words (before: the reader's Python repr, `missing:
    # RequirementLine(name=...)`).
    said = (
        f"locks/{ENV}.{HOST}.requirements.txt does not carry the yml's artifacts and hashes: "
        f"demo-numpy: 1.26.4, sha256 {'0' * 12} here, "
        f"1.26.4, sha256 {numpy.sha256[:12]} in the lock"
    )
    assert said in out and "RequirementLine(" not in out
    assert "env: install" in out and "static checks failed" in out
    code, out, _ = envgen(example, "status", ENV)
    assert code == 1 and said in out and "RequirementLine(" not in out
    pylock = example.root / "locks" / f"pylock.{ENV}-{HOST}.toml"
    written = pylock.read_text()
    pylock.write_text(written.replace(f'version = "{numpy.version}"', 'version = "9.9"'))
    code, out, _ = envgen(example, "status", ENV)
    assert code == 1 and "LockedFile(" not in out
    assert f"demo-numpy: 9.9 {numpy.url.rsplit('/', 1)[1]}, sha256 " in out
    pylock.write_text(written)

    requirements.write_text(original)
    (example.root / "locks" / f"pylock.{ENV}-{HOST}.toml").unlink()
    code, out, _ = envgen(example, "check", ENV, "--venv", "--no-solve")
    assert code == 4
    assert (
        f"locks/pylock.{ENV}-{HOST}.toml is missing: re-lock with `envgen lock {ENV} --force`"
        in out
    )


def test_export_writes_each_format_on_demand(example: Example, tmp_path: Path) -> None:
    lock = locked(example)
    locks = example.root / "locks"
    out = tmp_path / "out" / "r.txt"
    code, _, err = envgen(
        example,
        "export",
        ENV,
        "--format",
        "requirements",
        "--platform",
        "linux-aarch64",
        "-o",
        str(out),
    )
    assert code == 0, err
    assert out.read_bytes() == (locks / f"{ENV}.linux-aarch64.requirements.txt").read_bytes()
    code, stdout, _ = envgen(example, "export", ENV, "--format", "pylock", "--platform", "linux-64")
    assert code == 0 and stdout == (locks / f"pylock.{ENV}-linux-64.toml").read_text()
    code, stdout, _ = envgen(example, "export", ENV, "--format", "nix")
    assert code == 0 and stdout == (locks / f"{ENV}.nix").read_text()

    code, _, err = envgen(
        example, "export", ENV, "--format", "pylock", "--platform", "linux-ppc64le"
    )
    assert code == 2
    assert (
        f"--platform linux-ppc64le: the lock of {ENV} has no such part (it has "
        f"{', '.join(lock.platforms)})" in err
    )
    code, _, err = envgen(example, "export", "nope", "--format", "nix")
    assert code == 2 and "unknown env 'nope'" in err


def test_the_sbom_is_valid_cyclonedx_16_with_one_component_per_artifact_and_source(
    example: Example,
) -> None:
    lock = locked(example)
    code, stdout, err = envgen(example, "export", ENV, "--format", "cyclonedx")
    assert code == 0, err
    # Imported here, not at collection: its validator loads jsonschema, and with it rfc3987-syntax,
    # which builds its grammar on import (about 1 s of CPU), in every xdist worker that collects
    # this module.
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(stdout) is None
    bom = json.loads(stdout)
    assert bom["specVersion"] == "1.6"
    components = {c["bom-ref"]: c for c in bom["components"]}
    artifacts = len(lock.conda) + len(lock.pip) + len(lock.archives)
    assert len(bom["components"]) == artifacts + len(lock.sources)
    for entry in lock.conda:
        component = components[f"conda:{entry.platform}:{entry.name}"]
        assert component["purl"].startswith(f"pkg:conda/{entry.name}@{entry.version}?")
        hashes = {h["alg"]: h["content"] for h in component["hashes"]}
        assert hashes == {"SHA-256": entry.sha256, "MD5": entry.md5}
        assert component["externalReferences"][0]["url"] == entry.url
    for entry in lock.pip:
        component = components[f"pip:{entry.platform}:{canonicalize_name(entry.name)}"]
        assert component["purl"].startswith(
            f"pkg:pypi/{canonicalize_name(entry.name)}@{entry.version}?file_name="
        )
        assert component["hashes"] == [{"alg": "SHA-256", "content": entry.sha256}]
        assert component["externalReferences"][0]["url"] == entry.url
        assert {"name": "envgen:platform", "value": entry.platform} in component["properties"]
    for locked_source in lock.sources:
        component = components[f"source:{locked_source.source.name}"]
        assert component["version"] == locked_source.commit
        assert component["externalReferences"] == [
            {"type": "vcs", "url": locked_source.source.url, "comment": locked_source.commit}
        ]
    # An archive is a file of its own sha256, the wheels taken from it its parts, each of its own.
    for archive in lock.archives:
        component = components[f"archive:{archive.platform}:{archive.name}"]
        assert component["type"] == "file"
        assert component["hashes"] == [{"alg": "SHA-256", "content": archive.sha256}]
        assert component["externalReferences"][0]["url"] == archive.url
        wheels = {c["name"]: c for c in component["components"]}
        assert sorted(wheels) == sorted(m.name for m in archive.members)
        for member in archive.members:
            assert wheels[member.name]["hashes"] == [{"alg": "SHA-256", "content": member.sha256}]
            assert wheels[member.name]["purl"] == (
                f"pkg:pypi/{member.name}@{member.version}?file_name={member.filename}"
            )
    assert {a.platform for a in lock.archives} == {"linux-64", "linux-aarch64"}
    post = {p["name"]: p["value"] for p in components["source:post"]["properties"]}
    assert post["envgen:cherry-pick"] == lock.sources[2].source.cherry_picks[0]
    properties = {p["name"]: p["value"] for p in bom["metadata"]["properties"]}
    assert (
        properties["envgen:pending:demo-npu"]
        == "stands in for torch_npu: commercial release due Q2"
    )
    assert properties["envgen:override:demo-transformers"].startswith("demo-transformers==4.57.6: ")
    assert properties["envgen:excluded:demo-timm"].startswith("stands in for timm")
    assert properties["envgen:link:."].startswith("demo_ep/demo_ep_cpp*.so: ")
    # the same lock, the same bytes
    assert envgen(example, "export", ENV, "--format", "cyclonedx")[1] == stdout


def test_status_flags_a_missing_or_edited_derived_file_and_lock_writes_a_missing_one_again(
    example: Example,
) -> None:
    locked(example)
    locks = example.root / "locks"
    assert envgen(example, "status", ENV)[0] == 0
    pylock = locks / f"pylock.{ENV}-linux-aarch64.toml"
    written = pylock.read_bytes()
    pylock.unlink()
    code, out, _ = envgen(example, "status", ENV)
    assert code == 1
    assert (
        f"{ENV}: stale\n  locks/{pylock.name} is missing: `envgen lock {ENV} --force` "
        "writes it again\n" in out
    )

    code, out, err = envgen(example, "lock", ENV, "--json")
    assert code == 0, err
    # not a no-op: a derived file was missing
    assert json.loads(out)["results"][0]["status"] == "locked"
    assert pylock.read_bytes() == written

    requirements = locks / f"{ENV}.linux-64.requirements.txt"
    requirements.write_text(requirements.read_text().replace("# via demo-torch", "# via me"))
    code, out, _ = envgen(example, "status", ENV)
    assert code == 1 and f"locks/{requirements.name} was edited by hand" in out
    assert envgen(example, "lock", ENV, "--force", "-q")[0] == 0
    assert envgen(example, "status", ENV)[0] == 0


@pytest.mark.parametrize(
    ("installer", "source"),
    [("pip", f"{ENV}.{HOST}.requirements.txt"), ("uv", f"pylock.{ENV}-{HOST}.toml")],
)
def test_check_installs_from_the_derived_file_and_compares_the_installed_set(
    example: Example,
    installer: str,
    source: str,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Check's throwaway install is handed the installer's derived file of the lock (recorded) and
    made a copy of the session's venv of the lock (chk_venv.py), for both installers: the subject
    is the file check gives the installer and names, and the installed set it compares.

    What the installers do with those files is proven for real elsewhere: pip installing the
    requirements.txt with its hashes to the locked versions, and uv the pylock, in this module's
    test_pip_installs_the_requirements_with_hashes_and_refuses_a_tampered_wheel and
    test_uv_installs_the_pylock_with_the_locked_versions; check's own uv install in test_check;
    check's own pip install of this example in test_secrets (exit 0: its installed set, pip check
    and imports pass); pip's install into a venv through the same install core in test_install."""
    lock = locked(example)
    shared = shared_venv(tmp_path_factory, example)
    given: list[tuple[str, Path]] = []

    def copied(request: Request, source: Source, env: Destination, tool: Installer) -> None:
        part = source.pip(request.lock, request.platform, tool)
        assert part is not None
        given.append((tool.name, part.requirements))
        shutil.copytree(shared, env.path, symlinks=True)

    monkeypatch.setattr(
        check, "CheckOptions", functools.partial(check.CheckOptions, install=copied)
    )
    code, out, err = envgen(
        example, "check", ENV, "--venv", "--no-solve", "--installer", installer, "--json"
    )
    assert code == 0, out + err
    assert given == [(installer, example.root / "locks" / source)]
    steps = {s["name"]: s for s in json.loads(out)["results"][0]["steps"]}
    assert f"from {source} ({installer})" in steps["env: install (venv)"]["detail"]
    installed = steps["env: installed set"]
    assert installed["status"] == "ok"
    wheels = sum(len(a.members) for a in lock.archives_for(HOST))
    pip = len(lock.pip_for(HOST))
    detail = f"{pip} pip packages and {wheels} archive wheels at their locked versions"
    assert installed["detail"] == detail


def test_the_installed_set_step_names_what_differs_from_the_lock(
    example: Example, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """On a copy of the session's venv of the lock (chk_venv.py), a pip package and the two wheels
    of the host's archive taken away: each is named, the lock's pip entries first."""
    lock = locked(example)
    venv = tmp_path / "venv"
    shutil.copytree(shared_venv(tmp_path_factory, example), venv, symlinks=True)
    assert installed_set_step(venv, lock, HOST, tools_at(tmp_path)).status == "ok"
    (site,) = (venv / "lib").glob("python*/site-packages")
    for name in ("demo_numpy", "demo_kernel_npu", "demo_ep"):
        (info,) = site.glob(f"{name}-*.dist-info")
        shutil.rmtree(info)
    step = installed_set_step(venv, lock, HOST, tools_at(tmp_path))
    missing = (
        "demo-numpy: not installed (1.26.4 locked)",
        "demo-kernel-npu: not installed (1.0.0 locked)",
    )
    assert (step.status, step.problems[:2]) == ("failed", missing)
    assert step.problems[2:] == ("demo-ep: not installed (1.0.0 locked)",)
