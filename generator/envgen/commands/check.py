"""`envgen check`: static checks of a lock, a re-solve, then a throwaway install with smoke imports; always cleaned."""

from __future__ import annotations

import dataclasses
import fnmatch
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from collections.abc import Set as AbstractSet
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from shlex import quote

import rattler
from packaging.markers import Marker
from packaging.requirements import InvalidRequirement
from packaging.requirements import Requirement as Pep508
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from envgen.commands.status import stale_reasons
from envgen.errors import EnvgenError
from envgen.inputs.matrix import load_env
from envgen.installer import install_env, tool_environment, verify_recipe
from envgen.lockio.exports.common import locked_python
from envgen.lockio.exports.derived import derived_files, derived_problems
from envgen.lockio.input_hashes import input_hash, project_inputs
from envgen.lockio.store import read_lock
from envgen.model import CANN_SCRIPT_SEPARATOR, DEFAULT_CANN_SET_ENV, ImportCheck, Lock, Matrix, PipEntry, PipPackage
from envgen.platforms import host_platform, marker_environment
from envgen.process import run, tail
from envgen.project import Project
from envgen.redact import redact_text, strip_credentials
from envgen.resolve.pip_stage import lock_pypi
from envgen.resolve.uv_pylock import is_vcs

log = logging.getLogger(__name__)

OK, FAILED, SKIPPED = "ok", "failed", "skipped"


@dataclass(frozen=True)
class Step:
    """One check: its outcome ("ok", "failed", "skipped") and why."""

    name: str
    status: str
    detail: str = ""
    problems: tuple[str, ...] = ()


@dataclass(frozen=True)
class CheckReport:
    """Every step `check` ran for one env, in order; `kept` is the throwaway env when --keep kept it."""

    env: str
    platform: str
    steps: tuple[Step, ...]
    kept: str | None = None

    @property
    def ok(self) -> bool:
        return all(s.status != FAILED for s in self.steps)

    def as_dict(self) -> dict[str, object]:
        return {
            "env": self.env,
            "platform": self.platform,
            "ok": self.ok,
            "kept": self.kept,
            "steps": [dataclasses.asdict(s) for s in self.steps],
        }


def render_report(report: CheckReport) -> str:
    """The report as text, one line per step and its problems indented below."""
    lines = [f"check {report.env} ({report.platform}): {'ok' if report.ok else 'FAILED'}"]
    for step in report.steps:
        detail = f": {step.detail}" if step.detail else ""
        lines.append(f"  {step.status:<7} {step.name}{detail}")
        lines += [f"            {p}" for p in step.problems]
    if report.kept:
        lines.append(f"  kept the throwaway env at {report.kept}")
    return "\n".join(lines) + "\n"


def render_json(report: CheckReport) -> str:
    return json.dumps(report.as_dict(), indent=2, sort_keys=True) + "\n"


def _step(name: str, problems: Sequence[str], ok: str = "") -> Step:
    return Step(name, FAILED, f"{len(problems)} problem(s)", tuple(problems)) if problems else Step(name, OK, ok)


# --- static checks (pure) ---------------------------------------------------------------------------------


def _python_of(lock: Lock, matrix: Matrix, platform: str) -> str:
    return locked_python(lock, platform) or matrix.python


def _pip_index(lock: Lock, platform: str) -> dict[str, PipEntry]:
    return {canonicalize_name(e.name): e for e in lock.pip_for(platform)}


def _contains(specifier: str, version: str) -> bool:
    try:
        return SpecifierSet(specifier).contains(Version(version), prereleases=True)
    except (InvalidSpecifier, InvalidVersion):
        return False


def _applies(marker: str | None, environment: dict[str, str]) -> bool:
    return marker is None or Marker(marker).evaluate(environment)


