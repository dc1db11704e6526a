"""The envs an install makes: a conda prefix of the lock's conda part (rattler), or a venv of this
interpreter (seeded by uv from ensurepip's own wheels); either's python must install into it."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from shlex import quote

from uv import find_uv_bin

from envgen.errors import InputError, VerificationError
from envgen.inputs.files import read_input_text
from envgen.installer.bytecode import compile_sources
from envgen.installer.conda import install_conda
from envgen.installer.core import CondaPart, Destination
from envgen.installer.interpreter import run_interpreter
from envgen.installer.tools import tool_environment
from envgen.model import Lock
from envgen.process import run
from envgen.resolve.settings import Settings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CondaPrefix:
    """A conda prefix: rattler installs the lock's conda part, whose python must be the prefix's
    own (packages are downloaded into the cache of `settings`, within its network limits)."""

    path: Path
    settings: Settings
    kind: str = "conda prefix"
    takes_conda: bool = True

    @property
    def python(self) -> Path:
        return self.path / "bin" / "python"

    def create(self, lock: Lock, platform: str, conda: CondaPart) -> None:
        install_conda(
            conda.entries,
            self.path,
            cache=self.settings.cache,
            limits=self.settings.limits,
            credentials=conda.credentials,
        )
        if not self.python.exists():
            part = f"the conda part of the lock of {lock.env} for {platform}"
            raise VerificationError(
                f"{part} put no python at {self.python}",
                hint="add `python X.Y.*` to [conda] specs and re-lock, or install into a venv of "
                "this python with --venv",
                package="python",
            )
        ensure_own_python(self.path, self.settings)
        compile_noarch_python(self.path, self.settings)

    def activation(self, env: str) -> str:
        return conda_activation(self.path, env)


def conda_activation(prefix: Path, env: str) -> str:
    """The line that activates the conda prefix `prefix` of `env` without conda."""
    hook = prefix / "etc" / "conda" / "activate.d" / f"envgen-{env}.sh"
    return f'export PATH={quote(str(prefix / "bin"))}:"$PATH"; . {quote(str(hook))}'


def venv_activation(prefix: Path) -> str:
    """The line that activates the venv `prefix`: its own activate script."""
    return f". {quote(str(prefix / 'bin' / 'activate'))}"


@dataclass(frozen=True)
class Venv:
    """A venv made by `interpreter` (this one by default), whose version must be the lock's; the
    lock's conda part is not installed. Its python is asked in `settings`."""

    path: Path
    settings: Settings
    interpreter: str = sys.executable
    # Whether its seed packages get their bytecode: worth it where pip installs the env (it runs
    # once per source), not where uv does (pip then runs once, for pip check).
    compiled: bool = True
    kind: str = "venv"
    takes_conda: bool = False

    @property
    def python(self) -> Path:
        return self.path / "bin" / "python"

    def create(self, lock: Lock, platform: str, conda: CondaPart) -> None:
        del conda  # a venv takes none
        bytecode = self.settings.cache if self.compiled else None
        create_venv(self.path, lock, platform, python=self.interpreter, bytecode=bytecode)
        ensure_own_python(self.path, self.settings)

    def activation(self, env: str) -> str:
        del env  # a venv's own activate script
        return venv_activation(self.path)


def destination(
    path: Path, *, venv: bool, settings: Settings, compiled: bool = True
) -> Destination:
    """The env `install` and `check` make at `path`, in `settings`: a venv with `--venv` (its seeds
    `compiled` or not, see Venv), else a conda prefix."""
    if venv:
        return Venv(path.absolute(), settings, compiled=compiled)
    return CondaPrefix(path.absolute(), settings)


def ensure_own_python(prefix: Path, settings: Settings) -> None:
    """The prefix's python must install into the prefix: one that runs another interpreter's
    installation (a wrapper of a python elsewhere) would put the pip part there."""
    python = prefix / "bin" / "python"
    probe = [str(python), "-c", "import sys; print(sys.prefix)"]
    proc = run_interpreter(probe, env=tool_environment(settings), check=False)
    runs_in = proc.stdout.strip()
    if proc.returncode != 0 or Path(runs_in).resolve() != prefix.resolve():
        where = f"runs with sys.prefix {runs_in}" if proc.returncode == 0 else "does not run"
        landing = "pip packages installed through it would land elsewhere"
        raise VerificationError(
            f"{python} {where}, not {prefix}: {landing}",
            hint="the lock's conda python is not an interpreter of its own prefix (a wrapper "
            "around another python?): fix that package on its channel and re-lock, or install "
            "into a venv of this python with --venv",
        )


def compile_noarch_python(prefix: Path, settings: Settings) -> None:
    """The bytecode of the packages in the prefix that ship python sources without it (`noarch:
    python` ones: a bundle's records name their subdir as the platform's), by the prefix's own
    python (bytecode.py), as conda compiles them when it links them (rattler does not)."""
    sources = [
        prefix / name
        for record in sorted((prefix / "conda-meta").glob("*.json"))
        for name in _uncompiled(record)
    ]
    python = prefix / "bin" / "python"
    compile_sources(python, sources, settings.cache, tool_environment(settings))


