"""Build real git repositories with deterministic commits, tags and branches, for tests and `envgen
demo`."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import tomli_w

from envgen.process import run

# Every commit is made by this identity at EPOCH + one minute per commit already in the repository,
# so the same sequence of builder calls gives the same shas on every machine.
IDENTITY = ("envgen fixtures", "fixtures@envgen.invalid")
EPOCH = 1_700_000_000


def _git_env() -> dict[str, str]:
    """The machine's environment minus its git configuration, which must not shape fixture repos."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull, GIT_TERMINAL_PROMPT="0", LC_ALL="C"
    )
    # A fixture repository is a few small commits: no `git maintenance` after each one.
    env.update(
        GIT_CONFIG_COUNT="1", GIT_CONFIG_KEY_0="maintenance.auto", GIT_CONFIG_VALUE_0="false"
    )
    return env


@dataclass(frozen=True)
class GitRepo:
    """A non-bare repository on disk; `url` is its file:// URL."""

    path: Path

    @property
    def url(self) -> str:
        return self.path.resolve().as_uri()

    @classmethod
    def create(
        cls,
        path: Path,
        files: Mapping[str, str],
        *,
        branch: str = "main",
        allow_sha_wants: bool = True,
    ) -> GitRepo:
        """A new repository whose first commit on `branch` holds `files`.

        `allow_sha_wants` lets clients fetch any commit by sha (as GitHub does); without it a
        protocol-v0 client must fall back to fetching whole refs.
        """
        path.mkdir(parents=True, exist_ok=True)
        repo = cls(path)
        repo.git("init", "--quiet", f"--initial-branch={branch}")
        if allow_sha_wants:
            # any object, so any reachable one too (uploadpack.allowReachableSHA1InWant)
            repo.git("config", "uploadpack.allowAnySHA1InWant", "true")
        repo.commit(files, "initial commit")
        return repo

    def git(self, *args: str, env: Mapping[str, str] | None = None) -> str:
        full = _git_env()
        full.update(env or {})
        return run(["git", *args], cwd=self.path, env=full).stdout.strip()

    def rev(self, ref: str = "HEAD") -> str:
        """The commit `ref` points to (tags peeled)."""
        return self.git("rev-parse", f"{ref}^{{commit}}")

    def commit(
        self, files: Mapping[str, str | None], message: str, *, branch: str | None = None
    ) -> str:
        """Commit `files` (None deletes one) on `branch` (created from HEAD if new; default: the
        current one)."""
        if branch is not None:
            exists = self.git("branch", "--list", branch)
            self.git("checkout", "--quiet", *(() if exists else ("-b",)), branch)
        removed = [name for name, text in files.items() if text is None]
        for name, text in files.items():
            if text is not None:
                (self.path / name).parent.mkdir(parents=True, exist_ok=True)
                (self.path / name).write_text(text)
        if removed:
            self.git("rm", "--quiet", "--", *removed)
        if added := [name for name, text in files.items() if text is not None]:
            self.git("add", "--", *added)
        self.git("commit", "--quiet", "--allow-empty", "-m", message, env=self._stamp())
        return self.rev()

    def submodule(self, path: str, url: str, commit: str, message: str) -> str:
        """Commit a submodule at `path`: a gitlink to `commit` of `url` and its .gitmodules entry,
        as `git submodule add` records them (without cloning it)."""
        gitmodules = self.path / ".gitmodules"
        known = gitmodules.read_text() if gitmodules.exists() else ""
        gitmodules.write_text(f'{known}[submodule "{path}"]\n\tpath = {path}\n\turl = {url}\n')
        self.git("add", "--", ".gitmodules")
        self.git("update-index", "--add", "--cacheinfo", f"160000,{commit},{path}")
        return self.commit({}, message)

    def checkout(self, branch: str) -> None:
        self.git("checkout", "--quiet", branch)

    def branch(self, name: str, start: str = "HEAD") -> str:
        """Create or move branch `name` to `start` without checking it out."""
        self.git("branch", "--force", name, start)
        return self.rev(name)

    def tag(self, name: str, ref: str = "HEAD", *, message: str | None = None) -> str:
        """A lightweight tag, or an annotated one when `message` is given; returns the tagged
        commit."""
        if message is None:
            self.git("tag", name, ref)
        else:
            self.git("tag", "--annotate", "-m", message, name, ref, env=self._stamp())
        return self.rev(name)

    def delete_branch(self, name: str) -> None:
        self.git("branch", "--delete", "--force", name)

    def _stamp(self) -> dict[str, str]:
        date = f"@{EPOCH + 60 * int(self.git('rev-list', '--all', '--count'))} +0000"
        name, email = IDENTITY
        return {
            "GIT_AUTHOR_NAME": name,
            "GIT_AUTHOR_EMAIL": email,
            "GIT_AUTHOR_DATE": date,
            "GIT_COMMITTER_NAME": name,
            "GIT_COMMITTER_EMAIL": email,
            "GIT_COMMITTER_DATE": date,
        }


def side_commit(
    repo: GitRepo, branch: str, files: Mapping[str, str | None], message: str, *, start: str
) -> str:
    """A commit on a new branch forked from `start`, for cherry-picking; the current branch is
    restored."""
    current = repo.git("rev-parse", "--abbrev-ref", "HEAD")
    repo.branch(branch, start)
    sha = repo.commit(files, message, branch=branch)
    repo.checkout(current)
    return sha


def python_project(
    path: Path,
    name: str,
    version: str = "0.1.0",
    *,
    dependencies: tuple[str, ...] = (),
    files: Mapping[str, str] | None = None,
    branch: str = "main",
) -> GitRepo:
    """A setuptools project `name` (package `name` with `__version__`), pip-installable with
    `-e`."""
    package = name.replace("-", "_").lower()
    pyproject = tomli_w.dumps(
        {
            "build-system": {
                "requires": ["setuptools>=61"],
                "build-backend": "setuptools.build_meta",
            },
            "project": {"name": name, "version": version, "dependencies": list(dependencies)},
            "tool": {"setuptools": {"packages": [package]}},
        }
    )
    tree = {"pyproject.toml": pyproject, f"{package}/__init__.py": f'__version__ = "{version}"\n'}
    tree.update(files or {})
    return GitRepo.create(path, tree, branch=branch)