def pin_problems(matrix: Matrix, lock: Lock) -> list[str]:
    """Every matrix pin (pip packages, conda specs, sources) that the lock does not satisfy, per platform."""
    problems: list[str] = []
    if tuple(sorted(matrix.platforms)) != tuple(sorted(lock.platforms)):
        problems.append(
            f"platforms: the matrix has {', '.join(matrix.platforms)}, the lock {', '.join(lock.platforms)}"
        )
    provided = {canonicalize_name(s.source.distribution) for s in lock.sources}
    for platform in lock.platforms:
        environment = marker_environment(platform, _python_of(lock, matrix, platform))
        entries = _pip_index(lock, platform)
        for package in matrix.packages:
            problems += _package_problems(package, platform, environment, entries, provided, matrix.path)
        problems += _conda_problems(matrix, lock, platform)
    locked = {s.source.name: s for s in lock.sources}
    for source in matrix.sources:
        found = locked.get(source.name)
        where = f"{matrix.path}: sources.{source.name}"
        if found is None:
            problems.append(f"{where}: not in the lock")
        elif (found.source.url, found.source.ref, found.source.cherry_picks) != (
            source.url,
            source.ref,
            source.cherry_picks,
        ):
            problems.append(f"{where}: the lock has {strip_credentials(found.source.url)} {found.source.ref}")
        elif len(source.ref) == 40 and source.ref.lower() != found.commit:
            problems.append(f"{where}: pinned to {source.ref}, locked at {found.commit}")
    return problems


def _package_problems(
    package: PipPackage,
    platform: str,
    environment: dict[str, str],
    entries: dict[str, PipEntry],
    provided: AbstractSet[str],
    path: str,
) -> list[str]:
    name = canonicalize_name(package.name)
    if package.pending is not None or not _applies(package.marker, environment) or name in provided:
        return []
    where = f"{path}: pip.packages.{package.name}"
    entry = entries.get(name)
    if entry is None:
        return [f"{where}: not locked for {platform}"]
    problems = []
    if package.specifier and not _contains(package.specifier, entry.version):
        problems.append(f"{where}: wants {package.specifier}, {platform} has {entry.version}")
    if package.sha256 and package.sha256.lower() != entry.sha256:
        problems.append(f"{where}: sha256 {package.sha256} in the matrix, {entry.sha256} in the lock ({platform})")
    return problems


def _conda_problems(matrix: Matrix, lock: Lock, platform: str) -> list[str]:
    problems = []
    entries = {e.name: e for e in lock.conda_for(platform)}
    for text in matrix.conda_specs:
        spec = rattler.MatchSpec(text)
        name = spec.name.normalized
        entry = entries.get(name)
        where = f"{matrix.path}: conda.specs {text!r}"
        if entry is None:
            problems.append(f"{where}: {name} is not locked for {platform}")
        elif spec.version and not rattler.VersionSpec(spec.version).matches(rattler.Version(entry.version)):
            problems.append(f"{where}: {platform} has {name} {entry.version}")
        elif spec.build and not fnmatch.fnmatchcase(entry.build, spec.build):
            problems.append(f"{where}: {platform} has {name} build {entry.build}")
    return problems


def _unmet(
    name: str, specifier: str, who: str, platform: str, entries: dict[str, PipEntry], satisfied: AbstractSet[str]
) -> list[str]:
    """Why `name specifier` is not met by `entries` of `platform` ([] when met or satisfied otherwise)."""
    key = canonicalize_name(name)
    if key in satisfied:
        return []
    entry = entries.get(key)
    if entry is None:
        return [f"{who} requires {name}{specifier}, which is not locked for {platform}"]
    if specifier and not _contains(specifier, entry.version):
        return [f"{who} requires {name}{specifier}, {platform} has {entry.version}"]
    return []


def _marker_of(req: Pep508) -> str | None:
    return str(req.marker) if req.marker else None


