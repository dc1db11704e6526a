"""An env without [conda] against the real https://pypi.org/simple (opt in: `-m network`): python
3.11 + requests + rich locked from `envgen init --no-conda`, installed into a venv and checked,
with no conda channel anywhere."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from envgen.cli import cli
from envgen.lockio.store import read_lock
from envgen.platforms import host_platform
from envgen.project import Project

pytestmark = [
    pytest.mark.network,
    pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="the venv is made by a python 3.11"),
]

MATRIX = """\
schema = 1

[env]
name = "tools"
platforms = ["{platform}"]
python = "3.11"

[system]
glibc = "2.28"

[pip]
indexes = ["pypi"]

[pip.packages]
requests = {{}}
rich = {{}}

[[checks.imports]]
module = "rich"
distribution = "rich"

[[checks.imports]]
module = "requests"
distribution = "requests"
"""


def envgen(root: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, [*args, "--root", str(root)], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_requests_and_rich_lock_install_and_check_in_a_venv(tmp_path: Path) -> None:
    root = tmp_path / "project"
    code, _, err = envgen(tmp_path, "init", "--no-conda", str(root))
    assert code == 0, err
    assert sorted(p.name for p in (root / "channels").iterdir()) == ["pypi.toml"]
    (root / "env-templates" / "tools.toml").write_text(MATRIX.format(platform=host_platform()))

    code, _, err = envgen(root, "lock", "tools", "-q")
    assert code == 0, err
    lock = read_lock(Project(root), "tools")
    assert lock is not None and lock.conda == () and lock.python == "3.11"
    names = {e.name for e in lock.pip}
    assert {"requests", "rich", "urllib3", "idna", "certifi", "markdown-it-py"} <= names
    assert all(e.url.startswith("https://files.pythonhosted.org/") for e in lock.pip)

    prefix = tmp_path / "venv"
    code, out, err = envgen(root, "install", "tools", "--prefix", str(prefix), "--venv")
    assert code == 0, out + err
    assert (prefix / "pyvenv.cfg").is_file()

    code, out, err = envgen(root, "check", "tools", "--venv", "--installer", "uv", "--json")
    assert code == 0, out + err
    steps = {s["name"]: s for s in json.loads(out)["results"][0]["steps"]}
    assert not [s for s in steps.values() if s["status"] == "failed"]
    assert steps["solve: same conda set"]["status"] == "skipped"
    assert steps["solve: same pip set"]["status"] == "ok"
    assert steps["import rich"]["status"] == "ok" and steps["import requests"]["status"] == "ok"
