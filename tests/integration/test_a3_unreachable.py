"""`envgen lock a3` on the real template with its hosts unreachable: exit 3, naming the first URL of
each kind.

The hosts are played on 127.0.0.1: closed ports stand for an unreachable GitHub/gitcode, conda
channel and pip indexes; local repositories (through git's insteadOf, as a mirror would be) and a
loopback conda channel stand for the ones reached, so each run gets one stage further than the last.
Nothing in locks/ is written.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from envgen.cli import cli
from envgen.example.condapkgs import demo_packages, write_channel
from envgen.example.gitrepos import GitRepo, python_project
from envgen.example.http import serve_directory
from envgen.resolve.preflight import host_of

from tests.support.closed import closed_url
from tests.support.preflight import verdict

REPO = Path(__file__).resolve().parents[2]
ENV = "a3"
INDEXES = ("pypi", "pytorch-cpu", "triton-ascend")
# The a3 sources as the guide names them, with the refs the matrix asks for.
SOURCES = {
    "https://github.com/vllm-project/vllm.git": (
        "vllm",
        {"requirements/common.txt": "xgrammar==0.1.33\n"},
    ),
    "https://github.com/vllm-project/vllm-ascend.git": (
        "vllm_ascend",
        {"requirements.txt": "transformers==5.5.4\n"},
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
    """The repository's a3 matrix and channels, every host unreachable, git's own configuration
    isolated."""
    root = tmp_path / "project"
    (root / "env-templates").mkdir(parents=True)
    for env in ("a2", ENV):  # a2 extends a3
        shutil.copy(REPO / "env-templates" / f"{env}.toml", root / "env-templates")
    shutil.copytree(REPO / "channels", root / "channels")
    for name in INDEXES:
        channel(root, name, closed_url("/simple"))
    channel(root, "conda-forge", closed_url("/conda-forge"))
    gitconfig = tmp_path / "gitconfig"
    down = closed_url("/")
    gitconfig.write_text(
        f'[url "{down}"]\n\tinsteadOf = https://github.com/\n\tinsteadOf = https://gitcode.com/\n'
    )
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(gitconfig))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("ENVGEN_CACHE_DIR", str(tmp_path / "cache"))
    yield root
    assert not (root / "locks").exists() or not any((root / "locks").glob("a[23].*"))


def channel(root: Path, name: str, url: str) -> None:
    """Point channels/<name>.toml at `url`, keeping its kind and flags."""
    path = root / "channels" / f"{name}.toml"
    lines = [line for line in path.read_text().splitlines() if not line.startswith("url =")]
    path.write_text("\n".join([*lines, f'url = "{url}"']) + "\n")


def mirror_sources(tmp_path: Path) -> None:
    """Local repositories for the a3 sources, at the refs it names, reached through insteadOf."""
    lines = []
    for url, (distribution, files) in SOURCES.items():
        name = url.rsplit("/", 1)[1].removesuffix(".git")
        repo: GitRepo = python_project(tmp_path / "upstream" / name, distribution, files=files)
        repo.tag("v0.23.0")
        repo.branch("releases/v0.23.0")
        repo.branch("core_r0.16.0")
        lines += [f'[url "{repo.url}"]', f"\tinsteadOf = {url}"]
    (tmp_path / "gitconfig").write_text("\n".join(lines) + "\n")


def lock(root: Path, *envs: str, preflight: bool = False) -> tuple[int, str]:
    """`envgen lock`; without the preflight unless asked, so each stage meets its unreachable host
    itself."""
    args = [
        "lock",
        *(envs or (ENV,)),
        "--root",
        str(root),
        *(() if preflight else ("--no-preflight",)),
    ]
    result = CliRunner().invoke(cli, args)
    assert "Traceback" not in result.stderr
    return result.exit_code, result.stderr


def url_of(root: Path, name: str) -> str:
    return (root / "channels" / f"{name}.toml").read_text().split('url = "')[1].split('"')[0]


def test_preflight_names_every_unreachable_host_at_once(project: Path) -> None:
    """One run names every host, one line each, before any work (without it: one host per run, stage
    by stage)."""
    code, err = lock(project, "a2", ENV, preflight=True)
    assert code == 3, err
    # Before: solve logs first, then one line per host holding every remote and reason.
    assert err.startswith("error: 6 hosts that the lock needs did not answer; nothing was locked:")
    found = verdict(err)
    assert len(found) == 6, err
    # The matrix's first three GitHub remotes, then the fourth (verl) counted.
    names = ("vllm", "vllm-ascend", "megatron-lm")
    remotes = [url for url in SOURCES if url.startswith("https://github.com/")][:3]
    expected = {
        "github.com": [
            *(
                f"git remote {url} (a2 source {n}, a3 source {n})"
                for url, n in zip(remotes, names, strict=True)
            ),
            "and 1 more",
        ],
        "gitcode.com": [
            "git remote https://gitcode.com/Ascend/MindSpeed.git "
            "(a2 source mindspeed, a3 source mindspeed)"
        ],
        host_of(url_of(project, "conda-forge")): [
            f"conda channel {url_of(project, 'conda-forge')} (a2, a3)"
        ],
        **{
            host_of(url_of(project, n)): [f"pip index {url_of(project, n)} (a2, a3)"]
            for n in INDEXES
        },
    }
    for host, below in expected.items():
        reason, shown = found[host]
        assert shown == below, err
        assert reason.endswith(("[Errno 111] Connection refused", "Couldn't connect to server"))
        assert "unable to access" not in reason and len(f"  {host}: {reason}") <= 100, reason
    # The hint opens with what failed first: without a conda channel nothing can be solved.
    (hint,) = [line for line in err.splitlines() if line.startswith("  hint: ")]
    indexes = ", ".join(f"channels/{n}.toml" for n in INDEXES)
    mirror = "at a mirror this host reaches"
    conda = f"no conda channel answered: point `url` in channels/conda-forge.toml {mirror}"
    pip = f"pip indexes: point `url` in {indexes} {mirror}"
    git = "git remotes: a mirror through `git config"
    assert hint.startswith(f"  hint: {conda}; {pip}; {git}"), hint
    assert hint.endswith("; `envgen lock --no-preflight` skips this check"), hint
    assert not (project.parent / "cache" / "git").exists()  # nothing was fetched


def test_preflight_passes_once_the_hosts_answer(project: Path, tmp_path: Path) -> None:
    """The git remotes reached through insteadOf (a mirror), the conda channel served: only the
    indexes are left."""
    mirror_sources(tmp_path)
    write_channel(tmp_path / "conda", demo_packages("3.12.4"))
    with serve_directory(tmp_path / "conda") as conda_url:
        channel(project, "conda-forge", conda_url)
        code, err = lock(project, preflight=True)
    assert code == 3, err
    assert "error: 3 hosts that the lock needs did not answer" in err
    found = verdict(err).values()
    assert [[line.split(" ")[:2] for line in below] for _, below in found] == [
        [["pip", "index"]]
    ] * 3, err


def test_unreachable_git_host_names_the_first_source_url(project: Path) -> None:
    code, err = lock(project)
    assert code == 3, err
    assert (
        "error: source vllm: cannot reach git remote https://github.com/vllm-project/vllm.git"
        in err
    )
    assert "(sources vllm-ascend, megatron-lm, mindspeed, verl failed too)" in err


def test_locking_every_env_names_the_env_that_failed_and_the_others(project: Path) -> None:
    code, err = lock(project, "a2", "a3")
    assert code == 3, err
    assert (
        "error: a2: source vllm: cannot reach git remote https://github.com/vllm-project/vllm.git"
        in err
    )
    assert "(env a3 failed too)" in err


def test_unreachable_conda_channel_is_named(project: Path, tmp_path: Path) -> None:
    mirror_sources(tmp_path)
    conda = (
        (project / "channels" / "conda-forge.toml").read_text().split('url = "')[1].split('"')[0]
    )
    code, err = lock(project)
    assert code == 3, err
    assert "cannot reach git remote" not in err
    # the platforms are locked concurrently: whichever fails first is named
    assert re.search(
        rf"cannot fetch repodata for linux-(64|aarch64) from conda channel {re.escape(conda)}:", err
    )


def test_unreachable_index_is_named(project: Path, tmp_path: Path) -> None:
    mirror_sources(tmp_path)
    write_channel(tmp_path / "conda", demo_packages("3.12.4"))
    with serve_directory(tmp_path / "conda") as conda_url:
        channel(project, "conda-forge", conda_url)
        code, err = lock(project)
    assert code == 3, err
    # uv asks the indexes a platform needs in its own order: the one it reached first is named, with
    # its URL
    match = re.search(
        r"cannot reach index ([\w-]+) at (\S+) while locking linux-(64|aarch64): ", err
    )
    assert match is not None, err
    name, url = match.group(1), match.group(2)
    assert name in ("pypi", "pytorch-cpu", "triton-ascend")
    assert f'url = "{url}"' in (project / "channels" / f"{name}.toml").read_text()


def test_preflight_sends_a_channels_credentials_and_names_a_refused_login(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mirror_sources(tmp_path)
    write_channel(tmp_path / "conda", demo_packages("3.12.4"))
    with serve_directory(tmp_path / "conda", auth="ci:s3cret-token") as conda_url:
        channel(project, "conda-forge", conda_url.replace("http://", "http://ci:${CONDA_TOKEN}@"))
        monkeypatch.setenv("CONDA_TOKEN", "wrong-token")
        code, refused = lock(project, preflight=True)
        monkeypatch.setenv("CONDA_TOKEN", "s3cret-token")
        _, accepted = lock(project, preflight=True)
    assert code == 3
    host = conda_url.removeprefix("http://")
    assert "error: 4 hosts that the lock needs did not answer" in refused
    reason, below = verdict(refused)[host]
    assert reason.startswith("HTTP 401: the credentials were refused")
    assert below == [f"conda channel http://***@{host} (a3)"]
    assert (
        "error: 3 hosts that the lock needs did not answer" in accepted
        and f"  {host}: " not in accepted
    )
    assert "token" not in refused + accepted
