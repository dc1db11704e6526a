"""The hosted halves of the workflows, ci/relock-pr.sh and ci/npu-watchdog.sh, with real git and
bash.

GitHub's API is out of reach here: a `gh` executable on PATH stands in for it, recording each call
and answering `pr list` and `api .../jobs` from files the test writes. Everything else (git apply,
commit, push to a bare origin, the scripts' own decisions) is the real thing.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from envgen.example.gitrepos import GitRepo

REPO = Path(__file__).resolve().parents[2]

GH = """#!/bin/sh
printf '%s\\n' "$*" >> "$GH_LOG"
case "$1 $2" in
    "pr list") cat "$GH_DIR/pr-number" 2>/dev/null || true ;;
    "api --paginate") cat "$GH_DIR/jobs" ;;
esac
"""


@pytest.fixture
def gh(tmp_path: Path) -> dict[str, str]:
    """An environment whose PATH starts with the recording `gh`."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "gh").write_text(GH)
    (bin_dir / "gh").chmod(0o755)
    return {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "GH_LOG": str(tmp_path / "gh.log"),
        "GH_DIR": str(tmp_path),
        "GH_TOKEN": "unused",
        "REPO": "owner/envgen",
    }


def calls(tmp_path: Path) -> list[str]:
    log = tmp_path / "gh.log"
    return log.read_text().splitlines() if log.exists() else []


# --- ci/relock-pr.sh
# -----------------------------------------------------------------------------------------


@pytest.fixture
def checkout(tmp_path: Path, gh: dict[str, str]) -> tuple[Path, Path]:
    """A checkout of `main` whose origin is a bare repository, and ci/relock.py's outputs for a
    moved lock."""
    upstream = GitRepo.create(
        tmp_path / "upstream", {"locks/demo.sources.toml": 'commit = "aaa"\n'}
    )
    upstream.git("branch", "-M", "main")
    subprocess.run(
        ["git", "clone", "-q", "--bare", str(upstream.path), str(tmp_path / "origin.git")],
        check=True,
    )
    work = tmp_path / "work"
    subprocess.run(["git", "clone", "-q", str(tmp_path / "origin.git"), str(work)], check=True)
    out = tmp_path / "relock-out"
    out.mkdir()
    (work / "locks" / "demo.sources.toml").write_text('commit = "bbb"\n')
    (work / "locks" / "new.yml").write_text("version: 1\n")
    subprocess.run(["git", "add", "-N", "locks/new.yml"], cwd=work, check=True)
    patch = subprocess.run(
        ["git", "diff", "--binary"], cwd=work, check=True, capture_output=True
    ).stdout
    (out / "relock.patch").write_bytes(patch)
    subprocess.run(["git", "reset", "-q", "--hard"], cwd=work, check=True)
    (out / "pr-body.md").write_text("## Re-lock\n")
    (out / "changed-envs.txt").write_text("demo\nnew\n")
    return work, out


