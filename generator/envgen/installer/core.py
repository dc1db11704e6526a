"""The core of an install: a lock's artifacts read through a Source, the env they go into made by a
Destination, the pip part handed to an Installer (pip or uv), the recipe last. This module only
orders the steps: every artifact is located and the recipe checked before the env is touched."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from envgen.credentials import NO_CREDENTIALS, Credentials
from envgen.errors import InputError, ToolError, VerificationError
from envgen.lockio.integrity import recipe_problem, repair_hint
from envgen.model import CondaEntry, Lock, PipEntry
from envgen.process import Runner, run, tail
from envgen.redact import redact_text

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Request:
    """What to install of a lock: one platform's part, the activation profiles, and whether the
    sources that need CANN are left out."""

    lock: Lock
    platform: str
    profiles: tuple[str, ...] = ()
    skip_cann: bool = False


@dataclass(frozen=True)
class CondaPart:
    """One platform's conda packages, their URLs where the source has them, and the credentials
    their hosts are sent."""

    entries: tuple[CondaEntry, ...]
    credentials: Credentials = NO_CREDENTIALS


@dataclass(frozen=True)
class PipPart:
    """What pip or uv installs one platform's pip packages from: a hash-pinned file naming exactly
    `entries`, and for local artifacts the directory holding them (then no index is asked)."""

    requirements: Path
    entries: tuple[PipEntry, ...]
    find_links: Path | None = None
    trusted: tuple[str, ...] = ()  # hosts whose TLS is not verified, as the lock's indexes allow
    credentials: Credentials = NO_CREDENTIALS


@dataclass(frozen=True)
class Recipe:
    """The recipe that installs the git sources: its file, its text (checked against the lock
    before anything is installed), and the environment and credentials its git is given."""

    path: Path
    text: str
    environ: Mapping[str, str]
    credentials: Credentials = NO_CREDENTIALS


class Installer(Protocol):
    """What installs the pip part: pip or uv (tools.py), each reading its own file of the lock."""

    @property
    def name(self) -> str: ...

    @property
    def runs_env_pip(self) -> bool:
        """Whether it installs by running the env's own pip (then a venv's pip is worth compiling:
        Venv.compiled)."""
        ...

    def derived_file(self, env: str, platform: str) -> str:
        """The name in locks/ of the file this tool installs from."""
        ...

    def install(self, python: Path, part: PipPart) -> None: ...

    def recipe_options(self) -> RecipeOptions:
        """What the recipe is given to install the sources with this tool too."""
        ...


@dataclass(frozen=True)
class RecipeOptions:
    """The recipe's arguments and variables that make it install with an installer (`--uv UV`):
    the process's variables that start with one of `replaced` are dropped first (the installer's
    own configuration, which `environ` then sets as envgen sets it for its own runs)."""

    args: tuple[str, ...] = ()
    environ: Mapping[str, str] = dataclasses.field(default_factory=dict)
    replaced: tuple[str, ...] = ()

    def environment(self, base: Mapping[str, str]) -> dict[str, str]:
        """`base` as the recipe gets it: without the `replaced` variables, with `environ`."""
        return {
            **{k: v for k, v in base.items() if not k.startswith(self.replaced)},
            **self.environ,
        }


class Source(Protocol):
    """Where a lock's artifacts and recipe come from: its indexes and channels, or verified local
    files (sources.py)."""

    def recipe(self, lock: Lock) -> Recipe: ...

    def conda(self, lock: Lock, platform: str) -> CondaPart: ...

    def pip(self, lock: Lock, platform: str, installer: Installer) -> PipPart | None:
        """The pip part of `platform` as `installer` takes it (None: the lock has none)."""
        ...

    def archives(self, lock: Lock, platform: str) -> AbstractContextManager[Path | None]:
        """While open, a directory of the wheels the lock takes out of release archives on
        `platform` (the recipe's --archives), each checked against the lock on entry; None when
        the platform has none."""
        ...


class Destination(Protocol):
    """The env an install makes or updates: a conda prefix or a venv (destinations.py)."""

    @property
    def path(self) -> Path: ...

    @property
    def kind(self) -> str:
        """How messages name it: "conda prefix", "venv"."""
        ...

    @property
    def takes_conda(self) -> bool:
        """Whether the lock's conda part goes into it."""
        ...

    @property
    def python(self) -> Path: ...

    def create(self, lock: Lock, platform: str, conda: CondaPart) -> None:
        """Make the env (or reuse it), with `conda` in it when it takes the conda part; its python
        must install into it."""
        ...

    def activation(self, env: str) -> str:
        """The shell commands that activate the env of `env`'s lock."""
        ...


def install(
    request: Request,
    source: Source,
    destination: Destination,
    installer: Installer,
    *,
    runner: Runner = run,
) -> None:
    """Install what `request` asks of its lock from `source` into `destination`: the conda part
    (where the destination takes it), the pip part by `installer`, then the recipe through
    `runner`. The request, the recipe and every artifact are checked before the destination is
    touched: a source lacking an artifact or an edited recipe fails with nothing installed."""
    lock, platform = request.lock, request.platform
    check_request(request)
    check_destination(lock, destination)
    recipe = source.recipe(lock)
    verify_recipe(lock, recipe)
    conda = source.conda(lock, platform) if destination.takes_conda else CondaPart(())
    pip = source.pip(lock, platform, installer)
    with source.archives(lock, platform) as archives:
        destination.create(lock, platform, conda)
        if pip is not None:
            log.info(
                "installing %d pip packages with %s from %s into %s",
                len(pip.entries),
                installer.name,
                pip.requirements,
                destination.path,
            )
            installer.install(destination.python, pip)
        log.info("running %s on %s", recipe.path.name, destination.path)
        options = installer.recipe_options()
        run_recipe(recipe, destination.path, request, runner, archives=archives, options=options)


def check_request(request: Request) -> None:
    """The platform and profiles asked for must be the lock's."""
    lock, platform = request.lock, request.platform
    if platform not in lock.platforms:
        raise InputError(
            f"the lock of {lock.env} has no {platform} part (it has {', '.join(lock.platforms)})",
            hint=f"add {platform} to [env] platforms and re-lock",
            platform=platform,
        )
    known = [p.name for p in lock.profiles]
    unknown = [p for p in request.profiles if p not in known]
    if unknown:
        listed = ", ".join(known) or "none"
        raise InputError(
            f"the lock of {lock.env} has no profile {', '.join(map(repr, unknown))}",
            hint=f"known profiles: {listed} (they are [activation.profiles] in the matrix)",
            key="--profile",
            reason=f"no profile {', '.join(map(repr, unknown))}",
        )


def check_destination(lock: Lock, destination: Destination) -> None:
    """A lock without a conda part (a matrix without [conda]) installs into a venv only."""
    if destination.takes_conda and not lock.has_conda:
        raise InputError(
            f"the lock of {lock.env} has no conda part (its matrix has no [conda]), so it cannot "
            f"install into the {destination.kind} {destination.path}",
            hint=f"install it into a venv with --venv (a python {lock.python} runs envgen)",
        )


def verify_recipe(lock: Lock, recipe: Recipe) -> None:
    """The recipe about to run must be what the lock renders (the rule: lockio/integrity.py): it is
    derived, never edited."""
    problem = recipe_problem(lock, recipe.text, str(recipe.path))
    if problem is not None:
        raise VerificationError(problem, hint=repair_hint(lock.env))


def run_recipe(
    recipe: Recipe,
    prefix: Path,
    request: Request,
    runner: Runner = run,
    *,
    archives: Path | None = None,
    options: RecipeOptions = RecipeOptions(),
) -> str:
    """Run the recipe on `prefix` with the request's profiles (and `archives`, the directory of
    the archives' wheels; `options`, the installer's); returns its log (stderr). The git sources'
    credentials reach its git through the environment (`http.<url>.extraHeader`), as they reach
    envgen's own git."""
    cmd = ["sh", str(recipe.path), "--prefix", str(prefix)]
    for name in request.profiles:
        cmd += ["--profile", name]
    lock = request.lock
    # The recipe of an env without CANN has no --skip-cann: there is nothing to skip.
    if request.skip_cann and (lock.cann or any(s.source.needs_cann for s in lock.sources)):
        cmd.append("--skip-cann")
    if archives is not None:
        cmd += ["--archives", str(archives)]
    cmd += options.args
    env = recipe.credentials.git_environment(options.environment(recipe.environ))
    secrets = recipe.credentials.secrets
    proc = runner(cmd, env=env, check=False, secrets=secrets)
    if proc.returncode != 0:
        output = redact_text(tail(proc.stderr + proc.stdout), secrets)
        raise ToolError(
            f"{recipe.path} --prefix {prefix} failed (exit {proc.returncode}):\n{output}",
            hint="the last lines above name the source and step; fix it and run again",
        )
    return proc.stderr
