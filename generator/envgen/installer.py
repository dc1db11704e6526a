"""Install a Lock into a prefix: conda packages (rattler) or a venv, hash-checked pip artifacts, then the recipe."""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal, TypeVar

import rattler
import rattler.exceptions
from uv import find_uv_bin

from envgen import network
from envgen.credentials import NO_CREDENTIALS, NO_LOCK_CREDENTIALS, Credentials, LockCredentials, netrc_in_memory
from envgen.errors import EnvgenError, InputError, NetworkError, ToolError, VerificationError
from envgen.lockio.exports.common import trusted_hosts
from envgen.lockio.integrity import recipe_problem, repair_hint
from envgen.model import CondaEntry, Lock, PipEntry
from envgen.process import TimedOut, run, tail
from envgen.redact import redact_text
from envgen.resolve.archives import wheels_directory
from envgen.resolve.conda_stage import rattler_client, repodata_record
from envgen.scratch import scratch_dir

log = logging.getLogger(__name__)

Installer = Literal["pip", "uv"]
INSTALLERS: tuple[Installer, ...] = ("pip", "uv")

# What pip and uv print when an artifact's bytes differ from the locked sha256.
_HASH_MISMATCH = ("DO NOT MATCH THE HASHES", "Hash mismatch")
# What pip, uv and rattler print when a download could not reach its host.
_DOWNLOAD_FAILED = re.compile(
    r"Max retries exceeded|timed out|Failed to (?:download|fetch)|error sending request|NewConnectionError|"
    r"Connection refused|ConnectionError|name resolution|Name or service not known",
    re.IGNORECASE,
)
# What says a host was reached and answered, but not with the file: a verdict or a refusal, not a network failure.
_ANSWERED = re.compile(r"hash mismatch|DO NOT MATCH THE HASHES|HTTP status|\b(?:401|403|404)\b", re.IGNORECASE)
# A host as pip's urllib3 names it (host='h', port=p), or in a URL (never its credentials).
_HOST = re.compile(r"host='([^']+)', port=(\d+)|[a-z][a-z0-9+.-]*://(?:[^@/\s]*@)?([^/\s'\"`)]+)")


def pip_requirements(entries: Sequence[PipEntry]) -> str:
    """A requirements file pinning every artifact by URL and sha256 (for `--require-hashes --no-deps`)."""
    lines = [f"{e.name} @ {e.url} --hash=sha256:{e.sha256}" for e in sorted(entries, key=lambda e: e.name)]
    return "".join(f"{line}\n" for line in lines)


