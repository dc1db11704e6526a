"""A lock yml is read with the safe loader: a `!!python/...` tag is refused (exit 2 naming the
file), never run."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.hostile import ENV, Case, hostile_run, new_case, template_project

pytestmark = pytest.mark.adversarial

TAGS = [
    "!!python/object/apply:os.system ['touch {marker}']",
    "!!python/object/apply:subprocess.check_call [['touch', '{marker}']]",
    "!!python/object/new:subprocess.Popen [['touch', '{marker}']]",
    "!!python/name:os.system",
    "!!python/module:os",
    "!!python/object:envgen.model.Index {{name: x, url: 'file:///{marker}'}}",
]
# check reports a lock that does not parse as its first failed step (exit 4); show ignores a broken
# lock.
COMMANDS = {
    ("status", ENV): 2,
    ("export", ENV, "--format", "requirements", "--platform", "linux-64"): 2,
    # the re-lock reads the previous lock (a no-op lock reads only its hash)
    ("lock", ENV, "--force"): 2,
    ("install", ENV, "--prefix", "prefix", "--venv"): 2,
    ("diff", "../project/locks/valid.yml", "../project/locks/valid.yml"): 2,
    ("check", ENV, "--no-solve", "--no-env"): 4,
    ("show", ENV): 0,
}


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return template_project(tmp_path_factory.mktemp("yaml-tags"))


def tagged(template: Path, tag: str, where: str) -> bytes:
    text = (template / "locks" / f"{ENV}.yml").read_text()
    value = tag.format(marker=template.parent / "MARKER-PLACEHOLDER")
    if where == "top":
        return (text + f"extra: {value}\n").encode()
    assert "version: 1\n" in text
    return text.replace("version: 1\n", f"version: {value}\n", 1).encode()


def _with_marker(case: Case, data: bytes, template: Path) -> bytes:
    return data.replace(
        str(template.parent / "MARKER-PLACEHOLDER").encode(), str(case.marker).encode()
    )


@pytest.mark.parametrize("where", ["top", "version"])
@pytest.mark.parametrize("tag", TAGS)
def test_python_tags_in_a_lock_yml_are_refused_and_never_run(
    template: Path, tag: str, where: str
) -> None:
    data = tagged(template, tag, where)
    with new_case("yaml-tags", template, {}) as case:
        (case.project / "locks" / f"{ENV}.yml").write_bytes(_with_marker(case, data, template))
        outcomes = case.check([list(command) for command in COMMANDS])
        assert not case.failures, "\n".join(case.failures)
        for outcome, code in zip(outcomes, COMMANDS.values(), strict=True):
            assert outcome.code == code, (outcome.args, outcome.out, outcome.err)
            if code:
                assert "valid.yml" in outcome.out + outcome.err, (
                    outcome.args,
                    outcome.out,
                    outcome.err,
                )
        assert not case.marker.exists()


def test_the_real_command_line_refuses_a_python_tag(template: Path) -> None:
    data = tagged(template, TAGS[0], "top")
    with new_case("yaml-tags", template, {}) as case:
        (case.project / "locks" / f"{ENV}.yml").write_bytes(_with_marker(case, data, template))
        [status] = case.check([["status", ENV]], run=hostile_run)
        assert not case.failures, "\n".join(case.failures)
        assert status.code == 2 and "valid.yml" in status.err, status.err
        assert not case.marker.exists()


def test_the_planted_payload_would_be_seen(template: Path) -> None:
    """The marker check is live: the same payload through an unsafe loader does create it."""
    import yaml

    data = tagged(template, TAGS[0], "top")
    with new_case("yaml-tags", template, {}) as case:
        yaml.unsafe_load(_with_marker(case, data, template))
        assert case.marker.exists()
