"""env-templates/a3-sglang-fsdp.toml, a3-sglang.toml and a2-sglang.toml carry every fact of
section 3 of verl's A2/A3 guide and of scripts/install_sglang_mcore_npu.sh: the facts row by row
(component, where in `envgen show --json`, what it must be); a row that no longer holds fails with
its name."""

from __future__ import annotations

import pytest

from tests.support.templates import Fact, differing, missing_origins, show_json, wrong_facts

TOOLKIT = "/usr/local/Ascend/ascend-toolkit/set_env.sh"
NNAL = "/usr/local/Ascend/nnal/atb/set_env.sh"
CPU_ON_X86 = {"linux-aarch64": None, "linux-64": "pytorch-cpu"}
BOTH = ("linux-aarch64", "linux-64")
RELEASE = "https://github.com/sgl-project/sgl-kernel-npu/releases/download/2026.02.01/"
ZIP = "sgl-kernel-npu-2026.02.01-torch2.8.0-py311-cann8.5.0-a3-{}.zip"
SGLANG_RUNTIME = {
    "HCCL_HOST_SOCKET_PORT_RANGE": "60000-60050",
    "HCCL_NPU_SOCKET_PORT_RANGE": "61000-61050",
    "RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES": "1",
}
TRITON = "triton-ascend==3.2.1"
WHEELS = ["torch_memory_saver", "sgl_kernel_npu", "deep_ep"]
ROCE = {"HCCL_INTRA_ROCE_ENABLE": "1"}
KERNELS = "archives/sgl-kernel-npu"
PROFILES = "activation/profiles"
GUIDE = "ascend_tutorial/get_start/install_guidance.rst"
ORDER = ["sglang", "megatron-lm", "mindspeed", "verl"]
DEVICES = "activation/env/ASCEND_RT_VISIBLE_DEVICES"
X86_ZIP = RELEASE + ZIP.format("x86_64")
NPU_PYPROJECT = {"from": "python/pyproject_npu.toml", "to": "python/pyproject.toml"}
# Every requirement an override decides, by origin, named in its reason.
ORIGINS: dict[str, list[str]] = {
    "transformers": [
        "install_guidance.rst:170",
        "pyproject_npu.toml:61 transformers==5.3.0",
        "setup.py:43 transformers>=5.5.3,!=5.6.0,<5.11",
        "install_sglang_mcore_npu.sh:46",
    ],
    "numpy": [
        "install_sglang_mcore_npu.sh:17",
        "requirements-npu.txt:8 numpy<2.0.0",
        "setup.py:32 numpy>=2.0.0",
        "pyproject_npu.toml:36",
    ],
    "triton-ascend": [
        "install_guidance.rst:169",
        "requirements-npu.txt:22 triton-ascend==3.2.2",
        "d9e2a5b7",
    ],
}
MINDSPEED_ORIGINS = {
    "transformers": ["MindSpeed requirements.txt:17 transformers>=4.43.2"],
    "numpy": ["MindSpeed requirements.txt:4 numpy<=1.26.0"],
}

