"""`envgen show`: the A5 matrix as JSON checked against the A5 install guide's facts, and as
text."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from envgen.cli import cli
from envgen.commands.show import matrix_document, render_json, render_text
from envgen.inputs.matrix import load_matrix

REPO = Path(__file__).parents[2]
MATRICES = Path(__file__).parents[1] / "data" / "matrices"


def show(*args: str) -> str:
    result = CliRunner().invoke(cli, ["show", *args])
    assert result.exit_code == 0, result.stderr
    return result.stdout


@pytest.fixture(scope="module")
def a5() -> dict[str, Any]:
    return json.loads(show("a5", "--root", str(REPO), "--json"))["results"][0]


def test_a5_system_and_conda(a5: dict[str, Any]) -> None:
    assert a5["env"]["name"] == "a5"
    assert set(a5["env"]["platforms"]) == {"linux-aarch64", "linux-64"}
    assert a5["env"]["python"] == "3.11"
    assert a5["system"]["glibc"] == "2.28"
    cann = a5["system"]["cann"]
    assert cann["version"] == "9.1.0" and cann["pending"] is False
    assert "Q2" in cann["note"]
    toolkit = "/usr/local/Ascend/ascend-toolkit/set_env.sh"
    assert cann["scripts"] == [toolkit, "/usr/local/Ascend/nnal/atb/set_env.sh"]
    assert a5["conda"]["channels"] == [
        {"name": "conda-forge", "url": "https://conda.anaconda.org/conda-forge"}
    ]
    assert "python 3.11.*" in a5["conda"]["specs"]


def test_a5_pip_pins_and_indexes(a5: dict[str, Any]) -> None:
    indexes = {i["name"]: i for i in a5["pip"]["indexes"]}
    assert a5["pip"]["default_indexes"] == ["pypi"]
    assert indexes["triton-ascend"] == {
        "name": "triton-ascend",
        "url": "https://triton-ascend.osinfra.cn/pypi/simple/",
        "explicit": True,
        "trusted_host": "triton-ascend.osinfra.cn",
    }
    assert indexes["pytorch-cpu"]["url"] == "https://download.pytorch.org/whl/cpu"
    assert indexes["pytorch-cpu"]["explicit"] is True
    packages = a5["pip"]["packages"]
    assert packages["torch"]["specifier"] == "==2.10.0"
    # x86_64 Ascend hosts take the CPU build; aarch64 takes PyPI's (CPU-only) wheel
    assert packages["torch"]["index"] == {"linux-64": "pytorch-cpu", "linux-aarch64": None}
    assert packages["triton-ascend"]["specifier"] == "==3.2.2"
    assert packages["triton-ascend"]["index"] == {
        "linux-64": "triton-ascend",
        "linux-aarch64": "triton-ascend",
    }
    assert packages["transformers"]["specifier"] == "==4.57.6"
    assert packages["mbridge"]["specifier"] == "" and packages["mbridge"]["pending"] is None
    assert packages["torch-npu"]["pending"] is None
    assert packages["torch-npu"]["specifier"] == "==2.10.0.post4"


def test_a5_sources_refs_flags_and_order(a5: dict[str, Any]) -> None:
    sources = {s["name"]: s for s in a5["sources"]}
    assert a5["install"]["order"] == ["vllm", "vllm-ascend", "mindspeed", "megatron-lm", "verl"]
    assert [s["name"] for s in a5["sources"]] == a5["install"]["order"]
    expected = {
        "vllm": ("https://github.com/vllm-project/vllm.git", "v0.23.0", "vllm"),
        "vllm-ascend": (
            "https://github.com/vllm-project/vllm-ascend.git",
            "releases/v0.23.0",
            "vllm_ascend",
        ),
        "mindspeed": (
            "https://gitcode.com/Ascend/MindSpeed.git",
            "0c6c0ceaa523a96032dee1539a52032155e6404e",
            "mindspeed",
        ),
        "megatron-lm": (
            "https://github.com/NVIDIA/Megatron-LM.git",
            "core_r0.12.0",
            "megatron-core",
        ),
        "verl": ("https://github.com/verl-project/verl.git", "HEAD", "verl"),
    }
    for name, (url, ref, distribution) in expected.items():
        assert (sources[name]["url"], sources[name]["ref"], sources[name]["distribution"]) == (
            url,
            ref,
            distribution,
        )
        assert sources[name]["install"] == "editable"
    assert sources["vllm"]["env"] == {"VLLM_TARGET_DEVICE": "empty"}
    ascend = sources["vllm-ascend"]
    assert ascend["build_isolation"] is False and ascend["needs_cann"] is True
    assert ascend["build_index"] == "triton-ascend"
    assert ascend["env"] == {"SOC_VERSION": "ascend950dt_9582"}
    on_pythonpath = sorted(name for name, s in sources.items() if s["pythonpath"])
    assert on_pythonpath == ["megatron-lm", "mindspeed"]
    assert [n for n, s in sources.items() if not s["build_isolation"]] == ["vllm-ascend"]
    assert [n for n, s in sources.items() if s["needs_cann"]] == ["vllm-ascend"]
    assert sources["verl"]["requirements"] == ["requirements-npu.txt"]
    assert all(s["cherry_picks"] == [] for s in sources.values())


def test_a5_activation_checks_notes_and_pending(a5: dict[str, Any]) -> None:
    profiles = a5["activation"]["profiles"]
    assert profiles["checkpoint-engine"]["env"] == {
        "HCCL_WHITELIST_DISABLE": "0",
        "HCCL_WHITELIST_FILE": "/path/to/whitelist.json",
    }
    assert profiles["quiet-transformers"]["env"] == {"TRANSFORMERS_VERBOSITY": "error"}
    modules = {c["module"]: c for c in a5["checks"]["imports"]}
    assert {"torch", "torch_npu", "vllm", "megatron", "mindspeed", "verl", "transfer_queue"} <= set(
        modules
    )
    assert modules["torch"]["version"] == "2.10.0"
    assert modules["megatron"]["distribution"] == "megatron-core"
    assert modules["torch_npu"]["needs"] == "npu"
    assert "Ascend950" in a5["env"]["notes"]["device-detection"]
    assert "BF16" in a5["env"]["notes"]["precision"]
    assert a5["pending"] == []
    assert "Q2" in a5["env"]["notes"]["torch-npu"]


def test_json_is_stable_and_sorted() -> None:
    first = show("a5", "--root", str(REPO), "--json")
    assert first == show("a5", "--root", str(REPO), "--json")
    assert (
        first == json.dumps(json.loads(first), sort_keys=True, indent=2, ensure_ascii=False) + "\n"
    )
    assert "path" not in json.loads(first)["results"][0]["env"]


def test_a5_text_has_every_row() -> None:
    text = show("a5", "--root", str(REPO))
    matrix = load_matrix(REPO / "env-templates" / "a5.toml", REPO / "channels")
    assert text == render_text(matrix)
    rows = [
        "linux-aarch64, linux-64",
        "3.11",
        "2.28",
        f"9.1.0 ({matrix.cann.note})",
        "/usr/local/Ascend/ascend-toolkit/set_env.sh, then /usr/local/Ascend/nnal/atb/set_env.sh",
        "conda-forge  https://conda.anaconda.org/conda-forge",
        "python 3.11.*",
        "https://triton-ascend.osinfra.cn/pypi/simple/",
        "trusted host triton-ascend.osinfra.cn",
        "https://download.pytorch.org/whl/cpu",
        "vllm -> vllm-ascend -> mindspeed -> megatron-lm -> verl",
        "HCCL_WHITELIST_DISABLE=0",
        "HCCL_WHITELIST_FILE=/path/to/whitelist.json",
        "TRANSFORMERS_VERBOSITY=error",
        "no (--no-build-isolation)",
        "SOC_VERSION=ascend950dt_9582",
        "VLLM_TARGET_DEVICE=empty",
    ]
    for package in matrix.packages:
        rows.append(package.name)
        rows.append(package.pending or package.specifier or "unpinned")
    for source in matrix.sources:
        rows += [source.url, source.ref, source.distribution, *source.requirements]
    for name, note in matrix.notes:
        rows += [name, note]
    for check in matrix.checks:
        rows.append(check.module)
    for row in rows:
        assert row in text, row
    pythonpath = [line for line in text.splitlines() if "pythonpath" in line]
    assert sum("yes" in line for line in pythonpath) == 2


def test_credentials_are_redacted_everywhere() -> None:
    matrix = load_matrix(MATRICES / "env-templates" / "valid.toml", MATRICES / "channels")
    assert "s3cret" in matrix.index("private").url
    for rendered in (
        render_text(matrix),
        render_json(matrix),
        show("valid", "--root", str(MATRICES), "--json"),
    ):
        assert "s3cret" not in rendered and "ci-user" not in rendered
        assert "https://***@pypi.example.com/simple" in rendered
        assert "https://***@files.example.com/secret_wheel-1.0-py3-none-any.whl" in rendered
        assert "https://${MIRROR_HOST}/simple" in rendered


def test_document_of_the_valid_fixture() -> None:
    document = matrix_document(
        load_matrix(MATRICES / "env-templates" / "valid.toml", MATRICES / "channels")
    )
    assert document["install"]["order"] == ["second", "third", "first"]
    assert document["overrides"] == {
        "numpy": {
            "requirement": "numpy<2",
            "reason": "second's wheels are built against numpy 1",
            "transitive": False,
            "violates": [],
        }
    }
    assert document["activation"]["env"] == {"HF_HOME": "/data/hf"}
    assert document["sources"][0]["install"] == "plain"
    assert document["sources"][0]["cherry_picks"] == ["b" * 40, "a" * 40]
    assert document["pip"]["packages"]["Ray"]["extras"] == ["client", "default"]
    assert document["pending"] == [{"name": "torch-npu", "note": "not published yet"}]


@pytest.mark.parametrize("env", ["a2", "a3", "a5", "a5-950pr", "valid", "example"])
def test_no_line_ends_in_spaces(env: str, tmp_path: Path) -> None:
    """Before: a matrix without sources (`envgen init`'s example) printed its install order as a
    line of spaces."""
    from envgen.commands.init import init_project

    init_project(tmp_path)
    root = {"valid": MATRICES, "example": tmp_path}.get(env, REPO)
    text = show(env, "--root", str(root))
    assert text.count("\n") > 20
    assert [line for line in text.splitlines() if line != line.rstrip()] == []


def test_an_overridden_pin_shows_what_the_lock_holds_and_why() -> None:
    """Before: `show a5` listed transformers ==4.57.6 (the guide's table) while the override
    installs 5.5.4."""
    matrix = load_matrix(REPO / "env-templates" / "a5.toml", REPO / "channels")
    override = matrix.override_of("Transformers")
    assert override is not None and override.requirement == "transformers==5.5.4"
    (row,) = [line for line in show("a5", "--root", str(REPO)).splitlines() if "==4.57.6" in line]
    assert row.split()[:2] == ["transformers", "transformers==5.5.4"]
    assert "over the matrix's ==4.57.6; reason: " + override.reason + ")" in row
    torch = next(line for line in render_text(matrix).splitlines() if " torch " in line)
    assert "override" not in torch
    packages = matrix_document(matrix)["pip"]["packages"]
    assert packages["transformers"]["override"] == "transformers==5.5.4"
    assert packages["transformers"]["specifier"] == "==4.57.6"
    assert packages["torch"]["override"] is None
