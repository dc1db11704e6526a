"""One `uv pip compile` run: the generated project and uv.toml, uv's environment, its failures
explained."""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import tomli_w
from packaging.requirements import Requirement as Pep508

from envgen import network, platforms
from envgen.errors import (
    ConflictError,
    EnvgenError,
    NetworkError,
    ResolutionError,
    ToolError,
    Unreached,
)
from envgen.inputs.channels import IndexAccess
from envgen.model import Matrix, Origin, TracedRequirement
from envgen.names import package_key
from envgen.process import Running, TimedOut, start, tail
from envgen.redact import redact_text, redact_url
from envgen.resolve.preferences import Preference, render_pylock
from envgen.resolve.pypi.overrides import global_overrides
from envgen.resolve.settings import Settings
from envgen.scratch import scratch_dir
from envgen.urls import index_of

log = logging.getLogger(__name__)

INPUTS_PROJECT = "envgen-inputs"
# Variables uv may need to reach an index (TLS roots, proxies); nothing else of the caller's env is
# passed.
_PROXY_ENV = ("ALL_PROXY", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY")
_PASSED_ENV = (
    "PATH",
    "HOME",
    "TMPDIR",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    *_PROXY_ENV,
    *(v.lower() for v in _PROXY_ENV),
)
_URL = re.compile(r"[a-z][a-z0-9+.-]*://[^\s`'\")]+")
_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")


@dataclass(frozen=True)
class Inputs:
    """What goes to uv for one platform.

    `requirements` are PEP 508 strings with origins (those flagged `constraint` only limit
    versions); `index_for` maps a package to the index it must come from; `excluded` are names uv
    must not resolve (provided by a source, or pending); `direct` are packages locked by URL, and
    `hashes` maps those the matrix locks to the sha256 it gives.
    """

    requirements: tuple[TracedRequirement, ...]
    index_for: tuple[tuple[str, str], ...] = ()
    excluded: tuple[str, ...] = ()
    direct: tuple[str, ...] = ()
    hashes: tuple[tuple[str, tuple[str, Origin]], ...] = ()
    # The direct-layer requirements the matrix's overrides took out of `requirements`.
    replaced: tuple[TracedRequirement, ...] = ()


def render_pyproject(inputs: Inputs, indexes: Sequence[IndexAccess], python_version: str) -> str:
    """The generated project uv resolves: dependencies, and each package's index for this
    platform."""
    project = {
        "name": INPUTS_PROJECT,
        "version": "0",
        "requires-python": f">={python_version}",
        "dependencies": [r.text for r in inputs.requirements if not r.constraint],
    }
    # uv checks the names a source pins against the project's own index list, so it is repeated
    # here.
    sources = {name: {"index": index} for name, index in inputs.index_for}
    uv = {"sources": sources, "index": _indexes(indexes)}
    return tomli_w.dumps({"project": project, "tool": {"uv": uv}})


def _indexes(indexes: Sequence[IndexAccess]) -> list[dict[str, object]]:
    first_default = next((i.name for i in indexes if not i.explicit), None)
    tables: list[dict[str, object]] = []
    for index in indexes:
        table: dict[str, object] = {"name": index.name, "url": index.url}
        if index.explicit:
            table["explicit"] = True
        elif index.name == first_default:
            table["default"] = True
        tables.append(table)
    return tables


def render_uv_config(indexes: Sequence[IndexAccess], overrides: Sequence[str]) -> str:
    """The uv.toml given with --config-file: the matrix's indexes, overrides and trusted hosts,
    nothing else."""
    trusted = sorted({i.trusted_host for i in indexes if i.trusted_host})
    return tomli_w.dumps(
        {
            "override-dependencies": list(overrides),
            "allow-insecure-host": trusted,
            "index": _indexes(indexes),
        }
    )


def uv_environment(
    indexes: Sequence[IndexAccess], cache: Path, environ: Mapping[str, str], limits: network.Limits
) -> dict[str, str]:
    """uv's environment: its cache, TLS and proxy settings (from `environ`), envgen's network
    `limits`, index credentials; no UV_*/PIP_* of the caller."""
    env = {k: environ[k] for k in _PASSED_ENV if k in environ}
    env["UV_CACHE_DIR"] = str(cache / "uv")
    env["UV_NO_PROGRESS"] = "1"
    env.update(network.uv_environment(limits))
    for index in indexes:
        env.update(index.env)
    return env


def _mentioned(text: str) -> set[str]:
    return {package_key(m.group(0)) for m in _NAME.finditer(text)}


def why_unreachable(stderr: str, limits: network.Limits, secrets: Sequence[str] = ()) -> str:
    """Why uv (or pip) could not reach a host, in a few words: the timeout it ran into, or the
    innermost cause."""
    return redact_text(network.reason(stderr, limits), tuple(secrets))


def explain_failure(
    stderr: str,
    inputs: Inputs,
    indexes: Sequence[IndexAccess],
    matrix: Matrix,
    platform: str,
    settings: Settings,
) -> EnvgenError:
    """Turn uv's failure into an error naming the platform, the requirements involved and their
    origins."""
    offline, limits = settings.offline, settings.limits
    secrets = tuple(s for i in indexes for s in i.secrets)
    said = redact_text(tail(stderr), secrets)
    urls = [m.group(0).rstrip(".,:;") for m in _URL.finditer(stderr)]
    reached = list(
        filter(None, (index_of(u, [(index, index.url) for index in indexes]) for u in urls))
    )
    if reached and re.search(r"\b(401|403)\b|[Uu]nauthorized|[Ff]orbidden|authentication", stderr):
        index = reached[0]
        return ResolutionError(
            f"index {index.name} at {index.shown} refused access while locking {platform}\n{said}",
            hint=f"check the credentials of index {index.name} (user:token@ or ${{VAR}} in "
            "its URL)",
            host=index.shown,
            platform=platform,
        )
    if "No solution found" in stderr:
        if offline and ("offline" in stderr or "cache" in stderr):
            return ResolutionError(
                f"cannot lock PyPI packages for {platform} offline: uv's cache lacks "
                f"what they need\n{said}",
                hint="run once without --offline to fill the cache",
                platform=platform,
            )
        names = _mentioned(stderr)
        involved = [r for r in inputs.requirements if package_key(name_of(r.text)) in names]
        listed = (
            "".join(f"\n  {r.text}  ({r.origin})" for r in involved)
            or "\n  (none of the inputs named)"
        )
        # uv calls the generated project by its name: it is the direct layer (the matrix's pins and
        # overrides, the sources' requirements), whose requirements are listed above.
        said = said.replace(INPUTS_PROJECT, "the direct layer")
        return ConflictError(
            f"no PyPI resolution for {platform}; these requirements "
            f"conflict:{listed}\nuv says:\n{said}",
            hint=conflict_hint(sorted({package_key(name_of(r.text)) for r in involved}), matrix),
            said=said,
        )
    if urls:
        return _unreachable(stderr, reached, urls, platform, limits, secrets)
    return ToolError(
        f"uv pip compile failed for {platform}:\n{said}",
        hint="read uv's message above",
        platform=platform,
    )


def _unreachable(
    stderr: str,
    reached: Sequence[IndexAccess],
    urls: Sequence[str],
    platform: str,
    limits: network.Limits,
    secrets: Sequence[str],
) -> NetworkError:
    """uv could not fetch `urls`: from an index of the matrix (the first of `reached`) or other
    URLs."""
    why = why_unreachable(stderr, limits, secrets)
    if reached:
        index = reached[0]
        trust = (
            f"if you trust the host, set trusted_host in channels/{index.name}.toml; "
            if re.search(r"certificate|ssl|tls", stderr, re.IGNORECASE) and not index.trusted_host
            else ""
        )
        slow = f"; {network.raise_hint('read', limits)}" if network.timed_out(stderr) else ""
        return NetworkError(
            f"cannot reach index {index.name} at {index.shown} while locking {platform}: {why}",
            hint=f"check the URL in channels/{index.name}.toml, the network or proxy; {trust}"
            f"or re-lock from cache with --offline{slow}",
            hosts=[Unreached(index.shown, why)],
            platform=platform,
            failure=f"cannot reach index {index.name} at {index.shown}: {why}",
        )
    shown = sorted({redact_url(u) for u in urls})
    return NetworkError(
        f"uv could not fetch {', '.join(shown)} while locking {platform}: {why}",
        hint="check the URLs in the matrix and the network",
        hosts=[Unreached(url, why) for url in shown],
        platform=platform,
        failure=f"uv could not fetch {', '.join(shown)}: {why}",
    )


def conflict_hint(names: Sequence[str], matrix: Matrix) -> str:
    """What to do about a conflict on `names`: an override for a name without one, `transitive` for
    one with."""
    overridden = {package_key(o.name) for o in matrix.overrides}
    new = [n for n in names if n not in overridden] or ([] if names else ["<name>"])
    hint = "relax one of them"
    if new:
        hint += (
            f", or add {', '.join(f'[overrides.{n}]' for n in new)} (requirement + reason) "
            f"to {matrix.path}"
        )
    for name in (n for n in names if n in overridden):
        hint += (
            f"; [overrides.{name}] replaces only the matrix's and the sources' "
            f"requirements on {name}, and a "
            "package above still requires otherwise: pin that package to a release "
            "that agrees, or set "
            f"`transitive = true` on [overrides.{name}] to overrule it too (recorded in the lock)"
        )
    return hint


def name_of(text: str) -> str:
    return Pep508(text).name


@dataclass(frozen=True)
class UvJob:
    """One `uv pip compile` run, whole: the files of its work directory, its command and its
    environment.

    Equal jobs are the same resolution: a run started ahead on the inputs a previous lock predicts
    (`resolve/head_start.py`) stands in only for a job equal to it.
    """

    platform: str
    files: tuple[tuple[str, str], ...]
    cmd: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    secrets: tuple[str, ...]


@dataclass(frozen=True)
class UvOutcome:
    """How a job ended: uv's exit code and stderr, the pylock.toml text it wrote (on success), or
    the budget running out (`timed_out`)."""

    returncode: int
    stderr: str
    pylock: str = ""
    timed_out: bool = False


class UvRunner(Protocol):
    """What runs a planned job and says how it ended: `PlainRunner` runs it; a head start
    (resolve/head_start.py) hands over the outcome of an equal job it started earlier."""

    def run(self, job: UvJob) -> UvOutcome: ...


@dataclass(frozen=True)
class PlainRunner:
    """Runs each job it is given, within the network budget (seconds)."""

    budget: float

    def run(self, job: UvJob) -> UvOutcome:
        return execute(job, self.budget)


def plan_uv_compile(
    matrix: Matrix,
    platform: str,
    python_version: str,
    inputs: Inputs,
    indexes: Sequence[IndexAccess],
    settings: Settings,
    *,
    preferred: Sequence[Preference] = (),
) -> UvJob:
    """The `uv pip compile` run resolving `inputs` for `platform` (pure).

    `preferred` (the previous lock's pins) is written as the existing output file, which uv keeps
    where the inputs allow.
    """
    # Only transitive overrides reach uv: the others were applied to the direct layer already.
    transitive = global_overrides(matrix.overrides)
    files = {
        "pyproject.toml": render_pyproject(inputs, indexes, python_version),
        "uv.toml": render_uv_config(indexes, transitive),
    }
    if preferred:
        files["pylock.toml"] = render_pylock(preferred)
    cmd = [settings.uv, "pip", "compile", "pyproject.toml"]
    # --config-file replaces every config uv would discover (user, system, project): only ours
    # counts.
    cmd += ["--config-file", "uv.toml"]
    if inputs.excluded:
        files["excludes.txt"] = "".join(f"{name}\n" for name in inputs.excluded)
        cmd += ["--excludes", "excludes.txt"]
    constraints = [r.text for r in inputs.requirements if r.constraint]
    if constraints:
        # `-c` files of the sources limit versions without requiring anything.
        files["constraints.txt"] = "".join(f"{text}\n" for text in constraints)
        cmd += ["--constraints", "constraints.txt"]
    cmd += ["--python-version", python_version]
    cmd += ["--python-platform", platforms.uv_python_platform(platform, matrix.glibc)]
    cmd += ["--format", "pylock.toml", "--output-file", "pylock.toml", "--no-header"]
    # The interpreter running envgen builds any sdist; --python-version alone decides the
    # resolution.
    cmd += ["--python", sys.executable, "--no-python-downloads", "--color", "never"]
    if settings.offline:
        cmd.append("--offline")
    env = uv_environment(indexes, settings.cache, settings.variables, settings.limits)
    secrets = tuple(s for i in indexes for s in i.secrets)
    return UvJob(
        platform, tuple(sorted(files.items())), tuple(cmd), tuple(sorted(env.items())), secrets
    )


def execute(
    job: UvJob,
    budget: float,
    started: Callable[[Running], None] = lambda _: None,
) -> UvOutcome:
    """Run `job` in a scratch work directory, within `budget` seconds; `started` is told of the
    process."""
    with scratch_dir("envgen-uv-") as work:
        for name, text in job.files:
            (work / name).write_text(text)
        running = start(job.cmd, cwd=work, env=dict(job.env), secrets=job.secrets)
        started(running)
        try:
            proc = running.wait(budget, check=False)
        except TimedOut:
            return UvOutcome(-1, "", timed_out=True)
        pylock = (work / "pylock.toml").read_text() if proc.returncode == 0 else ""
    return UvOutcome(proc.returncode, proc.stderr, pylock)


def run_uv_compile(
    job: UvJob,
    matrix: Matrix,
    inputs: Inputs,
    indexes: Sequence[IndexAccess],
    settings: Settings,
    runner: UvRunner,
) -> str:
    """Run a planned `uv pip compile` (`plan_uv_compile`) through `runner`; returns the pylock.toml
    text uv wrote. A failure is explained with the inputs and indexes the job was planned from.
    """
    platform = job.platform
    outcome = runner.run(job)
    if outcome.timed_out:
        limits = settings.limits
        within = f"within {network.seconds('budget', limits)}"
        named = ", ".join(f"{i.name} at {i.shown}" for i in indexes)
        raise NetworkError(
            f"uv did not finish resolving {platform} {within} (indexes {named})",
            hint=f"check the indexes and the network; {network.raise_hint('budget', limits)}",
            hosts=[Unreached(i.shown, f"no complete answer {within}") for i in indexes],
            platform=platform,
            failure=f"uv did not finish resolving {within} (indexes {named})",
        )
    if outcome.returncode != 0:
        log.debug(
            "uv pip compile for %s said:\n%s", platform, redact_text(outcome.stderr, job.secrets)
        )
        raise explain_failure(outcome.stderr, inputs, indexes, matrix, platform, settings)
    return outcome.pylock
