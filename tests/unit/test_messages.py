"""Messages a newcomer reads: one line per unreachable remote without a dangling colon, a plain 'not
a lock'."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from envgen.errors import InputError, MatrixError, Problem, ToolError, Unreached
from envgen.inputs.files import read_input_text
from envgen.lockdiff.revisions import LockText, diff_sides
from envgen.network import Limits
from envgen.resolve.git.remote import unreachable

from tests.support.schemas import validate

SCHEMA = json.loads((Path(__file__).parents[2] / "docs" / "cli.schema.json").read_text())


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


def test_an_error_built_from_its_parts_says_them_in_one_format_and_carries_them() -> None:
    """`file[:line]: key: reason`, each part left out when not known; --json carries the parts;
    an error is never changed once built (reworded, with_hint make new ones)."""
    from envgen.cli.output import envelope

    placed = InputError(file="locks/a5.yml", line=3, key="version", reason="expected 1", hint="h")
    assert placed.message == "locks/a5.yml:3: version: expected 1"
    assert (placed.headline, placed.gist) == (placed.message, "version: expected 1")
    assert InputError(file="locks/a5.yml", reason="not valid YAML: x\ny").message == (
        "locks/a5.yml: not valid YAML: x\ny"
    )
    error = json.loads(envelope("diff", 2, [], placed))["error"]
    assert error == {
        "message": placed.message,
        "hint": "h",
        "file": "locks/a5.yml",
        "line": 3,
        "key": "version",
        "reason": "expected 1",
    }
    assert "file" not in json.loads(envelope("diff", 2, [], InputError("plain")))["error"]
    found = [
        Problem("env-templates/a5.toml", "pip.x", "bad", 4),
        Problem("channels/c.toml", "", "no"),
    ]
    document = json.loads(envelope("lock", 2, [], MatrixError(found)))
    validate(document, SCHEMA)
    assert document["error"]["problems"] == [
        {"file": "env-templates/a5.toml", "line": 4, "key": "pip.x", "reason": "bad"},
        {"file": "channels/c.toml", "reason": "no"},
    ]
    validate(json.loads(envelope("diff", 2, [], placed)), SCHEMA)
    hinted = placed.with_hint("other")
    named = placed.reworded(f"a5: {placed.message}\n(env b failed too)")
    assert (hinted.hint, hinted.message, placed.hint) == ("other", placed.message, "h")
    assert (named.headline, named.key, placed.headline) == (
        "a5: locks/a5.yml:3: version: expected 1",
        "version",
        "locks/a5.yml:3: version: expected 1",
    )
