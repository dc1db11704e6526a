"""Where a project's inputs and outputs live: env-templates/, channels/, locks/, the cache."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from envgen.errors import InputError
from envgen.names import env_name_problem

if TYPE_CHECKING:
    from envgen.model import Matrix


@dataclass(frozen=True)
class Project:
    """A checkout holding env-templates/, channels/ and locks/."""

    root: Path

    @property
    def templates_dir(self) -> Path:
        return self.root / "env-templates"

    @property
    def channels_dir(self) -> Path:
        return self.root / "channels"

    @property
    def locks_dir(self) -> Path:
        return self.root / "locks"

    def template(self, env: str) -> Path:
        return self.templates_dir / f"{checked_env(env)}.toml"

    def lock_yml(self, env: str) -> Path:
        return self.locks_dir / f"{checked_env(env)}.yml"

    def sources_toml(self, env: str) -> Path:
        return self.locks_dir / f"{checked_env(env)}.sources.toml"

    def install_sh(self, env: str) -> Path:
        return self.locks_dir / f"{checked_env(env)}.install.sh"

    def channel(self, name: str) -> Path:
        return self.channels_dir / f"{name}.toml"

    def channel_files(self, matrix: Matrix) -> dict[str, Path]:
        """The channel and index files a matrix uses, by name."""
        names = [c.name for c in matrix.channels] + [i.name for i in matrix.indexes]
        return {name: self.channel(name) for name in sorted(names)}

    def envs(self) -> list[str]:
        """Every env with a template, sorted."""
        return sorted(p.stem for p in self.templates_dir.glob("*.toml"))

    def known_envs(self, envs: Sequence[str], *, locked: bool = False) -> list[str]:
        """`envs` (every env with a template when none is named) once each checked to exist: a
        template, or with `locked` a lock whose template was removed. An unknown env is bad input,
        found before any work."""
        available = self.envs()
        for env in envs:
            if env in available or (locked and self.lock_yml(env).exists()):
                continue
            listed = ", ".join(available) or f"none (no *.toml in {self.templates_dir})"
            raise InputError(
                f"unknown env {env!r}: no {self.template(env)}; available envs: {listed}",
                hint=f"name one of the available envs, or create env-templates/{env}.toml "
                "(see docs/matrix.md)",
                file=str(self.template(env)),
            )
        if not envs and not available:
            raise InputError(
                f"no env in {self.templates_dir} (no *.toml)",
                hint="add a matrix there (see docs/matrix.md), or run `envgen init` for an example",
                file=str(self.templates_dir),
            )
        return list(envs) or available


# What makes a directory an envgen project: both, as `.git` makes a git checkout.
MARKERS = ("env-templates", "channels")


def is_project(directory: Path) -> bool:
    return all((directory / marker).is_dir() for marker in MARKERS)


def find_project(start: Path) -> Project:
    """The project holding `start`: `start` itself or its nearest parent with env-templates/ and
    channels/, searched upward as git, uv and pixi do, so any subdirectory of a checkout works."""
    start = start.resolve()
    for directory in (start, *start.parents):
        if is_project(directory):
            return Project(directory)
    raise InputError(
        f"no envgen project in {start} or its parents (a project has env-templates/ and channels/)",
        hint="run `envgen init` to start one here, or run envgen inside a project (or pass "
        "--root DIR)",
    )


def checked_env(env: str) -> str:
    """`env` when it is a name; a path (`../x`) would escape env-templates/, locks/ and the per-env
    mutex."""
    problem = env_name_problem(env)
    if problem:
        raise InputError(
            problem, hint="name an env by its file name in env-templates/ without .toml, e.g. `a5`"
        )
    return env


# What envgen keeps in its cache directory, and nothing else (`envgen cache clean` removes these):
CACHE_ENTRIES = (
    "advisories",  # the PyPI JSON API's answers by name and version (resolve/pypi/advisories.py)
    "archives",  # release archives and their wheels, by sha256 (resolve/archives/members.py)
    "artifacts",  # the files a bundle packs, by sha256 (bundle/downloads.py)
    "bytecode",  # python bytecode of installed sources, by sha256 (installer/bytecode.py)
    "conda",  # channels' repodata (resolve/conda/stage.py) and packages (installer/)
    "git",  # bare repositories of the sources (resolve/git/cache.py)
    "lock-documents",  # the parsed yml and sources.toml read before (lockio/lock_documents.py)
    "pip",  # pip's cache of the installs (installer/)
    "pypi-metadata",  # package metadata by sha256 (resolve/pypi/indexes.py)
    "source-metadata",  # a source's dependencies at a tree (resolve/sources/metadata.py)
    "uv",  # uv's cache (resolve/pypi/uv_compile.py, installer/)
)


def cache_dir() -> Path:
    """envgen's cache (CACHE_ENTRIES): $ENVGEN_CACHE_DIR or the user cache directory."""
    if os.environ.get("ENVGEN_CACHE_DIR"):
        return Path(os.environ["ENVGEN_CACHE_DIR"])
    import platformdirs  # imported here: only a run that resolves or installs needs the cache

    return Path(platformdirs.user_cache_dir("envgen"))
