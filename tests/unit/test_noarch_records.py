"""Which files of a conda prefix's records are compiled: conda-meta is read as hostile input."""

from __future__ import annotations

import json
import os
from pathlib import Path

from envgen.installer.destinations import _uncompiled


def test_only_plain_paths_of_readable_records_without_bytecode(tmp_path: Path) -> None:
    meta = tmp_path / "conda-meta"
    meta.mkdir()
    site = "lib/python3.11/site-packages"
    files = [f"{site}/pip/__init__.py", "/etc/x/site-packages/a.py", f"{site}/../../../b.py"]
    files += [f"{site}/c\n.py", f"{site}/d.txt", "bin/e.py"]
    (meta / "pip.json").write_text(json.dumps({"files": files}))
    assert _uncompiled(meta / "pip.json") == [f"{site}/pip/__init__.py"]
    (meta / "built.json").write_text(json.dumps({"files": [f"{site}/x.py", f"{site}/x.pyc"]}))
    assert _uncompiled(meta / "built.json") == []
    for name, text in [("bad.json", "{"), ("list.json", "[1]"), ("odd.json", '{"files": [1]}')]:
        (meta / name).write_text(text)
        assert _uncompiled(meta / name) == []
    os.mkfifo(meta / "fifo.json")  # never opened for a blocking read
    assert _uncompiled(meta / "fifo.json") == []
    (meta / "link.json").symlink_to(meta / "pip.json")
    assert _uncompiled(meta / "link.json") == []
