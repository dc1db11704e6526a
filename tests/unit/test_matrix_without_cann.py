"""A matrix without [system.cann]: an env with no CANN anywhere (the model, show); a matrix with it
reads as before, and a matrix extending one keeps its CANN. Before: [system.cann] was required."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from envgen.commands.init import init_project
from envgen.commands.show import render_json, render_text
from envgen.errors import MatrixError
from envgen.inputs.matrix import load_matrix
from envgen.model import Cann, ImportCheck

MATRICES = Path(__file__).parents[1] / "data" / "matrices"
CHANNELS = MATRICES / "channels"
VALID = (MATRICES / "env-templates" / "valid.toml").read_text()
CANN_TABLE = '[system.cann]\nversion = "8.1.RC1"\nset_env = "/opt/cann/set_env.sh"\n'


def without_cann(tmp_path: Path, name: str = "cpu") -> Path:
    """The valid fixture with its [system.cann], and what needs CANN, taken out."""
    assert CANN_TABLE in VALID
    text = VALID.replace(CANN_TABLE, "").replace("needs-cann = true\n", "")
    text = text.replace('needs = "cann"\n', "").replace('name = "valid"', f'name = "{name}"')
    path = tmp_path / f"{name}.toml"
    path.write_text(text)
    return path


def test_a_matrix_without_system_cann_has_no_cann(tmp_path: Path) -> None:
    matrix = load_matrix(without_cann(tmp_path), CHANNELS)
    assert matrix.cann is None
    assert matrix.npu is None
    assert matrix.glibc == "2.28"
    assert not any(s.needs_cann for s in matrix.sources)
    assert ImportCheck("second.sub", None, None, "none") in matrix.checks


def test_a_matrix_with_system_cann_reads_as_before() -> None:
    matrix = load_matrix(MATRICES / "env-templates" / "valid.toml", CHANNELS)
    assert matrix.cann == Cann("8.1.RC1", "/opt/cann/set_env.sh")


def test_a_matrix_extending_one_with_cann_keeps_it(tmp_path: Path) -> None:
    (tmp_path / "base.toml").write_text(VALID.replace('name = "valid"', 'name = "base"'))
    child = 'extends = "base"\nschema = 1\n\n[env]\nname = "child"\n'
    (tmp_path / "child.toml").write_text(child)
    assert load_matrix(tmp_path / "child.toml", CHANNELS).cann == Cann(
        "8.1.RC1", "/opt/cann/set_env.sh"
    )


@pytest.mark.parametrize(
    ("needing", "key"),
    [
        ('[system.npu]\ngeneration = "a3"\n', "system.npu"),
        ('[[checks.imports]]\nmodule = "torch_npu"\nneeds = "npu"\n', "needs npu"),
    ],
)
def test_what_needs_cann_is_refused_without_it(tmp_path: Path, needing: str, key: str) -> None:
    path = without_cann(tmp_path)
    text = path.read_text()
    if needing.startswith("[system.npu]"):
        text = text.replace("[conda]\n", f"{needing}\n[conda]\n")
    else:
        text += "\n" + needing
    path.write_text(text)
    with pytest.raises(MatrixError) as raised:
        load_matrix(path, CHANNELS)
    assert key in str(raised.value)
    assert "this env has no [system.cann]" in str(raised.value)


def test_show_of_an_env_without_cann_names_no_cann(tmp_path: Path) -> None:
    matrix = load_matrix(without_cann(tmp_path), CHANNELS)
    text = render_text(matrix)
    assert "CANN" not in text
    assert "cann" not in text.replace("needs none", "")
    document = json.loads(render_json(matrix))
    assert document["system"]["cann"] is None
    assert document["pending"] == [{"name": "torch-npu", "note": "not published yet"}]


def test_inits_example_is_a_cpu_project_without_cann(tmp_path: Path) -> None:
    init_project(tmp_path)
    matrix = load_matrix(tmp_path / "env-templates" / "example.toml", tmp_path / "channels")
    assert matrix.cann is None
    assert "CANN" not in render_text(matrix)
