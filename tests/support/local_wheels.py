"""Wheels of pure-Python distributions installed in this interpreter, for a loopback index.

A metadata build's isolated env installs its build requirements from the matrix's indexes only;
offline, the index serving setuptools-scm and its dependencies is made of the copies installed here
(test extras): each wheel holds the files its RECORD lists inside site-packages, bytecode and
executables left out, with a RECORD of its own.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata as metadata
import zipfile
from pathlib import Path

from tests.support.installed import dependency_closure

_INSTALLER_FILES = ("RECORD", "INSTALLER", "REQUESTED", "direct_url.json")


def wheels_of(requirements: list[str], dest: Path) -> list[Path]:
    """A wheel of each installed distribution `requirements` need, transitively, into `dest`."""
    dest.mkdir(parents=True, exist_ok=True)
    return [wheel_of(dist, dest) for dist in dependency_closure(requirements)]


def wheel_of(dist: metadata.Distribution, dest: Path) -> Path:
    """The py3-none-any wheel of `dist` (pure Python), written into `dest`."""
    files: list[tuple[str, bytes]] = []
    info = ""
    for file in dist.files or []:
        top, name = file.parts[0], file.name
        if top == ".." or "__pycache__" in file.parts or name.endswith(".pyc"):
            continue
        if top.endswith(".dist-info"):
            info = top
            if name in _INSTALLER_FILES:
                continue
        files.append((file.as_posix(), Path(str(dist.locate_file(file))).read_bytes()))
    assert info, f"{dist.metadata['Name']} has no .dist-info in its RECORD"
    record = "".join(f"{path},sha256={_digest(data)},{len(data)}\n" for path, data in files)
    files.append((f"{info}/RECORD", (record + f"{info}/RECORD,,\n").encode()))
    path = dest / f"{info.removesuffix('.dist-info')}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in files:
            zf.writestr(zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), data)
    return path


def _digest(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