def depends_problems(lock: Lock, python: Callable[[str], str]) -> list[str]:
    """Requirements (pip entries' depends, sources' requirement files) the lock does not satisfy, per platform.

    Names provided by a source, pending packages and overridden names are satisfied by construction; an
    override's own requirement must be satisfied instead. Markers are evaluated for each platform.
    """
    overrides = {canonicalize_name(o.override.name): o.override.requirement for o in lock.overrides}
    satisfied = {canonicalize_name(s.source.distribution) for s in lock.sources}
    satisfied |= {canonicalize_name(p.name) for p in lock.pending} | set(overrides)
    problems: list[str] = []
    for platform in lock.platforms:
        environment = marker_environment(platform, python(platform))
        entries = _pip_index(lock, platform)
        for entry in lock.pip_for(platform):
            for name, specifier in entry.depends:
                problems += _unmet(name, specifier, f"{entry.name} {entry.version}", platform, entries, satisfied)
        for locked in lock.sources:
            for req in locked.requirements:
                parsed = Pep508(req.text)
                if req.constraint or is_vcs(parsed) or not _applies(_marker_of(parsed), environment):
                    continue
                problems += _unmet(parsed.name, str(parsed.specifier), str(req.origin), platform, entries, satisfied)
        for name, requirement in sorted(overrides.items()):
            parsed = Pep508(requirement)
            if _applies(_marker_of(parsed), environment):
                problems += _unmet(
                    parsed.name, str(parsed.specifier), f"override {name}", platform, entries, satisfied - {name}
                )
    return problems


def index_problems(matrix: Matrix, lock: Lock) -> list[str]:
    """Packages from an index they may not come from: explicit indexes serve only the packages naming them."""
    explicit = {i.name for i in lock.indexes if i.explicit}
    packages = {canonicalize_name(p.name): p for p in matrix.packages}
    problems = []
    for entry in lock.pip:
        package = packages.get(canonicalize_name(entry.name))
        wanted = package.index_for(entry.platform) if package else None
        came = entry.index or "a direct URL"
        if wanted and entry.index != wanted and not (package and package.url):
            problems.append(
                f"{entry.name} {entry.version} ({entry.platform}) must come from {wanted}, came from {came}"
            )
        elif entry.index in explicit and entry.index != wanted:
            problems.append(
                f"{entry.name} {entry.version} ({entry.platform}) came from the explicit index {entry.index}, "
                "which serves only the packages that name it"
            )
    return problems


# --- static checks (effects: files) ----------------------------------------------------------------------


def static_steps(project: Project, lock: Lock, matrix: Matrix) -> list[Step]:
    """Input hash, pins, dependencies, indexes, the derived files and the recipe file."""
    current = project_inputs(project, matrix, lock.sources)
    stale = list(stale_reasons(lock.inputs, current, matrix.path))
    if not stale and input_hash(current) != lock.input_hash:
        stale.append(f"input hash {lock.input_hash[:12]} recorded, {input_hash(current)[:12]} now")
    steps = [
        _step(
            "static: input hash", [f"{r}: re-lock with `envgen lock {lock.env}`" for r in stale], lock.input_hash[:12]
        ),
        _step("static: matrix pins", pin_problems(matrix, lock), f"{len(lock.platforms)} platforms"),
        _step("static: dependencies", depends_problems(lock, lambda p: _python_of(lock, matrix, p))),
        _step("static: indexes", index_problems(matrix, lock)),
        _step(
            "static: derived files",
            [
                f"{p}: re-lock with `envgen lock {lock.env} --force`"
                for p in derived_problems(project.locks_dir, lock, matrix)
            ],
            f"{len(derived_files(lock, matrix))} files",
        ),
    ]
    try:
        verify_recipe(lock, project.install_sh(lock.env))
        steps.append(Step("static: recipe", OK, str(project.install_sh(lock.env).relative_to(project.root))))
    except EnvgenError as exc:
        steps.append(Step("static: recipe", FAILED, exc.message))
    return steps


# --- solve ------------------------------------------------------------------------------------------------


