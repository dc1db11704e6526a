"""Pure parts of the PyPI side: tags, wheel choice, pylock parsing, depends, inputs and generated uv
files."""

from __future__ import annotations

import itertools
import tomllib

import pytest
from envgen import platforms
from envgen.errors import InputError, ResolutionError
from envgen.inputs.channels import access_index
from envgen.model import Index, LockedSource, Matrix, Origin, PipPackage, Source, TracedRequirement
from envgen.resolve.pypi import uv_pylock
from envgen.resolve.pypi.stage import entry_index, gather_inputs
from envgen.resolve.pypi.uv_compile import render_pyproject, render_uv_config
from packaging.requirements import Requirement as Pep508
from packaging.tags import Tag

from tests.support.builders import make_matrix

ARM = "linux-aarch64"
SHA = "0" * 64


def wheel(filename: str) -> uv_pylock.Artifact:
    return uv_pylock.Artifact(url=f"https://files.example/{filename}", sha256=SHA)


def package(*files: str, sdist: str | None = None) -> uv_pylock.LockedPackage:
    return uv_pylock.LockedPackage(
        name="torch",
        version="2.10.0",
        marker=None,
        wheels=tuple(wheel(f) for f in files),
        sdist=uv_pylock.Artifact(f"https://files.example/{sdist}", SHA) if sdist else None,
    )


def test_platform_tags_stop_at_the_glibc_floor_and_the_architecture() -> None:
    tags = platforms.platform_tags(ARM, "3.11", "2.28")
    names = {t.platform for t in tags}
    assert {
        "manylinux_2_28_aarch64",
        "manylinux_2_17_aarch64",
        "manylinux2014_aarch64",
        "any",
    } <= names
    assert not {
        p for p in names if "x86_64" in p or p.startswith("linux_") or "2_29" in p or "2_34" in p
    }
    assert tags[0] == Tag("cp311", "cp311", "manylinux_2_28_aarch64")
    assert Tag("cp311", "abi3", "manylinux_2_17_aarch64") in tags
    assert Tag("cp312", "cp312", "manylinux_2_28_aarch64") not in tags
    assert "manylinux1_x86_64" in {
        t.platform for t in platforms.platform_tags("linux-64", "3.11", "2.28")
    }


def test_uv_platform_never_exceeds_the_floor() -> None:
    assert platforms.uv_python_platform(ARM, "2.28") == "aarch64-manylinux_2_28"
    assert platforms.uv_python_platform("linux-64", "2.30") == "x86_64-manylinux_2_28"
    assert platforms.uv_python_platform("linux-64", "2.27") == "x86_64-manylinux_2_17"
    assert platforms.uv_python_platform(ARM, "2.35") == "aarch64-manylinux_2_35"
    with pytest.raises(ValueError):
        platforms.uv_python_platform(ARM, "2.12")


def test_choice_prefers_the_most_specific_tag_within_the_floor() -> None:
    tags = uv_pylock.tag_priority(platforms.platform_tags(ARM, "3.11", "2.28"))
    files = (
        "torch-2.10.0-cp311-cp311-manylinux_2_34_aarch64.whl",
        "torch-2.10.0-py3-none-any.whl",
        "torch-2.10.0-cp311-cp311-manylinux_2_17_aarch64.manylinux2014_aarch64.whl",
        "torch-2.10.0-cp311-cp311-manylinux_2_28_aarch64.whl",
        "torch-2.10.0-cp311-cp311-manylinux_2_28_x86_64.whl",
    )
    chosen = uv_pylock.choose_artifact(package(*files), tags, ARM)
    assert chosen.artifact.filename == "torch-2.10.0-cp311-cp311-manylinux_2_28_aarch64.whl"
    assert not chosen.sdist
    older = uv_pylock.choose_artifact(package(*files[:3]), tags, ARM)
    assert older.artifact.filename == files[2]


