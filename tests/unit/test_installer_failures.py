"""What pip's and uv's failures mean: a host not reached (exit 3, one line per host) or an answer
(a refusal, a missing file), told apart from their output alone."""

from __future__ import annotations

import pytest
from envgen.errors import NetworkError, Unreached
from envgen.installer.tools import unreachable_hosts
from envgen.network import DEFAULTS

REFUSED = (
    "Looking in indexes: http://127.0.0.1:34207/simple\n"
    "Collecting demo-triton@ http://127.0.0.1:45595/files/demo_triton-3.2.2-py3-none-any.whl "
    "(from -r /tmp/pytest-of-root/pytest-403/popen-gw1/project/locks/demo.requirements.txt)\n"
    "ERROR: Could not install packages due to an OSError: HTTPConnectionPool(host='127.0.0.1', "
    "port=45595): Max retries exceeded with url: /files/demo_triton-3.2.2-py3-none-any.whl "
    "(Caused by NewConnectionError('...: Failed to establish a new connection: [Errno 111] "
    "Connection refused'))\n"
)


def test_a_refused_connection_names_its_host_whatever_numbers_the_paths_hold() -> None:
    failed = unreachable_hosts(REFUSED, "pip could not download the locked pip packages", DEFAULTS)
    assert isinstance(failed, NetworkError)
    assert "127.0.0.1:45595: connection refused" in failed.message
    assert failed.hosts == (Unreached("127.0.0.1:45595", "connection refused"),) and failed.listed


@pytest.mark.parametrize(
    "answer",
    [
        "ERROR: HTTP error 404 while getting http://127.0.0.1:1/files/a.whl",
        "403 Client Error: Forbidden for url: http://127.0.0.1:1/files/a.whl",
        "error: HTTP status client error (401 Unauthorized) for url (http://127.0.0.1:1/a.whl)",
    ],
)
def test_a_host_that_answered_is_no_network_failure(answer: str) -> None:
    assert unreachable_hosts(f"{REFUSED}{answer}\n", "pip could not download", DEFAULTS) is None
