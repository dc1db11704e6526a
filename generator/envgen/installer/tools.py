"""pip and uv behind one Installer: each reads its own file of the lock (the requirements.txt, the
PEP 751 pylock), installs without dependencies, every artifact checked against its sha256."""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from uv import find_uv_bin

from envgen import network
from envgen.credentials import NO_CREDENTIALS, netrc_in_memory
from envgen.errors import NetworkError, ToolError, Unreached, VerificationError
from envgen.installer.core import Installer, PipPart, RecipeOptions
from envgen.lockio.exports.names import pylock_name, requirements_name
from envgen.process import TimedOut, run, tail
from envgen.redact import redact_text
from envgen.resolve.settings import Settings

log = logging.getLogger(__name__)

InstallerName = Literal["pip", "uv"]
INSTALLER_NAMES: tuple[InstallerName, ...] = ("pip", "uv")

# What pip and uv print when an artifact's bytes differ from the locked sha256.
_HASH_MISMATCH = ("DO NOT MATCH THE HASHES", "Hash mismatch")
# What pip, uv and rattler print when a download could not reach its host.
_DOWNLOAD_FAILED = re.compile(
    r"Max retries exceeded|timed out|Failed to (?:download|fetch)|error sending request|"
    r"NewConnectionError|Connection refused|ConnectionError|name resolution|"
    r"Name or service not known",
    re.IGNORECASE,
)
# What says a host was reached and answered, but not with the file: a verdict or a refusal, not a
# network failure. A status code counts only as pip and uv print one (a path such as
# /tmp/pytest-403/ is no answer).
_ANSWERED = re.compile(
    r"hash mismatch|DO NOT MATCH THE HASHES|HTTP status|HTTP error \d{3}|"
    r"\b(?:401|403|404) (?:Client Error|Unauthorized|Forbidden|Not Found)",
    re.IGNORECASE,
)
# A host as pip's urllib3 names it (host='h', port=p), or in a URL (never its credentials).
_HOST = re.compile(r"host='([^']+)', port=(\d+)|[a-z][a-z0-9+.-]*://(?:[^@/\s]*@)?([^/\s'\"`)]+)")


