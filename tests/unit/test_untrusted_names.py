"""Names are names and strings have no control characters, checked when a matrix is loaded (exit
2)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from envgen.cli import cli
from envgen.names import is_plain_name, is_project_name

DATA = Path(__file__).parents[1] / "data" / "matrices"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    shutil.copytree(DATA / "channels", tmp_path / "channels")
    (tmp_path / "env-templates").mkdir()
    shutil.copy(DATA / "env-templates" / "valid.toml", tmp_path / "env-templates" / "valid.toml")
    return tmp_path


def edit(project: Path, old: str, new: str) -> None:
    path = project / "env-templates" / "valid.toml"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


@pytest.mark.parametrize(
    ("old", "new", "key"),
    [
        (
            "[activation.profiles.quiet]",
            '[activation.profiles."quiet\\nrm -rf x"]',
            "activation.profiles",
        ),
        ("[activation.profiles.quiet]", '[activation.profiles."-x"]', "activation.profiles"),
        (
            'set_env = "/opt/cann/set_env.sh"',
            'set_env = "/opt/cann/set_env.sh\\nid"',
            "system.cann.set_env",
        ),
        ('HF_HOME = "/data/hf"', 'HF_HOME = "/data/hf\\u0085"', "activation.env.HF_HOME"),
        ('ALPHA = "a b"', 'ALPHA = "a\\rb"', "sources.second.env.ALPHA"),
        ("[sources.first]", '[sources."fi\\nrst"]', "sources"),
    ],
)
def test_control_characters_and_bad_names_are_refused_at_load(
    project: Path, old: str, new: str, key: str
) -> None:
    edit(project, old, new)
    result = CliRunner().invoke(cli, ["show", "valid", "--root", str(project)])
    assert result.exit_code == 2, result.output
    assert key in result.stderr
    assert "Traceback" not in result.output


def test_prose_may_span_lines(project: Path) -> None:
    edit(project, 'description = "less logging"', 'description = "less\\nlogging"')
    result = CliRunner().invoke(cli, ["show", "valid", "--root", str(project)])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("env", ["../env-templates/valid", "a/b", "valid\nx", "-x", ".hidden", ""])
def test_env_names_are_names_not_paths(project: Path, env: str) -> None:
    before = sorted(p for p in project.parent.rglob("*"))
    for command in (
        ["lock", env],
        ["show", env],
        ["status", env],
        ["check", env],
        ["install", env, "--prefix", "p"],
    ):
        result = CliRunner().invoke(cli, [*command, "--root", str(project)])
        assert result.exit_code == 2, (command, result.output)
        assert "env name" in result.stderr or "No such option" in result.stderr
    assert sorted(p for p in project.parent.rglob("*")) == before


def test_a_template_whose_file_name_is_not_a_name_is_refused(project: Path) -> None:
    shutil.move(project / "env-templates" / "valid.toml", project / "env-templates" / "va lid.toml")
    result = CliRunner().invoke(cli, ["lock", "--root", str(project)])
    assert result.exit_code == 2, result.output
    assert "'va lid'" in result.stderr
    assert not (project / "locks").exists()


@pytest.mark.parametrize(
    ("name", "plain", "project"),
    [
        ("vllm-ascend", True, True),
        ("torch_npu", True, True),
        ("a5.x", True, True),
        ("Megatron-LM", True, True),
        ("trailing-", True, False),  # a file name may end in '-'; PEP 508 forbids it
        ("-leading", False, False),
        ("has space", False, False),
        ("../up", False, False),
        ("", False, False),
        ("numpy\n", False, False),  # a trailing newline: some packaging releases let it through
        ("\u212aelvin", False, False),  # the Kelvin sign, which matches k without re.ASCII
    ],
)
def test_a_plain_name_and_a_project_name_each_have_one_rule(
    name: str, plain: bool, project: bool
) -> None:
    """Env, source, profile and channel names (file names) against Python project names (PEP 508, as
    packaging validates them): the matrix readers and the preferences all ask these two."""
    assert is_plain_name(name) is plain
    assert is_project_name(name) is project
