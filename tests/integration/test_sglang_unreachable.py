"""`envgen lock` of the SGLang route's real templates with their hosts unreachable: exit 3, every
host named, and nothing else in the way.

As in test_a3_unreachable.py, the hosts are played on 127.0.0.1: closed ports stand for GitHub,
gitcode, the conda channel, the pip indexes and the release archive's host (the archive URLs are
rewritten to one, as the channels are); local repositories shaped as the sources (SGLang's project
in python/ with its pyproject_npu.toml) stand for the git remotes once they are reached.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from envgen.example.gitrepos import GitRepo, python_project
from envgen.resolve.preflight import host_of

from tests.integration.test_a3_unreachable import INDEXES, channel, lock, url_of
from tests.support.closed import closed_url
from tests.support.preflight import verdict

REPO = Path(__file__).resolve().parents[2]
ENVS = ("a3-sglang-fsdp", "a3-sglang", "a2-sglang")
RELEASES = "https://github.com/sgl-project/sgl-kernel-npu/releases/download/"
NPU_PYPROJECT = """\
[project]
name = "sglang"
dynamic = ["version"]
dependencies = ["transformers==5.3.0", "timm==1.0.16"]

[project.optional-dependencies]
srt_npu = []
"""
DEFAULT_PYPROJECT = "[project]\nname = 'sglang'\n"
SOURCES = {
    "https://github.com/sgl-project/sglang.git": (
        "sglang",
        {"python/pyproject.toml": DEFAULT_PYPROJECT, "python/pyproject_npu.toml": NPU_PYPROJECT},
    ),
    "https://gitcode.com/Ascend/MindSpeed.git": ("mindspeed", {"requirements.txt": "einops\n"}),
    "https://github.com/NVIDIA/Megatron-LM.git": ("megatron-core", {}),
    "https://github.com/verl-project/verl.git": (
        "verl",
        {"requirements-npu.txt": "triton-ascend==3.2.2\n"},
    ),
}


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The repository's SGLang templates and channels, every host unreachable, git's own
    configuration isolated; the archive URLs point at a closed port."""
    root = tmp_path / "project"
    (root / "env-templates").mkdir(parents=True)
    archive = closed_url("/releases/")
    for env in ENVS:
        text = (REPO / "env-templates" / f"{env}.toml").read_text()
        (root / "env-templates" / f"{env}.toml").write_text(text.replace(RELEASES, archive))
    shutil.copytree(REPO / "channels", root / "channels")
    for name in INDEXES:
        channel(root, name, closed_url("/simple"))
    channel(root, "conda-forge", closed_url("/conda-forge"))
    gitconfig = tmp_path / "gitconfig"
    down = closed_url("/")
    rules = "\tinsteadOf = https://github.com/\n\tinsteadOf = https://gitcode.com/\n"
    gitconfig.write_text(f'[url "{down}"]\n{rules}')
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(gitconfig))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("ENVGEN_CACHE_DIR", str(tmp_path / "cache"))
    yield root
    written = [path.name for env in ENVS for path in (root / "locks").glob(f"{env}.*")]
    assert written == []


def archive_url(root: Path) -> str:
    text = (root / "env-templates" / "a3-sglang-fsdp.toml").read_text()
    return text.split('linux-aarch64 = "')[1].split('"')[0]


def test_the_preflight_names_every_unreachable_host_of_every_sglang_env_at_once(
    project: Path,
) -> None:
    code, err = lock(project, *ENVS, preflight=True)
    assert code == 3, err
    assert err.startswith("error: 7 hosts that the lock needs did not answer; nothing was locked:")
    found = verdict(err)
    assert len(found) == 7, err
    archive = archive_url(project)
    every = ", ".join(ENVS)

    def index(name: str) -> str:
        return url_of(project, name)

    def sources(name: str) -> str:
        return ", ".join(f"{env} source {name}" for env in ENVS)

    conda = url_of(project, "conda-forge")
    sglang = "git remote https://github.com/sgl-project/sglang.git"
    expected = {
        "github.com": [f"{sglang} ({sources('sglang')})"],
        "gitcode.com": [
            "git remote https://gitcode.com/Ascend/MindSpeed.git (a3-sglang source "
            "mindspeed, a2-sglang source mindspeed)"
        ],
        host_of(archive): [
            f"archive {archive} ("
            + ", ".join(f"{env} archive sgl-kernel-npu" for env in ENVS)
            + ")",
        ],
        host_of(conda): [f"conda channel {conda} ({every})"],
        **{host_of(url): [f"pip index {url} ({every})"] for url in map(index, INDEXES)},
    }
    for host, first in expected.items():
        reason, below = found[host]
        assert below[: len(first)] == first, err
        assert reason.endswith(("Connection refused", "Couldn't connect to server")), reason
    assert len(found["github.com"][1]) == 3 and len(found[host_of(archive)][1]) == 2, err
    assert not (project.parent / "cache" / "git").exists()


def mirror_sources(tmp_path: Path) -> None:
    """Local repositories shaped as the SGLang route's sources, at the refs it names, reached
    through insteadOf (a mirror)."""
    lines = []
    for url, (distribution, files) in SOURCES.items():
        name = url.rsplit("/", 1)[1].removesuffix(".git")
        repo: GitRepo = python_project(tmp_path / "upstream" / name, distribution, files=files)
        repo.tag("v0.5.10")
        repo.branch("core_r0.16.0")
        lines += [f'[url "{repo.url}"]', f"\tinsteadOf = {url}"]
    (tmp_path / "gitconfig").write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize("env", ENVS)
def test_with_the_sources_reached_the_lock_stops_at_the_unreachable_archive(
    project: Path, tmp_path: Path, env: str
) -> None:
    mirror_sources(tmp_path)
    code, err = lock(project, env)
    assert code == 3, err
    assert "cannot reach git remote" not in err
    # The sources were pinned (SGLang's replaced pyproject found in its python/), then the archive.
    assert "INFO    source sglang: v0.5.10 -> " in err
    zipped = archive_url(project).removesuffix("aarch64.zip")
    assert f"error: cannot fetch the archive {zipped}" in err, err
    assert "Connection refused" in err
