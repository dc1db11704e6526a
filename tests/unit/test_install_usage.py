"""What `envgen install` ends with: how to use the env it made, with conda and without."""

from __future__ import annotations

import subprocess
from pathlib import Path

from envgen.commands.install.command import how_to_use


def test_a_conda_prefix_is_used_as_it_is_by_conda_activate_or_by_one_line_sourced(
    tmp_path: Path,
) -> None:
    prefix = tmp_path / "my env"
    hook = prefix / "etc" / "conda" / "activate.d" / "envgen-demo.sh"
    hook.parent.mkdir(parents=True)
    hook.write_text("export DEMO_MODE=on\n")
    (prefix / "bin").mkdir()
    (prefix / "bin" / "python").write_text("#!/bin/sh\necho the env python\n")
    (prefix / "bin" / "python").chmod(0o755)

    bare, conda, without = how_to_use("demo", prefix, venv=False)
    assert bare.strip().startswith(f"{prefix}/bin/python imports every source")
    assert "nothing activated" in bare
    assert conda.endswith(f"activate it: conda activate '{prefix}'")
    line = without.split("or, without conda: ", 1)[1]
    shown = subprocess.run(
        ["sh", "-c", f'{line}; echo "$DEMO_MODE"; python'],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines() == ["on", "the env python"]


def test_a_venv_is_activated_by_its_own_activate_script(tmp_path: Path) -> None:
    lines = how_to_use("demo", tmp_path / "v", venv=True)
    assert len(lines) == 2
    assert lines[1].endswith(f"activate it: . {tmp_path}/v/bin/activate")
    assert "conda" not in "".join(lines)


def test_an_env_without_cann_is_not_said_to_get_cann_on_activation(tmp_path: Path) -> None:
    lines = how_to_use("demo", tmp_path / "p", venv=False, cann=False)
    assert "for the env's variables (profiles) too" in lines[1]
    assert "CANN" not in "".join(lines)
    with_cann = how_to_use("demo", tmp_path / "p", venv=False)
    assert "for the env's variables (CANN, profiles) too" in with_cann[1]
