"""One cherry-pick rule for the lock and the recipe: the recipe's pick reproduces the commit the
lock recorded.

A host whose git config sets `commit.cleanup = strip` rewrites a picked commit's message (comment
lines go) unless the pick passes `--cleanup=verbatim`; a recipe committing otherwise than the lock
dies on the HEAD check.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import msgspec
import pytest
from envgen.cherry_picks import PICK_ENV
from envgen.example.gitrepos import side_commit
from envgen.example.srcprojects import backend_project
from envgen.model import FILES, Source
from envgen.recipe.render import render_recipe
from envgen.resolve.sources.pins import resolve_sources

from tests.support.a5 import a5_pypi_matrix
from tests.support.builders import at, make_lock
from tests.support.venvs import fresh_venv

# A message `commit.cleanup = strip` would change: a comment line and trailing blank lines.
MESSAGE = "a fix\n\n# not a comment: part of the upstream message\n\n\n"


@pytest.fixture
def stripping_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A global git config that strips commit messages, for envgen's git calls and the recipe's
    alike."""
    config = tmp_path / "gitconfig"
    config.write_text("[commit]\n\tcleanup = strip\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    return config


def test_the_recipe_reproduces_the_locked_cherry_pick(
    tmp_path: Path, stripping_git: Path, pip_site_packages: Path
) -> None:
    repo = backend_project(tmp_path / "picky", "picky", "1.0.0")
    base = repo.rev()
    fix = side_commit(repo, "fix", {"picky/fix.py": "FIXED = True\n"}, MESSAGE, start=base)
    source = Source("picky", repo.url, base, "picky", cherry_picks=(fix,), dependencies=FILES)
    matrix = msgspec.structs.replace(a5_pypi_matrix(("linux-64",)), sources=(source,))

    (locked,) = resolve_sources(matrix, at(tmp_path / "cache"))
    assert locked.commit == base and len(locked.picked) == 1

    # Under this config a pick without the shared flags commits something else: the rule is what
    # keeps them equal.
    scratch = tmp_path / "scratch"
    subprocess.run(["git", "clone", "-q", repo.url, str(scratch)], check=True)
    subprocess.run(["git", "-C", str(scratch), "checkout", "-q", "--detach", base], check=True)
    env = {**os.environ, **PICK_ENV}
    subprocess.run(
        ["git", "-C", str(scratch), "cherry-pick", "--no-gpg-sign", fix], check=True, env=env
    )
    stripped = subprocess.run(
        ["git", "-C", str(scratch), "rev-parse", "HEAD"], capture_output=True, text=True
    )
    assert stripped.stdout.strip() != locked.picked[-1]

    lock = make_lock("picks", sources=(locked,))
    venv = fresh_venv(tmp_path / "env", pip_site_packages)
    script = tmp_path / "picks.install.sh"
    script.write_text(render_recipe(lock))
    proc = subprocess.run(
        ["sh", str(script), "--prefix", str(venv), "--src", str(tmp_path / "src")],
        capture_output=True,
        text=True,
        env=dict(os.environ),
    )
    assert proc.returncode == 0, proc.stderr
    head = subprocess.run(
        ["git", "-C", str(tmp_path / "src" / "picky"), "rev-parse", "HEAD"],
        capture_output=True,
        text=True,
    )
    assert head.stdout.strip() == locked.picked[-1]
    message = subprocess.run(
        ["git", "-C", str(tmp_path / "src" / "picky"), "log", "-1", "--format=%B"],
        capture_output=True,
        text=True,
    )
    assert "# not a comment" in message.stdout
