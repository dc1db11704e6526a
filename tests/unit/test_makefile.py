"""The Makefile's targets and the venv each makes on a fresh clone: the runtime one (.venv-run) for
what only runs envgen, the one with the test and lint tools (.venv) for the rest, as its header
comment, the README and docs/cli.md say."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).parents[2]
RUNTIME = ("lock", "status", "diff", "check", "relock", "demo")
TOOLS = ("test", "test-network", "lint", "bench", "fuzz", "coverage")


def commands(target: str) -> str:
    """What `make TARGET` runs on a fresh clone, every prerequisite included (`-n -B`: printed, none
    run)."""
    names = ["VENV=.venv", "RUN_VENV=.venv-run", "PYTHON=python3"]
    return subprocess.run(
        ["make", "-n", "-B", "-C", str(REPO), "--no-print-directory", target, *names],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


@pytest.mark.parametrize("target", RUNTIME + TOOLS)
def test_each_target_makes_the_venv_it_needs(target: str) -> None:
    """Before: `make lock`, `status`, `diff`, `check` and `relock` built the test and lint venv
    (about 70 s) to run envgen, which needs only its runtime."""
    run = commands(target)
    made = re.findall(r"^python3 -m venv (\S+)$", run, re.MULTILINE)
    if target in RUNTIME:
        assert made == [".venv-run"], run
        assert ".venv/" not in run and "[test]" not in run, run
    else:
        assert made == [".venv"], run


def test_the_header_the_readme_and_the_reference_say_which_venv() -> None:
    header = "".join(
        line for line in (REPO / "Makefile").read_text().splitlines() if line.startswith("#")
    )
    assert "`make lock` (and demo, status, diff," in header and ".venv-run on first use" in header
    readme = (REPO / "README.md").read_text()
    (lock,) = [line for line in readme.splitlines() if line.startswith("make lock ")]
    assert "creates .venv-run on first use" in lock
    assert "`make lock` is `envgen lock` in `.venv-run`" in (REPO / "docs" / "cli.md").read_text()
