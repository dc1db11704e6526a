"""A lock solved from a served channel, written by write_lock, rendered by the real `conda-lock`
CLI."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from envgen.example.condapkgs import demo_packages, write_channel
from envgen.example.http import serve_directory
from envgen.lockio.conda_lock_yml import render_lock_yml
from envgen.lockio.store import read_lock, sealed_sources, write_lock
from envgen.model import Channel, Lock
from envgen.process import run
from envgen.project import Project
from envgen.resolve.conda.stage import solve_conda

from tests.support.builders import at, digest, make_lock, make_matrix, pip_entry

CONDA_LOCK = Path(sys.executable).parent / "conda-lock"
PLATFORMS = ("linux-aarch64", "linux-64")


@pytest.fixture(scope="module")
def lock(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lock]:
    root = tmp_path_factory.mktemp("condalock-channel")
    write_channel(root / "demo", demo_packages())
    with serve_directory(root) as base:
        channel = Channel("demo", f"{base}/demo")
        matrix = make_matrix(
            platforms=PLATFORMS, channels=(channel,), conda_specs=("python 3.11.*", "pip")
        )
        cache = tmp_path_factory.mktemp("cache")
        conda = tuple(e for p in PLATFORMS for e in solve_conda(matrix, p, at(cache)))
    pip = tuple(
        pip_entry(name, version, platform, depends=depends)
        for platform in PLATFORMS
        for name, version, depends in (
            ("mbridge", "0.15.1", (("transformers", ">=4.0"),)),
            ("transformers", "4.57.6", ()),
        )
    )
    yield make_lock(
        platforms=PLATFORMS,
        input_hash=digest("inputs"),
        conda=conda,
        pip=pip,
        channels=(channel,),
        inputs=(("matrix", digest("matrix")),),
    )


def conda_lock_render(kind: str, lockfile: Path, cwd: Path) -> None:
    args = [
        CONDA_LOCK,
        "render",
        "--kind",
        kind,
        *(a for p in PLATFORMS for a in ("-p", p)),
        lockfile,
    ]
    # Proxies on a closed port: any network use would fail, so a pass proves render works offline.
    env = {
        **os.environ,
        "HTTPS_PROXY": "http://127.0.0.1:9",
        "HTTP_PROXY": "http://127.0.0.1:9",
        "NO_PROXY": "",
    }
    run(args, cwd=cwd, env=env, timeout=300)


def test_conda_lock_renders_explicit_files_for_every_platform(lock: Lock, tmp_path: Path) -> None:
    project = Project(tmp_path)
    write_lock(project, "demo", lock, "#!/bin/sh\n")
    out = tmp_path / "out"
    out.mkdir()

    conda_lock_render("explicit", project.lock_yml("demo"), out)

    for platform in PLATFORMS:
        lines = (out / f"conda-{platform}.lock").read_text().splitlines()
        assert "@EXPLICIT" in lines
        assert f"# input_hash: {lock.input_hash}" in lines
        conda_lines = {line for line in lines if line.startswith("http")}
        assert conda_lines == {f"{e.url}#{e.md5}" for e in lock.conda_for(platform)}
        pip_lines = {line for line in lines if line.startswith("# pip ")}
        assert pip_lines == {
            f"# pip {e.name} @ {e.url}#sha256={e.sha256}" for e in lock.pip_for(platform)
        }
        assert len(conda_lines) == 4 and len(pip_lines) == 2


def test_conda_lock_renders_env_files(lock: Lock, tmp_path: Path) -> None:
    project = Project(tmp_path)
    write_lock(project, "demo", lock, "#!/bin/sh\n")
    out = tmp_path / "out"
    out.mkdir()

    conda_lock_render("env", project.lock_yml("demo"), out)

    for platform in PLATFORMS:
        text = (out / f"conda-{platform}.lock.yml").read_text()
        for entry in lock.conda_for(platform):
            assert f"- {entry.name}={entry.version}={entry.build}" in text
        for pip in lock.pip_for(platform):
            assert f"{pip.name} == {pip.version} --hash=sha256:{pip.sha256}" in text
        assert lock.channels[0].url in text


def test_written_lock_reads_back_and_rerenders_to_the_same_bytes(
    lock: Lock, tmp_path: Path
) -> None:
    project = Project(tmp_path)
    write_lock(project, "demo", lock, "#!/bin/sh\n")

    again = read_lock(project, "demo")

    assert again is not None
    assert again.conda == lock.conda
    assert again.pip == lock.pip
    assert again.inputs == lock.inputs
    assert render_lock_yml(again) == project.lock_yml("demo").read_text()
    sealed = sealed_sources(again, render_lock_yml(again), "#!/bin/sh\n")
    assert sealed == project.sources_toml("demo").read_text()