def _uncompiled(record: Path) -> list[str]:
    """The python sources of one conda-meta record that ships no bytecode, each a plain path inside
    the prefix; none for a record that is not a regular file of JSON naming its files (compiling is
    only a speed-up: such a package's sources compile when imported)."""
    try:
        files = json.loads(read_input_text(record, hint="")).get("files")
    except (InputError, ValueError, AttributeError) as exc:
        log.debug("%s: not read for compiling (%s)", record, exc)
        return []
    if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
        return []
    if any(f.endswith(".pyc") for f in files):
        return []
    return [
        f
        for f in files
        if f.endswith(".py")
        and "/site-packages/" in f
        and "\n" not in f
        and not PurePosixPath(f).is_absolute()
        and ".." not in PurePosixPath(f).parts
    ]


def create_venv(
    prefix: Path,
    lock: Lock,
    platform: str,
    *,
    python: str = sys.executable,
    bytecode: Path | None = None,
) -> None:
    """A venv at `prefix` made by `python` (this interpreter by default), whose version must be the
    locked one; its seeds compiled from the cache `bytecode`, or not compiled (make_venv)."""
    wanted = lock.python_for(platform)
    if wanted is None:
        unchecked = "so a venv cannot be checked against it"
        raise InputError(
            f"the lock of {lock.env} holds no single python for {platform}, {unchecked}",
            hint="add `python X.Y.*` to [conda] specs and re-lock, or install without --venv",
            platform=platform,
            package="python",
        )
    proc = run_interpreter([python, "-c", PROBE])
    have, _, bundled = proc.stdout.strip().partition("\n")
    if have.split(".")[:2] != wanted.split(".")[:2]:
        minor = ".".join(wanted.split(".")[:2])
        other = ", or install without --venv" if lock.has_conda else " (the lock has no conda part)"
        locked = f"the lock of {lock.env} has python {wanted} for {platform}"
        raise InputError(
            f"{python} is python {have}, but {locked}",
            hint=f"run envgen with a python {minor} interpreter{other}",
            package="python",
        )
    if (prefix / "pyvenv.cfg").is_file():
        log.info("reusing the venv at %s", prefix)
        return
    if prefix.exists() and any(prefix.iterdir()):
        hint = "choose an empty or new directory for --prefix"
        reason = "exists and is not a venv"
        raise InputError(f"{prefix} {reason}", hint=hint, file=str(prefix), reason=reason)
    log.info("creating a venv (python %s) at %s", have, prefix)
    seeds = sorted(Path(bundled).glob("*.whl")) if bundled else []
    make_venv(python, prefix, seeds, bytecode=bytecode)


# The interpreter's version, and the directory of the wheels its ensurepip installs (pip; setuptools
# up to 3.11), empty where a distribution has removed ensurepip's copies (Debian's python3-venv
# ships them elsewhere).
PROBE = """import os, sys
print('%d.%d.%d' % sys.version_info[:3])
try:
    import ensurepip
    bundled = os.path.join(os.path.dirname(ensurepip.__file__), '_bundled')
    print(bundled if os.path.isdir(bundled) else '')
except ImportError:
    print('')
"""


def make_venv(
    python: str, prefix: Path, seeds: Sequence[Path], *, bytecode: Path | None = None
) -> None:
    """`python -m venv` at `prefix` with the wheels ensurepip would install, put there by uv from
    those same files.

    ensurepip runs pip to install pip, about 3 s of CPU per venv; uv installs the same wheels in
    a fifth of that when it does not compile them. Without those wheels at hand, venv seeds itself
    as usual (and compiled).

    `bytecode`: the cache the seeds' bytecode comes from (bytecode.py), as ensurepip leaves them
    compiled; compiling them costs about 2.5 s of CPU, the first time on a machine. Where pip
    installs the env it runs once per source, and where PYTHONDONTWRITEBYTECODE is set (many
    container images) each run would otherwise compile pip anew, about 0.5 s of CPU apiece; where
    uv installs it (None), pip runs once (pip check), and compiles on import only what that
    imports."""
    if not seeds:
        run_interpreter([python, "-m", "venv", str(prefix)])
        return
    run_interpreter([python, "-m", "venv", "--without-pip", str(prefix)])
    offline = ["--no-config", "--offline", "--no-index", "--no-cache", "--no-deps", "--quiet"]
    python_of_venv = prefix / "bin" / "python"
    into = ["--python", str(python_of_venv)]
    run([find_uv_bin(), "pip", "install", *offline, *into, *map(str, seeds)])
    if bytecode is not None:
        # a new venv: its site-packages hold the seeds alone
        sources = sorted(prefix.glob("lib/python*/site-packages/**/*.py"))
        compile_sources(python_of_venv, sources, bytecode)
