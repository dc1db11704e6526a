"""What a read-only command imports: only what it needs. The command line imports a command's module
when that command runs, conda-lock is for `check`, cyclonedx for its exporter, rattler where a conda
spec or conda version is parsed, `build` where a source is built and requests where an index is
asked; `diff`, `show` and the other exports on a lock do not pay for them (their import is most of
such a command's time)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import msgspec
from envgen.lockio.store import write_lock
from envgen.project import Project

from tests.support.builders import bump, sample_lock, write_intact

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("build", "conda_lock", "cyclonedx", "rattler", "requests")

# Runs the command line in this process (as `envgen ARGS...` would), then prints which of the heavy
# packages it imported.
SCRIPT = """
import sys
from envgen.cli import cli
try:
    cli(sys.argv[1:], prog_name="envgen")
except SystemExit as exc:
    assert not exc.code, exc.code
print(sorted(m for m in {heavy!r} if m in sys.modules))
"""


def imported(*args: str, watched: tuple[str, ...] = HEAVY) -> str:
    script = SCRIPT.format(heavy=watched)
    done = subprocess.run(
        [sys.executable, "-c", script, *args], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()[-1]


def test_read_only_commands_import_none_of_the_heavy_packages(tmp_path: Path) -> None:
    project = Project(tmp_path / "project")
    for directory in ("env-templates", "channels"):
        shutil.copytree(ROOT / directory, project.root / directory)
    write_intact(project, sample_lock())
    root = ("--root", str(project.root))
    for fmt in ("pylock", "nix"):
        out = str(tmp_path / f"out.{fmt}")
        assert imported("export", "a5", "--format", fmt, "-o", out, "-q", *root) == "[]", fmt
    # Two locks of pip changes only (a conda version change is compared by rattler's rules).
    before, after = bump()
    pip_only = msgspec.structs.replace(after, conda=before.conda)
    for name, lock in (("a", before), ("b", pip_only)):
        other = Project(tmp_path / name)
        write_lock(other, lock.env, lock, "")
    a, b = (str(Project(tmp_path / n).lock_yml(before.env)) for n in ("a", "b"))
    assert imported("diff", a, b) == "[]"
    # show validates the matrix's conda specs (rattler), and nothing else heavy; of the lock it
    # reads the sources.toml (the overrides), not the yml.
    assert imported("show", "a5", *root, watched=(*HEAVY, "yaml")) == "['rattler']"
