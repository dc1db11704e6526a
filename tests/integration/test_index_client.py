"""The one index client: `status --outdated` reaches an HTTPS index with a self-signed certificate
through its trusted_host, with credentials from the environment, as the lock's metadata fetch does.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from envgen.cli import cli
from envgen.inputs.matrix import load_env
from envgen.lockio.input_hashes import input_hash, project_inputs
from envgen.model import PipEntry
from envgen.project import Project

from tests.support.builders import make_lock, write_intact
from tests.support.tls import serve_tls

MATRIX = """\
schema = 1

[env]
name = "tls"
platforms = ["linux-64"]
python = "3.11"

[system]
glibc = "2.28"

[system.cann]
version = "pending"
note = "not needed here"

[conda]
channels = ["conda-forge"]
specs = ["python 3.11.*"]

[pip]
indexes = ["private"]

[pip.packages]
mbridge = {}
"""


@pytest.fixture
def https_index(tmp_path: Path) -> Iterator[str]:
    """A PEP 503 page for mbridge over HTTPS with a fresh self-signed certificate and basic auth."""
    page = tmp_path / "index" / "simple" / "mbridge"
    page.mkdir(parents=True)
    files = ["mbridge-0.13.0-py3-none-any.whl", "mbridge-0.15.1-py3-none-any.whl"]
    page.joinpath("index.html").write_text(
        "".join(f'<a href="../../files/{f}">{f}</a>\n' for f in files)
    )
    with serve_tls(tmp_path / "index", tmp_path / "certs", auth="reader:s3cret") as base:
        yield base


def _project(root: Path, base: str, trusted: bool) -> Project:
    (root / "env-templates").mkdir(parents=True)
    (root / "channels").mkdir()
    (root / "env-templates" / "tls.toml").write_text(MATRIX)
    (root / "channels" / "conda-forge.toml").write_text(
        'kind = "conda"\nurl = "https://conda.example.org/cf"\n'
    )
    host = base.removeprefix("https://")
    # Credentials come from the environment, never from the file.
    url = base.replace("https://", "https://${IDX_USER}:${IDX_TOKEN}@") + "/simple"
    trust = f'trusted_host = "{host}"\n' if trusted else ""
    (root / "channels" / "private.toml").write_text(f'kind = "pip"\nurl = "{url}"\n{trust}')
    project = Project(root)
    matrix = load_env(project, "tls")
    inputs = project_inputs(project, matrix, ())
    wheel = f"{base}/files/mbridge-0.13.0-py3-none-any.whl"
    lock = make_lock(
        "tls",
        platforms=matrix.platforms,
        input_hash=input_hash(inputs),
        pip=(PipEntry("mbridge", "0.13.0", "linux-64", wheel, "a" * 64, index="private"),),
        channels=matrix.channels,
        indexes=matrix.indexes,
        cann=matrix.cann,
        inputs=inputs,
    )
    write_intact(project, lock)
    return project


def _outdated(project: Project) -> str:
    result = CliRunner().invoke(
        cli, ["status", "--root", str(project.root), "--outdated"], catch_exceptions=False
    )
    return result.stdout


@pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning")
def test_status_outdated_reaches_a_trusted_https_index_with_credentials(
    tmp_path: Path, https_index: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("IDX_USER", "reader")
    monkeypatch.setenv("IDX_TOKEN", "s3cret")
    out = _outdated(_project(tmp_path / "trusted", https_index, trusted=True))
    assert "    mbridge: locked 0.13.0; newer 0.15.1 on private\n" in out

    # Without trusted_host the certificate is verified, and fails; the message says what to set.
    out = _outdated(_project(tmp_path / "untrusted", https_index, trusted=False))
    assert "mbridge: locked 0.13.0" in out and "SSLError" in out
    assert "set trusted_host in channels/private.toml" in out

    # The credentials are the index's: a wrong token is refused, and never shown.
    monkeypatch.setenv("IDX_TOKEN", "wrong")
    out = _outdated(_project(tmp_path / "refused", https_index, trusted=True))
    assert "answered HTTP 401" in out and "wrong" not in out
