"""The bytecode an install compiles is compiled once per machine (installer/bytecode.py): the same
bytes elsewhere take it from the cache, and it is valid only for those bytes."""

from __future__ import annotations

import hashlib
import importlib.util
import io
import logging
import subprocess
import sys
from pathlib import Path

import pytest
from envgen.installer import pyc_worker
from envgen.installer.bytecode import ENTRY, compile_sources

SOURCE = "def where():\n    import inspect\n    return inspect.getsourcefile(where)\n\nVALUE = 1\n"


def _tree(root: Path, text: str = SOURCE) -> list[Path]:
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "mod.py").write_text(text)
    return [root / "pkg" / "__init__.py", root / "pkg" / "mod.py"]


def _said(caplog: pytest.LogCaptureFixture) -> str:
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("bytecode: ")]
    caplog.clear()
    return said[-1].removeprefix("bytecode: ")


def _run(root: Path, code: str) -> str:
    """`code` run by this python with `root` first on its path, no bytecode written."""
    env = {"PYTHONPATH": str(root), "PYTHONDONTWRITEBYTECODE": "1", "PATH": "/usr/bin:/bin"}
    proc = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    return proc.stdout.strip()


def test_the_same_bytes_elsewhere_take_their_bytecode_from_the_cache(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="envgen.installer.bytecode")
    cache = tmp_path / "cache"
    first, second = _tree(tmp_path / "one"), _tree(tmp_path / "two")
    compile_sources(Path(sys.executable), first, cache)
    assert _said(caplog) == "0 from the store, 2 compiled, 0 left as they are"
    compile_sources(Path(sys.executable), second, cache)
    assert _said(caplog) == "2 from the store, 0 compiled, 0 left as they are"
    kept = sorted(p.name for p in (cache / ENTRY).rglob("*.pyc"))
    assert len(kept) == 2  # one entry per distinct source, both kept once
    for source in second:
        pyc = Path(importlib.util.cache_from_source(str(source)))
        assert pyc.read_bytes()[4:8] == b"\x03\x00\x00\x00"  # hash-based, checked (PEP 552)
    # The copied bytecode is used, and the module is where it lies, not where it was compiled.
    code = "import sys, pkg.mod as m; print(m.where()); print(m.__cached__)"
    where, cached = _run(tmp_path / "two", code).splitlines()
    assert where == str(second[1])
    assert cached == importlib.util.cache_from_source(str(second[1]))


def test_a_changed_source_does_not_run_its_old_bytecode(tmp_path: Path) -> None:
    sources = _tree(tmp_path / "env")
    compile_sources(Path(sys.executable), sources, tmp_path / "cache")
    sources[1].write_text(SOURCE.replace("VALUE = 1", "VALUE = 2"))  # same size, new bytes
    assert _run(tmp_path / "env", "import pkg.mod as m; print(m.VALUE)") == "2"


def test_a_damaged_entry_is_compiled_again_and_a_broken_source_left_as_it_is(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="envgen.installer.bytecode")
    cache = tmp_path / "cache"
    compile_sources(Path(sys.executable), _tree(tmp_path / "one"), cache)
    _said(caplog)
    for entry in (cache / ENTRY).rglob("*.pyc"):
        entry.write_bytes(entry.read_bytes()[:20])  # the header whole, the code cut
    second = _tree(tmp_path / "two")
    broken = tmp_path / "two" / "pkg" / "broken.py"
    broken.write_text("def (:\n")
    odd = tmp_path / "two" / "pkg" / "odd\nname.py"
    odd.write_text("X = 1\n")
    compile_sources(Path(sys.executable), [*second, broken, odd], cache)
    assert _said(caplog) == "0 from the store, 2 compiled, 1 left as they are"
    assert not Path(importlib.util.cache_from_source(str(broken))).exists()
    assert not Path(importlib.util.cache_from_source(str(odd))).exists()
    assert _run(tmp_path / "two", "import pkg.mod as m; print(m.VALUE)") == "1"


def test_the_worker_counts_what_it_took_compiled_and_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """pyc_worker's own run, in this process (the tests above run it as the env's python does):
    a store entry written whole and taken back; a source that does not read is left."""
    store = tmp_path / "store"
    sources = _tree(tmp_path / "one")
    missing = tmp_path / "one" / "pkg" / "missing.py"

    def work(*names: Path) -> str:
        monkeypatch.setattr(sys, "argv", ["pyc_worker.py", str(store)])
        monkeypatch.setattr(sys, "stdin", io.StringIO("".join(f"{n}\n" for n in names)))
        pyc_worker.main()
        return capsys.readouterr().out

    assert work(*sources, missing) == "0 from the store, 2 compiled, 1 left as they are\n"
    (entry,) = store.rglob(f"{hashlib.sha256(SOURCE.encode()).hexdigest()}.pyc")
    assert not list(store.rglob("*.tmp"))
    assert work(*_tree(tmp_path / "two")) == "2 from the store, 0 compiled, 0 left as they are\n"
    entry.write_bytes(b"not bytecode")
    assert work(*_tree(tmp_path / "three")) == "1 from the store, 1 compiled, 0 left as they are\n"
