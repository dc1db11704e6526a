"""Loopback ports that refuse every connection: the unreachable hosts of the tests.

A port found free and then let go can be taken by any server another test starts meanwhile (the
workers share 127.0.0.1), and the "unreachable" host then answers. Each port here stays bound,
never listening, for the life of the test process: connections to it are refused and no other
socket can bind it."""

from __future__ import annotations

import socket

_HELD: list[socket.socket] = []


def closed_port() -> int:
    """A port on 127.0.0.1 whose connections are refused."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    _HELD.append(sock)
    return int(sock.getsockname()[1])


def closed_url(path: str = "") -> str:
    """`http://127.0.0.1:PORT` + path on a closed port."""
    return f"http://127.0.0.1:{closed_port()}{path}"
