"""The real A5 PyPI set for linux-aarch64 against https://pypi.org/simple (opt in: `-m network`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from envgen.platforms import platform_tags
from packaging.utils import parse_wheel_filename

from tests.support.a5 import a5_pypi_matrix
from tests.support.builders import at, lock_pip

pytestmark = pytest.mark.network


def test_a5_set_resolves_for_aarch64_with_one_wheel_each(tmp_path: Path) -> None:
    lock = lock_pip(a5_pypi_matrix(), "linux-aarch64", "3.11", (), at(tmp_path / "cache"))
    names = [e.name for e in lock.entries]
    assert {
        "torch",
        "transformers",
        "ray",
        "tensordict",
        "torchdata",
        "qwen-vl-utils",
        "mbridge",
    } <= set(names)
    assert not [n for n in names if n.startswith("nvidia-") or n == "triton"]
    accepted = set(platform_tags("linux-aarch64", "3.11", "2.28"))
    for entry in lock.entries:
        assert len(entry.sha256) == 64 and entry.url.startswith("https://")
        assert entry.index == "pypi" and entry.platform == "linux-aarch64"
        if not entry.sdist:
            _, _, _, tags = parse_wheel_filename(entry.url.rsplit("/", 1)[1])
            assert tags & accepted, entry.url
            assert all(t.platform == "any" or "aarch64" in t.platform for t in tags), entry.url
    torch = next(e for e in lock.entries if e.name == "torch")
    assert torch.version == "2.10.0" and not torch.sdist
    assert torch.url.endswith("-cp311-cp311-manylinux_2_28_aarch64.whl")
