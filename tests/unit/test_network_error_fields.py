"""A host not reached is told by its parts (the hosts, why, the platform), not by the words of a
message: check's re-solve names each failing host once, with every platform that failed on it."""

from __future__ import annotations

from pathlib import Path

import pytest
from envgen.commands.check.command import _again
from envgen.errors import ConflictError, NetworkError, Unreached
from envgen.inputs.channels import IndexAccess
from envgen.model import Channel
from envgen.network import Limits
from envgen.resolve.conda.stage import _unreachable
from envgen.resolve.pypi.uv_compile import Inputs, explain_failure

from tests.support.builders import at, make_matrix

INDEX = "https://pypi.example/simple"
CHANNEL = "https://conda.example/forge"
PLATFORMS = ("linux-64", "linux-aarch64")


def _uv_refused(platform: str, tmp_path: Path) -> NetworkError:
    stderr = f"error: Failed to fetch: `{INDEX}/demo-torch/`\n  Caused by: connection refused\n"
    index = IndexAccess("pypi", INDEX, explicit=False)
    failed = explain_failure(stderr, Inputs(()), [index], make_matrix(), platform, at(tmp_path))
    assert isinstance(failed, NetworkError)
    return failed


def test_uv_and_conda_failures_carry_their_host_reason_and_platform(tmp_path: Path) -> None:
    uv = _uv_refused("linux-64", tmp_path)
    assert (
        uv.message
        == f"cannot reach index pypi at {INDEX} while locking linux-64: connection refused"
    )
    assert (uv.hosts, uv.platform) == ((Unreached(INDEX, "connection refused"),), "linux-64")
    assert uv.failure == f"cannot reach index pypi at {INDEX}: connection refused"
    matrix = make_matrix(channels=(Channel("forge", CHANNEL),))
    conda = _unreachable(
        matrix, "linux-aarch64", f"error sending request for url ({CHANNEL}/x): refused", Limits()
    )
    assert conda.message.startswith(
        f"cannot fetch repodata for linux-aarch64 from conda channel {CHANNEL}: "
    )
    (host,) = conda.hosts
    assert (
        host.host == CHANNEL and conda.platform == "linux-aarch64" and host.reason in conda.message
    )
    assert conda.failure == f"cannot fetch repodata from conda channel {CHANNEL}: {host.reason}"
    assert not uv.listed and not conda.listed


def test_the_re_solve_names_a_failing_host_once_with_every_platform(tmp_path: Path) -> None:
    problems: list[str] = []
    unreachable: dict[str, list[str]] = {}
    for platform in PLATFORMS:

        def solve(platform: str = platform) -> None:
            raise _uv_refused(platform, tmp_path)

        assert _again(platform, problems, unreachable, solve) is None
    assert unreachable == {
        f"cannot reach index pypi at {INDEX}: connection refused": list(PLATFORMS)
    }
    assert problems == []


def test_the_re_solve_records_any_other_failure_as_a_problem_of_its_platform() -> None:
    problems: list[str] = []
    unreachable: dict[str, list[str]] = {}
    conflicts: list[dict[str, object]] = []

    def solve() -> None:
        raise ConflictError("no PyPI resolution for linux-64", conflicts=({"name": "demo-torch"},))

    assert _again("linux-64", problems, unreachable, solve, conflicts) is None
    assert problems == ["linux-64: no PyPI resolution for linux-64"]
    assert unreachable == {} and conflicts == [{"name": "demo-torch"}]


def test_several_hosts_at_once_are_listed_under_one_headline() -> None:
    hosts = [
        Unreached("a.example:443", "connection refused"),
        Unreached("b.example", "no answer within 1 s"),
    ]
    failed = NetworkError.listing(
        "pip could not download the locked pip packages: hosts could not be reached", hosts
    )
    assert failed.message.splitlines() == [
        "pip could not download the locked pip packages: hosts could not be reached",
        "  a.example:443: connection refused",
        "  b.example: no answer within 1 s",
    ]
    assert (
        failed.listed
        and failed.failure == failed.message.splitlines()[0]
        and failed.hosts == tuple(hosts)
    )
    assert failed.exit_code == 3


@pytest.mark.parametrize(
    "lines", [None, ["a.example: the channel at https://a.example/x: refused"]]
)
def test_a_listing_shows_the_lines_given_or_each_host_with_why(lines: list[str] | None) -> None:
    failed = NetworkError.listing(
        "1 host did not answer:", [Unreached("a.example", "refused")], lines=lines
    )
    assert failed.message == "1 host did not answer:\n  " + (
        lines[0] if lines else "a.example: refused"
    )


def test_a_reworded_error_keeps_its_class_hint_and_parts() -> None:
    """Before: `type(error)(message, hint=...)` lost a conflict's data and could not make a
    NetworkError."""
    unreached = NetworkError(
        "a: refused", "check a", hosts=[Unreached("a", "refused")], platform="linux-64"
    )
    again = unreached.reworded("a: refused\n(sources b failed too)")
    assert (
        type(again) is NetworkError
        and str(again) == "a: refused\n(sources b failed too)\n  hint: check a"
    )
    assert (again.hosts, again.platform, again.exit_code) == (unreached.hosts, "linux-64", 3)
    conflict = ConflictError("no resolution", conflicts=({"name": "demo-torch"},), said="uv says")
    assert (conflict.reworded("demo: no resolution").conflicts, conflict.reworded("x").said) == (
        conflict.conflicts,
        "uv says",
    )
    assert unreached.message == "a: refused"
