"""The requirement-file parser: includes, constraints, continuations, comments, options,
pyproject."""

from __future__ import annotations

import pytest
from envgen.errors import InputError, ResolutionError
from envgen.inputs.requirements import (
    Ignored,
    Line,
    parse_pyproject,
    parse_requirement_files,
    project_table,
)

CTX = "source demo at commit abc"


def _parse(files: dict[str, str], *paths: str) -> tuple[list[Line], list[Ignored], list[str]]:
    tree = {k: v.encode() for k, v in files.items()}
    parsed = parse_requirement_files(paths, tree.get, context=CTX)
    return list(parsed.lines), list(parsed.ignored), [p for p, _ in parsed.files]


def test_lines_keep_their_file_and_first_line_and_are_canonical() -> None:
    lines, ignored, files = _parse(
        {
            "req.txt": (
                "# a comment\n"
                "\n"
                "ray[default] >= 2.9 ; python_version >= '3.10'   # trailing comment\n"
                "numpy \\\n"
                "  ==1.26.4 \\\n"
                "  --hash=sha256:0123\n"
                'torch==2.10.0; platform_machine == "aarch64"\n'
            )
        },
        "req.txt",
    )
    assert [(x.text, x.file, x.line) for x in lines] == [
        ('ray[default]>=2.9; python_version >= "3.10"', "req.txt", 3),
        ("numpy==1.26.4", "req.txt", 4),
        ('torch==2.10.0; platform_machine == "aarch64"', "req.txt", 7),
    ]
    assert ignored == [] and files == ["req.txt"]


def test_includes_are_relative_to_the_including_file_and_read_once() -> None:
    lines, _, files = _parse(
        {
            "reqs/main.txt": "-r common.txt\n-c ../constraints.txt\n"
            "--requirement=common.txt\nfoo\n",
            "reqs/common.txt": "-rnested/more.txt\nbar\n",
            "reqs/nested/more.txt": "baz\n",
            "constraints.txt": "bar<2\n",
        },
        "reqs/main.txt",
    )
    assert files == ["reqs/main.txt", "reqs/common.txt", "reqs/nested/more.txt", "constraints.txt"]
    assert [(x.text, x.file, x.line, x.constraint) for x in lines] == [
        ("baz", "reqs/nested/more.txt", 1, False),
        ("bar", "reqs/common.txt", 2, False),
        ("bar<2", "constraints.txt", 1, True),
        ("foo", "reqs/main.txt", 4, False),
    ]


def test_index_and_pip_options_are_reported_not_applied() -> None:
    lines, ignored, _ = _parse(
        {
            "r.txt": (
                "--extra-index-url https://x.example/simple\n"
                "-i https://y.example/simple\n"
                "--trusted-host=x.example\n"
                "--find-links ./wheels\n"
                "--pre\n"
                "foo\n"
            )
        },
        "r.txt",
    )
    assert [x.text for x in lines] == ["foo"]
    assert [(x.option, x.line) for x in ignored] == [
        ("--extra-index-url", 1),
        ("-i", 2),
        ("--trusted-host", 3),
        ("--find-links", 4),
        ("--pre", 5),
    ]


def test_git_lines_plain_and_editable() -> None:
    lines, _, _ = _parse(
        {
            "r.txt": (
                "TransferQueue @ git+https://github.com/Ascend/TransferQueue.git@main\n"
                "-e git+https://example.org/tool.git@v1#egg=tool\n"
            )
        },
        "r.txt",
    )
    assert [(x.text, x.editable) for x in lines] == [
        ("TransferQueue @ git+https://github.com/Ascend/TransferQueue.git@main", False),
        ("tool @ git+https://example.org/tool.git@v1", True),
    ]
    assert lines[0].requirement.url == "git+https://github.com/Ascend/TransferQueue.git@main"


def test_missing_include_names_the_including_line() -> None:
    with pytest.raises(ResolutionError) as err:
        _parse({"r.txt": "foo\n-r gone.txt\n"}, "r.txt")
    assert "gone.txt (included from r.txt:2)" in str(err.value) and CTX in str(err.value)


def test_include_outside_the_tree_is_refused() -> None:
    with pytest.raises(InputError, match="outside the source tree"):
        _parse({"r.txt": "-r ../../etc/passwd\n"}, "r.txt")


def test_bad_requirement_and_unknown_option_name_file_and_line() -> None:
    with pytest.raises(InputError, match=r"r.txt:2: `foo ==` is not a valid requirement"):
        _parse({"r.txt": "ok\nfoo ==\n"}, "r.txt")
    with pytest.raises(
        InputError, match=r"r.txt:1: unknown requirement-file option `--frobnicate`"
    ):
        _parse({"r.txt": "--frobnicate\n"}, "r.txt")
    with pytest.raises(InputError, match="not a git URL"):
        _parse({"r.txt": "-e .\n"}, "r.txt")


def test_include_cycle_terminates() -> None:
    lines, _, files = _parse({"a.txt": "-r b.txt\nx\n", "b.txt": "-r a.txt\ny\n"}, "a.txt")
    assert files == ["a.txt", "b.txt"] and [x.text for x in lines] == ["y", "x"]


PYPROJECT = """[build-system]
requires = ["setuptools"]

[project]
name = "demo"
version = "1"
dependencies = [
    "numpy>=1.26",
    'requests[socks] ; python_version >= "3.8"',
]
"""


def test_pyproject_dependencies_with_lines() -> None:
    lines = parse_pyproject(PYPROJECT, "pyproject.toml", context=CTX)
    assert [(x.text, x.line) for x in lines] == [
        ("numpy>=1.26", 8),
        ('requests[socks]; python_version >= "3.8"', 9),
    ]


def test_pyproject_dynamic_dependencies_are_an_input_error() -> None:
    text = '[project]\nname = "demo"\nversion = "1"\ndynamic = ["dependencies"]\n'
    with pytest.raises(InputError, match="declares `dependencies` as dynamic") as err:
        parse_pyproject(text, "pyproject.toml", context=CTX)
    assert err.value.hint and "requirements file" in err.value.hint
    with pytest.raises(InputError, match=r"no \[project\] table"):
        parse_pyproject("[tool.x]\n", "pyproject.toml", context=CTX)


def test_the_project_table_of_a_pyproject_or_none_and_a_file_that_is_not_toml_named() -> None:
    assert project_table('[project]\nname = "x"\n', "pyproject.toml", context="source s") == {
        "name": "x"
    }
    assert project_table("[tool.x]\na = 1\n", "pyproject.toml", context="source s") is None
    with pytest.raises(InputError) as raised:
        project_table("[project\n", "pyproject.toml", context="source s at tree 0123abc")
    error = raised.value
    assert error.message.startswith("source s at tree 0123abc: pyproject.toml is not valid TOML: ")
    assert error.file == "pyproject.toml"
    assert (error.reason or "").startswith("is not valid TOML: ")
