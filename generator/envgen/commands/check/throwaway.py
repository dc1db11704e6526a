"""The throwaway-env steps of `envgen check`: install into a temporary env, pip check, the import
checks."""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Iterator
from collections.abc import Set as AbstractSet
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from shlex import quote

from packaging.requirements import InvalidRequirement
from packaging.requirements import Requirement as Pep508

from envgen import interrupts
from envgen.commands.check.npu import npu_step_names, npu_steps
from envgen.commands.check.options import CheckOptions
from envgen.commands.check.report import FAILED, OK, SKIPPED, Step, step_of
from envgen.commands.check.static import pip_by_name, version_in
from envgen.errors import EnvgenError, NetworkError
from envgen.installer.core import Destination, Installer, Request, Source
from envgen.installer.destinations import destination
from envgen.installer.interpreter import InterpreterRunner, run_interpreter
from envgen.installer.tools import tool_environment
from envgen.model import CANN_SCRIPT_SEPARATOR, DEFAULT_CANN_SET_ENV, ImportCheck, Lock
from envgen.names import package_key
from envgen.npu import Npu
from envgen.process import tail
from envgen.redact import redact_text
from envgen.resolve.settings import Settings
from envgen.scratch import children_scratch, scratch_dir

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Hardware:
    """What this host offers: CANN (its set_env.sh exists) and an NPU (`npu-smi` on PATH)."""

    set_env: str
    cann: bool
    npu: bool


def detect_hardware(lock: Lock) -> Hardware:
    set_env = os.environ.get("ASCEND_SET_ENV") or (
        lock.cann.set_env if lock.cann else DEFAULT_CANN_SET_ENV
    )
    # Several scripts are ':'-separated; the first one missing is the one a skip names.
    missing = [
        script for script in set_env.split(CANN_SCRIPT_SEPARATOR) if not Path(script).is_file()
    ]
    return Hardware(
        missing[0] if missing else set_env, not missing, shutil.which("npu-smi") is not None
    )


_IMPORTS = r"""
import importlib, importlib.metadata, json, sys
results = {}
for module, distribution in json.loads(sys.argv[1]):
    try:
        importlib.import_module(module)
        version = importlib.metadata.version(distribution) if distribution else None
        results[module] = {"ok": True, "version": version}
    except BaseException as exc:
        results[module] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
print(json.dumps(results))
"""


def _expected_version(check: ImportCheck, lock: Lock, platform: str) -> str | None:
    if check.version:
        return check.version
    entry = pip_by_name(lock, platform).get(package_key(_distribution(check)))
    return entry.version if entry else None


def _distribution(check: ImportCheck) -> str:
    """The distribution whose version an import check compares: the one named, else the module's own
    name."""
    return check.distribution or check.module


def _skip_reason(check: ImportCheck, hardware: Hardware, skipped: AbstractSet[str]) -> str | None:
    if check.needs == "cann" and not hardware.cann:
        return f"needs CANN; {hardware.set_env} not found"
    if check.needs == "npu" and not hardware.npu:
        return "needs an NPU; npu-smi is not on PATH"
    if check.distribution and package_key(check.distribution) in skipped:
        return f"{check.distribution} comes from a source that was skipped (needs CANN)"
    return None


def import_steps(
    lock: Lock,
    env: Destination,
    platform: str,
    *,
    settings: Settings,
    hardware: Hardware,
    require_npu: bool,
    skipped: AbstractSet[str],
) -> list[Step]:
    """The matrix's import checks in the activated env (one interpreter, run in `settings`), each
    with its expected version."""
    reasons = {c.module: _skip_reason(c, hardware, skipped) for c in lock.checks}
    expected = {c.module: _expected_version(c, lock, platform) for c in lock.checks}
    runnable = [c for c in lock.checks if reasons[c.module] is None]
    results: dict[str, dict[str, object]] = {}
    if runnable:
        # A version to compare needs a distribution to read it from, named or not.
        wanted = [c.distribution or (c.module if expected[c.module] else None) for c in runnable]
        argument = json.dumps([[c.module, d] for c, d in zip(runnable, wanted, strict=True)])
        python = quote(str(env.python))
        script = f'{env.activation(lock.env)}; exec {python} -c "$0" "$1"'
        probe = ["sh", "-c", script, _IMPORTS, argument]
        proc = run_interpreter(probe, env=tool_environment(settings), check=False)
        try:
            results = json.loads(proc.stdout.strip().splitlines()[-1])
        except (IndexError, json.JSONDecodeError):
            detail = redact_text(tail(proc.stderr or proc.stdout, 5))
            results = {
                c.module: {"ok": False, "error": f"the import check did not run: {detail}"}
                for c in runnable
            }
    steps = []
    for check in lock.checks:
        reason = reasons[check.module]
        if reason is not None:
            steps.append(Step(f"import {check.module}", FAILED if require_npu else SKIPPED, reason))
        else:
            steps.append(_import_step(check, results.get(check.module, {}), expected[check.module]))
    return steps


