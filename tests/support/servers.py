"""A loopback HTTP server for a test's own request handler: started on a free port of 127.0.0.1,
stopped (and its socket closed) when the test leaves the block."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler

from envgen.example.http import LoopbackServer


@contextmanager
def serving(
    handler: Callable[..., BaseHTTPRequestHandler], host: str = "127.0.0.1"
) -> Iterator[str]:
    """The base URL (`http://HOST:PORT`) of a server answering every request with `handler`."""
    server = LoopbackServer((host, 0), handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://{host}:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