def pinned_matrix(matrix: Matrix, lock: Lock, platform: str) -> Matrix:
    """The matrix with every pip package pinned to what the lock has for `platform` (pure)."""
    entries = _pip_index(lock, platform)
    packages = []
    named = set()
    for package in matrix.packages:
        name = canonicalize_name(package.name)
        named.add(name)
        entry = entries.get(name)
        if entry is not None and package.url is None and package.pending is None:
            package = dataclasses.replace(package, specifier=f"=={entry.version}")
        packages.append(package)
    packages += [PipPackage(e.name, f"=={e.version}") for key, e in sorted(entries.items()) if key not in named]
    return dataclasses.replace(matrix, packages=tuple(packages))


def solve_step(matrix: Matrix, lock: Lock, *, cache: Path) -> Step:
    """Resolve again with every package pinned to its locked version: the same files must come out."""
    problems = []
    for platform in lock.platforms:
        try:
            again = lock_pypi(
                pinned_matrix(matrix, lock, platform),
                platform,
                _python_of(lock, matrix, platform),
                lock.sources,
                cache=cache,
            )
        except EnvgenError as exc:
            problems.append(f"{platform}: {exc.message}")
            continue
        before = {(canonicalize_name(e.name), e.version, e.sha256) for e in lock.pip_for(platform)}
        after = {(canonicalize_name(e.name), e.version, e.sha256) for e in again.entries}
        problems += [
            f"{platform}: the lock has {n} {v} ({s[:12]}), not resolved now" for n, v, s in sorted(before - after)
        ]
        problems += [
            f"{platform}: resolved now {n} {v} ({s[:12]}), not in the lock" for n, v, s in sorted(after - before)
        ]
    return _step("solve: same pip set", problems, f"{len(lock.pip)} entries on {len(lock.platforms)} platforms")


# --- throwaway env ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Hardware:
    """What this host offers: CANN (its set_env.sh exists) and an NPU (`npu-smi` on PATH)."""

    set_env: str
    cann: bool
    npu: bool


def detect_hardware(lock: Lock) -> Hardware:
    set_env = os.environ.get("ASCEND_SET_ENV") or (lock.cann.set_env if lock.cann else DEFAULT_CANN_SET_ENV)
    # Several scripts are ':'-separated; the first one missing is the one a skip names.
    missing = [script for script in set_env.split(CANN_SCRIPT_SEPARATOR) if not Path(script).is_file()]
    return Hardware(missing[0] if missing else set_env, not missing, shutil.which("npu-smi") is not None)


@contextmanager
def throwaway_dir(env: str, *, keep: bool) -> Iterator[Path]:
    """A temporary directory removed on success, failure and interrupt, unless `keep`."""
    path = Path(tempfile.mkdtemp(prefix=f"envgen-check-{env}-"))
    try:
        yield path
    finally:
        if keep:
            log.warning("kept the throwaway env of %s at %s", env, path)
        else:
            shutil.rmtree(path, ignore_errors=True)


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


def _activation(prefix: Path, env: str, venv: bool) -> str:
    if venv:
        return f". {quote(str(prefix / 'bin' / 'activate'))}"
    hook = prefix / "etc" / "conda" / "activate.d" / f"envgen-{env}.sh"
    return f'export PATH={quote(str(prefix / "bin"))}:"$PATH"; . {quote(str(hook))}'


def _expected_version(check: ImportCheck, lock: Lock, platform: str) -> str | None:
    if check.version:
        return check.version
    entry = _pip_index(lock, platform).get(canonicalize_name(_distribution(check)))
    return entry.version if entry else None


def _distribution(check: ImportCheck) -> str:
    """The distribution whose version an import check compares: the one named, else the module's own name."""
    return check.distribution or check.module


