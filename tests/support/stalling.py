"""Servers on 127.0.0.1 that take a connection and then never finish answering: the hosts envgen
must not wait on forever. `silent` accepts and never says a word; `headers` reads the request, sends
a 200 status and headers announcing a body, then stalls. And a git that waits at a given command."""

from __future__ import annotations

import os
import shutil
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

MODES = ("silent", "headers")
_HEADERS = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 1000000\r\n\r\n{"


@contextmanager
def stalling_server(mode: str) -> Iterator[str]:
    """Yield the base URL `http://127.0.0.1:PORT` of a server stalling in `mode`; every connection
    is closed after."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def answer(conn: socket.socket) -> None:
        with suppress(OSError):
            conn.recv(65536)
            conn.sendall(_HEADERS)

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            held.append(conn)
            if mode == "headers":
                threading.Thread(target=answer, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        with suppress(OSError):
            listener.shutdown(socket.SHUT_RDWR)  # wakes the accept() below on Linux
        listener.close()
        for conn in held:
            conn.close()
        thread.join(timeout=5)


def git_waiting(tmp_path: Path, pattern: str) -> dict[str, str]:
    """PATH with a git that, given arguments matching the case `pattern`, marks tmp_path/marker and
    waits there (until killed: envgen kills the children of an interrupted command)."""
    shims, marker, real = tmp_path / "shims", tmp_path / "marker", shutil.which("git")
    shims.mkdir(exist_ok=True)
    script = f'case " $* " in {pattern}) : >{marker}; exec sleep 120 ;; esac\nexec {real} "$@"\n'
    (shims / "git").write_text(f"#!/bin/sh\n{script}")
    (shims / "git").chmod(0o755)
    return {"PATH": f"{shims}{os.pathsep}{os.environ['PATH']}"}