def test_build_tag_tie_is_resolved_the_same_way_in_any_order() -> None:
    tags = uv_pylock.tag_priority(platforms.platform_tags("linux-64", "3.11", "2.28"))
    files = (
        "torch-2.10.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl",
        "torch-2.10.0+cpu-3-cp311-cp311-manylinux_2_28_x86_64.whl",
        "torch-2.10.0+cpu-2-cp311-cp311-manylinux_2_28_x86_64.whl",
    )
    chosen = {
        uv_pylock.choose_artifact(package(*order), tags, "linux-64").artifact.filename
        for order in itertools.permutations(files)
    }
    assert chosen == {"torch-2.10.0+cpu-3-cp311-cp311-manylinux_2_28_x86_64.whl"}


def test_never_a_wheel_of_another_platform() -> None:
    tags = uv_pylock.tag_priority(platforms.platform_tags(ARM, "3.11", "2.28"))
    x86_only = ("torch-2.10.0-cp311-cp311-manylinux_2_28_x86_64.whl",)
    fallback = uv_pylock.choose_artifact(package(*x86_only, sdist="torch-2.10.0.tar.gz"), tags, ARM)
    assert fallback.sdist and fallback.artifact.filename == "torch-2.10.0.tar.gz"
    with pytest.raises(ResolutionError, match=r"torch 2\.10\.0 has no wheel for linux-aarch64"):
        uv_pylock.choose_artifact(package(*x86_only), tags, ARM)


def test_parse_pylock_reads_wheels_sdists_and_archives() -> None:
    text = """
lock-version = "1.0"
created-by = "uv"
requires-python = ">=3.11"

[[packages]]
name = "Zeta_Pkg"
version = "1.0"
archive = { url = "https://host/zeta_pkg-1.0-py3-none-any.whl", hashes = { sha256 = "aa" } }

[[packages]]
name = "alpha"
version = "2.0"
marker = "platform_machine == 'x86_64'"
sdist = { url = "https://host/alpha-2.0.tar.gz", hashes = { sha256 = "bb" } }
wheels = [{ url = "https://host/alpha-2.0-py3-none-any.whl", hashes = { sha256 = "cc" } }]
"""
    alpha, zeta = uv_pylock.parse_pylock(text)
    assert (alpha.name, zeta.name) == ("alpha", "zeta-pkg")
    assert alpha.sdist == uv_pylock.Artifact("https://host/alpha-2.0.tar.gz", "bb")
    assert [w.sha256 for w in alpha.wheels] == ["cc"]
    assert zeta.wheels[0].filename == "zeta_pkg-1.0-py3-none-any.whl" and zeta.sdist is None
    env = platforms.marker_environment(ARM, "3.11")
    assert not uv_pylock.applies(alpha.marker, env)
    assert uv_pylock.applies(alpha.marker, platforms.marker_environment("linux-64", "3.11"))


def test_depends_follow_markers_and_requested_extras() -> None:
    env = uv_pylock.Target(platforms.marker_environment(ARM, "3.11"))
    ray = uv_pylock.parse_metadata(
        "Metadata-Version: 2.1\nName: ray\nVersion: 2.0\n"
        "Requires-Dist: click>=7\n"
        "Requires-Dist: click!=8.0.0\n"
        "Requires-Dist: aiohttp>=3.7; extra == 'default'\n"
        "Requires-Dist: nvidia-nccl; platform_machine == 'x86_64'\n"
        "Requires-Dist: pytest; extra == 'test'\n",
        "ray",
    )
    aiohttp = uv_pylock.parse_metadata("Name: aiohttp\nRequires-Dist: yarl[idna]>=1\n", "aiohttp")
    metadata = {"ray": ray, "aiohttp": aiohttp}
    extras = uv_pylock.requested_extras([Pep508("ray[default]")], metadata, env)
    assert extras == {"ray": frozenset({"default"}), "yarl": frozenset({"idna"})}
    assert uv_pylock.depends(ray, env, extras["ray"]) == (
        ("aiohttp", ">=3.7"),
        ("click", "!=8.0.0,>=7"),
    )
    assert uv_pylock.depends(ray, env, ()) == (("click", "!=8.0.0,>=7"),)
    x86 = uv_pylock.Target(platforms.marker_environment("linux-64", "3.11"))
    assert ("nvidia-nccl", "") in uv_pylock.depends(ray, x86, ())


