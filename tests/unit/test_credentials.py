"""Credentials split off URLs and handed to rattler, git, pip and uv apart: scoping, encodings, the
netrc."""

from __future__ import annotations

import base64
import netrc
import subprocess
import sys
from pathlib import Path

import pytest
from envgen.credentials import Credential, Credentials, netrc_in_memory, split_credential
from envgen.errors import InputError
from envgen.inputs.credentials import lock_credentials
from envgen.model import Channel, Index, Source
from envgen.redact import written_url

from tests.support.builders import make_lock, make_matrix


def test_split_credential_keeps_the_url_bare_and_decodes_the_userinfo() -> None:
    bare, credential = split_credential(
        "https://al%40corp:p%3Aw%2Fd@repo.example:8443/api/pypi/simple/"
    )
    assert bare == "https://repo.example:8443/api/pypi/simple/"
    assert credential == Credential(bare, "al@corp", "p:w/d")
    assert credential.header == "Basic " + base64.b64encode(b"al@corp:p:w/d").decode()
    # A token given as the user name (GitHub's style) is the secret.
    assert split_credential("https://ghp_tok3n@github.com/o/r.git")[1] == Credential(
        "https://github.com/o/r.git", "ghp_tok3n", ""
    )
    assert Credentials.of(["https://ghp_tok3n@github.com/o/r.git"]).secrets == ("ghp_tok3n",)


def test_only_http_urls_with_userinfo_carry_a_credential() -> None:
    for url in (
        "https://repo.example/simple",
        "ssh://git@host/o/r.git",
        "git@host:o/r.git",
        "/srv/repo",
    ):
        assert split_credential(url) == (url, None)


def test_a_credential_goes_to_its_own_scheme_host_and_port_only() -> None:
    credentials = Credentials.of(["https://u:s3cret@repo.example/api/pypi/simple"])
    assert (
        credentials.for_url("https://repo.example/api/pypi/files/a-1.0-py3-none-any.whl")
        is not None
    )
    for other in (
        "https://repo.example.evil/a.whl",
        "https://repo.example:8443/a.whl",
        "http://repo.example/a.whl",
        "https://other.example/api/pypi/simple/a.whl",
    ):
        assert credentials.for_url(other) is None, other


def test_of_one_host_the_credential_whose_path_holds_the_url_wins() -> None:
    credentials = Credentials.of(
        ["https://a:one@art.example/conda/team-a", "https://b:two@art.example/conda/team-b"]
    )
    assert credentials.headers("art.example", "/conda/team-b/linux-64/repodata.json") == {
        "Authorization": "Basic " + base64.b64encode(b"b:two").decode()
    }
    found = credentials.for_url("https://art.example/conda/team-a/noarch/x.conda")
    assert found is not None and found.username == "a"
    assert credentials.headers("elsewhere.example", "/conda/team-a/x") is None


def test_git_gets_an_extra_header_per_remote_after_the_config_already_in_the_environment() -> None:
    credentials = Credentials.of(["https://u:tok@git.example/org/repo.git"])
    env = credentials.git_environment(
        {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "url.x.insteadOf", "GIT_CONFIG_VALUE_0": "y"}
    )
    assert env["GIT_CONFIG_COUNT"] == "2"
    assert (env["GIT_CONFIG_KEY_0"], env["GIT_CONFIG_VALUE_0"]) == ("url.x.insteadOf", "y")
    assert env["GIT_CONFIG_KEY_1"] == "http.https://git.example/org/repo.git.extraHeader"
    assert (
        env["GIT_CONFIG_VALUE_1"] == "Authorization: Basic " + base64.b64encode(b"u:tok").decode()
    )
    assert Credentials().git_environment({"HOME": "/h"}) == {"HOME": "/h"}


def test_the_netrc_parses_back_to_the_credentials_one_machine_per_host() -> None:
    credentials = Credentials.of(
        [
            "https://plain:t0k@one.example/simple",
            "https://with%20space:q%22uo%23te@two.example/simple",
            "https://second:ignored@one.example:8443/simple",
        ]
    )
    with netrc_in_memory(credentials) as (env, fds):
        parsed = netrc.netrc(env["NETRC"])
        assert parsed.authenticators("one.example") == ("plain", "", "t0k")
        assert parsed.authenticators("two.example") == ("with space", "", 'q"uo#te')
        # A child reads it as often as it likes, through the descriptor it inherits.
        read = [
            sys.executable,
            "-c",
            "import os; print(open(os.environ['NETRC']).read().count('machine'))",
        ]
        for _ in range(2):
            proc = subprocess.run(
                read, env=env, pass_fds=fds, capture_output=True, text=True, check=True
            )
            assert proc.stdout.strip() == "2"
    with netrc_in_memory(Credentials()) as (env, fds):
        assert (env, fds) == ({}, ())


def test_a_lock_keeps_a_credential_reference_and_drops_a_literal_one() -> None:
    assert (
        written_url("https://u:${TOKEN}@repo.example/simple")
        == "https://u:${TOKEN}@repo.example/simple"
    )
    assert (
        written_url("https://${TOKEN}@repo.example/simple")
        == "https://${TOKEN}@repo.example/simple"
    )
    assert written_url("https://u:s3cret@repo.example/simple") == "https://repo.example/simple"
    assert written_url("https://u:pre${TOKEN}@repo.example/simple") == "https://repo.example/simple"


def test_a_lock_gets_its_credentials_from_channels_and_its_references_each_tool_its_own(
    tmp_path: Path,
) -> None:
    channels = tmp_path / "channels"
    channels.mkdir()
    (channels / "private.toml").write_text(
        'kind = "pip"\nurl = "https://pip:l1teral@pypi.corp/simple"\n'
    )
    (channels / "forge.toml").write_text('kind = "conda"\nurl = "https://conda.corp/forge"\n')
    lock = make_lock(
        channels=(Channel("forge", "https://conda:${CONDA_TOKEN}@conda.corp/forge"),),
        # What sources.toml records: a literal credential dropped, a reference kept.
        indexes=(
            Index("private", "https://pypi.corp/simple"),
            Index("extra", "https://x:${EXTRA}@extra.corp/simple"),
        ),
    )
    matrix = make_matrix(
        sources=(Source("proj", "https://git:g1t@git.corp/org/proj.git", "main", "proj"),)
    )
    found = lock_credentials(lock, channels, matrix, {"CONDA_TOKEN": "c0nda", "EXTRA": "3xtra"})
    assert [(c.url, c.username, c.password) for c in found.pip.items] == [
        ("https://pypi.corp/simple", "pip", "l1teral"),
        ("https://extra.corp/simple", "x", "3xtra"),
    ]
    assert [(c.username, c.password) for c in found.conda.items] == [("conda", "c0nda")]
    assert [(c.url, c.password) for c in found.git.items] == [
        ("https://git.corp/org/proj.git", "g1t")
    ]
    assert sorted(found.secrets) == ["3xtra", "c0nda", "g1t", "l1teral"]
    with pytest.raises(InputError, match=r"index extra: .*\$\{EXTRA\}, which is not set"):
        lock_credentials(lock, channels, None, {"CONDA_TOKEN": "c0nda"})
