"""`extends`: a matrix as the keys that differ from another, merged by the loader, errors located
per file."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from envgen.cli import cli
from envgen.commands.check.static import pin_problems
from envgen.inputs.matrix import load_env
from envgen.project import Project
from envgen.resolve.pypi.stage import gather_inputs
from packaging.requirements import Requirement

from tests.support.builders import make_lock, pip_entry

MATRICES = Path(__file__).parents[1] / "data" / "matrices"


@pytest.fixture
def project(tmp_path: Path) -> Project:
    """A project holding the `valid` fixture as `base` and its channels."""
    shutil.copytree(MATRICES / "channels", tmp_path / "channels")
    (tmp_path / "env-templates").mkdir()
    text = (
        (MATRICES / "env-templates" / "valid.toml")
        .read_text()
        .replace('name = "valid"', 'name = "base"')
    )
    (tmp_path / "env-templates" / "base.toml").write_text(text)
    return Project(tmp_path)


def write(project: Project, env: str, text: str) -> Path:
    path = project.template(env)
    path.write_text(text)
    return path


def show(project: Project, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["show", *args, "--root", str(project.root)])
    assert "Traceback" not in result.stderr
    return result.exit_code, result.stdout, result.stderr


DERIVED = """\
schema = 1
extends = "base"

[env]
name = "derived"

[conda]
specs = ["python 3.11.*"]

[env.notes]
alpha = "the derived note"

[sources.second.env]
ZED = "2"

[pip.packages.torch]
version = "==2.11.0"