def tool_environment(settings: Settings) -> dict[str, str]:
    """The environment for pip and uv: the command's variables without the machine's pip/uv
    configuration and any active env, within its network limits."""
    environ = settings.variables
    dropped = ("PIP_", "UV_", "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "CONDA_PREFIX")
    env = {k: v for k, v in environ.items() if not k.startswith(dropped)}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1")
    env.update(UV_NO_CONFIG="1")
    env.update(network.uv_environment(settings.limits))
    return env


def unreachable_hosts(
    output: str, what: str, limits: network.Limits, platform: str | None = None
) -> NetworkError | None:
    """A download failure in a tool's output as one line per host it could not reach (None: not
    one); its hints name the `limits` it ran within."""
    if not _DOWNLOAD_FAILED.search(output) or _ANSWERED.search(output):
        return None
    # The lines reporting the failure name the hosts that failed (pip also lists every file it
    # collects); when none does, every host the output names is a suspect.
    failed = "\n".join(line for line in output.splitlines() if _DOWNLOAD_FAILED.search(line))
    hosts = named_hosts(failed) or named_hosts(output)
    why = redact_text(network.reason(output, limits))
    slow = f"; {network.raise_hint('read', limits)}" if network.timed_out(output) else ""
    hint = f"check the network and the index or channel serving these files{slow}"
    if not hosts:
        return NetworkError(f"{what}: {why}", hint=hint, hosts=(), platform=platform)
    some = "a host" if len(hosts) == 1 else "hosts"
    unreached = [Unreached(h, why) for h in hosts]
    return NetworkError.listing(
        f"{what}: {some} could not be reached", unreached, hint, platform=platform
    )


def named_hosts(text: str) -> list[str]:
    """The hosts `text` names (`host:port` as urllib3 gives them, or the host of a URL, never its
    credentials), sorted."""
    return sorted({f"{m[1]}:{m[2]}" if m[1] else m[3] for m in _HOST.finditer(text)})


@dataclass(frozen=True)
class Pip:
    """pip of the env itself, from the lock's requirements.txt (`--require-hashes`), run in the
    command's `settings` (its variables, network limits and cache)."""

    settings: Settings
    name: str = "pip"
    runs_env_pip: bool = True

    def derived_file(self, env: str, platform: str) -> str:
        return requirements_name(env, platform)

    def command(self, python: Path, part: PipPart) -> list[str]:
        cache = self.settings.cache / "pip"
        cmd = [str(python), "-m", "pip", "install", "--cache-dir", str(cache)]
        cmd += network.pip_options(self.settings.limits)
        cmd += [arg for host in part.trusted for arg in ("--trusted-host", host)]
        if part.find_links is not None:
            cmd += ["--no-index", "--find-links", str(part.find_links)]
        return [*cmd, "--no-deps", "--require-hashes", "-r", str(part.requirements)]

    def install(self, python: Path, part: PipPart) -> None:
        run_installer(self, self.command(python, part), python, part, self.settings)

    def recipe_options(self) -> RecipeOptions:
        return RecipeOptions()  # the recipe's default: the env's own pip


@dataclass(frozen=True)
class Uv:
    """uv installing into the env's python, from the lock's PEP 751 pylock, run in the command's
    `settings`."""

    settings: Settings
    name: str = "uv"
    runs_env_pip: bool = False

    def derived_file(self, env: str, platform: str) -> str:
        return pylock_name(env, platform)

    def command(self, python: Path, part: PipPart) -> list[str]:
        cmd = [find_uv_bin(), "pip", "install", "--python", str(python)]
        cmd += ["--cache-dir", str(self.settings.cache / "uv")]
        cmd += [arg for host in part.trusted for arg in ("--allow-insecure-host", host)]
        if part.find_links is not None:
            cmd += ["--no-index", "--offline", "--find-links", str(part.find_links)]
        return [*cmd, "--no-deps", "--require-hashes", "-r", str(part.requirements)]

    def install(self, python: Path, part: PipPart) -> None:
        run_installer(self, self.command(python, part), python, part, self.settings)

    def recipe_options(self) -> RecipeOptions:
        # The recipe's uv configured as envgen's own: no config file, no UV_* of the process, the
        # network limits and the cache.
        environ = {"UV_NO_CONFIG": "1", "UV_CACHE_DIR": str(self.settings.cache / "uv")}
        environ |= network.uv_environment(self.settings.limits)
        return RecipeOptions(("--uv", find_uv_bin()), environ, replaced=("UV_",))


def installer_named(name: InstallerName, settings: Settings) -> Pip | Uv:
    """The installer `--installer` names, run in `settings`."""
    return Uv(settings) if name == "uv" else Pip(settings)


def run_installer(
    installer: Installer, cmd: list[str], python: Path, part: PipPart, settings: Settings
) -> None:
    """Run `cmd`, the install of `part` into `python`'s env, in `settings` (within its network
    budget); a hash mismatch is a VerificationError, a host not reached a NetworkError, any other
    failure a ToolError. `part`'s credentials reach the tool as a netrc in memory, for the
    artifacts on their hosts: the files it reads and every file on disk stay without them."""
    prefix = python.parent.parent
    credentials = NO_CREDENTIALS if part.find_links is not None else part.credentials
    limits = settings.limits
    try:
        with netrc_in_memory(credentials) as (netrc, fds):
            env = {**tool_environment(settings), **netrc}
            proc = run(
                cmd,
                env=env,
                timeout=limits.budget,
                check=False,
                pass_fds=fds,
                secrets=credentials.secrets,
            )
    except TimedOut as exc:
        within = f"within {network.seconds('budget', limits)}"
        asked = named_hosts(" ".join(e.url for e in part.entries))
        raise NetworkError(
            f"{installer.name} did not finish installing the locked pip packages into "
            f"{prefix} {within}",
            hint=f"check the indexes and the network; {network.raise_hint('budget', limits)}",
            hosts=[Unreached(host, f"no complete answer {within}") for host in asked],
        ) from exc
    if proc.returncode != 0:
        raise _failure(
            installer.name, proc.stderr + proc.stdout, prefix, credentials.secrets, limits
        )


def _failure(
    tool: str, said: str, prefix: Path, secrets: tuple[str, ...], limits: network.Limits
) -> Exception:
    output = redact_text(tail(said), secrets)
    if any(marker in said for marker in _HASH_MISMATCH):
        where = f"{tool} install into {prefix}"
        return VerificationError(
            f"a pip artifact does not match its locked sha256 ({where}):\n{output}",
            hint="the index serves other bytes than were locked: find out why, then re-lock",
        )
    what = f"{tool} could not download the locked pip packages"
    unreachable = unreachable_hosts(redact_text(said, secrets), what, limits)
    if unreachable is not None:
        log.debug("%s said:\n%s", tool, output)
        return unreachable
    return ToolError(f"{tool} could not install the locked pip packages into {prefix}:\n{output}")
