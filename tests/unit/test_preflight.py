"""The preflight's plan: which hosts a re-lock asks (each URL once, a kept and cached commit asks nothing)."""

from __future__ import annotations

from pathlib import Path

import pytest
from envgen.model import Channel, Index, Source
from envgen.resolve.preflight import Relock, host_of, targets

from tests.support.builders import locked_source, make_matrix

SHA = "a" * 40


@pytest.mark.parametrize(
    ("url", "host"),
    [
        ("https://github.com/vllm-project/vllm.git", "github.com"),
        ("http://127.0.0.1:8080/simple", "127.0.0.1:8080"),
        ("ssh://git@gitcode.com:2222/Ascend/MindSpeed.git", "gitcode.com:2222"),
        ("git@github.com:NVIDIA/Megatron-LM.git", "github.com"),
        ("https://user:secret@pypi.example.com/simple", "pypi.example.com"),
        ("file:///srv/git/verl.git", "local"),
        ("/srv/git/verl.git", "local"),
    ],
)
def test_host_of(url: str, host: str) -> None:
    assert host_of(url) == host


def test_targets_each_url_once_and_only_the_remotes_a_re_lock_asks(tmp_path: Path) -> None:
    pinned = Source("pinned", "https://github.com/o/pinned.git", SHA, "pinned")
    moving = Source("moving", "https://github.com/o/moving.git", "main", "moving")
    kept = Source("kept", "https://github.com/o/kept.git", "main", "kept")
    fields = {
        "channels": (Channel("forge", "https://conda.example.org/forge"),),
        "indexes": (Index("pypi", "https://pypi.org/simple"),),
        "sources": (pinned, moving, kept),
    }
    previous = {"kept": locked_source("kept", kept.url, "main", SHA)}
    relocks = [Relock(make_matrix("a3", **fields), previous), Relock(make_matrix("a2", **fields), previous)]
    found = {(t.kind, t.url): t.needed_by for t in targets(relocks, cache=tmp_path)}
    # The kept commit and the pinned one are not in the (empty) cache: their remotes are asked too.
    assert found == {
        ("git remote", pinned.url): ("a3 source pinned", "a2 source pinned"),
        ("git remote", moving.url): ("a3 source moving", "a2 source moving"),
        ("git remote", kept.url): ("a3 source kept", "a2 source kept"),
        ("conda channel", "https://conda.example.org/forge"): ("a3", "a2"),
        ("pip index", "https://pypi.org/simple"): ("a3", "a2"),
    }
    offline = targets(relocks[:1], cache=tmp_path, offline=True)
    assert [t.kind for t in offline] == ["git remote"] * 3 + ["conda channel"]
