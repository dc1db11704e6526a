"""Git repos of tiny Python projects with an in-tree build backend, pip-installable (also `-e`)
offline."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from envgen.example.gitrepos import GitRepo

# A PEP 517/660 backend in the project itself: no setuptools, no index, so builds work with or
# without build isolation and without network. It reads `fixture.json` for the name, version, module
# and required env.
BACKEND = r'''"""Build backend of an envgen fixture project (PEP 517 + PEP 660)."""

import base64
import hashlib
import json
import os
import pathlib
import zipfile

ROOT = pathlib.Path.cwd()
CONFIG = json.loads((ROOT / "fixture.json").read_text())


def _check_env():
    for name, value in CONFIG["require_env"].items():
        if os.environ.get(name) != value:
            raise RuntimeError(f"{CONFIG['name']} refuses to build: set {name}={value}")


def _stem():
    return CONFIG["name"].replace("-", "_").lower()


def _requires():
    # Declared dependencies: listed in fixture.json, or read from a file at build time (as setup.py files do).
    listed = list(CONFIG.get("dependencies", []))
    if CONFIG.get("dependencies_file"):
        text = (ROOT / CONFIG["dependencies_file"]).read_text()
        listed += [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]
    return listed


def _metadata():
    lines = ["Metadata-Version: 2.1", f"Name: {CONFIG['name']}", f"Version: {CONFIG['version']}"]
    return "\n".join(lines + [f"Requires-Dist: {r}" for r in _requires()]) + "\n"


def _wheel(directory, files):
    info = f"{_stem()}-{CONFIG['version']}.dist-info"
    files = dict(files)
    files[f"{info}/METADATA"] = _metadata()
    files[f"{info}/WHEEL"] = "Wheel-Version: 1.0\nGenerator: envgen-fixture\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    record = ""
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record += f"{path},sha256={digest},{len(text.encode())}\n"
    files[f"{info}/RECORD"] = record + f"{info}/RECORD,,\n"
    name = f"{_stem()}-{CONFIG['version']}-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(directory, name), "w") as zf:
        for path, text in files.items():
            zf.writestr(path, text)
    return name


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    _check_env()
    info = f"{_stem()}-{CONFIG['version']}.dist-info"
    os.makedirs(os.path.join(metadata_directory, info))
    with open(os.path.join(metadata_directory, info, "METADATA"), "w") as fh:
        fh.write(_metadata())
    return info


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    _check_env()
    files = {}
    if CONFIG["module"]:
        for path in sorted((ROOT / CONFIG["module"]).rglob("*.py")):
            files[path.relative_to(ROOT).as_posix()] = path.read_text()
    return _wheel(wheel_directory, files)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    _check_env()
    files = {f"_{_stem()}_editable.pth": str(ROOT) + "\n"} if CONFIG["module"] else {}
    return _wheel(wheel_directory, files)
'''  # noqa: E501 (the backend's source: the bytes of every fixture project's tree)


def backend_project(
    path: Path,
    name: str,
    version: str = "0.1.0",
    *,
    module: str | None = None,
    importable: bool = True,
    require_env: Mapping[str, str] | None = None,
    dependencies: tuple[str, ...] = (),
    dependencies_file: str | None = None,
) -> GitRepo:
    """A git repo of project `name` whose module `module` (default: the name) sets `__version__`.

    `importable=False` puts the module in the tree but installs nothing of it: only PYTHONPATH makes
    it importable (as with MindSpeed and Megatron-LM). `require_env` makes the build fail unless
    each variable has its value (as vllm needs VLLM_TARGET_DEVICE=empty). The project declares
    `dependencies`, and the lines of `dependencies_file` read at build time (a dynamic
    `install_requires`); the file itself is not created.
    """
    module = module or name.replace("-", "_").lower()
    config = {
        "name": name,
        "version": version,
        "module": module if importable else "",
        "require_env": dict(require_env or {}),
        "dependencies": list(dependencies),
        "dependencies_file": dependencies_file,
    }
    pyproject = (
        '[build-system]\nrequires = []\nbuild-backend = "fixture_backend"\nbackend-path = '
        '["_backend"]\n'
    )
    files = {
        "pyproject.toml": pyproject,
        "fixture.json": json.dumps(config, indent=2, sort_keys=True) + "\n",
        "_backend/fixture_backend.py": BACKEND,
        f"{module}/__init__.py": f'__version__ = "{version}"\n',
    }
    return GitRepo.create(path, files)


def npu_project(
    path: Path,
    name: str,
    version: str,
    *,
    subdirectory: str,
    dependencies: tuple[str, ...],
    optional: dict[str, tuple[str, ...]],
) -> GitRepo:
    """A git repo whose project lies in `subdirectory` and builds only once its NPU pyproject is
    copied over the default one (as SGLang's `python/pyproject_npu.toml`): the default names a
    backend that does not exist and a dependency no index has. The NPU one declares `dependencies`
    and the extras `optional`, statically (PEP 621), and so does the wheel it builds (without the
    extras)."""
    module = name.replace("-", "_").lower()
    config: dict[str, object] = {
        "name": name,
        "version": version,
        "module": module,
        "require_env": {},
        "dependencies": list(dependencies),
        "dependencies_file": None,
    }
    listed = "".join(f'    "{dep}",\n' for dep in dependencies)
    extras = "".join(f"{extra} = {json.dumps(list(deps))}\n" for extra, deps in optional.items())
    system = '[build-system]\nrequires = []\nbuild-backend = "{}"\nbackend-path = ["_backend"]\n\n'
    npu = (
        system.format("fixture_backend")
        + f'[project]\nname = "{name}"\nversion = "{version}"\ndependencies = [\n{listed}]\n\n'
        f"[project.optional-dependencies]\n{extras}"
    )
    default = (
        system.format("cuda_backend")
        + f'[project]\nname = "{name}"\nversion = "{version}"\n'
        + 'dependencies = ["demo-cuda-kernels>=1"]\n'
    )
    files = {
        f"{subdirectory}/pyproject.toml": default,
        f"{subdirectory}/pyproject_npu.toml": npu,
        f"{subdirectory}/fixture.json": json.dumps(config, indent=2, sort_keys=True) + "\n",
        f"{subdirectory}/_backend/fixture_backend.py": BACKEND,
        f"{subdirectory}/{module}/__init__.py": f'__version__ = "{version}"\n',
        "README.md": f"# {name}: the project is in {subdirectory}/\n",
    }
    return GitRepo.create(path, files)