# (component, path in the show document, expected value), as tests/support/templates.py reads them.
SHARED: list[Fact] = [
    ("HDK 25.5.0", "env/notes/driver", "~HDK) 25.5.0"),
    ("CANN >= 8.5.0", "system/cann/version", "8.5.0"),
    ("... as a floor", "system/cann/note", "~CANN >= 8.5.0"),
    ("CANN: both set_env.sh, toolkit first", "system/cann/scripts", [TOOLKIT, NNAL]),
    ("Python 3.11", "env/python", "3.11"),
    ("Python via conda", "conda/specs", ["python 3.11.*", "pip"]),
    ("Python >=3.10,<3.12 supported", "env/notes/python", "~>=3.10,<3.12"),
    ("torch 2.8.0", "pip/packages/torch/specifier", "==2.8.0"),
    ("torch x86_64: +cpu from the CPU index", "pip/packages/torch/index", CPU_ON_X86),
    ("torch_npu 2.8.0.post2", "pip/packages/torch-npu/specifier", "==2.8.0.post2"),
    ("torchvision 0.23.0", "pip/packages/torchvision/specifier", "==0.23.0"),
    ("torchvision x86_64: +cpu", "pip/packages/torchvision/index", CPU_ON_X86),
    ("triton-ascend 3.2.1", "pip/packages/triton-ascend/specifier", "==3.2.1"),
    ("... against verl main's 3.2.2", "overrides/triton-ascend/requirement", TRITON),
    ("transformers 5.3.0", "pip/packages/transformers/specifier", "==5.3.0"),
    ("... against verl's floor", "overrides/transformers/requirement", "transformers==5.3.0"),
    ("numpy<2.0.0", "overrides/numpy/requirement", "numpy<2.0.0"),
    ("click==8.2.1", "pip/packages/click/specifier", "==8.2.1"),
    ("pyyaml, pybind11, cachetools", "pip/packages/cachetools/specifier", ""),
    ("... pybind11", "pip/packages/pybind11/specifier", ""),
    ("... pyyaml", "pip/packages/pyyaml/specifier", ""),
    ("SGLang tag v0.5.10", "sources/sglang/ref", "v0.5.10"),
    ("SGLang from GitHub", "sources/sglang/url", "https://github.com/sgl-project/sglang.git"),
    ("pyproject_npu.toml over pyproject.toml", "sources/sglang/replace", [NPU_PYPROJECT]),
    ("pip install -e python[srt_npu]", "sources/sglang/subdirectory", "python"),
    ("... its extra", "sources/sglang/extras", ["srt_npu"]),
    ("... editable", "sources/sglang/install", "editable"),
    ("MAX_JOBS=32", "sources/sglang/env/MAX_JOBS", "32"),
    ("... for verl too", "sources/verl/env/MAX_JOBS", "32"),
    ("sgl-kernel-npu's wheels", f"{KERNELS}/wheels", WHEELS),
    ("... aarch64 zip", f"{KERNELS}/url/linux-aarch64", RELEASE + ZIP.format("aarch64")),
    ("... x86_64 zip", "archives/sgl-kernel-npu/url/linux-64", RELEASE + ZIP.format("x86_64")),
    ("... sha256 pinned by the lock", "archives/sgl-kernel-npu/sha256", dict.fromkeys(BOTH)),
    ("deep_ep_cpp*.so linked", "install/links/0/target", "deep_ep/deep_ep_cpp*.so"),
    ("... into site-packages", "install/links/0/directory", ""),
    ("timm uninstalled", "pip/exclude/timm/platforms", list(BOTH)),
    ("... its origin", "pip/exclude/timm/reason", "~install_sglang_mcore_npu.sh:49"),
    ("upstream triton left out on x86_64", "pip/exclude/triton/platforms", ["linux-64"]),
    ("verl default branch", "sources/verl/ref", "HEAD"),
    ("verl with submodules", "sources/verl/submodules", True),
    ("verl: then requirements-npu.txt", "sources/verl/requirements", ["requirements-npu.txt"]),
    ("SGLang's runtime variables", "activation/env", SGLANG_RUNTIME),
    ("expert parallelism", f"{PROFILES}/expert-parallel/env", {"SGLANG_DEEPEP_BF16_DISPATCH": "1"}),
    ("intra-node RoCE, CANN >= 8.5.0", f"{PROFILES}/intra-roce/env", ROCE),
    ("import torch 2.8.0", "imports/torch/version", "2.8.0"),
    ("import torch_npu", "imports/torch_npu", {"version": "2.8.0.post2", "needs": "npu"}),
    ("import sglang", "imports/sglang/version", "0.5.10"),
    ("import triton", "imports/triton", {"distribution": "triton-ascend", "version": "3.2.1"}),
    ("the script's own import deep_ep", "imports/deep_ep/distribution", "deep-ep"),
    ("the guide's page, watched", "watch/pages/0/path", f"docs/{GUIDE}"),
    ("the script, watched", "watch/pages/1/path", "scripts/install_sglang_mcore_npu.sh"),
    ("nothing pending", "pending", []),
]
MEGATRON: list[Fact] = [
    ("MindSpeed core_r0.16.0", "sources/mindspeed/ref", "core_r0.16.0"),
    ("MindSpeed from gitcode", "sources/mindspeed/url", "https://gitcode.com/Ascend/MindSpeed.git"),
    ("Megatron-LM core_r0.16.0", "sources/megatron-lm/ref", "core_r0.16.0"),
    ("Megatron-LM installs as megatron-core", "sources/megatron-lm/distribution", "megatron-core"),
    ("mbridge", "pip/packages/mbridge/specifier", ""),
    ("order: SGLang, Megatron-LM, MindSpeed, verl", "install/order", ORDER),
    ("USE_MEGATRON=1", "env/notes/route", "~USE_MEGATRON=1"),
    ("import mindspeed", "imports/mindspeed/distribution", "mindspeed"),
]
PER_ENV: dict[str, list[Fact]] = {
    "a3-sglang-fsdp": [
        ("FSDP only: SGLang, then verl", "install/order", ["sglang", "verl"]),
        ("USE_MEGATRON=0", "env/notes/route", "~USE_MEGATRON=0"),
        ("A3 generation", "system/npu/generation", "a3"),
        ("A3: 16 devices", DEVICES, ",".join(map(str, range(16)))),
    ],
    "a3-sglang": [
        *MEGATRON,
        ("A3 generation", "system/npu/generation", "a3"),
        ("A3: 16 devices", DEVICES, ",".join(map(str, range(16)))),
        ("extends the FSDP-only route", "env/extends", ["a3-sglang-fsdp"]),
    ],
    "a2-sglang": [
        *MEGATRON,
        ("A2 generation", "system/npu/generation", "a2"),
        ("A2: 8 devices", DEVICES, ",".join(map(str, range(8)))),
        ("A2: the A3 build of sgl-kernel-npu", f"{KERNELS}/url/linux-64", X86_ZIP),
        ("extends a3-sglang", "env/extends", ["a3-sglang", "a3-sglang-fsdp"]),
    ],
}
ENVS = list(PER_ENV)


