"""`envgen why` and `envgen tree` on the served example, locked once for the module: a package
reached through a source's declared requirement, through an override, in the conda part, from a
release archive; an absent package; the JSON; nothing but locks/ read."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from envgen.cli import cli
from envgen.example.project import Example
from envgen.project import Project

from tests.support.builders import make_lock, pip_entry, write_intact
from tests.support.example import run_envgen
from tests.support.schemas import validate

SCHEMA = json.loads((Path(__file__).parents[2] / "docs" / "cli.schema.json").read_text())
DATA = Path(__file__).parents[1] / "data" / "matrices"
ENV = "demo"
P = "linux-64"


@pytest.fixture(scope="module")
def locked(read_only_locked: Example) -> Example:
    """The worker's served example, locked (tests/integration/conftest.py). The tests only read its
    locks/, and nothing upstream or served."""
    return read_only_locked


def why(example: Example, *args: str) -> tuple[int, str, str]:
    return run_envgen(example, "why", ENV, *args)


def test_a_package_of_a_source_requirement_and_an_override(locked: Example) -> None:
    code, out, err = why(locked, "demo-tokenizers", "--platform", P)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith(f"demo-tokenizers 0.21.0 on {P}: ")
    assert (
        "  override (reason: the matrix validates 4.57.6; rollout's requirements ask for 5.x)"
        " -> demo-transformers==4.57.6 -> demo-tokenizers" in out
    )
    assert (
        "  rollout (requirements.txt:1) -> demo-transformers>=5.0"
        " [overridden by demo-transformers==4.57.6] -> demo-tokenizers"
    ) in out
    assert (
        "  matrix (env-templates/demo.toml: pip.packages.demo-transformers)"
        " -> demo-transformers==4.57.6 [overridden by demo-transformers==4.57.6] -> demo-tokenizers"
    ) in out
    lengths = [line.count(" -> ") for line in lines[1:]]
    assert lengths == sorted(lengths)


def test_a_source_named_by_another_and_a_requirement_of_its_pyproject(locked: Example) -> None:
    code, out, err = why(locked, "demo-queue", "--platform", P)
    assert code == 0, err
    assert "  post (requirements-npu.txt:2) -> demo-queue (git)" in out
    code, out, err = why(locked, "demo-sampler", "--platform", P)
    assert code == 0, err
    assert "  serving (python/pyproject_npu.toml:15) -> demo-sampler" in out


def test_the_conda_part_and_a_wheel_of_a_release_archive(locked: Example) -> None:
    code, out, err = why(locked, "python", "--platform", P)
    assert code == 0, err
    assert out.startswith("python 3.11") and "  conda -> " in out
    code, out, err = why(locked, "demo-ep")
    assert code == 0, err
    assert "  archive (demo-kernels) -> demo-ep==1.0.0" in out
    assert {line.split(" on ")[1].split(":")[0] for line in out.splitlines() if " on " in line} == {
        "linux-64",
        "linux-aarch64",
    }


def test_an_absent_package_is_exit_1_with_the_nearest_names(locked: Example) -> None:
    code, out, err = why(locked, "demo-tokeniser", "--platform", P)
    assert code == 1 and out == ""
    assert f"demo-tokeniser: not in the lock of demo on {P}; nearest: demo-tokenizers" in err
    code, out, _ = why(locked, "demo-tokeniser", "--json")
    document = json.loads(out)
    assert document["exit_code"] == 1 and not document["ok"]
    assert [r["nearest"][0] for r in document["results"]] == ["demo-tokenizers"] * 2
    code, out, err = run_envgen(locked, "tree", ENV, "--invert", "nope-nothing")
    assert code == 1 and "nope-nothing: not in the lock of demo" in err


def test_json_of_why_and_tree(locked: Example) -> None:
    code, out, err = why(locked, "demo-numpy", "--platform", P, "--json")
    assert code == 0, err
    document = json.loads(out)
    validate(document, SCHEMA)
    (result,) = document["results"]
    assert result["package"] == {
        "part": "pip",
        "name": "demo-numpy",
        "version": "1.26.4",
        "kind": "pip",
        "index": "pypi",
    }
    first = result["paths"][0]
    assert first["text"] == (
        "matrix (env-templates/demo.toml: pip.packages.demo-torch) -> demo-torch -> demo-numpy"
        + first["hops"][-1]["requirement"].removeprefix("demo-numpy")
    )
    assert [h["name"] for h in first["hops"]] == ["demo-torch", "demo-numpy"]
    code, out, err = run_envgen(locked, "tree", ENV, "--platform", P, "--json")
    assert code == 0, err
    validate(json.loads(out), SCHEMA)
    (tree,) = json.loads(out)["results"]
    roots = [row["root"] for row in tree["rows"] if row["depth"] == 0]
    assert roots == ["conda", "matrix", "sources", "overrides", "archives"]
    triton = next(r for r in tree["rows"] if r.get("name") == "demo-triton")
    assert triton["index"] == "extra"


def test_the_tree_is_deterministic_and_shows_index_and_overrides(locked: Example) -> None:
    code, out, err = run_envgen(locked, "tree", ENV, "--platform", P)
    assert code == 0, err
    assert out == run_envgen(locked, "tree", ENV, "--platform", P)[1]
    lines = out.splitlines()
    assert lines[:2] == [f"demo on {P}", "conda"]
    assert any("demo-triton 3.2.2 (index extra)" in line for line in lines)
    assert any("[overridden by demo-transformers==4.57.6]" in line for line in lines)
    code, out, _ = run_envgen(locked, "tree", ENV, "--platform", P, "--depth", "1")
    assert code == 0 and all(not line.startswith(("│", "    ")) for line in out.splitlines())
    code, out, _ = run_envgen(locked, "tree", ENV, "--platform", P, "--invert", "demo-numpy")
    assert out.splitlines()[1].startswith("demo-numpy 1.26.4") and "└── matrix" in out


def test_only_locks_are_read(locked: Example, tmp_path: Path) -> None:
    """The matrix gone (and no network asked): the lock alone answers; a missing derived file
    loses the matrix keys only, and says so."""
    copy = tmp_path / "project"
    shutil.copytree(locked.root, copy)
    (copy / "env-templates" / f"{ENV}.toml").unlink()
    (copy / "locks" / f"{ENV}.{P}.requirements.txt").unlink()
    args = ["why", ENV, "demo-peft", "--platform", P, "--root", str(copy)]
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    assert f"locks/{ENV}.{P}.requirements.txt is missing: the matrix's pins are not shown" in (
        result.stderr
    )
    assert result.stdout.splitlines()[1:] == ["  no recorded reason -> demo-peft"]


def test_a_pending_or_left_out_package_says_so(locked: Example) -> None:
    code, out, err = why(locked, "demo-timm", "--platform", P)
    assert code == 1 and out == ""
    assert "demo-timm: not in the lock of demo on linux-64 (left out on purpose: stands in" in err
    code, _, err = why(locked, "demo_npu", "--platform", P)
    assert code == 1 and "demo_npu: not in the lock of demo on linux-64 (pending: stands in" in err


def test_a_cycle_in_a_locks_depends_is_walked_once(tmp_path: Path) -> None:
    """A lock read through the lock store whose pip entries require each other."""
    root = tmp_path / "project"
    shutil.copytree(DATA / "channels", root / "channels")
    (root / "env-templates").mkdir()
    shutil.copy(DATA / "env-templates" / "valid.toml", root / "env-templates" / "valid.toml")
    pip = (
        pip_entry("a", "1.0", P, depends=(("b", ">=1"),)),
        pip_entry("b", "1.0", P, depends=(("a", ""),)),
    )
    write_intact(Project(root), make_lock("valid", pip=pip))
    found = CliRunner().invoke(cli, ["why", "valid", "b", "--root", str(root)])
    assert found.exit_code == 0, found.output
    assert found.stdout.splitlines()[1:] == ["  no recorded reason -> a -> b>=1"]
    drawn = CliRunner().invoke(cli, ["tree", "valid", "--root", str(root)])
    assert drawn.exit_code == 0, drawn.output
    assert drawn.stdout.splitlines()[-2:] == [
        "        └── a 1.0 (by URL) (cycle)",
        "(*): shown above; (cycle): a requirement back up the branch; ...: deeper",
    ]