def tool_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for pip and uv: the machine's pip/uv configuration and any active env left out."""
    environ = os.environ if environ is None else environ
    dropped = ("PIP_", "UV_", "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "CONDA_PREFIX")
    env = {k: v for k, v in environ.items() if not k.startswith(dropped)}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1", UV_NO_CONFIG="1")
    env.update(network.uv_environment(network.limits()))
    return env


def unreachable_hosts(output: str, what: str) -> NetworkError | None:
    """A download failure in a tool's output as one line per host it could not reach (None: not one)."""
    if not _DOWNLOAD_FAILED.search(output) or _ANSWERED.search(output):
        return None
    limits = network.limits()
    # The lines reporting the failure name the hosts that failed (pip also lists every file it collects); when
    # none does, every host the output names is a suspect.
    failed = "\n".join(line for line in output.splitlines() if _DOWNLOAD_FAILED.search(line))
    hosts = sorted({f"{m[1]}:{m[2]}" if m[1] else m[3] for m in _HOST.finditer(failed)})
    hosts = hosts or sorted({f"{m[1]}:{m[2]}" if m[1] else m[3] for m in _HOST.finditer(output)})
    why = redact_text(network.reason(output, limits))
    slow = f"; {network.raise_hint('read', limits)}" if network.timed_out(output) else ""
    hint = f"check the network and the index or channel serving these files{slow}"
    if not hosts:
        return NetworkError(f"{what}: {why}", hint=hint)
    lines = "".join(f"\n  {host}: {why}" for host in hosts)
    return NetworkError(f"{what}: {'a host' if len(hosts) == 1 else 'hosts'} could not be reached{lines}", hint=hint)


# rattler reports download, hash and link failures alike through these.
_INSTALL_ERRORS = (
    rattler.exceptions.InstallerError,
    rattler.exceptions.TransactionError,
    rattler.exceptions.LinkError,
    rattler.exceptions.IoError,
    rattler.exceptions.CacheDirError,
)


def install_conda(
    entries: Sequence[CondaEntry], prefix: Path, *, cache: Path, credentials: Credentials = NO_CREDENTIALS
) -> None:
    """Create (or update) the conda prefix `prefix` from one platform's locked entries.

    Packages are downloaded into `cache/conda/pkgs`; rattler checks each http(s) download against its sha256.
    `credentials` go with the downloads from their channels' hosts, as headers (the URLs carry none).
    """
    platforms = sorted({e.platform for e in entries})
    if len(platforms) != 1:
        raise InputError(
            f"installing into {prefix} needs the conda entries of one platform; got {', '.join(platforms) or 'none'}",
            hint="pass Lock.conda_for(platform)",
        )
    log.info("installing %d conda packages for %s into %s", len(entries), platforms[0], prefix)
    limits = network.limits()
    work = rattler.install(
        [repodata_record(e) for e in entries],
        prefix,
        cache_dir=cache / "conda" / "pkgs",
        platform=rattler.Subdir(platforms[0]),
        show_progress=False,
        execute_link_scripts=False,
        client=rattler_client(credentials, limits),
    )

    def over() -> EnvgenError:
        return NetworkError(
            f"installing the locked conda packages for {platforms[0]} took more than "
            f"{network.seconds('budget', limits)}",
            hint=f"check the channels and the network; {network.raise_hint('budget', limits)}",
        )

    what = f"downloading the locked conda packages for {platforms[0]}"
    try:
        network.run_bounded(work, budget=limits.budget, over=over)
    except _INSTALL_ERRORS as exc:
        unreachable = unreachable_hosts(redact_text(str(exc), credentials.secrets), what)
        if unreachable is not None:
            network.abandoned.set()
            raise unreachable from exc
        raise VerificationError(
            f"installing the locked conda packages for {platforms[0]} into {prefix} failed:\n"
            f"{redact_text(str(exc).strip(), credentials.secrets)}",
            hint="a hash mismatch means the channel serves other bytes than were locked: re-lock or fix the "
            "channel; otherwise check the channel is reachable",
        ) from exc


def verify_recipe(lock: Lock, recipe: Path) -> None:
    """The recipe about to run must be what the lock renders (the rule: lockio/integrity.py): it is derived,
    never edited."""
    try:
        written = recipe.read_bytes()
    except OSError as exc:
        raise InputError(
            f"cannot read the recipe {recipe}: {exc.strerror}", hint=f"run `envgen lock {lock.env}`"
        ) from exc
    # surrogateescape maps bytes to text one to one: a recipe that is not even UTF-8 any more differs like any edit.
    problem = recipe_problem(lock, written.decode("utf-8", "surrogateescape"), str(recipe))
    if problem is not None:
        raise VerificationError(problem, hint=repair_hint(lock.env))


def create_venv(prefix: Path, lock: Lock, platform: str, *, python: str = sys.executable) -> None:
    """A venv at `prefix` made by `python` (this interpreter by default), whose version must be the locked one."""
    wanted = lock.python_for(platform)
    if wanted is None:
        raise InputError(
            f"the lock of {lock.env} holds no single python for {platform}, so a venv cannot be checked against it",
            hint="add `python X.Y.*` to [conda] specs and re-lock, or install without --venv",
        )
    proc = run([python, "-c", _PROBE])
    have, _, bundled = proc.stdout.strip().partition("\n")
    if have.split(".")[:2] != wanted.split(".")[:2]:
        raise InputError(
            f"{python} is python {have}, but the lock of {lock.env} has python {wanted} for {platform}",
            hint=f"run envgen with a python {'.'.join(wanted.split('.')[:2])} interpreter, or install without --venv",
        )
    if (prefix / "pyvenv.cfg").is_file():
        log.info("reusing the venv at %s", prefix)
        return
    if prefix.exists() and any(prefix.iterdir()):
        raise InputError(f"{prefix} exists and is not a venv", hint="choose an empty or new directory for --prefix")
    log.info("creating a venv (python %s) at %s", have, prefix)
    _make_venv(python, prefix, sorted(Path(bundled).glob("*.whl")) if bundled else [])


# The interpreter's version, and the directory of the wheels its ensurepip installs (pip; setuptools up to 3.11),
# empty where a distribution has removed ensurepip's copies (Debian's python3-venv ships them elsewhere).
_PROBE = """import os, sys
print('%d.%d.%d' % sys.version_info[:3])
try:
    import ensurepip
    bundled = os.path.join(os.path.dirname(ensurepip.__file__), '_bundled')
    print(bundled if os.path.isdir(bundled) else '')
except ImportError:
    print('')
"""


def _make_venv(python: str, prefix: Path, seeds: Sequence[Path]) -> None:
    """`python -m venv` at `prefix` with the wheels ensurepip would install, put there by uv from those same files.

    ensurepip runs pip to install pip, about 3 s of CPU per venv; uv installs the same wheels in half of that.
    Without those wheels at hand, venv seeds itself as usual.

    uv compiles their bytecode, as ensurepip does: a check runs pip half a dozen times in the new env, and where
    PYTHONDONTWRITEBYTECODE is set (many container images) each run would otherwise compile pip anew, about
    0.5 s of CPU apiece."""
    if not seeds:
        run([python, "-m", "venv", str(prefix)])
        return
    run([python, "-m", "venv", "--without-pip", str(prefix)])
    offline = ["--no-config", "--offline", "--no-index", "--no-cache", "--no-deps", "--quiet", "--compile-bytecode"]
    run([find_uv_bin(), "pip", "install", *offline, "--python", str(prefix / "bin" / "python"), *map(str, seeds)])


def ensure_own_python(prefix: Path) -> None:
    """The prefix's python must install into the prefix: a stand-in that runs another python would not."""
    python = prefix / "bin" / "python"
    proc = run([python, "-c", "import sys; print(sys.prefix)"], env=tool_environment(), check=False)
    runs_in = proc.stdout.strip()
    if proc.returncode != 0 or Path(runs_in).resolve() != prefix.resolve():
        where = f"runs with sys.prefix {runs_in}" if proc.returncode == 0 else "does not run"
        raise VerificationError(
            f"{python} {where}, not {prefix}: pip packages installed through it would land elsewhere",
            hint="the locked conda packages hold no real CPython (a fixture channel?): install with --venv",
        )


def pip_install_command(
    installer: Installer,
    python: Path,
    requirements: Path,
    *,
    cache: Path,
    trusted: Sequence[str] = (),
    offline: bool = False,
) -> list[str]:
    """The pip or uv command installing a hashed requirements file into `python`'s env, without dependencies.

    `offline`: no index at all (the requirements name local files)."""
    if installer == "uv":
        cmd = [find_uv_bin(), "pip", "install", "--python", str(python), "--cache-dir", str(cache / "uv")]
        cmd += [arg for host in trusted for arg in ("--allow-insecure-host", host)]
    else:
        cmd = [str(python), "-m", "pip", "install", "--cache-dir", str(cache / "pip")]
        cmd += [*network.pip_options(network.limits())]
        cmd += [arg for host in trusted for arg in ("--trusted-host", host)]
    if offline:
        cmd += ["--no-index", "--offline"] if installer == "uv" else ["--no-index"]
    return [*cmd, "--no-deps", "--require-hashes", "-r", str(requirements)]


def install_pip(
    entries: Sequence[PipEntry],
    prefix: Path,
    *,
    installer: Installer,
    cache: Path,
    trusted: Sequence[str] = (),
    requirements: Path | None = None,
    offline: bool = False,
    credentials: Credentials = NO_CREDENTIALS,
) -> None:
    """Install `entries` into the prefix's python: no dependencies, every artifact checked against its sha256.

    `trusted` names hosts whose TLS is not verified, as the matrix's channels allow for their indexes.
    `credentials` (the indexes') reach pip or uv as a netrc in memory, for the artifacts on their hosts: the
    requirements and every file on disk stay without them.
    `requirements` is a file of the lock's to install from instead (its requirements.txt for pip, its pylock
    for uv), so the file users install from is the one proven; it must name exactly `entries`.
    """
    if not entries:
        return
    python = prefix / "bin" / "python"
    if not python.exists():
        raise VerificationError(
            f"no python at {python} to install {len(entries)} pip packages into",
            hint="the locked conda packages must include python; for fixture channels use --venv",
        )
    with scratch_dir("envgen-pip-") as tmp:
        if requirements is None:
            requirements = tmp / "requirements.txt"
            requirements.write_text(pip_requirements(entries))
        cmd = pip_install_command(installer, python, requirements, cache=cache, trusted=trusted, offline=offline)
        log.info("installing %d pip packages with %s from %s into %s", len(entries), installer, requirements, prefix)
        limits = network.limits()
        try:
            with netrc_in_memory(NO_CREDENTIALS if offline else credentials) as (netrc, fds):
                env = {**tool_environment(), **netrc}
                proc = run(cmd, env=env, timeout=limits.budget, check=False, pass_fds=fds, secrets=credentials.secrets)
        except TimedOut as exc:
            raise NetworkError(
                f"{installer} did not finish installing the locked pip packages into {prefix} within "
                f"{network.seconds('budget', limits)}",
                hint=f"check the indexes and the network; {network.raise_hint('budget', limits)}",
            ) from exc
    if proc.returncode == 0:
        return
    output = redact_text(tail(proc.stderr + proc.stdout), credentials.secrets)
    if any(marker in proc.stderr + proc.stdout for marker in _HASH_MISMATCH):
        raise VerificationError(
            f"a pip artifact does not match its locked sha256 ({installer} install into {prefix}):\n{output}",
            hint="the index serves other bytes than were locked: find out why, then re-lock",
        )
    what = f"{installer} could not download the locked pip packages"
    unreachable = unreachable_hosts(redact_text(proc.stderr + proc.stdout, credentials.secrets), what)
    if unreachable is not None:
        log.debug("%s said:\n%s", installer, output)
        raise unreachable
    raise ToolError(f"{installer} could not install the locked pip packages into {prefix}:\n{output}")


def run_recipe(
    recipe: Path,
    prefix: Path,
    *,
    profiles: Sequence[str] = (),
    skip_cann: bool = False,
    environ: Mapping[str, str] | None = None,
    credentials: Credentials = NO_CREDENTIALS,
    archives: Path | None = None,
) -> str:
    """Run the install.sh recipe on `prefix`; returns its log (stderr). `credentials` (the git sources') reach
    its git through the environment (`http.<url>.extraHeader`), as they reach envgen's own git."""
    cmd = ["sh", str(recipe), "--prefix", str(prefix)]
    for name in profiles:
        cmd += ["--profile", name]
    if skip_cann:
        cmd.append("--skip-cann")
    if archives is not None:
        cmd += ["--archives", str(archives)]
    env = credentials.git_environment(os.environ if environ is None else environ)
    proc = run(cmd, env=env, check=False, secrets=credentials.secrets)
    if proc.returncode != 0:
        output = redact_text(tail(proc.stderr + proc.stdout), credentials.secrets)
        raise ToolError(
            f"{recipe} --prefix {prefix} failed (exit {proc.returncode}):\n{output}",
            hint="the last lines above name the source and step; fix it and run again",
        )
    return proc.stderr


def _check_request(lock: Lock, platform: str, profiles: Sequence[str]) -> None:
    """The platform and profiles asked for must be the lock's."""
    if platform not in lock.platforms:
        raise InputError(
            f"the lock of {lock.env} has no {platform} part (it has {', '.join(lock.platforms)})",
            hint=f"add {platform} to [env] platforms and re-lock",
        )
    known = [p.name for p in lock.profiles]
    unknown = [p for p in profiles if p not in known]
    if unknown:
        listed = ", ".join(known) or "none"
        raise InputError(
            f"the lock of {lock.env} has no profile {', '.join(map(repr, unknown))}",
            hint=f"known profiles: {listed} (they are [activation.profiles] in the matrix)",
        )


def install_env(
    lock: Lock,
    recipe: Path,
    prefix: Path,
    *,
    platform: str,
    venv: bool,
    cache: Path,
    installer: Installer = "pip",
    profiles: Sequence[str] = (),
    skip_cann: bool = False,
    requirements: Path | None = None,
    local: Mapping[str, Path] | None = None,
    recipe_environ: Mapping[str, str] | None = None,
    credentials: LockCredentials = NO_LOCK_CREDENTIALS,
) -> None:
    """Install everything `lock` pins for `platform` into `prefix`, then run its recipe for the git sources.

    With `venv` the env is a venv of this interpreter (the lock's conda part is not installed; its python
    version must match); otherwise rattler installs the conda part, which must bring python and pip.
    `local` maps every artifact's sha256 to a verified local file (a bundle's): no index or channel is used.
    `recipe_environ` is the recipe's environment (a bundle's sends git to local mirrors). `credentials` are
    those of the lock's channels, indexes and git sources, each used for its own host only.
    """
    _check_request(lock, platform, profiles)
    verify_recipe(lock, recipe)
    entries = lock.pip_for(platform)
    # Every artifact located before the prefix is touched: a bundle lacking one fails here, not
    # half-way.
    conda = () if venv else _located(lock.conda_for(platform), local)
    pip = _located(entries, local)
    prefix = prefix.absolute()
    # The archives' wheels too, each checked against the lock before the prefix is touched.
    with wheels_directory(lock, platform, cache, local, network.limits()) as archives:
        if venv:
            create_venv(prefix, lock, platform)
        else:
            install_conda(conda, prefix, cache=cache, credentials=credentials.conda)
        ensure_own_python(prefix)
        install_pip(
            pip,
            prefix,
            installer=installer,
            cache=cache,
            trusted=trusted_hosts(lock, entries),
            requirements=requirements,
            offline=local is not None,
            credentials=credentials.pip,
        )
        log.info("running %s on %s", recipe.name, prefix)
        run_recipe(
            recipe,
            prefix,
            profiles=profiles,
            skip_cann=skip_cann,
            environ=recipe_environ,
            credentials=credentials.git,
            archives=archives,
        )


_E = TypeVar("_E", CondaEntry, PipEntry)


def _located(entries: Sequence[_E], local: Mapping[str, Path] | None) -> tuple[_E, ...]:
    """The entries with their URLs pointing at local files when `local` has them (sha256 -> path);
    one `local` lacks is a VerificationError naming it (a bundle carries every artifact locked)."""
    if local is None:
        return tuple(entries)
    missing = [f"{e.name} {e.version} ({e.platform})" for e in entries if e.sha256 not in local]
    if missing:
        more = f" and {len(missing) - 1} more" if missing[1:] else ""
        raise VerificationError(
            f"the bundle holds no file for {missing[0]}{more}",
            hint="make the bundle again from this lock (nothing was installed)",
        )
    return tuple(dataclasses.replace(e, url=local[e.sha256].absolute().as_uri()) for e in entries)
