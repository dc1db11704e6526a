"""A matrix without [conda]: pip only, for a venv of its [env] python; the lock of one records that
python and no conda entry, and reads back as written (a conda-lock file conda-lock's parser reads).
`envgen init --no-conda` starts a project with one. Before: [conda] was required."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
from click.testing import CliRunner
from conda_lock.lockfile import parse_conda_lock_file
from envgen.cli import cli
from envgen.commands.init import EXAMPLE_MATRIX, init_project
from envgen.errors import InputError, MatrixError
from envgen.inputs.matrix import load_matrix
from envgen.lockio.conda_lock_yml import parse_lock_yml, render_lock_yml
from envgen.lockio.sources_toml import parse_sources_toml, render_sources_toml
from envgen.model import Lock

from tests.support.builders import sample_lock

MATRICES = Path(__file__).parents[1] / "data" / "matrices"
CHANNELS = MATRICES / "channels"
VALID = (MATRICES / "env-templates" / "valid.toml").read_text()
CONDA_TABLE = '[conda]\nchannels = ["conda-forge"]\nspecs = ["python 3.11.*", "pip >=24"]\n'


def without_conda(tmp_path: Path, text: str = VALID) -> Path:
    assert CONDA_TABLE in text
    path = tmp_path / "valid.toml"
    path.write_text(text.replace(CONDA_TABLE, ""))
    return path


def pip_only(lock: Lock) -> Lock:
    return msgspec.structs.replace(lock, conda=(), channels=(), python="3.11")


def test_a_matrix_with_conda_reads_as_before() -> None:
    assert load_matrix(MATRICES / "env-templates" / "valid.toml", CHANNELS).has_conda


def test_a_matrix_without_conda_names_its_python_in_env(tmp_path: Path) -> None:
    matrix = load_matrix(without_conda(tmp_path), CHANNELS)
    assert not matrix.has_conda
    assert (matrix.channels, matrix.conda_specs, matrix.python) == ((), (), "3.11")


def test_without_conda_env_python_is_still_required(tmp_path: Path) -> None:
    text = VALID.replace('python = "3.11"\n', "", 1)
    with pytest.raises(MatrixError) as raised:
        load_matrix(without_conda(tmp_path, text), CHANNELS)
    assert "env.python" in str(raised.value)


def test_a_pip_only_lock_reads_back_with_its_python(tmp_path: Path) -> None:
    lock = pip_only(sample_lock())
    assert not lock.has_conda and lock.python_for(lock.platforms[0]) == "3.11"
    sources = render_sources_toml(lock)
    assert '\npython = "3.11"\n' in sources
    assert parse_sources_toml(sources).lock.python == "3.11"
    assert 'python = "' not in render_sources_toml(sample_lock())
    yml = render_lock_yml(lock)
    assert "No conda part" in yml and "conda-lock install" not in yml
    assert parse_lock_yml(yml).conda == ()
    path = tmp_path / "pip.yml"
    path.write_text(yml)
    parsed = parse_conda_lock_file(path)
    assert parsed.metadata.channels == [] and {p.manager for p in parsed.package} == {"pip"}


def test_a_python_that_is_no_major_minor_is_refused() -> None:
    sources = render_sources_toml(pip_only(sample_lock())).replace('"3.11"', '"3.11; x"')
    with pytest.raises(InputError, match="not a major.minor Python version"):
        parse_sources_toml(sources)


def test_init_no_conda_starts_a_pip_only_project(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["init", "--no-conda", str(tmp_path)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "--prefix DIR --venv" in result.stderr
    assert sorted(p.name for p in (tmp_path / "channels").iterdir()) == ["pypi.toml"]
    text = (tmp_path / "env-templates" / "example.toml").read_text()
    assert "\n[conda]" not in text and "conda-forge" not in text
    matrix = load_matrix(tmp_path / "env-templates" / "example.toml", tmp_path / "channels")
    assert not matrix.has_conda and matrix.python == "3.11"
    assert [p.name for p in matrix.packages] == ["numpy", "requests"]


def test_init_writes_the_conda_example_as_before(tmp_path: Path) -> None:
    init_project(tmp_path)
    text = (tmp_path / "env-templates" / "example.toml").read_text()
    assert text == EXAMPLE_MATRIX and "[conda]" in text
    assert load_matrix(tmp_path / "env-templates" / "example.toml", tmp_path / "channels").has_conda
