"""conda-lock's lockfile models, imported without conda-lock's command line, and its lock file writer's steps.

`import conda_lock.lockfile.v2prelim.models` first runs the `__init__` of `conda_lock` (conda-lock's whole CLI:
its solvers and a vendored poetry, about half a second) and of `conda_lock.lockfile` (its readers and writer,
which import requests for the PyPI name mapping). The models are imported under bare packages instead: the
`__init__`s never run, only the model submodules (and pydantic) load. `conda_lock` stays bare (its submodules
still import on demand); `conda_lock.lockfile` is bare only while the models load, so a later import of it in
the same process gets the real one. In a process that already imported conda-lock nothing changes.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import yaml


def _register_bare(name: str) -> bool:
    """Put package `name` in sys.modules without running its `__init__`; False when it is there or absent."""
    if name in sys.modules:
        return False
    spec = importlib.util.find_spec(name)
    if spec is None or spec.submodule_search_locations is None:
        return False  # not installed: the import that follows fails with Python's own message
    sys.modules[name] = importlib.util.module_from_spec(spec)
    return True


@contextmanager
def _models_only() -> Iterator[None]:
    """Within: `conda_lock.lockfile`'s submodules import without its `__init__` (nor conda-lock's)."""
    _register_bare("conda_lock")
    bare_lockfile = _register_bare("conda_lock.lockfile")
    try:
        yield
    finally:
        if bare_lockfile:
            del sys.modules["conda_lock.lockfile"]


with _models_only():
    from conda_lock.lockfile.v1.models import Lockfile as LockfileV1
    from conda_lock.lockfile.v2prelim.models import (
        HashModel,
        LockedDependency,
        Lockfile,
        LockMeta,
        lockfile_v1_to_v2,
    )
    from conda_lock.models.channel import Channel

# libyaml's emitter writes what PyYAML's pure-Python one writes, about ten times faster (a lock of 200 packages
# took a third of a second), as long as every string is printable ASCII and every key short: otherwise the two
# fold and escape differently, or mark long keys differently, and conda-lock's own (pure-Python) dumper runs.
_FAST_DUMPER: Any = getattr(yaml, "CSafeDumper", None)
_LONGEST_KEY = 100


def plain_ascii(value: object) -> bool:
    """Whether `value` is plain data whose every string libyaml emits as PyYAML does."""
    if isinstance(value, str):
        return value.isascii() and value.isprintable()
    if isinstance(value, dict):
        return all(
            isinstance(k, str) and 0 < len(k) <= _LONGEST_KEY and plain_ascii(k) and plain_ascii(v)
            for k, v in value.items()
        )
    if isinstance(value, list):
        return all(plain_ascii(v) for v in value)
    return value is None or type(value) in (bool, int)


def conda_lock_text(content: Lockfile) -> str:
    """The text conda-lock's `write_conda_lock_file(content, path, metadata_choices=None,
    include_help_text=False)` writes (a test compares the two byte for byte): the same steps, but the text is
    returned rather than written, and dumped by libyaml where it writes the same. Sorts `content` in place."""
    content.alphasort_inplace()
    content.filter_virtual_packages_inplace()
    output = content.to_v1().dict_for_output()
    dumper = _FAST_DUMPER if _FAST_DUMPER is not None and plain_ascii(output) else yaml.Dumper
    text: str = yaml.dump(output, Dumper=dumper, sort_keys=False)
    return text


__all__ = [
    "Channel",
    "HashModel",
    "LockMeta",
    "LockedDependency",
    "Lockfile",
    "LockfileV1",
    "conda_lock_text",
    "lockfile_v1_to_v2",
]
