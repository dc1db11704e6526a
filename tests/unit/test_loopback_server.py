"""The example's loopback HTTP server (envgen/example/http.py): it takes as many connections at once
as a resolver opens, and a client that leaves mid-answer prints nothing."""

from __future__ import annotations

import socket
import struct
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from envgen.example.http import LoopbackServer, serve_directory


def test_a_burst_of_connections_is_taken_without_a_retransmission(tmp_path: Path) -> None:
    """The listen queue holds what a resolver opens at once (socketserver's backlog of five made the
    kernel drop the rest, each retried after TCP's one-second retransmission timeout): sixty
    connections opened together, then sixty-four requests from thirty-two threads, all answered."""
    (tmp_path / "f").write_bytes(b"x")
    assert LoopbackServer.request_queue_size >= 64
    with serve_directory(tmp_path) as base:
        port = int(base.rsplit(":", 1)[1])
        sockets = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(60)]
        for sock in sockets:
            sock.close()

        def fetch(_: int) -> bytes:
            with urllib.request.urlopen(f"{base}/f", timeout=5) as answer:
                return bytes(answer.read())

        with ThreadPoolExecutor(max_workers=32) as pool:
            assert set(pool.map(fetch, range(64))) == {b"x"}


def test_a_client_that_leaves_mid_answer_prints_no_traceback(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "big").write_bytes(b"\0" * (8 << 20))
    with serve_directory(tmp_path) as base:
        port = int(base.rsplit(":", 1)[1])
        for _ in range(3):
            sock = socket.create_connection(("127.0.0.1", port), timeout=5)
            sock.sendall(b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
            sock.recv(1024)
            # Reset, not a polite close: the server's next write fails as a killed client's does.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            sock.close()
        with urllib.request.urlopen(f"{base}/big", timeout=5) as answer:
            assert len(answer.read()) == 8 << 20
    err = capfd.readouterr().err
    assert "Traceback" not in err and "Exception occurred" not in err
