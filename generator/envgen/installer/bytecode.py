"""The bytecode of the python sources an install leaves uncompiled, compiled once per machine.

rattler links `noarch: python` packages as sources only, and uv installs a venv's seed wheels
without bytecode; conda and ensurepip compile them, so envgen does too (without bytecode each run of
the env's pip compiles pip anew where none may be written: PYTHONDONTWRITEBYTECODE, a read-only
prefix). Compiling pip and setuptools costs one to two and a half seconds of CPU, and every check's
throwaway env, every install and every bundle install paid it again for the same files. The env's
own python (pyc_worker.py) compiles each source once into the cache's `bytecode/` entry, by the
sha256 of its bytes and the interpreter's magic number, and copies it from there afterwards:
hash-based bytecode (PEP 552), valid for the same bytes wherever they lie and checked against them
on import.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path

from envgen.installer.interpreter import run_interpreter

log = logging.getLogger(__name__)

ENTRY = "bytecode"  # its directory in envgen's cache (project.CACHE_ENTRIES)
_WORKER = Path(__file__).with_name("pyc_worker.py")


def compile_sources(
    python: Path, sources: Sequence[Path], cache: Path, env: Mapping[str, str] | None = None
) -> None:
    """The bytecode of `sources` for `python`, from `cache` or compiled by it and kept there; a
    source that does not compile, or whose path holds a line break, is left as it is."""
    sources = [source for source in sources if not any(c in str(source) for c in "\n\r")]
    if not sources:
        return
    log.debug("the bytecode of %d python files for %s", len(sources), python)
    proc = run_interpreter(
        [str(python), "-I", str(_WORKER), str(cache / ENTRY)],
        env=env,
        input="".join(f"{source}\n" for source in sources),
        check=False,
    )
    log.debug("bytecode: %s", (proc.stdout + proc.stderr).strip())