def _skip_reason(check: ImportCheck, hardware: Hardware, skipped: AbstractSet[str]) -> str | None:
    if check.needs == "cann" and not hardware.cann:
        return f"needs CANN; {hardware.set_env} not found"
    if check.needs == "npu" and not hardware.npu:
        return "needs an NPU; npu-smi is not on PATH"
    if check.distribution and canonicalize_name(check.distribution) in skipped:
        return f"{check.distribution} comes from a source that was skipped (needs CANN)"
    return None


def import_steps(
    lock: Lock,
    prefix: Path,
    platform: str,
    *,
    venv: bool,
    hardware: Hardware,
    require_npu: bool,
    skipped: AbstractSet[str],
) -> list[Step]:
    """The matrix's import checks in the activated env (one interpreter), each with its expected version."""
    reasons = {c.module: _skip_reason(c, hardware, skipped) for c in lock.checks}
    expected = {c.module: _expected_version(c, lock, platform) for c in lock.checks}
    runnable = [c for c in lock.checks if reasons[c.module] is None]
    results: dict[str, dict[str, object]] = {}
    if runnable:
        # A version to compare needs a distribution to read it from, named or not.
        wanted = [c.distribution or (c.module if expected[c.module] else None) for c in runnable]
        argument = json.dumps([[c.module, d] for c, d in zip(runnable, wanted, strict=True)])
        script = f'{_activation(prefix, lock.env, venv)}; exec {quote(str(prefix / "bin" / "python"))} -c "$0" "$1"'
        proc = run(["sh", "-c", script, _IMPORTS, argument], env=tool_environment(), check=False)
        try:
            results = json.loads(proc.stdout.strip().splitlines()[-1])
        except (IndexError, json.JSONDecodeError):
            detail = redact_text(tail(proc.stderr or proc.stdout, 5))
            results = {c.module: {"ok": False, "error": f"the import check did not run: {detail}"} for c in runnable}
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
    if expected and isinstance(version, str) and not _contains(f"=={expected}", version):
        return Step(name, FAILED, f"{_distribution(check)} {version} installed, {expected} expected")
    return Step(name, OK, f"{_distribution(check)} {version}" if version else "")


def pip_check_step(prefix: Path, ignored: AbstractSet[str]) -> Step:
    """`pip check` of the env, minus requirements on pending packages and skipped sources (reported apart)."""
    proc = run([prefix / "bin" / "python", "-m", "pip", "check"], env=tool_environment(), check=False)
    lines = [line for line in proc.stdout.splitlines() if line.strip() and "No broken requirements" not in line]
    problems = []
    for line in lines:
        words = line.replace(",", " ").split()
        # "x 1.0 requires y, which is not installed." / "x 1.0 has requirement y>=2, but you have y 1.0."
        target = words[3] if len(words) > 3 and words[2] == "requires" else words[4] if len(words) > 4 else ""
        try:
            name: str = canonicalize_name(Pep508(target).name)
        except InvalidRequirement:
            name = ""
        if name not in ignored:
            problems.append(line)
    if proc.returncode != 0 and not lines:
        problems.append(redact_text(tail(proc.stderr, 5)))
    return _step("env: pip check", problems)


InstallFn = Callable[..., None]