def matrix(*packages: PipPackage, indexes: tuple[Index, ...] = ()) -> Matrix:
    return make_matrix(
        "t",
        platforms=(ARM, "linux-64"),
        indexes=indexes
        or (Index("pypi", "https://pypi.org/simple"), Index("extra", "https://x/simple", True)),
        packages=packages,
        sources=(Source("megatron-lm", "https://g/m.git", "main", distribution="megatron_core"),),
    )


def source(*lines: str) -> LockedSource:
    reqs = tuple(
        TracedRequirement(t, Origin("requirements-npu.txt", line=i, source="verl"))
        for i, t in enumerate(lines, 1)
    )
    return LockedSource(
        Source("verl", "https://g/verl.git", "main", distribution="verl"), "a" * 40, reqs
    )


def test_gather_inputs_keeps_origins_and_drops_what_sources_or_pending_cover() -> None:
    m = matrix(
        PipPackage("torch", "==2.10.0", index=(("linux-64", "extra"),)),
        PipPackage("torch-npu", pending="due Q2"),
        PipPackage(
            "private", url="https://h/${TOKEN}/private-1.0-py3-none-any.whl", sha256="AB" * 32
        ),
    )
    verl = source(
        "transformers>=4.5",
        "TransferQueue @ git+https://github.com/Ascend/TransferQueue.git@main",
        "megatron-core>=0.12",
        "torch_npu",
        "Verl",
    )
    arm = gather_inputs(m, ARM, [verl], {"TOKEN": "t0k"})
    assert [(r.text, str(r.origin)) for r in arm.requirements] == [
        ("torch==2.10.0", "env-templates/t.toml: pip.packages.torch.version"),
        (
            "private @ https://h/t0k/private-1.0-py3-none-any.whl",
            "env-templates/t.toml: pip.packages.private.url",
        ),
        ("transformers>=4.5", "source verl: requirements-npu.txt:1"),
    ]
    assert arm.index_for == ()
    assert arm.excluded == ("megatron-core", "torch-npu", "verl")
    assert arm.direct == ("private",)
    assert arm.hashes == (
        ("private", ("ab" * 32, Origin("env-templates/t.toml", key="pip.packages.private.sha256"))),
    )
    assert gather_inputs(m, "linux-64", [verl], {"TOKEN": "t"}).index_for == (("torch", "extra"),)
    with pytest.raises(InputError, match=r"pip\.packages\.private\.url.*\$\{TOKEN\}"):
        gather_inputs(m, ARM, [], {})


def test_an_unparsable_source_requirement_names_its_origin() -> None:
    with pytest.raises(InputError, match=r"source verl: requirements-npu\.txt:2"):
        gather_inputs(matrix(), ARM, [source("ok", "not a requirement !!")], {})


def test_generated_uv_files_carry_only_the_matrix_indexes_without_credentials() -> None:
    indexes = [
        access_index(Index("pypi", "https://pypi.org/simple"), {}),
        access_index(Index("mirror", "https://m.example/simple"), {}),
        access_index(
            Index("triton-ascend", "https://${USER_}:${TOK}@t.example/simple/", True),
            {"USER_": "me", "TOK": "s3"},
        ),
    ]
    assert (
        indexes[2].url == "https://t.example/simple/"
        and indexes[2].shown == "https://***@t.example/simple/"
    )
    assert indexes[2].env == {
        "UV_INDEX_TRITON_ASCEND_USERNAME": "me",
        "UV_INDEX_TRITON_ASCEND_PASSWORD": "s3",
    }
    m = matrix(PipPackage("triton-ascend", "==3.2.2", index=((ARM, "triton-ascend"),)))
    inputs = gather_inputs(m, ARM, [], {})
    config = tomllib.loads(render_uv_config(indexes, ["dep==1.0"]))
    assert config["override-dependencies"] == ["dep==1.0"]
    assert config["index"] == [
        {"name": "pypi", "url": "https://pypi.org/simple", "default": True},
        {"name": "mirror", "url": "https://m.example/simple"},
        {"name": "triton-ascend", "url": "https://t.example/simple/", "explicit": True},
    ]
    project = tomllib.loads(render_pyproject(inputs, indexes, "3.11"))
    assert project["project"]["dependencies"] == ["triton-ascend==3.2.2"]
    assert project["tool"]["uv"]["sources"] == {"triton-ascend": {"index": "triton-ascend"}}
    assert project["tool"]["uv"]["index"] == config["index"]
    assert "s3" not in render_uv_config(indexes, []) + render_pyproject(inputs, indexes, "3.11")


