"""`envgen init`: a minimal project a newcomer edits into their own stack."""

from __future__ import annotations

from pathlib import Path

from envgen.errors import InputError
from envgen.project import MARKERS, find_project

EXAMPLE_MATRIX = """\
# An example matrix: one conda python and two pip pins, locked for linux-64.
# docs/matrix.md of envgen describes every key; `envgen show example` prints what envgen reads here.
schema = 1

[env]
name = "example"
description = "a starting point: rename the file and this name, then add your packages and git sources"
platforms = ["linux-64"]
python = "3.11"

[system]
glibc = "2.28"

[system.cann]
version = "pending"
note = "this example needs no CANN; an Ascend stack names its version (e.g. 8.1.RC1)"

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

CHANNELS = {
    "conda-forge.toml": '# A conda channel. The file name is the name matrices use.\nkind = "conda"\n'
    'url = "https://conda.anaconda.org/conda-forge"\n',
    "pypi.toml": '# A pip index. The file name is the name matrices use.\nkind = "pip"\nurl = "https://pypi.org/simple"\n',
}

# What envgen leaves in a project that is not meant for git: a lock's mutex files and the relock outputs.
GITIGNORE = "# envgen: per-env mutex files of `envgen lock`, outputs of the relock workflow\nlocks/.*\nrelock-out/\n"


def init_project(directory: Path) -> list[Path]:
    """Create env-templates/example.toml, channels/ and a .gitignore entry in `directory`; returns what it
    created. Refuses a directory that already is, or is inside, a project (it would shadow it)."""
    try:
        existing = find_project(directory) if directory.exists() else None
    except InputError:
        existing = None
    if existing is not None:
        raise InputError(
            f"{directory.resolve()} is already in the envgen project {existing.root}",
            hint="edit its env-templates/ and channels/, or give `envgen init` a directory outside it",
        )
    files = {
        Path(MARKERS[0]) / "example.toml": EXAMPLE_MATRIX,
        **{Path(MARKERS[1]) / n: t for n, t in CHANNELS.items()},
    }
    created = []
    for relative, text in files.items():
        path = directory / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists():
            path.write_text(text, encoding="utf-8")
            created.append(path)
    gitignore = directory / ".gitignore"
    current = gitignore.read_text(encoding="utf-8") if gitignore.exists() else ""
    if "locks/.*" not in current.splitlines():
        gitignore.write_text(current + ("\n" if current and not current.endswith("\n") else "") + GITIGNORE)
        created.append(gitignore)
    return created