@pytest.mark.parametrize("env", ENVS)
def test_every_fact_of_the_guide_and_the_script_is_in_the_matrix(env: str) -> None:
    wrong = wrong_facts(show_json(env), SHARED + PER_ENV[env])
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("env", ENVS)
def test_every_override_names_every_origin_of_what_it_decides(env: str) -> None:
    extra = MINDSPEED_ORIGINS if env != "a3-sglang-fsdp" else {}
    origins = {k: [*v, *extra.get(k, [])] for k, v in ORIGINS.items()}
    assert not missing_origins(show_json(env), origins)


def test_the_fsdp_only_route_has_no_mindspeed_megatron_or_mbridge() -> None:
    document = show_json("a3-sglang-fsdp")
    assert [s["name"] for s in document["sources"]] == ["sglang", "verl"]
    assert "mbridge" not in document["pip"]["packages"]
    imported = {c["module"] for c in document["checks"]["imports"]}
    assert not {"megatron", "mindspeed", "mbridge"} & imported


def test_a2_differs_from_a3_in_the_generation_its_devices_and_notes_only() -> None:
    found = differing("a2-sglang", "a3-sglang")
    expected = {
        "/env/name",
        "/env/description",
        "/env/extends/0",
        "/env/extends/1",
        "/activation/env/ASCEND_RT_VISIBLE_DEVICES",
        "/system/npu/generation",
        "/system/npu/title",
        "/system/npu/soc_codes/0",
        "/system/npu/soc_codes/1",
        "/system/npu/device_names/0",
        "/system/npu/device_names/1",
        "/system/npu/device_type",
        "/env/notes/device-detection",
        "/env/notes/dies",
    }
    assert found == expected
