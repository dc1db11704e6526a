"""ci/relock.py, the relock workflow's logic, end to end on the bundled example served on
127.0.0.1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from envgen.commands.demo import commit_project, step_environment
from envgen.example.http import serve_directory
from envgen.example.project import ENV, GITHUB, Example, advance_branch

from tests.support.advisories import stand_in
from tests.support.closed import closed_url
from tests.support.example import served_example

SCRIPT = Path(__file__).resolve().parents[2] / "ci" / "relock.py"
TORCH_NEWS = "demo-torch ==2.10.0: newer in 2.10 on pypi: 2.10.1"


class Served:
    """The example project, committed as the base a pull request compares with, and how to run
    ci/relock.py."""

    def __init__(self, example: Example, workdir: Path) -> None:
        self.example = example
        self.root = example.root
        self.out = workdir / "relock-out"
        self.outputs = workdir / "github-output"
        self.env = step_environment(example, workdir, os.environ)
        self.env["GITHUB_OUTPUT"] = str(self.outputs)

    def relock(self, *args: str) -> subprocess.CompletedProcess[str]:
        self.outputs.write_text("")
        argv = [
            sys.executable,
            str(SCRIPT),
            "--root",
            str(self.root),
            "--out",
            str(self.out),
            *args,
        ]
        return subprocess.run(argv, env=self.env, capture_output=True, text=True, check=False)

    def git(self, *args: str) -> str:
        done = subprocess.run(
            ["git", *args], cwd=self.root, env=self.env, capture_output=True, text=True, check=True
        )
        return done.stdout

    def locked(self, source: str) -> str:
        sources = (self.root / "locks" / f"{ENV}.sources.toml").read_text()
        return sources.split(f'name = "{source}"', 1)[1].split('commit = "', 1)[1][:40]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    workdir = tmp_path_factory.mktemp("relock")
    with served_example(tmp_path_factory, workdir) as example:
        served = Served(example, workdir)
        commit_project(served.root, "the project, no lock yet")
        # The first run finds no lock: it writes one (new files in the patch); that becomes the
        # base. Its audit's service refuses connections: a line of the body, not a failure.
        served.env |= {"ENVGEN_AUDIT_URL": closed_url(), "ENVGEN_RETRIES": "0"}
        first = served.relock()
        assert first.returncode == 0, first.stderr
        assert f"{ENV}: no lock yet" in first.stderr
        body = (served.out / "pr-body.md").read_text()
        assert f"- **{ENV}** (changed): no lock yet" in body
        assert f"- **{ENV}**: not audited: cannot ask http://127.0.0.1:" in body
        assert json.loads((served.out / "audits" / f"{ENV}.json").read_text())["exit_code"] == 3
        assert "new file mode" in (served.out / "relock.patch").read_text()
        commit_project(served.root, "lock demo")
        yield served


def test_nothing_moved_no_changes_and_no_body(served: Served) -> None:
    result = served.relock()
    assert result.returncode == 0, result.stderr
    assert "no lock changed; no pull request" in result.stderr
    # The watch's news without a pull request: a warning on the run (the example pins demo-torch
    # ==2.10.0 beside 2.10.1).
    assert f"relock: warning: {ENV}: {TORCH_NEWS}\n" in result.stderr
    assert result.stdout == ""  # stdout carries only Actions annotations
    assert not (served.out / "pr-body.md").exists()
    assert not (served.out / "relock.patch").exists()
    assert served.outputs.read_text() == "changed=false\n"
    assert served.git("status", "--porcelain") == ""
    (report,) = json.loads((served.out / "status.json").read_text())["results"]
    assert (report["env"], report["state"], report["drifted"]) == (ENV, "fresh", [])


def test_an_unreachable_remote_is_a_warning_not_a_failure(served: Served) -> None:
    queue = served.example.repos["queue"].path
    hidden = queue.with_name("queue-away")
    queue.rename(hidden)
    try:
        result = served.relock()
    finally:
        hidden.rename(queue)
    assert result.returncode == 0, result.stderr
    assert "relock: warning: demo: source demo-queue: upstream not asked: " in result.stderr
    assert "no lock changed; no pull request" in result.stderr
    assert not (served.out / "pr-body.md").exists()


def test_moved_branch_relocks_that_source_and_writes_the_pr_body(
    served: Served, tmp_path: Path
) -> None:
    before = {name: served.locked(name) for name in ("rollout", "trainer", "post")}
    advisory = {"id": "GHSA-demo-torc-0001", "aliases": [], "fixed_in": ["2.10.1"]}
    answers = stand_in(tmp_path, served.example, {"demo-torch": [advisory]})
    moved = advance_branch(served.example, "trainer", "core_r0.12.0")
    try:
        with serve_directory(answers) as url:
            served.env["ENVGEN_AUDIT_URL"] = url
            result = served.relock()
        assert result.returncode == 0, result.stderr
        assert served.outputs.read_text() == "changed=true\n"
        # Exactly the drifted source moved; the others stay at their locked commits.
        assert served.locked("trainer") == moved
        assert {n: served.locked(n) for n in ("rollout", "post")} == {
            n: before[n] for n in ("rollout", "post")
        }
        assert (served.out / "changed-envs.txt").read_text() == f"{ENV}\n"
        check = json.loads((served.out / "checks" / f"{ENV}.json").read_text())["results"][0]
        steps = {s["name"]: s["status"] for s in check["steps"]}
        assert (
            check["ok"]
            and steps["solve: same pip set"] == "ok"
            and steps["env: install"] == "skipped"
        )

        body = (served.out / "pr-body.md").read_text()
        old, new = before["trainer"], moved
        compare = f"{GITHUB}trainer/compare/{old}...{new}"
        assert (
            f"| {ENV} | `trainer` | `core_r0.12.0` | `{old[:12]}` | `{new[:12]}` | "
            f"[compare]({compare}) |" in body
        )
        assert f"- **{ENV}** (changed): source trainer moved upstream" in body
        heading = "### Upstream says otherwise (`envgen status --watch`)"
        assert f"{heading}\n\n- **{ENV}**: {TORCH_NEWS}\n" in body
        assert f"- **{ENV}**: ok (" in body
        # The audit's finding is in a package the change did not move: counted, not listed.
        audit = body.split("### Known vulnerabilities in what moved (`envgen audit`)\n\n", 1)[1]
        assert audit.startswith("- none in the pip packages this change moved\n- 2 more known")
        # The lock diff follows the summary: the trainer commit change, nothing about rollout or
        # post.
        diff = body.split("### Checks", 1)[1]
        assert "trainer" in diff and old[:12] in diff and new[:12] in diff
        assert "rollout" not in diff and "post" not in diff

        # The patch is what the pull request job applies: locks/ only, onto a clean checkout of the
        # base.
        patch = served.out / "relock.patch"
        files = {
            line.split("\t")[2]
            for line in served.git("apply", "--numstat", str(patch)).splitlines()
        }
        assert all(f.startswith("locks/") for f in files), files
        # The commit moved (and the recipe and exports that name it); the packages did not.
        assert {f"locks/{ENV}.sources.toml", f"locks/{ENV}.install.sh"} <= files
        assert f"locks/{ENV}.yml" not in files
        served.git("stash", "--include-untracked")
        served.git("apply", "--check", str(patch))
        served.git("stash", "pop")
    finally:
        served.git("checkout", "--", "locks")


def test_names_that_are_not_names_are_refused(served: Served, tmp_path: Path) -> None:
    result = served.relock("--update", "--upload-pack=touch x")
    assert result.returncode == 2
    assert "--update: '--upload-pack=touch' is not a name" in result.stderr
    result = served.relock("--envs=--root=/")
    assert result.returncode == 2
    assert "--envs: '--root=/' is not a name" in result.stderr
    result = served.relock("--update", "nosuch")
    assert result.returncode == 2
    assert (
        "--update nosuch: no source pinned from a branch, tag or HEAD has that name"
        in result.stderr
    )
    result = served.relock("--root", str(tmp_path))
    assert result.returncode == 2
    assert f"{tmp_path}: not a git checkout with a commit 'HEAD'" in result.stderr
