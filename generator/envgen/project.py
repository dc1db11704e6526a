"""Where a project's inputs and outputs live: env-templates/, channels/, locks/, the cache."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import platformdirs

from envgen.errors import InputError
from envgen.inputs.untrusted import env_name_problem

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


def checked_env(env: str) -> str:
    """`env` when it is a name; a path (`../x`) would escape env-templates/, locks/ and the per-env mutex."""
    problem = env_name_problem(env)
    if problem:
        raise InputError(problem, hint="name an env by its file name in env-templates/ without .toml, e.g. `a5`")
    return env


def cache_dir() -> Path:
    """envgen's cache (git objects, uv cache, conda packages): $ENVGEN_CACHE_DIR or the user cache dir."""
    return Path(os.environ.get("ENVGEN_CACHE_DIR") or platformdirs.user_cache_dir("envgen"))
