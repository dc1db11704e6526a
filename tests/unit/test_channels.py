"""load_channels: the repository's channel files, URLs kept as written, and every problem of every
file at once."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from envgen.cli import cli
from envgen.errors import InputError, MatrixError
from envgen.inputs.channels import load_channels
from envgen.model import Channel, Index

REPO_CHANNELS = Path(__file__).parents[2] / "channels"
MATRICES = Path(__file__).parents[1] / "data" / "matrices"


def write(directory: Path, files: dict[str, str]) -> Path:
    directory.mkdir(exist_ok=True)
    for name, text in files.items():
        (directory / f"{name}.toml").write_text(text)
    return directory


def test_repository_channels_load() -> None:
    channels = load_channels(REPO_CHANNELS)
    assert channels["conda-forge"] == Channel(
        "conda-forge", "https://conda.anaconda.org/conda-forge"
    )
    assert channels["pypi"] == Index("pypi", "https://pypi.org/simple")
    assert channels["pytorch-cpu"] == Index(
        "pytorch-cpu", "https://download.pytorch.org/whl/cpu", explicit=True
    )
    assert channels["triton-ascend"] == Index(
        "triton-ascend",
        "https://triton-ascend.osinfra.cn/pypi/simple/",
        explicit=True,
        trusted_host="triton-ascend.osinfra.cn",
    )


def test_urls_are_kept_as_written(tmp_path: Path) -> None:
    channels = load_channels(
        write(
            tmp_path / "channels",
            {
                "private": 'kind = "pip"\nurl = '
                '"https://${USER}:${TOKEN}@pypi.example.com/simple"\n',
                "token": 'kind = "pip"\nurl = '
                '"https://ci:s3cret@pypi.example.com/simple/"\nexplicit = false\n',
                "mirror": 'kind = "conda"\nurl = "https://${MIRROR}/conda-forge/"\n',
            },
        )
    )
    assert channels["private"] == Index(
        "private", "https://${USER}:${TOKEN}@pypi.example.com/simple"
    )
    assert channels["token"] == Index("token", "https://ci:s3cret@pypi.example.com/simple/")
    assert channels["mirror"] == Channel("mirror", "https://${MIRROR}/conda-forge")


def test_every_problem_of_every_file_is_reported(tmp_path: Path) -> None:
    directory = write(
        tmp_path / "channels",
        {
            "good": 'kind = "pip"\nurl = "https://pypi.org/simple"\n',
            "a-typo": 'kind = "pip"\nurl = "https://x.example/simple"\ntrusted-host = '
            '"x.example"\n',
            "b-kind": 'kind = "pypi"\nurl = "https://x.example/simple"\n',
            "c-nokind": 'url = "https://x.example/simple"\n',
            "d-nourl": '# no url\nkind = "conda"\n',
            "e-explicit": 'kind = "pip"\nurl = "https://x.example/simple"\nexplicit = "yes"\n',
            "f-conda-explicit": 'kind = "conda"\nurl = "https://x.example/c"\nexplicit = true\n',
            "g-syntax": 'kind = "pip"\nurl = "https://x.example/simple\n',
            "h-space": 'kind = "pip"\nurl = "https://x.example/my simple"\n',
            "i-host": 'kind = "pip"\nurl = "https://x.example/simple"\ntrusted_host = '
            '"https://x.example"\n',
        },
    )
    with pytest.raises(MatrixError) as caught:
        load_channels(directory)
    messages = [str(p) for p in caught.value.problems]
    expected = [
        "a-typo.toml:3: trusted-host: unknown key; did you mean 'trusted_host'?",
        "b-kind.toml:1: kind: 'pypi' is not a kind; expected one of: conda, pip",
        "c-nokind.toml: kind: missing required key",
        "d-nourl.toml: url: missing required key",
        "e-explicit.toml:3: explicit: expected true or false, got a string",
        "f-conda-explicit.toml:3: explicit: unknown key",
        "g-syntax.toml:2: TOML syntax error",
        "h-space.toml:2: url: must not contain whitespace",
        "i-host.toml:3: trusted_host: 'https://x.example' is not a host name",
    ]
    for part in expected:
        assert any(part in message for message in messages), (part, messages)
    assert len(messages) == len(expected)
    assert all("good.toml" not in message for message in messages)
    assert caught.value.exit_code == 2


def test_missing_directory_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=str(tmp_path / "nowhere")):
        load_channels(tmp_path / "nowhere")


def test_show_reports_a_broken_channel_file_with_exit_2(tmp_path: Path) -> None:
    write(
        tmp_path / "env-templates",
        {"valid": (MATRICES / "env-templates" / "valid.toml").read_text()},
    )
    channels = write(
        tmp_path / "channels",
        {p.stem: p.read_text() for p in (MATRICES / "channels").glob("*.toml")},
    )
    (channels / "conda-forge.toml").write_text(
        'kind = "conda"\nurl = "https://conda.anaconda.org/conda-forge"\nurls = 1\n'
    )
    result = CliRunner().invoke(cli, ["show", "valid", "--root", str(tmp_path)])
    assert result.exit_code == 2
    assert "Traceback" not in result.stderr
    assert "conda-forge.toml:3: urls: unknown key; did you mean 'url'?" in result.stderr
    assert "(1 problem)" in result.stderr
