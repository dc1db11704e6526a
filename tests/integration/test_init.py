"""`envgen init` on a hostile directory, through the real command line: a .gitignore that is not
UTF-8 or not a regular file is a clear error (exit 2) that never hangs, and nothing is written
through a symlink leading out of the directory; each refusal comes before anything is written.
Before: exit 70, a hang, and writes where the links led."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def envgen_init(directory: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "envgen", "init", str(directory)],
        capture_output=True,
        text=True,
        timeout=60,  # a FIFO read would block forever
        env={**os.environ, "NO_COLOR": "1"},
        check=False,
    )


def tree(directory: Path) -> dict[str, str]:
    """Every entry under `directory`: a symlink's target, a file's bytes, what else it is."""
    found = {}
    for path in sorted(directory.rglob("*")):
        if path.is_symlink():
            found[str(path.relative_to(directory))] = f"-> {os.readlink(path)}"
        elif path.is_file():
            found[str(path.relative_to(directory))] = path.read_bytes().hex()
        else:
            found[str(path.relative_to(directory))] = "fifo" if path.is_fifo() else "dir"
    return found


@pytest.mark.parametrize(
    ("plant", "message"),
    [
        ("latin-1", "cannot read {gitignore}: not UTF-8 text"),
        ("fifo", "{gitignore} is not a regular file"),
        ("symlink", "{gitignore} is a symbolic link"),
    ],
)
def test_a_gitignore_that_does_not_read_is_exit_2_and_nothing_is_written(
    tmp_path: Path, plant: str, message: str
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    gitignore = project / ".gitignore"
    if plant == "latin-1":
        gitignore.write_bytes("build/\ncaf\xe9/\n".encode("latin-1"))
    elif plant == "fifo":
        os.mkfifo(gitignore)
    else:  # inside the directory, yet not a file of its own (outside: the test below)
        (project / "ignored").write_text("build/\n")
        gitignore.symlink_to(project / "ignored")
    before = tree(tmp_path)
    proc = envgen_init(project)
    assert proc.returncode == 2, proc.stderr
    assert message.format(gitignore=gitignore) in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    assert tree(tmp_path) == before


LINKS = ["env-templates", "channels", "channels/pypi.toml", "env-templates/example.toml"]
LINKS += [".gitignore"]


@pytest.mark.parametrize("link", LINKS)
def test_init_never_writes_through_a_link_leading_out(tmp_path: Path, link: str) -> None:
    """A directory linked elsewhere, or a dangling link to a file elsewhere: refused, and the place
    it leads to stays as it was (a dangling link's target is not created)."""
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    project.mkdir()
    elsewhere.mkdir()
    planted = project / link
    planted.parent.mkdir(parents=True, exist_ok=True)
    target = elsewhere / ("dir" if "." not in planted.name else "file.toml")
    if "." not in planted.name:
        target.mkdir()
    planted.symlink_to(target)
    before = tree(tmp_path)
    proc = envgen_init(project)
    assert proc.returncode == 2, proc.stderr
    assert f"leads through a symbolic link to {target}" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    assert tree(tmp_path) == before


def test_a_symlink_inside_the_directory_is_followed(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "templates").mkdir(parents=True)
    (project / "env-templates").symlink_to(project / "templates")
    proc = envgen_init(project)
    assert proc.returncode == 0, proc.stderr
    assert (project / "templates" / "example.toml").is_file()
