"""What the SGLang route's script does by hand, as the matrix says it, on the served example: wheels
from a release archive (fetched, each hashed, refused when tampered), a source's file replacement,
its subdirectory and extra, a package left out on purpose, a link in site-packages; the recipe
applying them in a real venv under `bash --posix`."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tomllib
import zipfile
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
from envgen.example.project import RELEASES, Example
from envgen.example.releases import MACHINES, archive_name, build_release, kernel_dists
from envgen.example.wheels import FixtureDist
from envgen.installer.tools import Uv, tool_environment
from envgen.lockio.store import read_lock
from envgen.model import Link, Lock
from envgen.platforms import host_platform
from envgen.project import Project
from envgen.recipe.render import render_recipe
from uv import find_uv_bin

from tests.support.builders import make_lock, tools_at
from tests.support.example import run_envgen, use_git_config
from tests.support.venvs import fresh_venv, site_packages

ENV = "demo"
HOST = host_platform()
NPU_PYPROJECT = "python/pyproject_npu.toml"
REPLACE = "sources.serving.replace[0]"
TARGET = "demo_ep/demo_ep_cpp*.so"
LINK = "install.links[0]"


def locked(example: Example) -> Lock:
    code, _, err = run_envgen(example, "lock", ENV)
    assert code == 0, err
    return module_lock(example)


@pytest.fixture(scope="module")
def locked_once(
    served: Example, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, dict[Path, bytes]]:
    """The module's example locked once, with the module's cache: that cache, and what `envgen lock`
    wrote in locks/ (the tests of the matrix as it is share it; a test that edits the matrix locks
    an example of its own)."""
    cache = tmp_path_factory.mktemp("routes-cache")
    patch = pytest.MonkeyPatch()
    use_git_config(served.gitconfig, patch)
    patch.setenv("ENVGEN_CACHE_DIR", str(cache))
    try:
        locked(served)
    finally:
        patch.undo()
    return cache, {p: p.read_bytes() for p in (served.root / "locks").iterdir()}


@pytest.fixture
def locked_example(
    served: Example, locked_once: tuple[Path, dict[Path, bytes]], monkeypatch: pytest.MonkeyPatch
) -> Iterator[Example]:
    """The module's served example and its lock, git mirrors active, the cache it was locked with;
    its locks/, its served release archives and its upstream repos put back as they were
    afterwards."""
    cache, locks = locked_once
    use_git_config(served.gitconfig, monkeypatch)
    monkeypatch.setenv("ENVGEN_CACHE_DIR", str(cache))
    releases = served.root.parent / "pypi" / RELEASES
    archives = {p: p.read_bytes() for p in releases.iterdir()}
    heads = {name: repo.rev() for name, repo in served.repos.items()}
    yield served
    for path in releases.iterdir():
        path.unlink()
    for path, data in archives.items():
        path.write_bytes(data)
    for name, repo in served.repos.items():
        if repo.rev() != heads[name]:
            repo.git("reset", "-q", "--hard", heads[name])
    for path in (served.root / "locks").iterdir():
        path.unlink()
    for path, data in locks.items():
        path.write_bytes(data)


def module_lock(example: Example) -> Lock:
    """The lock of `example` as written."""
    lock = read_lock(Project(example.root), ENV)
    assert lock is not None
    return lock


def served_zip(example: Example, platform: str) -> Path:
    return example.root.parent / "pypi" / RELEASES / archive_name(MACHINES[platform])


def edit(example: Example, old: str, new: str) -> None:
    text = example.matrix.read_text()
    assert old in text
    example.matrix.write_text(text.replace(old, new))


def test_each_wheel_of_the_archive_is_locked_with_its_sha256_and_requirements(
    locked_example: Example,
) -> None:
    lock = module_lock(locked_example)
    assert {a.platform for a in lock.archives} == {"linux-64", "linux-aarch64"}
    for archive in lock.archives:
        zipped = served_zip(locked_example, archive.platform)
        assert archive.url == f"{locked_example.pypi_url}/{RELEASES}/{zipped.name}"
        assert archive.sha256 == hashlib.sha256(zipped.read_bytes()).hexdigest()
        with zipfile.ZipFile(zipped) as zf:
            held = {name: hashlib.sha256(zf.read(name)).hexdigest() for name in zf.namelist()}
        wheels = {k: v for k, v in held.items() if k.endswith(".whl")}
        assert {m.path: m.sha256 for m in archive.members} == wheels
        requires = {m.name: m.requires for m in archive.members}
        assert requires == {"demo-kernel-npu": ("demo-torch>=2.10",), "demo-ep": ()}
        # The wheels are the archive's, not an index's: no pip entry; their requirement resolved.
        names = {e.name for e in lock.pip_for(archive.platform)}
        assert not names & {"demo-kernel-npu", "demo-ep"} and "demo-torch" in names
    requirements = (locked_example.root / "locks" / f"{ENV}.{HOST}.requirements.txt").read_text()
    (archive,) = lock.archives_for(HOST)
    assert f"#   demo-kernels: {archive.url} sha256:{archive.sha256}\n" in requirements
    pylock = tomllib.loads(
        (locked_example.root / "locks" / f"pylock.{ENV}-{HOST}.toml").read_text()
    )
    (table,) = pylock["tool"]["envgen"]["archives"]
    assert table["hashes"] == {"sha256": archive.sha256}
    assert [w["hashes"]["sha256"] for w in table["wheels"]] == [m.sha256 for m in archive.members]
    nix = (locked_example.root / "locks" / f"{ENV}.nix").read_text()
    assert f'url = "{archive.url}";\n' in nix and f'sha256 = "{archive.sha256}";' in nix


def test_the_source_counts_its_replaced_pyproject_and_its_extra_and_leaves_out_what_it_should(
    locked_example: Example,
) -> None:
    lock = module_lock(locked_example)
    serving = next(s for s in lock.sources if s.source.name == "serving")
    declared = {r.text: (r.origin.file, r.origin.line) for r in serving.requirements}
    assert declared == {
        "demo-torch": (NPU_PYPROJECT, 10),
        "demo-timm==1.0.16": (NPU_PYPROJECT, 11),
        "demo-sampler": (NPU_PYPROJECT, 15),  # the srt_npu extra's
    }
    for platform in lock.platforms:
        names = {e.name for e in lock.pip_for(platform)}
        assert "demo-sampler" in names and "demo-timm" not in names
    (left,) = lock.exclusions
    assert left.name == "demo-timm" and left.reason.startswith("stands in for timm")
    sources = (locked_example.root / "locks" / f"{ENV}.sources.toml").read_text()
    written = f'{{ from = "{NPU_PYPROJECT}", to = "python/pyproject.toml" }}'
    assert f"replace = [\n    {written},\n]" in sources


def test_without_the_replacement_the_default_pyproject_counts_and_fails_the_lock(
    example: Example,
) -> None:
    edit(example, f'replace = [{{ from = "{NPU_PYPROJECT}", to = "python/pyproject.toml" }}]\n', "")
    code, _, err = run_envgen(example, "lock", ENV)
    assert code == 3, err
    assert "demo-cuda-kernels>=1  (source serving: python/pyproject.toml:" in err, err
    assert not (example.root / "locks" / f"{ENV}.yml").exists()


def test_without_the_exclusion_the_lock_holds_the_package(example: Example) -> None:
    edit(example, "[pip.exclude.demo-timm]\n", "[pip.exclude.demo-gone]\n")
    lock = locked(example)
    assert {"demo-timm", "demo-sampler"} <= {e.name for e in lock.pip_for(HOST)}


def test_two_exclusions_of_one_canonical_name_are_refused_naming_both(example: Example) -> None:
    """Exclusions are keyed by canonical name, as packages are. Before: both accepted, and both
    recorded in the lock as written."""
    second = '[pip.exclude."Demo.Timm"]\nreason = "the same package again"\n\n'
    edit(example, "[pip.exclude.demo-timm]\n", second + "[pip.exclude.demo-timm]\n")
    code, out, err = run_envgen(example, "lock", ENV)
    assert (code, out) == (2, ""), err
    where = f"{example.matrix}:42: pip.exclude.demo-timm"
    said = "pip.exclude entry 'demo-timm' is the same name as pip.exclude entry 'Demo.Timm'"
    assert f"{where}: {said} after normalisation ('demo-timm')" in err, err
    assert not (example.root / "locks" / f"{ENV}.yml").exists()


def test_an_archive_other_than_the_matrix_pins_is_refused_with_exit_4(example: Example) -> None:
    pinned = "0" * 64
    table = "[archives.demo-kernels.url]"
    edit(example, table, f'sha256 = "{pinned}"\n\n{table}')
    code, _, err = run_envgen(example, "lock", ENV)
    assert code == 4, err
    zipped = served_zip(example, "linux-aarch64")
    found = hashlib.sha256(zipped.read_bytes()).hexdigest()
    url = f"{example.pypi_url}/{RELEASES}/{zipped.name}"
    where = "env-templates/demo.toml: archives.demo-kernels.sha256"
    assert f"error: the archive {url} has sha256 {found}, but {where} says {pinned}" in err, err
    assert not (example.root / "locks" / f"{ENV}.yml").exists()


def republish_release(example: Example, version: str) -> None:
    """The served zips rebuilt with another demo-ep wheel inside, under the same names."""
    for platform, machine in MACHINES.items():
        kernel, ep = kernel_dists(machine)
        dists = (kernel, FixtureDist(ep.name, version, tags=ep.tags, files=ep.files))
        served_zip(example, platform).unlink()
        build_release(served_zip(example, platform).parent, archive_name(machine), dists)


def test_an_archive_changed_under_its_url_is_refused_by_the_relock_and_the_install(
    locked_example: Example, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lock = module_lock(locked_example)
    republish_release(locked_example, "1.0.1")
    # The locked bytes are not in this cache.
    monkeypatch.setenv("ENVGEN_CACHE_DIR", str(tmp_path / "empty-cache"))
    (archive,) = lock.archives_for(HOST)
    code, _, err = run_envgen(
        locked_example, "install", ENV, "--venv", "--prefix", str(tmp_path / "env")
    )
    assert code == 4, err
    assert f"error: the archive {archive.url} has sha256 " in err
    assert f"but the lock of archive demo-kernels ({HOST}) says {archive.sha256}" in err
    assert not (tmp_path / "env").exists()
    code, _, err = run_envgen(locked_example, "lock", ENV, "--force")
    assert code == 4, err
    assert f"but the lock it was locked in says {lock.archives[0].sha256}" in err
    assert "write its sha256 into the matrix (archives.<name>.sha256)" in err


@pytest.mark.parametrize(
    ("old", "new", "key"),
    [
        (f'from = "{NPU_PYPROJECT}"', 'from = "../../etc/passwd"', f"{REPLACE}.from"),
        ('to = "python/pyproject.toml"', 'to = "/tmp/pyproject.toml"', f"{REPLACE}.to"),
        ('to = "python/pyproject.toml"', 'to = "-f"', f"{REPLACE}.to"),
        ('subdirectory = "python"', 'subdirectory = "python/.."', "sources.serving.subdirectory"),
        (f'target = "{TARGET}"', 'target = "../../../bin/python"', "install.links[0].target"),
        (f'target = "{TARGET}"', 'target = "/etc/passwd"', "install.links[0].target"),
        ("[[install.links]]", '[[install.links]]\ndirectory = "../.."', f"{LINK}.directory"),
    ],
)
def test_a_path_that_would_escape_its_tree_or_site_packages_is_refused_with_exit_2(
    example: Example, old: str, new: str, key: str
) -> None:
    edit(example, old, new)
    for command in ("show", "lock"):
        code, _, err = run_envgen(example, command, ENV)
        assert code == 2, err
        assert "demo.toml:" in err and f": {key}: " in err
        assert "is not a relative path inside" in err
    assert not (example.root / "locks" / f"{ENV}.yml").exists()


def test_a_replacement_read_through_a_symbolic_link_of_the_tree_is_refused_with_exit_2(
    example: Example,
) -> None:
    repo = example.repos["serving"]
    (repo.path / "python" / "leak.toml").symlink_to("/etc/passwd")
    repo.git("add", "python/leak.toml")
    identity = ("-c", "user.name=t", "-c", "user.email=t@envgen.invalid")
    repo.git(*identity, "commit", "-q", "-m", "a link out")
    edit(example, 'ref = "v0.5.10"', f'ref = "{repo.rev()}"')
    edit(example, f'from = "{NPU_PYPROJECT}"', 'from = "python/leak.toml"')
    code, _, err = run_envgen(example, "lock", ENV)
    assert code == 2, err
    assert f"{REPLACE}.from: 'python/leak.toml' is not a regular file of its own tree" in err


def test_a_lock_whose_link_was_edited_to_escape_is_refused(locked_example: Example) -> None:
    sources = locked_example.root / "locks" / f"{ENV}.sources.toml"
    text = sources.read_text()
    sources.write_text(text.replace('target = "demo_ep/demo_ep_cpp*.so"', 'target = "../../../x"'))
    code, out, err = run_envgen(locked_example, "check", ENV, "--no-env", "--no-solve")
    assert code == 4, out + err
    where = f"locks/{ENV}.sources.toml:"
    refused = "links[0].target: '../../../x' is not a relative path inside the tree"
    assert f"failed  static: lock parses: {where}" in out and refused in out
    prefix = str(locked_example.root / "x")
    code, _, err = run_envgen(locked_example, "install", ENV, "--venv", "--prefix", prefix)
    assert code == 2 and refused in err
    assert not (locked_example.root / "x").exists()


def git_out(checkout: Path, *args: str) -> str:
    proc = subprocess.run(["git", "-C", str(checkout), *args], capture_output=True, text=True)
    return proc.stdout


def host_wheel_dir(example: Example, tmp_path: Path) -> Path:
    """The host's archive wheels taken out of the served zip, by file name."""
    out = tmp_path / "wheels"
    out.mkdir()
    with zipfile.ZipFile(served_zip(example, HOST)) as zf:
        for name in zf.namelist():
            if name.endswith(".whl"):
                (out / name).write_bytes(zf.read(name))
    return out


