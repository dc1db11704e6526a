"""`envgen --version`: the installed distribution's version, or 0.0.0 from a source tree never
installed."""

from __future__ import annotations

import importlib.metadata

import envgen
import pytest
from click.testing import CliRunner
from envgen.cli import cli


def test_the_version_is_the_installed_distributions() -> None:
    result = CliRunner().invoke(cli, ["--version"])
    assert result.exit_code == 0, result.output
    assert result.output == f"envgen, version {importlib.metadata.version('envgen')}\n"


def test_a_source_tree_never_installed_says_0_0_0(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.metadata.version

    def version(name: str) -> str:
        if name == "envgen":
            raise importlib.metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(importlib.metadata, "version", version)
    kept = vars(envgen).pop("__version__", None)  # read again, on first use
    try:
        result = CliRunner().invoke(cli, ["--version"])
    finally:
        vars(envgen).pop("__version__", None)
        if kept is not None:
            vars(envgen)["__version__"] = kept
    assert result.exit_code == 0, result.output
    assert result.output == "envgen, version 0.0.0\n"
