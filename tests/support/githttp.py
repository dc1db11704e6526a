"""Git's smart HTTP protocol served from a directory of repositories on 127.0.0.1, behind basic
auth.

`git http-backend` (git's own CGI program) answers each request; the server only checks the
Authorization header and passes the request through, so clone, ls-remote and fetch by sha behave as
on a real forge.
"""

from __future__ import annotations

import base64
import functools
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from envgen.example.http import LoopbackServer


class _GitHandler(BaseHTTPRequestHandler):
    def __init__(
        self, *args: object, root: Path, auth: str, seen: list[str], **kwargs: object
    ) -> None:
        self.root, self.auth, self.seen = root, auth, seen
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def _serve(self) -> None:
        # What each request carried in its URL: a test asserts no credential ever travels there.
        self.seen.append(self.path)
        expected = "Basic " + base64.b64encode(self.auth.encode()).decode()
        if self.headers.get("Authorization") != expected:
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="envgen-git"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        path, _, query = self.path.partition("?")
        env = {
            "GIT_PROJECT_ROOT": str(self.root),
            "GIT_HTTP_EXPORT_ALL": "1",
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "REQUEST_METHOD": self.command,
            "REMOTE_USER": self.auth.partition(":")[0],
            "REMOTE_ADDR": "127.0.0.1",
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "HTTP_CONTENT_ENCODING": self.headers.get("Content-Encoding", ""),
            "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
            "PATH": "/usr/bin:/bin",
        }
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        proc = subprocess.run(
            ["git", "http-backend"], input=body, env=env, capture_output=True, check=False
        )
        head, _, payload = proc.stdout.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = next(
            (line.split(":", 1)[1].strip() for line in lines if line.lower().startswith("status:")),
            "200",
        )
        self.send_response(int(status.split()[0]))
        for line in lines:
            name, _, value = line.partition(":")
            if name and name.lower() != "status":
                self.send_header(name, value.strip())
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


@contextmanager
def serve_git(root: Path, auth: str) -> Iterator[tuple[str, list[str]]]:
    """Serve the repositories under `root` (`<base>/<name>` is `root/<name>`, bare or not),
    requiring basic `auth` ("user:password"); yields the base URL `http://127.0.0.1:PORT` and the
    request paths seen."""
    seen: list[str] = []
    handler = functools.partial(_GitHandler, root=root, auth=auth, seen=seen)
    server = LoopbackServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(
        target=functools.partial(server.serve_forever, poll_interval=0.02), daemon=True
    )
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
