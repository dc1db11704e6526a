"""An error names its package, platform and host as fields, not only in its words: `--json` carries
them beside the message they compose or that names them (issue 40)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from envgen.cli import cli
from envgen.cli.output import envelope
from envgen.commands.lock.command import read_previous
from envgen.errors import InputError
from envgen.lockio.store import LockTexts
from envgen.network import Limits
from envgen.project import Project
from envgen.resolve.git.remote import unreachable

from tests.support.builders import make_lock, sample_lock, write_intact
from tests.support.schemas import validate

REPO = Path(__file__).parents[2]
SCHEMA = json.loads((REPO / "docs" / "cli.schema.json").read_text())


def _project(where: Path) -> Project:
    project = Project(where)
    for directory in ("env-templates", "channels"):
        shutil.copytree(REPO / directory, project.root / directory)
    return project


def _export_error(project: Project, platform: str) -> dict[str, Any]:
    args = ["export", "a5", "--format", "requirements", "--platform", platform, "--json"]
    result = CliRunner().invoke(cli, [*args, "--root", str(project.root)])
    assert result.exit_code == 2, result.stderr
    document = json.loads(result.stdout)
    validate(document, SCHEMA)
    error: dict[str, Any] = document["error"]
    assert f"error: {error['message']}\n" in result.stderr
    return error


def test_the_parts_compose_the_message_and_the_new_ones_are_carried() -> None:
    error = InputError(
        file="locks/a5.yml", key="x", reason="bad", package="torch", platform="linux-64", host="h"
    )
    assert error.message == "locks/a5.yml: x: bad"
    assert error.parts() == {
        "file": "locks/a5.yml",
        "key": "x",
        "reason": "bad",
        "package": "torch",
        "platform": "linux-64",
        "host": "h",
    }
    plain = json.loads(envelope("lock", 2, [], InputError("plain")))["error"]
    assert not {"package", "platform", "host"} & plain.keys()


def test_a_platform_the_lock_lacks_is_carried_with_the_option_naming_it(tmp_path: Path) -> None:
    project = _project(tmp_path / "project")
    write_intact(project, make_lock("a5", platforms=("linux-64",)))
    error = _export_error(project, "linux-aarch64")
    reason = "the lock of a5 has no such part (it has linux-64)"
    assert error == {
        "message": f"--platform linux-aarch64: {reason}",
        "hint": "name one of the lock's platforms",
        "key": "--platform",
        "platform": "linux-aarch64",
        "reason": reason,
    }


def test_a_lock_entry_without_sha256_names_its_file_package_and_platform(tmp_path: Path) -> None:
    project = _project(tmp_path / "project")
    write_intact(project, sample_lock())
    yml = project.lock_yml("a5")
    lines = yml.read_text().splitlines(keepends=True)
    first = next(i for i, line in enumerate(lines) if line.strip().startswith("sha256:"))
    yml.write_text("".join(lines[:first] + lines[first + 1 :]))
    error = _export_error(project, "linux-64")
    assert (error["file"], error["package"], error["platform"]) == (
        "locks/a5.yml",
        "pip",
        "linux-64",
    )
    assert error["message"] == f"locks/a5.yml: {error['reason']}"
    assert error["reason"] == "package pip (linux-64) has no sha256"


def test_an_unreachable_host_is_carried_as_the_host() -> None:
    url = "https://user:s3cret@example.com/x.git"
    failed = unreachable(url, "x", "fatal: unable to access\n", Limits())
    error = json.loads(envelope("status", 3, [], failed))
    validate(error, SCHEMA)
    assert error["error"]["host"] == "https://***@example.com/x.git" == failed.hosts[0].host
    assert "s3cret" not in json.dumps(error)
    assert error["error"]["host"] in error["error"]["message"]


def test_an_unreadable_previous_lock_keeps_the_parts_of_what_is_wrong_in_it() -> None:
    """Before: the re-lock's error said the parse error's words again but carried none of its
    parts."""
    names = ("locks/a5.yml", "locks/a5.sources.toml", "locks/a5.install.sh")
    texts = LockTexts("a5", "version: 2\n", "", "", names)
    with pytest.raises(InputError) as raised:
        read_previous(texts, afresh=False, telling=False)
    error = raised.value
    assert (error.file, error.key, error.reason) == (
        "locks/a5.yml",
        "version",
        "expected a conda-lock version 1 file",
    )
    assert error.message.startswith("locks/a5.yml: version: expected a conda-lock version 1 file\n")
    assert "envgen lock a5 --upgrade" in (error.hint or "")