def install_pip_part(example: Example, prefix: Path) -> None:
    """The lock's pip part in `prefix`, put there by uv (quicker than pip): these tests are about
    the recipe's steps after it; pip's install of the part is test_install's and
    test_frozen_and_installers'."""
    requirements = example.root / "locks" / f"{ENV}.{HOST}.requirements.txt"
    cmd = [find_uv_bin(), "pip", "install", "-q", "--python", str(prefix / "bin" / "python")]
    cmd += ["--cache-dir", str(uv_cache(prefix) / "uv")]
    proc = subprocess.run(
        [*cmd, "--no-deps", "--require-hashes", "-r", str(requirements)],
        capture_output=True,
        text=True,
        env=tool_environment(tools_at(prefix.parent)),
    )
    assert proc.returncode == 0, proc.stderr


def uv_cache(prefix: Path) -> Path:
    return prefix.parent / "cache"


def posix_recipe(recipe: Path, prefix: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`recipe` run on `prefix` under `bash --posix`, with `--uv` as `envgen install --installer uv`
    passes it (its cache beside the env): these tests are about the recipe's archive, replacement
    and link steps, not the tool that installs the wheels and sources; the recipe's pip path is
    test_recipe_run's and test_bundle's (the recipe without envgen)."""
    options = Uv(tools_at(uv_cache(prefix))).recipe_options()
    env = options.environment(os.environ)
    cmd = ["bash", "--posix", str(recipe), "--prefix", str(prefix), "--skip-cann"]
    cmd += [*options.args, *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)


def lock_recipe(example: Example) -> Path:
    return example.root / "locks" / f"{ENV}.install.sh"


def test_the_recipe_applies_archive_replacement_and_link_under_bash_posix_in_a_real_venv(
    locked_example: Example, tmp_path: Path, pip_site_packages: Path
) -> None:
    lock = module_lock(locked_example)
    prefix = fresh_venv(tmp_path / "env", pip_site_packages)
    install_pip_part(locked_example, prefix)
    proc = posix_recipe(lock_recipe(locked_example), prefix)
    assert proc.returncode == 0, proc.stderr
    checkout = prefix / "src" / "serving"
    npu = (checkout / NPU_PYPROJECT).read_text()
    assert (checkout / "python" / "pyproject.toml").read_text() == npu
    assert "serving: python/pyproject.toml replaced by python/pyproject_npu.toml" in proc.stderr
    status = git_out(checkout, "status", "--porcelain")
    assert status == " M python/pyproject.toml\n"
    site = site_packages(prefix)
    (link,) = site.glob("demo_ep_cpp*.so")
    assert link.is_symlink() and os.readlink(link) == f"demo_ep/{link.name}"
    target = (site / "demo_ep" / link.name).resolve()
    assert link.resolve() == target and target.is_file()
    python = str(prefix / "bin" / "python")
    shown = subprocess.run([python, "-c", _VERSIONS], capture_output=True, text=True, check=True)
    versions = {"demo-ep": "1.0.0", "demo-kernel-npu": "1.0.0", "demo-serving": "0.5.10"}
    assert json.loads(shown.stdout) == versions
    # Again: nothing moves.
    again = posix_recipe(lock_recipe(locked_example), prefix)
    assert again.returncode == 0, again.stderr
    assert "demo-kernels: already installed from " in again.stderr
    assert "serving: already installed at " in again.stderr
    assert f"link {link.name} -> demo_ep/{link.name}: already there" in again.stderr
    # A lock on another commit: the checkout's replaced file is restored before it moves.
    repo = locked_example.repos["serving"]
    moved = repo.commit({"CHANGES.txt": "moved\n"}, "a later commit")
    serving = next(s for s in lock.sources if s.source.name == "serving")
    tree = repo.git("rev-parse", f"{moved}^{{tree}}")
    sources = [
        msgspec.structs.replace(s, commit=moved, tree=tree) if s is serving else s
        for s in lock.sources
    ]
    relocked = msgspec.structs.replace(lock, sources=tuple(sources))
    recipe = tmp_path / "moved.install.sh"
    recipe.write_text(render_recipe(relocked))
    proc = posix_recipe(recipe, prefix)
    assert proc.returncode == 0, proc.stderr
    assert git_out(checkout, "rev-parse", "HEAD").strip() == moved
    assert (checkout / "python" / "pyproject.toml").read_text() == npu


_VERSIONS = """import importlib.metadata as m, json
print(json.dumps({n: m.version(n) for n in ("demo-ep", "demo-kernel-npu", "demo-serving")}))"""


def test_the_recipe_refuses_a_tampered_wheel_and_installs_nothing_of_its_archive(
    locked_example: Example, tmp_path: Path, pip_site_packages: Path
) -> None:
    wheels = host_wheel_dir(locked_example, tmp_path)
    (wheel,) = wheels.glob("demo_ep-*.whl")
    data = bytearray(wheel.read_bytes())
    data[len(data) // 2] ^= 0xFF
    wheel.write_bytes(bytes(data))
    prefix = fresh_venv(tmp_path / "env", pip_site_packages)
    install_pip_part(locked_example, prefix)
    before = sorted(p.name for p in site_packages(prefix).iterdir())
    proc = posix_recipe(lock_recipe(locked_example), prefix, "--archives", str(wheels))
    assert proc.returncode != 0
    found = hashlib.sha256(bytes(data)).hexdigest()
    said = f"demo-kernels: {wheel.name} has sha256 {found}, the lock says "
    assert said in proc.stderr, proc.stderr
    assert "nothing of the archive was installed" in proc.stderr
    assert sorted(p.name for p in site_packages(prefix).iterdir()) == before


def test_the_recipe_takes_the_wheels_from_archives_dir_and_checks_them(
    locked_example: Example, tmp_path: Path, pip_site_packages: Path
) -> None:
    prefix = fresh_venv(tmp_path / "env", pip_site_packages)
    install_pip_part(locked_example, prefix)
    wheels = host_wheel_dir(locked_example, tmp_path)
    served_zip(locked_example, HOST).unlink()  # not fetchable
    proc = posix_recipe(lock_recipe(locked_example), prefix, "--archives", str(wheels))
    assert proc.returncode == 0, proc.stderr
    assert "demo-kernels: fetching" not in proc.stderr
    assert any(site_packages(prefix).glob("demo_ep_cpp*.so"))


def test_a_link_leading_out_of_site_packages_through_a_symbolic_link_is_refused(
    tmp_path: Path, pip_site_packages: Path
) -> None:
    prefix = fresh_venv(tmp_path / "env", pip_site_packages)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "ext_cpp.so").write_text("not the env's\n")
    (site_packages(prefix) / "ext").symlink_to(outside)
    lock = make_lock("links", links=(Link("ext/ext_cpp*.so", "a stand-in link"),))
    recipe = tmp_path / "links.install.sh"
    recipe.write_text(render_recipe(lock))
    cmd = ["bash", "--posix", str(recipe), "--prefix", str(prefix)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode != 0
    assert "link ext/ext_cpp*.so: ext/ext_cpp.so lies outside" in proc.stderr, proc.stderr
    assert not list(site_packages(prefix).glob("ext_cpp*"))


def test_an_archive_fetched_once_serves_an_offline_relock_from_the_cache(
    locked_example: Example,
) -> None:
    lock = module_lock(locked_example)
    for platform in lock.platforms:
        served_zip(locked_example, platform).unlink()
    code, _, err = run_envgen(locked_example, "lock", ENV, "--force", "--offline")
    assert code == 0, err
    again = read_lock(Project(locked_example.root), ENV)
    assert again is not None and again.archives == lock.archives


def test_a_wheel_missing_from_the_archive_is_named_with_exit_3(example: Example) -> None:
    edit(example, '"demo-kernel-npu", "demo-ep"]', '"demo-kernel-npu", "demo-absent"]')
    code, _, err = run_envgen(example, "lock", ENV)
    assert code == 3, err
    assert "archive demo-kernels for linux-aarch64" in err
    assert "holds no wheel of demo-absent" in err
    assert "it holds demo_ep-1.0.0-cp311-cp311-manylinux_2_28_aarch64.whl, demo_kernel_npu-" in err
