"""The python of a lock: one definition for the solve, the install, the checks and the derived
files."""

from __future__ import annotations

import pytest
from envgen.errors import ResolutionError
from envgen.model import CondaEntry, Lock
from envgen.resolve.conda.stage import python_version

from tests.support.builders import conda_entry, make_lock


def _python(version: str, platform: str = "linux-64") -> CondaEntry:
    return conda_entry("python", version, platform, "0")


def _lock(*conda: CondaEntry) -> Lock:
    return make_lock("e", platforms=("linux-64", "linux-aarch64"), conda=conda)


def test_one_python_per_platform_is_the_lock_s_python() -> None:
    lock = _lock(_python("3.11.9"), _python("3.10.14", "linux-aarch64"))
    assert lock.python_for("linux-64") == python_version(lock.conda_for("linux-64")) == "3.11.9"
    assert lock.python_for("linux-aarch64") == "3.10.14"


def test_none_or_several_pythons_are_no_python() -> None:
    several = _lock(_python("3.11.9"), _python("3.12.1"))
    assert several.python_for("linux-64") is None and _lock().python_for("linux-64") is None
    with pytest.raises(ResolutionError, match=r"versions 3\.11\.9, 3\.12\.1"):
        python_version(several.conda_for("linux-64"))
    with pytest.raises(ResolutionError, match="no python package"):
        python_version(())
