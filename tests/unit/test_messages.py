"""Messages a newcomer reads: one line per unreachable remote without a dangling colon, a plain 'not
a lock'."""

from __future__ import annotations

from pathlib import Path

import pytest
from envgen.errors import InputError, ToolError, Unreached
from envgen.inputs.files import read_input_text
from envgen.lockdiff.revisions import LockText, diff_sides
from envgen.network import Limits
from envgen.resolve.git.remote import unreachable


def test_an_unreachable_remote_without_detail_has_no_dangling_colon() -> None:
    """Before: status printed `upstream unreachable (source x: cannot reach git remote URL:)`."""
    silent = unreachable("https://example.com/x.git", "x", "", Limits())
    assert (
        silent.message
        == "source x: cannot reach git remote https://example.com/x.git (git said nothing)"
    )
    assert silent.summary == silent.message
    assert silent.hosts == (Unreached("https://example.com/x.git", "git said nothing"),)
    said = unreachable("https://example.com/x.git", "x", "\nfatal: unable to access\n", Limits())
    assert (
        said.summary
        == "source x: cannot reach git remote https://example.com/x.git: fatal: unable to access"
    )
    assert said.hosts == (Unreached("https://example.com/x.git", "fatal: unable to access"),)
    assert ToolError("headline:\n\n").summary == "headline"


def test_a_file_that_is_not_a_lock_says_so_plainly(tmp_path: Path) -> None:
    """Before: a warning about a missing sources.toml, a YAML error and the hint to run `envgen
    lock`."""
    readme = LockText("README.md", "README", "# envgen\n\nkey: value: other\n", None)
    toml = LockText("env-templates/a5.toml", "a5", 'schema = 1\n[env]\nname = "a5"\n', None)
    for side in (readme, toml):
        with pytest.raises(InputError) as raised:
            diff_sides(side, side)
        assert raised.value.message.startswith(
            f"{side.label} is not an envgen lock (locks/<env>.yml in conda-lock"
        )
        assert "envgen lock`" not in (raised.value.hint or "")


def test_an_input_read_under_another_name_is_named_so_in_every_message(tmp_path: Path) -> None:
    """A bundle's member is read from a temporary directory, and named by the bundle and its name:
    the message says so itself (before: the path was replaced in the message's text afterwards)."""
    (tmp_path / "bad").write_bytes(b"\xff")
    (tmp_path / "link").symlink_to(tmp_path / "bad")
    cases = {
        "bad": "not UTF-8 text",
        "link": "is a symbolic link",
        ".": "is not a regular file",
        "gone": "cannot read",
    }
    for name, said in cases.items():
        with pytest.raises(InputError) as raised:
            read_input_text(tmp_path / name, hint="make it again", shown=f"b.tar:{name}")
        assert f"b.tar:{name}" in raised.value.message and said in raised.value.message
        assert str(tmp_path) not in raised.value.message
    with pytest.raises(InputError, match=f"cannot read {tmp_path / 'bad'}: not UTF-8"):
        read_input_text(tmp_path / "bad", hint="make it again")
