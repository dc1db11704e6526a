"""An env without [conda], end to end on the served example: locked with pip entries only (the
channel is never asked), exported, installed into a venv of its python and checked. Before: a matrix
without [conda] did not load."""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from envgen.commands.install import command as install_command
from envgen.example.project import Example
from envgen.installer.destinations import Venv
from envgen.lockio.conda_lock_yml import parse_lock_yml
from envgen.lockio.store import read_lock
from envgen.project import Project
from envgen.resolve.settings import Settings

from tests.support.example import locked_variant, run_envgen, use_git_config

ENV = "demo"
CONDA_TABLE = '[conda]\nchannels = ["demo-forge"]\nspecs = ["python 3.11.*", "pip", "libdemo"]\n'


def without_conda(example: Example) -> None:
    """The example's matrix without [conda]; its channel file points at a port nothing serves, so
    any request to it fails."""
    text = example.matrix.read_text()
    assert CONDA_TABLE in text
    example.matrix.write_text(text.replace(CONDA_TABLE, ""))
    (example.root / "channels" / "demo-forge.toml").write_text(
        'kind = "conda"\nurl = "http://127.0.0.1:9/demo-forge"\n'
    )


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Example]:
    """The example without [conda], locked."""
    with locked_variant(tmp_path_factory, ENV, without_conda) as example:
        yield example


@pytest.fixture
def example(served: Example, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Example:
    use_git_config(served.gitconfig, monkeypatch)
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    return served


def test_the_lock_holds_pip_entries_only_and_its_python(example: Example) -> None:
    lock = read_lock(Project(example.root), ENV)
    assert lock is not None
    assert lock.conda == () and lock.channels == ()
    assert lock.python == "3.11" and not lock.has_conda
    assert {e.platform for e in lock.pip} == {"linux-aarch64", "linux-64"}
    assert "demo-torch" in {e.name for e in lock.pip}
    sources = (example.root / "locks" / f"{ENV}.sources.toml").read_text()
    assert re.search(r'^python = "3\.11"$', sources, re.M)
    assert "demo-forge" not in "".join(
        p.read_text() for p in (example.root / "locks").iterdir() if p.is_file()
    )


def test_the_pip_only_lock_is_a_conda_lock_file(example: Example, tmp_path: Path) -> None:
    """conda-lock's own parser reads it: its metadata names no channel, every package is pip's."""
    from conda_lock.lockfile import parse_conda_lock_file

    yml = example.root / "locks" / f"{ENV}.yml"
    parsed = parse_conda_lock_file(yml)
    assert parsed.metadata.channels == []
    assert parsed.package and {p.manager for p in parsed.package} == {"pip"}
    assert len(parse_lock_yml(yml.read_text()).pip) == len(parsed.package)


@pytest.mark.parametrize("form", ["requirements", "pylock", "nix", "cyclonedx"])
def test_every_export_is_written(example: Example, form: str) -> None:
    platform = () if form == "nix" else ("--platform", "linux-64")
    code, out, err = run_envgen(example, "export", ENV, "--format", form, *platform)
    assert code == 0, err
    assert "demo-torch" in out and "demo-forge" not in out


def test_a_relock_is_a_no_op(example: Example) -> None:
    code, out, err = run_envgen(example, "lock", ENV, "--json")
    assert code == 0, err
    assert '"status": "up-to-date"' in out


def test_a_forced_relock_starts_uv_ahead_on_the_matrix_python_and_writes_the_same_bytes(
    example: Example,
) -> None:
    locks = example.root / "locks"
    before = {p.name: p.read_bytes() for p in locks.iterdir() if p.is_file()}
    code, _, err = run_envgen(example, "-v", "lock", ENV, "--force")
    assert code == 0, err
    for platform in ("linux-aarch64", "linux-64"):
        assert f"{platform}: uv started ahead, on python 3.11 " in err, err
        assert f"{platform}: adopting the uv run started ahead" in err, err
    assert {p.name: p.read_bytes() for p in locks.iterdir() if p.is_file()} == before


def test_install_into_a_venv_then_check_it(example: Example, tmp_path: Path) -> None:
    prefix = tmp_path / "venv"
    code, out, err = run_envgen(
        example, "install", ENV, "--prefix", str(prefix), "--venv", "--installer", "uv"
    )
    assert code == 0, out + err
    assert (prefix / "pyvenv.cfg").is_file() and not (prefix / "conda-meta").exists()
    imported = run_envgen(example, "check", ENV, "--venv", "--installer", "uv", "--json")
    code, out, err = imported
    assert code == 0, out + err
    steps = {s["name"]: s for s in json.loads(out)["results"][0]["steps"]}
    assert not [s for s in steps.values() if s["status"] == "failed"]
    conda = steps["solve: same conda set"]
    assert (conda["status"], conda["detail"]) == (
        "skipped",
        "the env has no conda part (no [conda])",
    )
    assert steps["solve: same pip set"]["status"] == "ok"
    assert steps["env: pip check"]["status"] == "ok"
    assert steps["import demo_torch"]["status"] == "ok"


def test_a_conda_prefix_is_refused(example: Example, tmp_path: Path) -> None:
    prefix = tmp_path / "env"
    code, out, err = run_envgen(example, "install", ENV, "--prefix", str(prefix))
    assert code == 2
    assert "has no conda part" in err and "--venv" in err
    assert not prefix.exists()
    code, out, err = run_envgen(example, "check", ENV, "--no-solve", "--json")
    assert code != 0
    steps = {s["name"]: s for s in json.loads(out)["results"][0]["steps"]}
    assert "has no conda part" in steps["env: install (conda prefix)"]["detail"]


def test_an_interpreter_of_another_python_is_refused(
    example: Example, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A python 3.10 (a stand-in that answers the probe so) makes no venv of a lock of 3.11."""
    fake = tmp_path / "python3.10"
    fake.write_text("#!/bin/sh\necho 3.10.14\necho\n")
    fake.chmod(0o755)

    def made(path: Path, *, settings: Settings, **_: object) -> Venv:
        return Venv(path.absolute(), settings, interpreter=str(fake))

    monkeypatch.setattr(install_command, "destination", made)
    prefix = tmp_path / "venv"
    code, out, err = run_envgen(example, "install", ENV, "--prefix", str(prefix), "--venv")
    assert code == 2
    assert f"{fake} is python 3.10.14, but the lock of {ENV} has python 3.11" in err
    assert not prefix.exists()


@pytest.mark.parametrize(
    "command", [("show", ENV), ("status",), ("bundle", ENV, "--platform", "linux-64")]
)
def test_show_status_and_bundle_need_no_conda_part(
    example: Example, command: tuple[str, ...], tmp_path: Path
) -> None:
    extra = ("--output", str(tmp_path / "demo.tar")) if command[0] == "bundle" else ()
    code, out, err = run_envgen(example, *command, *extra)
    assert code == 0, out + err
    assert "demo-forge" not in out + err
