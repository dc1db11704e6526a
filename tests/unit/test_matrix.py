"""load_matrix: the valid fixture normalised, and every malformed fixture reported through the real
CLI."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from envgen.cli import cli
from envgen.errors import InputError, MatrixError
from envgen.inputs.matrix import load_matrix
from envgen.inputs.toml_reader import key_lines
from envgen.inputs.untrusted import ref_problem
from envgen.model import Cann, ImportCheck, Index, Override, PipPackage, Profile

ROOT = Path(__file__).parents[1] / "data" / "matrices"
TEMPLATES = ROOT / "env-templates"
CHANNELS = ROOT / "channels"
MALFORMED = sorted(p.stem for p in TEMPLATES.glob("*.toml") if p.stem != "valid")
EXPECT = re.compile(r"# expect: (?P<key>\S*) \| (?P<text>.+)$")


def expectations(case: str) -> list[tuple[int, str, str]]:
    """(line, key path, message part) of every `# expect:` comment in a fixture."""
    out = []
    for number, line in enumerate((TEMPLATES / f"{case}.toml").read_text().splitlines(), start=1):
        match = EXPECT.search(line)
        if match:
            out.append((number, match.group("key"), match.group("text").strip()))
    return out


def show(*args: str) -> tuple[int, str, str, BaseException | None]:
    result = CliRunner().invoke(cli, ["show", *args])
    return result.exit_code, result.stdout, result.stderr, result.exception


def test_there_are_enough_malformed_fixtures() -> None:
    assert len(MALFORMED) >= 15
    assert all(expectations(case) for case in MALFORMED)
    assert len(expectations("many-problems")) >= 5


@pytest.mark.parametrize("case", MALFORMED)
def test_malformed_matrix_exits_2_naming_file_line_and_key(case: str) -> None:
    code, stdout, stderr, exception = show(case, "--root", str(ROOT))
    assert code == 2, stderr
    assert isinstance(exception, SystemExit)
    assert stdout == ""
    assert "Traceback" not in stderr
    expected = expectations(case)
    problems = [line.strip() for line in stderr.splitlines() if f"{case}.toml:" in line]
    assert len(problems) == len(expected), stderr
    count = len(expected)
    assert f"({count} problem{'s' if count != 1 else ''})" in stderr
    for line, key, text in expected:
        where = f"{case}.toml:{line}: {key}: " if key else f"{case}.toml:{line}: "
        assert any(where in problem and text in problem for problem in problems), (
            where,
            text,
            stderr,
        )


def test_all_problems_are_reported_by_the_installed_entry_point() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "envgen", "show", "many-problems", "--root", str(ROOT)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    for line, key, _ in expectations("many-problems"):
        assert f"many-problems.toml:{line}: {key}: " in result.stderr


def test_missing_matrix_names_path_and_available_envs() -> None:
    code, _, stderr, _ = show("no-such-env", "--root", str(ROOT))
    assert code == 2
    assert str(TEMPLATES / "no-such-env.toml") in stderr
    assert "valid" in stderr and "many-problems" in stderr
    with pytest.raises(InputError, match="available envs"):
        load_matrix(TEMPLATES / "no-such-env.toml", CHANNELS)


def test_valid_matrix_is_normalised() -> None:
    matrix = load_matrix(TEMPLATES / "valid.toml", CHANNELS)
    assert matrix.name == "valid"
    assert matrix.platforms == ("linux-64", "linux-aarch64")
    assert (matrix.python, matrix.glibc) == ("3.11", "2.28")
    assert matrix.cann == Cann(version="8.1.RC1", set_env="/opt/cann/set_env.sh", note=None)
    assert [c.name for c in matrix.channels] == ["conda-forge"]
    assert matrix.conda_specs == ("python 3.11.*", "pip >=24")
    # default indexes first, in the written order, then the explicit ones the matrix names, by name
    assert [i.name for i in matrix.indexes] == ["mirror", "pypi", "private", "pytorch-cpu"]
    assert [i.name for i in matrix.default_indexes] == ["mirror", "pypi"]
    assert matrix.index("mirror") == Index(
        "mirror", "https://${MIRROR_HOST}/simple", explicit=False, trusted_host="mirror.example.com"
    )
    assert matrix.index("private").url == "https://ci-user:s3cret-token@pypi.example.com/simple"
    packages = {p.name: p for p in matrix.packages}
    assert [p.name for p in matrix.packages] == [
        "internal-tool",
        "Ray",
        "secret-wheel",
        "torch",
        "torch-npu",
    ]
    assert packages["Ray"] == PipPackage(
        name="Ray",
        specifier="<3,>=2.40",
        extras=("client", "default"),
        marker='platform_machine == "aarch64"',
    )
    assert packages["torch"].index == (("linux-64", "pytorch-cpu"),)
    assert packages["torch"].index_for("linux-aarch64") is None
    assert packages["internal-tool"].index == (
        ("linux-64", "private"),
        ("linux-aarch64", "private"),
    )
    assert (
        packages["secret-wheel"].sha256
        == "abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789"
    )
    assert packages["torch-npu"].pending == "not published yet"
    assert [s.name for s in matrix.sources] == ["second", "third", "first"]
    second, third, first = matrix.sources
    assert second.distribution == "second_dist" and not second.editable
    assert second.pythonpath and not second.build_isolation and second.needs_cann
    assert second.build_index == "private"
    assert second.env == (("ALPHA", "a b"), ("ZED", "1"))
    assert second.requirements == ("pyproject", "requirements/extra.txt")
    assert second.cherry_picks == ("b" * 40, "a" * 40)
    assert (
        third.distribution == "third"
        and third.editable
        and third.build_isolation
        and not third.pythonpath
    )
    assert first.ref == "0123456789abcdef0123456789abcdef01234567"
    assert matrix.overrides == (
        Override("numpy", "numpy<2", "second's wheels are built against numpy 1"),
    )
    assert matrix.activation_env == (("HF_HOME", "/data/hf"),)
    assert matrix.profiles == (Profile("quiet", "less logging", (("LOG_LEVEL", "error"),)),)
    assert matrix.checks == (
        ImportCheck("ray", "ray", "2.40.0", "none"),
        ImportCheck("second.sub", None, None, "cann"),
    )
    assert matrix.notes == (("alpha", "first note"), ("zeta", "last note"))


def test_install_order_defaults_to_declaration_order(tmp_path: Path) -> None:
    text = (TEMPLATES / "valid.toml").read_text().replace('order = ["second"]', "order = []")
    (tmp_path / "unordered.toml").write_text(text.replace('name = "valid"', 'name = "unordered"'))
    matrix = load_matrix(tmp_path / "unordered.toml", CHANNELS)
    assert [s.name for s in matrix.sources] == ["third", "second", "first"]


def test_problems_in_channel_files_and_matrix_come_together(tmp_path: Path) -> None:
    channels = tmp_path / "channels"
    channels.mkdir()
    for path in CHANNELS.glob("*.toml"):
        (channels / path.name).write_text(path.read_text())
    (channels / "pypi.toml").write_text(
        'kind = "pip"\nurl = "https://pypi.org/simple"\nexplict = true\n'
    )
    text = (TEMPLATES / "valid.toml").read_text().replace('ref = "main"', 'ref = "deadbee"')
    (tmp_path / "valid.toml").write_text(text)
    with pytest.raises(MatrixError) as caught:
        load_matrix(tmp_path / "valid.toml", channels)
    messages = [str(p) for p in caught.value.problems]
    assert any(
        "pypi.toml:3: explict: unknown key; did you mean 'explicit'?" in m for m in messages
    ), messages
    assert any("sources.third.ref" in m and "abbreviated commit" in m for m in messages), messages
    # the broken channel is reported once, in its own file, not again as unknown where the matrix
    # names it
    assert not any("unknown pip index 'pypi'" in m for m in messages), messages
    assert len(messages) == 2


@pytest.mark.parametrize(
    ("ref", "problem"),
    [
        ("v0.23.0", None),
        ("releases/v0.23.0", None),
        ("HEAD", None),
        ("core_r0.12.0", None),
        ("0c6c0ceaa523a96032dee1539a52032155e6404e", None),
        ("0c6c0ce", "abbreviated commit"),
        ("0c6c0ceaa523a96032dee1539a52032155e6404", "abbreviated commit"),
        ("feature..x", "not a valid git ref"),
        ("has space", "not a valid git ref"),
        ("-leading-dash", "not a valid git ref"),
        ("branch.lock", "not a valid git ref"),
        ("trailing/", "not a valid git ref"),
    ],
)
def test_ref_problem(ref: str, problem: str | None) -> None:
    found = ref_problem(ref)
    assert (found is None) if problem is None else (found is not None and problem in found)


def test_key_lines_follow_inline_tables_arrays_and_array_tables() -> None:
    text = "\n".join(
        [
            'a = "x = [ # not a key"',  # 1
            "[t.u]",  # 2
            "k = { x = 1, y = { z = 'w}' } }",  # 3
            "arr = [",  # 4
            '  "one",',  # 5
            '  "two = #",',  # 6
            "]",  # 7
            '"quoted.key" = 1',  # 8
            "[[c.items]]",  # 9
            "m = 1",  # 10
            "[[c.items]]",  # 11
            "m = '''",  # 12
            "multi [line]",  # 13
            "'''",  # 14
            "after = 2",  # 15
        ]
    )
    lines = key_lines(text)
    assert lines[("a",)] == 1
    assert lines[("t",)] == 2 and lines[("t", "u")] == 2
    assert lines[("t", "u", "k", "y", "z")] == 3
    assert lines[("t", "u", "arr", 0)] == 5 and lines[("t", "u", "arr", 1)] == 6
    assert lines[("t", "u", "quoted.key")] == 8
    assert lines[("c", "items", 0, "m")] == 10
    assert lines[("c", "items", 1)] == 11
    assert lines[("c", "items", 1, "after")] == 15


def test_key_lines_skip_escaped_quotes_and_count_lines_across_a_long_file() -> None:
    text = 'a = "q\\" = [ \\\\"\nb = \'c\\\'\nc = "\\\\\\""\n' + "".join(
        f"n{i} = {i}\n" for i in range(3000)
    )
    lines = key_lines(text)
    assert lines[("a",)] == 1 and lines[("b",)] == 2 and lines[("c",)] == 3
    assert lines[("n0",)] == 4 and lines[("n2999",)] == 3003
