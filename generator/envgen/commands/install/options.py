"""What `envgen install` was asked, as one value the command line builds once, and what it made."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from envgen.installer.tools import InstallerName
from envgen.model import Lock


@dataclass(frozen=True)
class InstallOptions:
    """Where to install (`prefix`, a venv or a conda prefix), with which installer and `cache`,
    the profiles, whether sources needing CANN are skipped; with `bundle`, from that bundle with no
    network (trusted through the project's lock or `lock_sha256`); `frozen`: the lock as it is,
    even when stale."""

    prefix: Path
    cache: Path
    venv: bool = False
    installer: InstallerName = "pip"
    profiles: tuple[str, ...] = ()
    skip_cann: bool = False
    bundle: Path | None = None
    lock_sha256: str | None = None
    frozen: bool = False


@dataclass(frozen=True)
class Installed:
    """What an install made: the env's prefix (absolute) and the lock it holds."""

    prefix: Path
    lock: Lock