def relock_pr(work: Path, out: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    script = REPO / "ci" / "relock-pr.sh"
    return subprocess.run(
        ["bash", str(script), str(out)],
        cwd=work,
        env={**env, "BASE": "main"},
        capture_output=True,
        text=True,
    )


def test_relock_pr_pushes_the_branch_and_opens_the_pull_request(
    checkout: tuple[Path, Path], gh: dict[str, str], tmp_path: Path
) -> None:
    work, out = checkout
    result = relock_pr(work, out, gh)
    assert result.returncode == 0, result.stderr
    origin = GitRepo(tmp_path / "origin.git")
    assert origin.git("show", "envgen/relock:locks/demo.sources.toml") == 'commit = "bbb"'
    assert origin.git("show", "envgen/relock:locks/new.yml") == "version: 1"
    assert origin.git("log", "--format=%s", "-1", "envgen/relock").strip() == "Re-lock demo new"
    assert origin.git("rev-parse", "envgen/relock^") == origin.git("rev-parse", "main")
    assert calls(tmp_path)[-1] == (
        f"pr create --repo owner/envgen --head envgen/relock --base main --title Re-lock demo new "
        f"--body-file {out}/pr-body.md"
    )


def test_relock_pr_updates_the_open_pull_request(
    checkout: tuple[Path, Path], gh: dict[str, str], tmp_path: Path
) -> None:
    work, out = checkout
    (tmp_path / "pr-number").write_text("42\n")
    result = relock_pr(work, out, gh)
    assert result.returncode == 0, result.stderr
    assert "updated pull request #42" in result.stdout
    assert calls(tmp_path)[-1] == f"pr edit 42 --repo owner/envgen --body-file {out}/pr-body.md"


def test_relock_pr_refuses_a_patch_outside_locks(
    checkout: tuple[Path, Path], gh: dict[str, str], tmp_path: Path
) -> None:
    work, out = checkout
    patch = out / "relock.patch"
    patch.write_bytes(patch.read_bytes().replace(b"locks/new.yml", b".github/workflows/new.yml"))
    result = relock_pr(work, out, gh)
    assert result.returncode == 1
    assert "the patch touches .github/workflows/new.yml, outside locks/; refusing" in result.stderr
    assert calls(tmp_path) == []
    assert "envgen/relock" not in GitRepo(tmp_path / "origin.git").git("branch", "--list")


def test_relock_pr_refuses_a_rename_from_outside_locks(
    checkout: tuple[Path, Path], gh: dict[str, str], tmp_path: Path
) -> None:
    # `git apply --numstat` names only the new side of a rename: moving README into locks/ deletes
    # it.
    work, out = checkout
    (work / "README").write_text("envgen\n")
    GitRepo(work).git("add", "README")
    GitRepo(work).git(
        "-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-q", "-m", "readme"
    )
    rename = b"diff --git a/README b/locks/readme.yml\nsimilarity index 100%\nrename from README\n"
    rename += b"rename to locks/readme.yml\n"
    (out / "relock.patch").write_bytes((out / "relock.patch").read_bytes() + rename)
    result = relock_pr(work, out, gh)
    assert result.returncode == 1
    assert "the patch touches README, outside locks/; refusing" in result.stderr
    assert calls(tmp_path) == []
    assert "envgen/relock" not in GitRepo(tmp_path / "origin.git").git("branch", "--list")


def _patch_adding(work: Path, out: Path, add: Callable[[GitRepo], None]) -> None:
    """relock.patch replaced by the diff of what `add` stages in the checkout (then undone)."""
    repo = GitRepo(work)
    add(repo)
    diff = ["git", "diff", "--cached", "--binary"]
    patch = subprocess.run(diff, cwd=work, check=True, capture_output=True).stdout
    (out / "relock.patch").write_bytes(patch)
    repo.git("reset", "-q", "--hard")
    subprocess.run(["git", "clean", "-qfdx"], cwd=work, check=True)


def _symlink(repo: GitRepo) -> None:
    (repo.path / "locks" / "passwd").symlink_to("/etc/passwd")
    repo.git("add", "locks/passwd")


def _gitlink(repo: GitRepo) -> None:
    repo.git("update-index", "--add", "--cacheinfo", f"160000,{repo.rev()},locks/vendored")


def _gitattributes(repo: GitRepo) -> None:
    (repo.path / "locks" / ".gitattributes").write_text("*.yml filter=evil\n")
    repo.git("add", "locks/.gitattributes")


@pytest.mark.parametrize(
    ("add", "message"),
    [
        (_symlink, "the patch makes locks/passwd mode 120000, not a regular file"),
        (_gitlink, "the patch makes locks/vendored mode 160000, not a regular file"),
        (_gitattributes, "the patch touches locks/.gitattributes, one of git's own files"),
    ],
    ids=["symlink", "gitlink", "gitattributes"],
)
def test_relock_pr_accepts_only_regular_files_under_locks(
    checkout: tuple[Path, Path],
    gh: dict[str, str],
    tmp_path: Path,
    add: Callable[[GitRepo], None],
    message: str,
) -> None:
    work, out = checkout
    _patch_adding(work, out, add)
    result = relock_pr(work, out, gh)
    assert result.returncode == 1, result.stderr
    assert f"relock-pr: {message}; refusing" in result.stderr, result.stderr
    assert calls(tmp_path) == []
    assert "envgen/relock" not in GitRepo(tmp_path / "origin.git").git("branch", "--list")
    # applied to the index only: nothing of the patch reached the work tree
    assert sorted(p.name for p in (work / "locks").iterdir()) == ["demo.sources.toml"]


# --- ci/npu-watchdog.sh
# --------------------------------------------------------------------------------------


def watchdog(
    env: dict[str, str], tmp_path: Path, jobs: str, expected: int
) -> subprocess.CompletedProcess[str]:
    (tmp_path / "jobs").write_text(jobs)
    settings = {"RUN_ID": "7", "EXPECTED": str(expected), "QUEUE_MINUTES": "0", "POLL_SECONDS": "0"}
    settings["GITHUB_STEP_SUMMARY"] = str(tmp_path / "summary.md")
    return subprocess.run(
        ["bash", str(REPO / "ci" / "npu-watchdog.sh")],
        env={**env, **settings},
        capture_output=True,
        text=True,
    )


def test_watchdog_is_done_when_every_check_job_has_a_runner(
    gh: dict[str, str], tmp_path: Path
) -> None:
    jobs = (
        "in_progress\tcheck a2 on linux-aarch64-a2b3-8\ncompleted\tcheck a3 on linux-aarch64-a3-8\n"
    )
    result = watchdog(gh, tmp_path, jobs, expected=2)
    assert result.returncode == 0, result.stderr
    assert "all 2 check jobs got a runner" in result.stdout
    assert calls(tmp_path) == [
        "api --paginate repos/owner/envgen/actions/runs/7/jobs --jq "
        '.jobs[] | select(.name | startswith("check ")) | "\\(.status)\\t\\(.name)"'
    ]


def test_watchdog_names_the_jobs_left_queued_and_cancels_the_run(
    gh: dict[str, str], tmp_path: Path
) -> None:
    jobs = "completed\tcheck a2 on linux-aarch64-a2b3-8\nqueued\tcheck a5 on linux-aarch64-a5-8\n"
    result = watchdog(gh, tmp_path, jobs, expected=2)
    assert result.returncode == 1
    summary = (tmp_path / "summary.md").read_text()
    assert "within 0 minutes" in summary
    assert "- check a5 on linux-aarch64-a5-8\n" in summary and "a2" not in summary
    assert calls(tmp_path)[-1] == "run cancel 7 --repo owner/envgen"
