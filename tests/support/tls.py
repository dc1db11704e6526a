"""An HTTPS server on 127.0.0.1 with a fresh self-signed certificate that no client trusts."""

from __future__ import annotations

import ssl
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from envgen.example.http import serve_directory


@contextmanager
def serve_tls(root: Path, certs: Path, auth: str | None = None) -> Iterator[str]:
    """Serve `root` over HTTPS (basic `auth` when given); yields the base URL
    `https://127.0.0.1:PORT`."""
    certs.mkdir()
    cert, key = certs / "cert.pem", certs / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
        ]
        + ["-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    with serve_directory(root, auth=auth, tls=context) as base:
        yield base
