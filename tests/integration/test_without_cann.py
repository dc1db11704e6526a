"""An env without [system.cann], end to end on the served example: locked, shown and checked, with
no CANN in anything it writes or prints. Before: a matrix without [system.cann] did not load."""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from envgen.cli import cli
from envgen.example.project import Example
from envgen.lockio.store import read_lock
from envgen.project import Project

from tests.support.chk_venv import copied_install
from tests.support.example import locked_variant, use_git_config

ENV = "demo"
CANN_TABLE = (
    '[system.cann]\nversion = "pending"\nnote = "stands in for CANN: no public release yet"\n'
    'set_env = "/usr/local/Ascend/cann/set_env.sh"\n'
)


def envgen(example: Example, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, [*args, "--root", str(example.root)], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Example]:
    """The example without [system.cann] (and its import check needing CANN), locked."""
    with locked_variant(tmp_path_factory, ENV, without_cann) as example:
        yield example


def without_cann(example: Example) -> None:
    text = example.matrix.read_text()
    assert CANN_TABLE in text and 'needs = "cann"\n' in text
    example.matrix.write_text(text.replace(CANN_TABLE, "").replace('needs = "cann"\n', ""))


@pytest.fixture
def example(served: Example, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Example:
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(served.gitconfig))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.delenv("ASCEND_SET_ENV", raising=False)
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    return served


@pytest.fixture
def installed(
    example: Example,
    read_only_served: Example,
    worker_first_lock: dict[str, bytes],
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Check's throwaway install replaced by a copy of the session's venv of the example's lock
    (chk_venv.py, built from the worker's example and first lock if no module built it yet): the
    same wheels and sources as this lock's, which differs in its CANN parts only. The subject here
    is what check decides and says; this lock's own install is the two install tests' below."""
    for name, data in worker_first_lock.items():
        (read_only_served.root / "locks" / name).write_bytes(data)
    with pytest.MonkeyPatch.context() as patch:
        use_git_config(read_only_served.gitconfig, patch)
        copied_install(tmp_path_factory, read_only_served, monkeypatch)


def cann_lines(text: str) -> list[str]:
    """The lines naming CANN (ASCEND_SET_ENV, --skip-cann, needsCann...), "cannot" aside."""
    return [line for line in text.splitlines() if re.search(r"cann(?!ot)|ascend_set", line, re.I)]


def test_the_lock_and_every_derived_file_hold_no_cann(example: Example) -> None:
    lock = read_lock(Project(example.root), ENV)
    assert lock is not None
    assert lock.cann is None
    assert [p.name for p in lock.pending] == ["demo-npu"]
    written = sorted(p for p in (example.root / "locks").iterdir() if p.is_file())
    assert len(written) > 3
    for path in written:
        if path.name.startswith("."):
            continue
        assert cann_lines(path.read_text()) == [], path.name


@pytest.mark.parametrize("form", ["requirements", "pylock", "nix", "cyclonedx"])
def test_no_export_names_cann(example: Example, form: str) -> None:
    platform = () if form == "nix" else ("--platform", "linux-64")
    code, out, err = envgen(example, "export", ENV, "--format", form, *platform)
    assert code == 0, err
    assert out.strip()
    assert cann_lines(out) == []


def test_show_names_no_cann(example: Example) -> None:
    code, text, err = envgen(example, "show", ENV)
    assert code == 0, err
    assert cann_lines(text) == []
    code, out, err = envgen(example, "show", ENV, "--json")
    assert code == 0, err
    document = json.loads(out)["results"][0]
    assert document["system"]["cann"] is None
    assert [p["name"] for p in document["pending"]] == ["demo-npu"]


def test_check_passes_with_no_cann_step(example: Example, installed: None) -> None:
    code, out, err = envgen(
        example, "check", ENV, "--venv", "--installer", "uv", "--no-solve", "--json"
    )
    assert code == 0, out + err
    steps = {s["name"]: s for s in json.loads(out)["results"][0]["steps"]}
    assert not [s for s in steps.values() if s["status"] == "failed"]
    assert steps["env: pip check"]["status"] == "ok"
    assert steps["import demo_triton"]["status"] == "ok"
    assert cann_lines(json.dumps(steps)) == []
    code, text, err = envgen(example, "check", ENV, "--no-env", "--no-solve")
    assert code == 0, text + err
    assert cann_lines(text) == []


def test_install_into_a_conda_prefix_writes_and_says_nothing_of_cann(
    example: Example, tmp_path: Path
) -> None:
    prefix = tmp_path / "env"
    code, out, err = envgen(example, "install", ENV, "--prefix", str(prefix), "--installer", "uv")
    assert code == 0, out + err
    assert "for the env's variables (profiles) too, activate it" in err
    assert cann_lines(out + err) == []
    hooks = sorted((prefix / "etc" / "conda").glob("*.d/envgen-demo.sh"))
    assert len(hooks) == 2
    assert [cann_lines(hook.read_text()) for hook in hooks] == [[], []]


def test_an_install_from_a_bundle_says_nothing_of_cann(example: Example, tmp_path: Path) -> None:
    """The advice an install ends with comes from the lock installed: a bundle's too. The pip part
    by uv, as above: pip's install from a bundle into a conda prefix is test_demo's (its pip runs
    about half a dozen times, seconds of CPU for the same advice)."""
    bundle = tmp_path / "demo.tar"
    code, out, err = envgen(example, "bundle", ENV, "--platform", "linux-64", "-o", str(bundle))
    assert code == 0, out + err
    prefix = tmp_path / "env"
    code, out, err = envgen(
        example,
        "install",
        ENV,
        "--prefix",
        str(prefix),
        "--from-bundle",
        str(bundle),
        "--installer",
        "uv",
    )
    assert code == 0, out + err
    assert "for the env's variables (profiles) too, activate it" in err
    assert cann_lines(out + err) == []
