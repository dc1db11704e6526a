"""env-templates/a2.toml and a3.toml carry every fact of verl's A2/A3 install guide, and differ only
in the chip.

FACTS is the guide's version matrix and its notes, transcribed row by row (component, where in
`envgen show --json`, what it must be): a row that no longer holds fails with the component's name.
"""

from __future__ import annotations

import pytest

from tests.support.templates import REPO, Fact, differing, missing_origins, show_json, wrong_facts

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
OPENCV = "opencv-python-headless==4.11.0.86"
ORDER = ["vllm", "vllm-ascend", "megatron-lm", "mindspeed", "verl"]
PROFILES = "activation/profiles"
QUIET = {"TRANSFORMERS_VERBOSITY": "error"}
ROCE = {"HCCL_INTRA_ROCE_ENABLE": "1"}
# Every requirement an override decides, by origin: each is named in its reason (file:line and the
# specifier as written there), so a reason cannot drop a requirement it overrules or keeps.
ORIGINS: dict[str, list[str]] = {
    "transformers": [
        "install_vllm_mcore_npu.sh:52",
        "requirements.txt:38 transformers==5.5.4",
        "setup.py:43 transformers>=5.5.3,!=5.6.0,<5.11",
        "MindSpeed requirements.txt:17 transformers>=4.43.2",
        "requirements/common.txt:10 transformers>=4.56.0",
    ],
    "xgrammar": [
        "install_vllm_mcore_npu.sh:52",
        "requirements/common.txt:28 xgrammar>=0.2.0,<1.0.0",
        "requirements.txt:22 xgrammar>=0.1.30",
    ],
    "numpy": [
        "requirements-npu.txt:8 numpy<2.0.0",
        "setup.py:32 numpy>=2.0.0",
        "MindSpeed requirements.txt:4 numpy<=1.26.0",
        "requirements/common.txt:5",
        "vllm-ascend requirements.txt:5",
    ],
    "opencv-python-headless": [
        "requirements/common.txt:36 asks opencv-python-headless>=4.13.0",
        "opencv-python-headless>=4.0.0",
        "numpy>=2",
    ],
}

# (component, path in the show document, expected value), as tests/support/templates.py reads them.
FACTS: list[Fact] = [
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
    (
        "triton-ascend from its index",
        "pip/packages/triton-ascend/index",
        dict.fromkeys(BOTH, "triton-ascend"),
    ),
    ("the triton-ascend index and trusted host", "pip/indexes/2", TRITON_INDEX),
    (
        "triton and triton-ascend uninstalled first",
        "env/notes/triton",
        "~uninstalls triton and triton-ascend",
    ),
    ("transformers 5.10.4", "pip/packages/transformers/specifier", "==5.10.4"),
    (
        "transformers installed again at the end",
        "overrides/transformers/requirement",
        "transformers==5.10.4",
    ),
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
    (
        "vLLM-Ascend from GitHub",
        "sources/vllm-ascend/url",
        "https://github.com/vllm-project/vllm-ascend.git",
    ),
    ("vLLM-Ascend submodules", "sources/vllm-ascend/submodules", True),
    ("vLLM-Ascend --no-build-isolation", "sources/vllm-ascend/build_isolation", False),
    (
        "vLLM-Ascend with the triton-ascend index",
        "sources/vllm-ascend/build_index",
        "triton-ascend",
    ),
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
    (
        "verl's recipe submodule",
        "env/notes/submodules",
        "~https://github.com/verl-project/verl-recipe.git",
    ),
    ("verl: its declared dependencies", "sources/verl/dependencies", "metadata"),
    ("verl: then requirements-npu.txt", "sources/verl/requirements", [VERL_NPU]),
    ("Megatron-LM: nothing it declares", "sources/megatron-lm/dependencies", "none"),
    ("verl pip install -e", "sources/verl/install", "editable"),
    ("requirements-npu.txt wins on numpy", "overrides/numpy/requirement", "numpy<2.0.0"),
    ("... the reason", "overrides/numpy/reason", "~installs requirements-npu.txt last"),
    ("opencv accepting numpy 1", "overrides/opencv-python-headless/requirement", OPENCV),
    ("order: Megatron-LM first", "install/order", ORDER),
    (
        "order: overrides last",
        "env/notes/install-order",
        "~finally transformers 5.10.4 and xgrammar 0.1.33 again",
    ),
    ("USE_MEGATRON=1", "env/notes/install-order", "~USE_MEGATRON=1"),
    ("runtime variables as a profile", "activation/profiles/npu-runtime/env", HCCL),
    ("the guide's log filter", f"{PROFILES}/quiet-transformers/env", QUIET),
    ("... its origin", f"{PROFILES}/quiet-transformers/description", "~install_guidance.rst"),
    ("intra-node RoCE, CANN >= 8.5.0", f"{PROFILES}/intra-roce/env", ROCE),
    ("... its origin", f"{PROFILES}/intra-roce/description", "~verl/checkpoint_engine/README"),
    ("vllm-ascend's build records here", "system/npu/build_info", "vllm_ascend._build_info"),
    (
        "import torch 2.10.0",
        "imports/torch",
        {"distribution": "torch", "version": "2.10.0", "needs": "none"},
    ),
    (
        "import torch_npu",
        "imports/torch_npu",
        {"distribution": "torch-npu", "version": "2.10.0.post4", "needs": "npu"},
    ),
    ("import torchvision", "imports/torchvision/version", "0.25.0"),
    ("import torchaudio", "imports/torchaudio/version", "2.10.0"),
    ("import transformers", "imports/transformers/version", "5.10.4"),
    ("import xgrammar", "imports/xgrammar/version", "0.1.33"),
    ("import vllm", "imports/vllm/version", "0.23.0"),
    (
        "import triton (CANN)",
        "imports/triton",
        {"distribution": "triton-ascend", "version": "3.2.2", "needs": "cann"},
    ),
    ("import vllm_ascend (CANN)", "imports/vllm_ascend/needs", "cann"),
    ("import megatron", "imports/megatron/distribution", "megatron-core"),
    ("import mindspeed", "imports/mindspeed/distribution", "mindspeed"),
    ("import mbridge", "imports/mbridge/distribution", "mbridge"),
    ("import verl", "imports/verl/distribution", "verl"),
    ("nothing pending", "pending", []),
]

# What differs between the generations: the chip, how to detect it, its dies and its image.
PER_ENV: dict[str, list[Fact]] = {
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
        (
            "A3 builds for ascend910_9392",
            "sources/vllm-ascend/env",
            {"SOC_VERSION": "ascend910_9392"},
        ),
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


@pytest.mark.parametrize("env", ["a2", "a3"])
def test_every_fact_of_the_guide_is_in_the_matrix(env: str) -> None:
    wrong = wrong_facts(show_json(env), FACTS + PER_ENV[env])
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("env", ["a2", "a3"])
def test_every_override_names_every_origin_of_what_it_decides(env: str) -> None:
    assert not missing_origins(show_json(env), ORIGINS)


def test_a2_and_a3_differ_exactly_in_the_chip_the_generation_and_their_notes() -> None:
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
    assert differing("a2", "a3") == expected


def test_a2_is_written_as_the_difference_and_a5_stands_alone() -> None:
    a2 = (REPO / "env-templates" / "a2.toml").read_text()
    assert 'extends = "a3"' in a2 and len(a2.splitlines()) < 30
    a5 = (REPO / "env-templates" / "a5.toml").read_text().splitlines()
    assert not [line for line in a5 if line.startswith("extends")]
    assert show_json("a5")["env"]["extends"] == []