def _import_step(check: ImportCheck, result: dict[str, object], expected: str | None) -> Step:
    name = f"import {check.module}"
    if not result.get("ok"):
        return Step(name, FAILED, str(result.get("error", "no result")))
    version = result.get("version")
    if expected and isinstance(version, str) and not version_in(f"=={expected}", version):
        return Step(
            name, FAILED, f"{_distribution(check)} {version} installed, {expected} expected"
        )
    return Step(name, OK, f"{_distribution(check)} {version}" if version else "")


def pip_check_step(
    prefix: Path,
    ignored: AbstractSet[str],
    settings: Settings,
    runner: InterpreterRunner = run_interpreter,
) -> Step:
    """`pip check` of the env (run in `settings`), minus requirements on pending packages,
    skipped sources (reported apart) and the packages the lock leaves out on purpose."""
    pip_check: list[str | Path] = [prefix / "bin" / "python", "-m", "pip", "check"]
    proc = runner(pip_check, env=tool_environment(settings), check=False)
    lines = [
        line
        for line in proc.stdout.splitlines()
        if line.strip() and "No broken requirements" not in line
    ]
    problems = []
    for line in lines:
        words = line.replace(",", " ").split()
        # "x 1.0 requires y, which is not installed." / "x 1.0 has requirement y>=2, but you have y
        # 1.0."
        target = (
            words[3]
            if len(words) > 3 and words[2] == "requires"
            else words[4]
            if len(words) > 4
            else ""
        )
        try:
            name: str = package_key(Pep508(target).name)
        except InvalidRequirement:
            name = ""
        if name not in ignored:
            problems.append(line)
    if proc.returncode != 0 and not lines:
        problems.append(redact_text(tail(proc.stderr, 5)))
    return step_of("env: pip check", problems)


# The distributions the env's python sees, as `pip list` lists them (the first on sys.path of each
# name), read by importlib.metadata: the same answer without pip's start-up, a second or so of a
# check on a loaded machine.
_DISTRIBUTIONS = r"""
import importlib.metadata, json, re
installed = {}
for dist in importlib.metadata.distributions():
    name = dist.metadata["Name"]
    if name:
        installed.setdefault(re.sub(r"[-_.]+", "-", name).lower(), dist.version)
print(json.dumps(installed))
"""


def installed_set_step(prefix: Path, lock: Lock, platform: str, settings: Settings) -> Step:
    """The env's distributions against the lock: every pip entry of `platform` at its locked
    version (its python run in `settings`)."""
    cmd = [str(prefix / "bin" / "python"), "-c", _DISTRIBUTIONS]
    proc = run_interpreter(cmd, env=tool_environment(settings), check=False)
    if proc.returncode != 0:
        return Step("env: installed set", FAILED, redact_text(tail(proc.stderr, 5)))
    installed = {package_key(name): version for name, version in json.loads(proc.stdout).items()}
    entries = lock.pip_for(platform)
    # The wheels taken from release archives are held to their locked versions too.
    wheels = [(m.name, m.version) for a in lock.archives_for(platform) for m in a.members]
    problems = []
    for name, version in (*((e.name, e.version) for e in entries), *wheels):
        have = installed.get(package_key(name))
        if have is None:
            problems.append(f"{name}: not installed ({version} locked)")
        elif have != version:
            problems.append(f"{name}: {have} installed, {version} locked")
    wheeled = f" and {len(wheels)} archive wheels" if wheels else ""
    detail = f"{len(entries)} pip packages{wheeled} at their locked versions"
    return step_of("env: installed set", problems, detail)