def test_entry_index_attributes_the_a5_url_shapes() -> None:
    indexes = [
        access_index(Index("pypi", "https://pypi.org/simple"), {}),
        access_index(Index("pytorch-cpu", "https://download.pytorch.org/whl/cpu", True), {}),
        access_index(
            Index("triton-ascend", "https://triton-ascend.osinfra.cn/pypi/simple/", True, "t.cn"),
            {},
        ),
    ]
    m = matrix(
        PipPackage("torch", "==2.10.0", index=(("linux-64", "pytorch-cpu"),)),
        PipPackage(
            "triton-ascend",
            "==3.2.2",
            index=((ARM, "triton-ascend"), ("linux-64", "triton-ascend")),
        ),
        indexes=tuple(Index(i.name, i.url, i.explicit) for i in indexes),
    )

    def index_of(name: str, version: str, url: str, platform: str) -> str | None:
        choice = uv_pylock.Choice(
            uv_pylock.LockedPackage(name, version, None, (), None), uv_pylock.Artifact(url, SHA)
        )
        return entry_index(choice, gather_inputs(m, platform, [], {}), indexes)

    # The CPU index links its files outside /whl/cpu/ (and PyPI's live on another host): the pin
    # decides.
    cpu = (
        "https://download.pytorch.org/whl/torch-2.10.0%2Bcpu-cp311-cp311-manylinux_2_28_x86_64.whl"
    )
    assert index_of("torch", "2.10.0+cpu", cpu, "linux-64") == "pytorch-cpu"
    assert (
        index_of("torch", "2.10.0+cpu", cpu.replace("/whl/", "/whl/cpu/"), "linux-64")
        == "pytorch-cpu"
    )
    pypi = "https://files.pythonhosted.org/packages/ab/cd/torch-2.10.0-cp311-cp311-manylinux_2_28_aarch64.whl"
    assert index_of("torch", "2.10.0", pypi, ARM) == "pypi"
    triton = "https://triton-ascend.osinfra.cn/pypi/packages/triton_ascend-3.2.2-cp311-cp311-manylinux_2_28.whl"
    assert index_of("triton-ascend", "3.2.2", triton, ARM) == "triton-ascend"
    # A package only limited by the matrix pin on another platform comes from the default index.
    assert (
        index_of("numpy", "1.26.4", pypi.replace("torch-2.10.0", "numpy-1.26.4"), "linux-64")
        == "pypi"
    )


def test_the_uv_config_allows_only_the_trusted_hosts_of_the_indexes() -> None:
    indexes = [
        access_index(Index("pypi", "https://pypi.org/simple"), {}),
        access_index(Index("triton-ascend", "https://t.example/simple/", True, "t.example"), {}),
    ]
    assert tomllib.loads(render_uv_config(indexes, []))["allow-insecure-host"] == ["t.example"]
    assert tomllib.loads(render_uv_config(indexes[:1], []))["allow-insecure-host"] == []


@pytest.mark.parametrize(
    ("text", "needs"),
    [
        ('a; extra == "test"', True),
        ('a; extra != "test"', True),
        ('a; "test" == extra', True),
        ('a; python_version < "3.9" and extra == "test"', True),
        ('a; (extra == "x" or extra == "y") and os_name == "posix"', True),
        ('a; platform_machine == "extra"', False),
        ('a; sys_platform == "linux"', False),
        ("a", False),
    ],
)
def test_a_requirement_needs_an_extra_when_its_marker_names_the_variable(
    text: str, needs: bool
) -> None:
    assert uv_pylock.needs_extra(Pep508(text)) is needs
