"""What `envgen check` was asked, as one value the command line builds once."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from envgen.installer import core
from envgen.installer.core import Destination, Installer, Request, Source
from envgen.installer.tools import InstallerName

# What installs the throwaway env: installer.core.install, or a test's stand-in.
Install = Callable[[Request, Source, Destination, Installer], None]


@dataclass(frozen=True)
class CheckOptions:
    """What is checked and how: the re-solve (`solve`), the throwaway env (`throwaway`: a venv or
    a conda prefix, by pip or uv, kept or not, installed by `install`, the install core or a test's
    stand-in), whether what needs an NPU fails rather than skips, whether a skipped env fails
    (`require_env`); with `bundle`, the env from that bundle with no network (trusted through the
    project's lock or `lock_sha256`); `frozen`: the lock as it is, even when stale."""

    cache: Path
    venv: bool = False
    installer: InstallerName = "pip"
    keep: bool = False
    require_npu: bool = False
    solve: bool = True
    throwaway: bool = True
    require_env: bool = False
    bundle: Path | None = None
    lock_sha256: str | None = None
    frozen: bool = False
    install: Install = core.install
