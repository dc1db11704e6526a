"""conda-lock's lockfile models, imported without conda-lock's command line.

`import conda_lock.lockfile` first runs the package's `__init__`, which imports conda-lock's whole CLI (its
solvers and a vendored poetry): about half a second on every re-lock, for models envgen reads and writes
with. `import_models_only` registers the package without running that `__init__`, so only the lockfile
submodules (and what they import) load. In a process that already imported conda-lock it changes nothing.
"""

from __future__ import annotations

import importlib.util
import sys


def import_models_only() -> None:
    """Make `conda_lock` importable as a bare package (its submodules load on demand, its `__init__` never)."""
    if "conda_lock" in sys.modules:
        return
    spec = importlib.util.find_spec("conda_lock")
    if spec is None or spec.submodule_search_locations is None:
        return  # not installed: the import that follows fails with Python's own message
    sys.modules["conda_lock"] = importlib.util.module_from_spec(spec)


import_models_only()

from conda_lock.lockfile import write_conda_lock_file  # noqa: E402
from conda_lock.lockfile.v1.models import Lockfile as LockfileV1  # noqa: E402
from conda_lock.lockfile.v2prelim.models import (  # noqa: E402
    HashModel,
    LockedDependency,
    Lockfile,
    LockMeta,
    lockfile_v1_to_v2,
)
from conda_lock.models.channel import Channel  # noqa: E402

__all__ = [
    "Channel",
    "HashModel",
    "LockMeta",
    "LockedDependency",
    "Lockfile",
    "LockfileV1",
    "lockfile_v1_to_v2",
    "write_conda_lock_file",
]
