"""env-templates/a2.toml and a3.toml carry every fact of verl's A2/A3 install guide, and differ only in the chip.

FACTS is the guide's version matrix and its notes, transcribed row by row (component, where in `envgen show
--json`, what it must be): a row that no longer holds fails with the component's name.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from envgen.cli import cli

REPO = Path(__file__).resolve().parents[2]

TOOLKIT = "/usr/local/Ascend/ascend-toolkit/set_env.sh"
NNAL = "/usr/local/Ascend/nnal/atb/set_env.sh"
TRITON_INDEX = {
    "name": "triton-ascend",
    "url": "https://triton-ascend.osinfra.cn/pypi/simple/",
    "explicit": True,
    "trusted_host": "triton-ascend.osinfra.cn",
}
VERL_NPU = "requirements-npu.txt"
A3_SKUS = "ascend910_9391/9381/9372/9392/9382/9362"
BOTH = {"linux-aarch64": None, "linux-64": None}
CPU_ON_X86 = {"linux-aarch64": None, "linux-64": "pytorch-cpu"}
HCCL = {
    "HCCL_CONNECT_TIMEOUT": "1500",
    "HCCL_HOST_SOCKET_PORT_RANGE": "60000-60050",
    "HCCL_NPU_SOCKET_PORT_RANGE": "61000-61050",
    "RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES": "1",
}

# (component, path in the show document, expected value; a str starting with "~" means "contains").
# Paths: dict keys, "sources/<name>" picks a source by name, "imports/<module>" an import check by module.
FACTS: list[tuple[str, str, object]] = [
    ("driver/firmware (HDK) 26.0.rc1", "env/notes/driver", "~HDK) 26.0.rc1"),
    ("CANN 9.1.0", "system/cann/version", "9.1.0"),
    ("CANN: both set_env.sh, toolkit first", "system/cann/scripts", [TOOLKIT, NNAL]),
    ("Python 3.12", "env/python", "3.12"),
    ("Python via conda", "conda/specs", ["python 3.12.*", "pip"]),
    ("Python >=3.10,<3.13 supported", "env/notes/python", "~>=3.10,<3.13"),
    ("torch 2.10.0", "pip/packages/torch/specifier", "==2.10.0"),
    ("torch x86_64: +cpu from the CPU index", "pip/packages/torch/index", CPU_ON_X86),
    ("torch_npu 2.10.0.post4", "pip/packages/torch-npu/specifier", "==2.10.0.post4"),
    ("torch_npu from PyPI", "pip/packages/torch-npu/index", BOTH),
    ("torch_npu: post2 in the prose, post4 in the table", "env/notes/torch-npu", "~2.10.0.post2"),
    ("torchvision 0.25.0", "pip/packages/torchvision/specifier", "==0.25.0"),
    ("torchvision x86_64: +cpu from the CPU index", "pip/packages/torchvision/index", CPU_ON_X86),
    ("torchaudio 2.10.0", "pip/packages/torchaudio/specifier", "==2.10.0"),
    ("triton-ascend 3.2.2", "pip/packages/triton-ascend/specifier", "==3.2.2"),
    ("triton-ascend from its index", "pip/packages/triton-ascend/index", dict.fromkeys(BOTH, "triton-ascend")),
    ("the triton-ascend index and trusted host", "pip/indexes/2", TRITON_INDEX),
    ("triton and triton-ascend uninstalled first", "env/notes/triton", "~uninstalls triton and triton-ascend"),
    ("transformers 5.10.4", "pip/packages/transformers/specifier", "==5.10.4"),
    ("transformers installed again at the end", "overrides/transformers/requirement", "transformers==5.10.4"),
    ("... against vllm-ascend's 5.5.4", "overrides/transformers/reason", "~transformers==5.5.4"),
    ("... the reason", "overrides/transformers/reason", "~again at the very end"),
    ("xgrammar 0.1.33", "pip/packages/xgrammar/specifier", "==0.1.33"),
    ("xgrammar installed again at the end", "overrides/xgrammar/requirement", "xgrammar==0.1.33"),
    ("... the reason", "overrides/xgrammar/reason", "~again at the very end"),
    ("setuptools-scm unpinned", "pip/packages/setuptools-scm/specifier", ""),
    ("vLLM tag v0.23.0", "sources/vllm/ref", "v0.23.0"),
    ("vLLM from GitHub", "sources/vllm/url", "https://github.com/vllm-project/vllm.git"),
    ("VLLM_TARGET_DEVICE=empty", "sources/vllm/env", {"VLLM_TARGET_DEVICE": "empty"}),
    ("vllm pip install -e", "sources/vllm/install", "editable"),
    ("vLLM-Ascend releases/v0.23.0", "sources/vllm-ascend/ref", "releases/v0.23.0"),
    ("vLLM-Ascend from GitHub", "sources/vllm-ascend/url", "https://github.com/vllm-project/vllm-ascend.git"),
    ("vLLM-Ascend submodules", "sources/vllm-ascend/submodules", True),
    ("vLLM-Ascend --no-build-isolation", "sources/vllm-ascend/build_isolation", False),
    ("vLLM-Ascend with the triton-ascend index", "sources/vllm-ascend/build_index", "triton-ascend"),
    ("vLLM-Ascend after CANN's env", "sources/vllm-ascend/needs_cann", True),
    ("vLLM-Ascend pip install -e", "sources/vllm-ascend/install", "editable"),
    ("MindSpeed core_r0.16.0", "sources/mindspeed/ref", "core_r0.16.0"),
    ("MindSpeed from gitcode", "sources/mindspeed/url", "https://gitcode.com/Ascend/MindSpeed.git"),
    ("MindSpeed pip install -e", "sources/mindspeed/install", "editable"),
    ("Megatron-LM core_r0.16.0", "sources/megatron-lm/ref", "core_r0.16.0"),
    ("Megatron-LM installs as megatron-core", "sources/megatron-lm/distribution", "megatron-core"),
    ("Megatron-LM pip install -e", "sources/megatron-lm/install", "editable"),
    ("mbridge unpinned", "pip/packages/mbridge/specifier", ""),
    ("verl default branch", "sources/verl/ref", "HEAD"),
    ("verl from GitHub", "sources/verl/url", "https://github.com/verl-project/verl.git"),
    ("verl with submodules", "sources/verl/submodules", True),
    ("verl's recipe submodule", "env/notes/submodules", "~https://github.com/verl-project/verl-recipe.git"),
    ("verl: its declared dependencies", "sources/verl/dependencies", "metadata"),
    ("verl: then requirements-npu.txt", "sources/verl/requirements", [VERL_NPU]),
    ("Megatron-LM: nothing it declares", "sources/megatron-lm/dependencies", "none"),
    ("verl pip install -e", "sources/verl/install", "editable"),
    ("requirements-npu.txt wins on numpy", "overrides/numpy/requirement", "numpy<2.0.0"),
    ("... the reason", "overrides/numpy/reason", "~installs requirements-npu.txt last"),
    ("order", "install/order", ["vllm", "vllm-ascend", "mindspeed", "megatron-lm", "verl"]),
    ("order: overrides last", "env/notes/install-order", "~finally transformers 5.10.4 and xgrammar 0.1.33 again"),
    ("USE_MEGATRON=1", "env/notes/install-order", "~USE_MEGATRON=1"),
    ("runtime variables as a profile", "activation/profiles/npu-runtime/env", HCCL),
    ("vllm-ascend's build records here", "system/npu/build_info", "vllm_ascend._build_info"),
    ("import torch 2.10.0", "imports/torch", {"distribution": "torch", "version": "2.10.0", "needs": "none"}),
    ("import torch_npu", "imports/torch_npu", {"distribution": "torch-npu", "version": "2.10.0.post4", "needs": "npu"}),
    ("import torchvision", "imports/torchvision/version", "0.25.0"),
    ("import torchaudio", "imports/torchaudio/version", "2.10.0"),
    ("import transformers", "imports/transformers/version", "5.10.4"),
    ("import xgrammar", "imports/xgrammar/version", "0.1.33"),
    ("import vllm", "imports/vllm/version", "0.23.0"),
    ("import triton (CANN)", "imports/triton", {"distribution": "triton-ascend", "version": "3.2.2", "needs": "cann"}),
    ("import vllm_ascend (CANN)", "imports/vllm_ascend/needs", "cann"),
    ("import megatron", "imports/megatron/distribution", "megatron-core"),
    ("import mindspeed", "imports/mindspeed/distribution", "mindspeed"),
    ("import mbridge", "imports/mbridge/distribution", "mbridge"),
    ("import verl", "imports/verl/distribution", "verl"),
    ("nothing pending", "pending", []),
]

# What differs between the generations: the chip, how to detect it, its dies and its image.
PER_ENV: dict[str, list[tuple[str, str, object]]] = {
    "a2": [
        ("A2 builds for ascend910b1", "sources/vllm-ascend/env", {"SOC_VERSION": "ascend910b1"}),
        ("A2 soc-version", "system/npu/soc_version", "ascend910b1"),
        ("A2 generation", "system/npu/generation", "a2"),
        ("A2 builds record A2", "system/npu/device_type", "A2"),
        ("A2 reports 220-225", "system/npu/soc_codes", [220, 225]),
        ("A2 device names", "system/npu/device_names", ["Ascend910B", "A2G"]),
        ("A2: one die per card", "env/notes/dies", "~n_gpus_per_node is 8"),
        ("A2 image", "env/notes/image", "~cann:9.1.0-910b-ubuntu22.04-py3.12"),
        ("A2 extends A3", "env/extends", ["a3"]),
    ],
    "a3": [
        ("A3 builds for ascend910_9392", "sources/vllm-ascend/env", {"SOC_VERSION": "ascend910_9392"}),
        ("A3 soc-version", "system/npu/soc_version", "ascend910_9392"),
        ("A3 generation", "system/npu/generation", "a3"),
        ("A3 builds record A3", "system/npu/device_type", "A3"),
        ("A3 reports 250-255", "system/npu/soc_codes", [250, 255]),
        ("A3 device names", "system/npu/device_names", ["Ascend910_93"]),
        ("A3: vllm-ascend's fallback and the SKUs", "env/notes/soc-version", f"~{A3_SKUS}"),
        ("A3: two dies per card", "env/notes/dies", "~n_gpus_per_node is 16"),
        ("A3 image", "env/notes/image", "~cann:9.1.0-a3-ubuntu22.04-py3.12"),
    ],
}


def show_json(env: str) -> dict[str, Any]:
    result = CliRunner().invoke(cli, ["show", env, "--json", "--root", str(REPO)])
    assert result.exit_code == 0, result.stderr
    document: dict[str, Any] = json.loads(result.stdout)["results"][0]
    return document


def walk(document: dict[str, Any], path: str) -> object:
    node: Any = document
    parts = path.split("/")
    while parts:
        part = parts.pop(0)
        if part == "sources":
            name = parts.pop(0)
            node = next(s for s in node["sources"] if s["name"] == name)
        elif part == "imports":
            module = parts.pop(0)
            node = next(c for c in node["checks"]["imports"] if c["module"] == module)
        elif isinstance(node, list):
            node = node[int(part)]
        else:
            node = node[part]
    return node


@pytest.mark.parametrize("env", ["a2", "a3"])
def test_every_fact_of_the_guide_is_in_the_matrix(env: str) -> None:
    document = show_json(env)
    wrong = []
    for component, path, expected in FACTS + PER_ENV[env]:
        found = walk(document, path)
        if isinstance(expected, str) and expected.startswith("~"):
            holds = isinstance(found, str) and expected[1:] in found
        elif isinstance(expected, dict) and isinstance(found, dict):
            holds = {k: found.get(k) for k in expected} == expected
        else:
            holds = found == expected
        if not holds:
            wrong.append(f"{component}: {path} is {found!r}, expected {expected!r}")
    assert not wrong, "\n".join(wrong)


def leaves(node: object, path: str = "") -> dict[str, object]:
    """Every scalar of a document by path; sources and import checks keyed by name, not position."""
    if isinstance(node, dict):
        return {k: v for key, value in node.items() for k, v in leaves(value, f"{path}/{key}").items()}
    if isinstance(node, list) and node and all(isinstance(i, dict) and ("name" in i or "module" in i) for i in node):
        return {k: v for i in node for k, v in leaves(i, f"{path}/{i.get('name') or i['module']}").items()}
    if isinstance(node, list):
        return {k: v for n, i in enumerate(node) for k, v in leaves(i, f"{path}/{n}").items()}
    return {path: node}


def test_a2_and_a3_differ_exactly_in_the_chip_the_generation_and_their_notes() -> None:
    a2, a3 = leaves(show_json("a2")), leaves(show_json("a3"))
    differing = {path for path in set(a2) | set(a3) if a2.get(path) != a3.get(path)}
    expected = {
        "/env/name",
        "/env/extends/0",
        "/sources/vllm-ascend/env/SOC_VERSION",
        "/system/npu/generation",
        "/system/npu/soc_version",
        "/system/npu/device_type",
        # the generation's row: its name, reported codes and device names
        "/system/npu/title",
        "/system/npu/soc_codes/0",
        "/system/npu/soc_codes/1",
        "/system/npu/device_names/0",
        "/system/npu/device_names/1",
        "/env/notes/device-detection",
        "/env/notes/dies",
        "/env/notes/soc-version",
        "/env/notes/image",
    }
    assert differing == expected


def test_a2_is_written_as_the_difference_and_a5_stands_alone() -> None:
    a2 = (REPO / "env-templates" / "a2.toml").read_text()
    assert 'extends = "a3"' in a2 and len(a2.splitlines()) < 30
    assert "extends" not in (REPO / "env-templates" / "a5.toml").read_text()
    assert show_json("a5")["env"]["extends"] == []
