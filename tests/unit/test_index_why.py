"""The one-line cause of a failed request keeps its own parentheses and drops only its wrappers'
closers."""

from __future__ import annotations

import pytest
import requests
from envgen.network import Limits
from envgen.resolve.pypi.index_client import IndexClient


@pytest.mark.parametrize(
    ("message", "said"),
    [
        (
            "<urllib3.connection.HTTPSConnection object at 0x7f>: Failed to resolve "
            "'conda.anaconda.org' "
            "([Errno -2] Name or service not known)",
            "Failed to resolve 'conda.anaconda.org' ([Errno -2] Name or service not known)",
        ),
        (
            "HTTPConnectionPool(host='127.0.0.1', port=9): Max retries exceeded with "
            "url: /simple/ (Caused by "
            "NewConnectionError('<urllib3.connection.HTTPConnection object at 0x7f>: "
            "Failed to establish a new "
            "connection: [Errno 111] Connection refused'))",
            "[Errno 111] Connection refused",
        ),
    ],
)
def test_the_cause_is_the_innermost_message_with_balanced_parentheses(
    message: str, said: str
) -> None:
    assert IndexClient([], Limits()).why(requests.exceptions.ConnectionError(message)) == said