[[checks.imports]]
module = "torch"
"""


def test_tables_merge_key_by_key_and_other_values_replace_whole(project: Project) -> None:
    write(project, "derived", DERIVED)
    base, derived = load_env(project, "base"), load_env(project, "derived")
    assert derived.bases == ("env-templates/base.toml",) and derived.extends == ("base",)
    assert derived.path == "env-templates/derived.toml"
    # arrays replace whole: the conda specs and the import checks
    assert base.conda_specs == ("python 3.11.*", "pip >=24") and derived.conda_specs == (
        "python 3.11.*",
    )
    assert derived.channels == base.channels
    assert [c.module for c in derived.checks] == ["torch"]
    # tables merge: one note replaced, the other kept; one variable of a source's env replaced
    assert dict(derived.notes) == {"alpha": "the derived note", "zeta": "last note"}
    second = {s.name: s for s in derived.sources}["second"]
    assert dict(second.env) == {"ALPHA": "a b", "ZED": "2"}
    assert second.cherry_picks == {s.name: s for s in base.sources}["second"].cherry_picks
    torch = {p.name: p for p in derived.packages}["torch"]
    assert torch.specifier == "==2.11.0"
    # a key the derived table does not write is kept: torch's index table stays
    assert torch.index == (("linux-64", "pytorch-cpu"),)
    # everything not written is the base's
    assert (
        derived.python == base.python
        and derived.cann == base.cann
        and derived.overrides == base.overrides
    )
    assert derived.description == base.description


def test_show_prints_the_merged_result(project: Project) -> None:
    write(project, "derived", DERIVED)
    code, out, _ = show(project, "derived", "--json")
    assert code == 0
    doc = json.loads(out)["results"][0]
    assert doc["env"]["extends"] == ["base"]
    assert doc["env"]["name"] == "derived"
    assert doc["pip"]["packages"]["torch"]["specifier"] == "==2.11.0"
    assert doc["pip"]["packages"]["torch"]["index"] == {
        "linux-64": "pytorch-cpu",
        "linux-aarch64": None,
    }
    assert doc["overrides"]["numpy"]["requirement"] == "numpy<2"
    _, base_out, _ = show(project, "base", "--json")
    base_doc = json.loads(base_out)["results"][0]
    assert base_doc["env"]["extends"] == []
    assert (
        doc["conda"]["channels"] == base_doc["conda"]["channels"]
        and doc["activation"] == base_doc["activation"]
    )
    code, text, _ = show(project, "derived")
    assert code == 0
    assert re.search(r"^  extends +base \(merged below\)$", text, re.MULTILINE), text


def test_a_chain_merges_nearest_last(project: Project) -> None:
    write(
        project, "middle", 'schema = 1\nextends = "base"\n[env]\nname = "middle"\npython = "3.12"\n'
    )
    write(project, "top", 'extends = "middle"\n[env]\nname = "top"\n[system]\nglibc = "2.31"\n')
    top = load_env(project, "top")
    assert top.extends == ("middle", "base")
    assert (top.python, top.glibc, top.name) == ("3.12", "2.31", "top")


def test_unknown_key_in_the_derived_file_names_the_derived_file_and_line(project: Project) -> None:
    text = DERIVED.replace(
        'ZED = "2"\n', 'ZED = "2"\n\n[sources.vllm]\nurl = "https://e.com/v.git"\nrefs = "v1"\n'
    )
    path = write(project, "derived", text)
    code, out, err = show(project, "derived")
    assert code == 2 and out == ""
    lines = text.splitlines()
    refs, table = lines.index('refs = "v1"') + 1, lines.index("[sources.vllm]") + 1
    assert f"{path}:{refs}: sources.vllm.refs: unknown key; did you mean 'ref'?" in err
    # the required key it lacks is located at the table the derived file wrote
    assert f"{path}:{table}: sources.vllm.ref: missing required key" in err


def test_a_bad_value_inherited_from_the_base_names_the_base_file(project: Project) -> None:
    base = project.template("base")
    text = base.read_text().replace('python = "3.11"', 'python = "three"')
    base.write_text(text)
    write(project, "derived", DERIVED)
    code, _, err = show(project, "derived")
    assert code == 2
    line = text.splitlines().index('python = "three"') + 1
    assert f"{base}:{line}: env.python: 'three' is not a major.minor Python version" in err


def test_a_name_inherited_from_the_base_is_refused(project: Project) -> None:
    write(project, "derived", 'schema = 1\nextends = "base"\n')
    code, _, err = show(project, "derived")
    assert code == 2
    assert "env.name: 'base' differs from the file name derived.toml" in err


@pytest.mark.parametrize(
    ("files", "fragment"),
    [
        ({"derived": 'extends = "derived"\n'}, "extends itself through derived -> derived"),
        (
            {"derived": 'extends = "other"\n', "other": 'extends = "derived"\n'},
            "extends itself through derived -> other -> derived",
        ),
        ({"derived": 'extends = "nowhere"\n'}, "no matrix"),
        ({"derived": "extends = 3\n"}, "expected the name of another env"),
        ({"derived": 'extends = "../base"\n'}, "expected the name of another env"),
    ],
)
def test_cycles_missing_and_malformed_bases_exit_2(
    project: Project, files: dict[str, str], fragment: str
) -> None:
    for env, text in files.items():
        write(project, env, "schema = 1\n" + text + f'[env]\nname = "{env}"\n')
    code, out, err = show(project, "derived")
    assert code == 2 and out == ""
    assert fragment in err
    assert ".toml:2: extends: " in err
    if fragment == "no matrix":
        assert "available envs: base" in err


def test_a_base_that_is_a_symbolic_link_out_of_env_templates_is_refused(
    project: Project, tmp_path: Path
) -> None:
    # A pull request can add a symlink; `extends` must not read a file outside env-templates/
    # through one.
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    shutil.move(project.template("base"), outside / "secret.toml")
    project.template("base").symlink_to(outside / "secret.toml")
    write(project, "derived", 'schema = 1\nextends = "base"\n[env]\nname = "derived"\n')
    code, out, err = show(project, "derived")
    assert code == 2 and out == ""
    assert "derived.toml:2: extends: " in err
    assert "is a symbolic link" in err


def test_origins_name_the_file_that_wrote_each_key(project: Project) -> None:
    write(project, "derived", DERIVED + "\n[pip.packages.mbridge]\n")
    derived = load_env(project, "derived")
    base, mine = "env-templates/base.toml", "env-templates/derived.toml"
    # A key the derived file writes is its own; one it inherits is the base's, even inside a table
    # it adds to.
    assert derived.file_of("pip", "packages", "torch", "version") == mine
    assert derived.file_of("pip", "packages", "torch", "index") == base
    assert derived.file_of("sources", "second", "env", "ZED") == mine
    assert derived.file_of("sources", "second", "ref") == base
    assert derived.file_of("conda", "channels") == base
    assert derived.file_of("conda", "specs") == mine
    override = str(derived.origin("overrides", "numpy", "requirement"))
    assert override == f"{base}: overrides.numpy.requirement"
    # What a re-lock hands uv carries those origins: the pins, a pin with no version, the override.
    inputs = gather_inputs(derived, "linux-64", (), {})
    origins = {Requirement(r.text).name: str(r.origin) for r in inputs.requirements}
    assert origins["torch"] == f"{mine}: pip.packages.torch.version"
    assert origins["Ray"] == f"{base}: pip.packages.Ray.version"
    assert origins["mbridge"] == f"{mine}: pip.packages.mbridge"
    assert origins["numpy"] == f"{base}: overrides.numpy.requirement"
    # check's static step names the same files.
    torch = pip_entry("torch", "2.10.0", "linux-64")
    lock = make_lock("derived", platforms=derived.platforms, pip=(torch,))
    problems = pin_problems(derived, lock)
    assert f"{mine}: pip.packages.torch: wants ==2.11.0, linux-64 has 2.10.0" in problems
    assert f"{base}: pip.packages.internal-tool: not locked for linux-64" in problems
    # A matrix that extends nothing is its own file throughout.
    alone = load_env(project, "base")
    assert alone.key_files == () and alone.file_of("overrides", "numpy", "requirement") == base
