"""`envgen init`: a minimal project a newcomer edits into their own stack."""

from __future__ import annotations

import os
from pathlib import Path

from envgen.errors import InputError
from envgen.inputs.files import read_input_text
from envgen.project import MARKERS, find_project

EXAMPLE_MATRIX = """\
# An example matrix: one conda python and two pip pins, locked for linux-64.
# docs/matrix.md of envgen describes every key; `envgen show example` prints what envgen reads here.
schema = 1

[env]
name = "example"
description = "a starting point: rename the file and this name, then add packages and git sources"
platforms = ["linux-64"]
python = "3.11"

# CPU only: no [system.cann]. An Ascend stack adds one naming its CANN (version = "8.1.RC1").
[system]
glibc = "2.28"

[conda]
channels = ["conda-forge"]
specs = ["python 3.11.*", "pip"]

[pip]
indexes = ["pypi"]

[pip.packages]
numpy = { version = ">=2,<3" }
requests = {}

[[checks.imports]]
module = "numpy"
distribution = "numpy"
"""

# `envgen init --no-conda`: the same matrix, pip only (a venv of a python 3.11 installs it).
_CONDA_TABLE = '[conda]\nchannels = ["conda-forge"]\nspecs = ["python 3.11.*", "pip"]\n'
_NO_CONDA = (
    "# No [conda]: pip only, installed into a venv of a python 3.11 interpreter\n"
    "# (`envgen install example --prefix DIR --venv`); [env] python names it.\n"
)
PIP_ONLY_MATRIX = EXAMPLE_MATRIX.replace(
    "# An example matrix: one conda python and two pip pins,",
    "# An example matrix: two pip pins for a venv of python 3.11,",
).replace(_CONDA_TABLE, _NO_CONDA)

CHANNELS = {
    "conda-forge.toml": "# A conda channel. The file name is the name matrices use.\n"
    'kind = "conda"\nurl = "https://conda.anaconda.org/conda-forge"\n',
    "pypi.toml": '# A pip index. The file name is the name matrices use.\nkind = "pip"\nurl = '
    '"https://pypi.org/simple"\n',
}

# What envgen leaves in a project that is not meant for git: a lock's mutex files and the relock
# outputs.
GITIGNORE = (
    "# envgen: per-env mutex files of `envgen lock`, outputs of the relock "
    "workflow\nlocks/.*\nrelock-out/\n"
)


def _inside(directory: Path, path: Path) -> None:
    """Refuse a `path` that leads out of `directory` through a symlink (itself, or a directory on
    the way): init would write where it was not asked to."""
    root, real = os.path.realpath(directory), os.path.realpath(path)
    if real != root and not real.startswith(root + os.sep):
        outside = f"outside {directory}: init writes only inside it"
        raise InputError(
            f"{path} leads through a symbolic link to {real}, {outside}",
            hint="remove the link, or run `envgen init` in another directory",
            file=str(path),
        )


def _gitignore(path: Path) -> str:
    """The current .gitignore ('' when there is none), read as any input file is."""
    if not os.path.lexists(path):
        return ""
    return read_input_text(path, hint="make it a UTF-8 text file, or move it away and run again")


def init_project(directory: Path, *, conda: bool = True) -> list[Path]:
    """Create env-templates/example.toml, channels/ and a .gitignore entry in `directory`; returns
    what it created (without `conda`: an example with no [conda], pip only for a venv, and no
    conda channel). Refuses a directory that already is, or is inside, a project (it would shadow
    it), and a path leading out of `directory` through a symlink; all is checked before a write."""
    try:
        existing = find_project(directory) if directory.exists() else None
    except InputError:
        existing = None
    if existing is not None:
        raise InputError(
            f"{directory.resolve()} is already in the envgen project {existing.root}",
            hint="edit its env-templates/ and channels/, or give `envgen init` a directory "
            "outside it",
        )
    files = {
        Path(MARKERS[0]) / "example.toml": EXAMPLE_MATRIX if conda else PIP_ONLY_MATRIX,
        **{Path(MARKERS[1]) / n: t for n, t in CHANNELS.items() if conda or n == "pypi.toml"},
    }
    gitignore = directory / ".gitignore"
    for path in (*(directory / relative for relative in files), gitignore):
        _inside(directory, path)
    current = _gitignore(gitignore)
    created = []
    for relative, text in files.items():
        path = directory / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists():
            path.write_text(text, encoding="utf-8")
            created.append(path)
    if "locks/.*" not in current.splitlines():
        gitignore.write_text(
            current + ("\n" if current and not current.endswith("\n") else "") + GITIGNORE
        )
        created.append(gitignore)
    return created