def _installed_env_steps(
    lock: Lock,
    env: Destination,
    platform: str,
    *,
    settings: Settings,
    hardware: Hardware,
    require_npu: bool,
    skip_cann: bool,
    npu: Npu | None,
) -> list[Step]:
    """What is checked in the installed env: its set against the lock, pip check, imports, the NPU
    steps."""
    steps = [installed_set_step(env.path, lock, platform, settings)]
    cann_sources = [s.source for s in lock.sources if s.source.needs_cann]
    skipped = {package_key(s.distribution) for s in cann_sources} if skip_cann else set()
    if skip_cann:
        names = ", ".join(s.name for s in cann_sources)
        reason = f"{names}: {hardware.set_env} not found"
        steps.append(Step("env: sources needing CANN", SKIPPED, reason))
    ignored = skipped | {package_key(p.name) for p in lock.pending}
    # What the lock leaves out on purpose is not installed, on purpose: not a broken requirement.
    ignored |= {package_key(e.name) for e in lock.exclusions if e.applies(platform)}
    steps.append(pip_check_step(env.path, ignored, settings))
    steps += import_steps(
        lock,
        env,
        platform,
        settings=settings,
        hardware=hardware,
        require_npu=require_npu,
        skipped=skipped,
    )
    activation = env.activation(lock.env)
    steps += npu_steps(npu, env.path, activation, settings, require_npu=require_npu)
    return steps


@contextmanager
def _said_when_interrupted(tmp: Path, keep: bool) -> Iterator[None]:
    try:
        yield
    except (KeyboardInterrupt, interrupts.Interrupted):
        interrupts.cleaned(f"the throwaway env {tmp} was {'kept (--keep)' if keep else 'removed'}")
        raise


def throwaway_steps(
    lock: Lock,
    source: Source,
    installer: Installer,
    options: CheckOptions,
    *,
    platform: str,
    settings: Settings,
    npu: Npu | None = None,
) -> tuple[list[Step], str | None]:
    """Install the lock from `source` into a temporary env, run pip check, the import checks and,
    for an env targeting `npu`, the NPU steps; the env is removed unless `options.keep`.

    Two kinds of env: a conda prefix of the lock's conda part (its python must be the prefix's
    own), or with `options.venv` a venv of this interpreter, made by `options.install`. The pip
    part is installed by `installer` (pip or uv) from the file `source` gives it (the lock's derived
    one, or a bundle's); every tool runs in `settings`. Sources and checks needing CANN or an NPU
    the host lacks are skipped with the reason; `options.require_npu` makes them fail instead.
    """
    venv, require_npu, keep = options.venv, options.require_npu, options.keep
    hardware = detect_hardware(lock)
    cann_sources = [s.source for s in lock.sources if s.source.needs_cann]
    skip_cann = bool(cann_sources) and not hardware.cann and not require_npu
    with (
        scratch_dir(f"envgen-check-{lock.env}-", keep=keep) as tmp,
        _said_when_interrupted(tmp, keep),
        children_scratch("envgen-check-tmp-"),  # the children's temp files, gone even if killed
    ):
        compiled = installer.runs_env_pip
        env = destination(tmp / "env", venv=venv, settings=settings, compiled=compiled)
        log.info("check %s: installing %s into the throwaway env %s", lock.env, platform, env.path)
        name = f"env: install ({env.kind})"
        try:
            options.install(Request(lock, platform, skip_cann=skip_cann), source, env, installer)
        except EnvgenError as exc:
            return _install_failed(name, exc, lock, npu), str(tmp) if keep else None
        part = source.pip(lock, platform, installer)
        origin = f" from {part.requirements.name} ({installer.name})" if part is not None else ""
        pip_count = len(lock.pip_for(platform))
        detail = f"{pip_count} pip packages{origin}, {len(lock.sources)} sources"
        steps = [Step(name, OK, detail)]
        steps += _installed_env_steps(
            lock,
            env,
            platform,
            settings=settings,
            hardware=hardware,
            require_npu=require_npu,
            skip_cann=skip_cann,
            npu=npu,
        )
        return steps, str(tmp) if keep else None


def _install_failed(name: str, exc: EnvgenError, lock: Lock, npu: Npu | None) -> list[Step]:
    """The failed install step, and the steps it skips: a host that could not be reached is no
    verdict on the lock (one line per host)."""
    if isinstance(exc, NetworkError):
        hosts = tuple(str(h) for h in exc.hosts) if exc.listed else ()
        failed = Step(name, FAILED, exc.failure, hosts, unreachable=True)
    else:
        failed = Step(name, FAILED, exc.message)
    skipped = ["env: pip check", *(f"import {c.module}" for c in lock.checks), *npu_step_names(npu)]
    return [failed, *(Step(skip, SKIPPED, "the install failed") for skip in skipped)]
