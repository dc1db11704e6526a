"""A venv envgen makes has the same seed packages whether uv puts ensurepip's wheels there or venv
does."""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from envgen.installer.destinations import PROBE, make_venv

from tests.support.venvs import site_packages

# The distributions the venv's python sees, as `pip list` names them, without pip's start-up.
_LIST = "import importlib.metadata as m; print(*{d.metadata['Name'] for d in m.distributions()})"


def _seeded(prefix: Path) -> set[str]:
    listing = subprocess.run(
        [str(prefix / "bin" / "python"), "-c", _LIST],
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": "/usr/bin:/bin"},
    ).stdout
    return {name.lower() for name in listing.split()}


def test_uv_seeds_the_wheels_ensurepip_would_install(
    tmp_path: Path, pip_site_packages: Path
) -> None:
    """Against the session's venv of pip (tests/support/venvs.py), which make_venv made without seed
    wheels: ensurepip's way."""
    probe = [sys.executable, "-c", PROBE]
    bundled = subprocess.run(probe, capture_output=True, text=True, check=True)
    wheels = sorted(Path(bundled.stdout.split("\n")[1]).glob("*.whl"))
    assert wheels, "this interpreter's ensurepip has its wheels"
    ensurepip = pip_site_packages.parents[2]
    # The venvs are made side by side: neither reads the other.
    with ThreadPoolExecutor(2) as pool:
        compiled = {"bytecode": tmp_path / "cache"}
        made = [pool.submit(make_venv, sys.executable, tmp_path / "uv", wheels, **compiled)]
        made.append(pool.submit(make_venv, sys.executable, tmp_path / "plain", wheels))
    for future in made:
        future.result()
    # pip compiled as ensurepip leaves it, whatever PYTHONDONTWRITEBYTECODE says (asked before pip
    # runs there); not compiled when asked not to be (uv installs that env).
    for prefix in (tmp_path / "uv", ensurepip, tmp_path / "plain"):
        compiled = list(site_packages(prefix).rglob("*.pyc"))
        assert bool(compiled) == (prefix.name != "plain"), prefix
    assert _seeded(tmp_path / "uv") == _seeded(ensurepip) >= {"pip"}
    assert _seeded(tmp_path / "plain") == _seeded(ensurepip)
    assert (tmp_path / "uv" / "bin" / "pip").exists()
    assert "deactivate ()" in (tmp_path / "uv" / "bin" / "activate").read_text()