def throwaway_steps(
    lock: Lock,
    recipe: Path,
    *,
    platform: str,
    venv: bool,
    cache: Path,
    require_npu: bool,
    keep: bool,
    install: InstallFn = install_env,
) -> tuple[list[Step], str | None]:
    """Install into a temporary env, run pip check and the import checks; the env is removed unless `keep`.

    Two kinds of env: a rattler prefix of the lock's conda part (the path for real channels, whose python is
    a real CPython), or with `venv` a venv of this interpreter (the honest path when the channel is a fixture:
    its python is a stand-in, which install_env refuses to pip-install through). Sources and checks needing
    CANN or an NPU the host lacks are skipped with the reason; `require_npu` makes them fail instead.
    """
    hardware = detect_hardware(lock)
    cann_sources = [s.source for s in lock.sources if s.source.needs_cann]
    skip_cann = bool(cann_sources) and not hardware.cann and not require_npu
    steps: list[Step] = []
    with throwaway_dir(lock.env, keep=keep) as tmp:
        prefix = tmp / "env"
        log.info("check %s: installing %s into the throwaway env %s", lock.env, platform, prefix)
        kind = "venv" if venv else "conda prefix"
        try:
            install(lock, recipe, prefix, platform=platform, venv=venv, cache=cache, skip_cann=skip_cann)
        except EnvgenError as exc:
            steps.append(Step(f"env: install ({kind})", FAILED, exc.message))
            steps.append(Step("env: pip check", SKIPPED, "the install failed"))
            steps += [Step(f"import {c.module}", SKIPPED, "the install failed") for c in lock.checks]
            return steps, str(tmp) if keep else None
        steps.append(
            Step(
                f"env: install ({kind})", OK, f"{len(lock.pip_for(platform))} pip packages, {len(lock.sources)} sources"
            )
        )
        skipped = {canonicalize_name(s.distribution) for s in cann_sources} if skip_cann else set()
        if skip_cann:
            names = ", ".join(s.name for s in cann_sources)
            steps.append(Step("env: sources needing CANN", SKIPPED, f"{names}: {hardware.set_env} not found"))
        ignored = skipped | {canonicalize_name(p.name) for p in lock.pending}
        steps.append(pip_check_step(prefix, ignored))
        steps += import_steps(
            lock, prefix, platform, venv=venv, hardware=hardware, require_npu=require_npu, skipped=skipped
        )
        return steps, str(tmp) if keep else None


# --- the whole check --------------------------------------------------------------------------------------


def check_env(
    project: Project,
    env: str,
    *,
    cache: Path,
    venv: bool = False,
    require_npu: bool = False,
    keep: bool = False,
    solve: bool = True,
    throwaway: bool = True,
    platform: str | None = None,
    install: InstallFn = install_env,
) -> CheckReport:
    """Check the lock of `env`: static steps, a re-solve, a throwaway install on this host; never raises for a
    failed step (the report says), only for bugs and interrupts (the throwaway env is removed even then)."""
    platform = platform or host_platform()
    steps: list[Step] = []

    def report(kept: str | None = None) -> CheckReport:
        return CheckReport(env, platform, tuple(steps), kept)

    try:
        lock = read_lock(project, env)
        if lock is None:
            raise EnvgenError(f"no lock for {env} in {project.locks_dir}", hint=f"run `envgen lock {env}`")
    except EnvgenError as exc:
        steps.append(Step("static: lock parses", FAILED, exc.message))
        return report()
    try:
        matrix = load_env(project, env)
    except EnvgenError as exc:
        steps.append(Step("static: matrix loads", FAILED, exc.message))
        return report()
    log.info("check %s: static checks", env)
    steps.append(
        Step("static: lock parses", OK, f"{len(lock.conda)} conda, {len(lock.pip)} pip, {len(lock.sources)} sources")
    )
    steps += static_steps(project, lock, matrix)
    if any(s.status == FAILED for s in steps):
        steps.append(Step("solve: same pip set", SKIPPED, "static checks failed"))
        steps.append(Step("env: install", SKIPPED, "static checks failed"))
        return report()
    if solve:
        log.info("check %s: resolving the pip set again with every version pinned", env)
    steps.append(solve_step(matrix, lock, cache=cache) if solve else Step("solve: same pip set", SKIPPED, "--no-solve"))
    if not throwaway:
        steps.append(Step("env: install", SKIPPED, "--no-env"))
        return report()
    if platform not in lock.platforms:
        steps.append(Step("env: install", SKIPPED, f"the lock has no {platform} part"))
        return report()
    env_steps, kept = throwaway_steps(
        lock,
        project.install_sh(env),
        platform=platform,
        venv=venv,
        cache=cache,
        require_npu=require_npu,
        keep=keep,
        install=install,
    )
    steps += env_steps
    return report(kept)
