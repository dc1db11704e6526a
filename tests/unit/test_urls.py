"""urls.py: which index a URL belongs to, one rule for the pip stage, uv's errors, the HTTP client,
the exports and the lock's seal."""

from __future__ import annotations

from envgen import urls
from envgen.credentials import Credential


def test_index_of_matches_the_index_prefix_without_credentials() -> None:
    indexes = [
        ("pypi", "https://pypi.org/simple"),
        ("cpu", "https://u:t@download.example/whl/cpu/"),
    ]
    assert urls.index_of("https://download.example/whl/cpu/torch-2.10.0.whl", indexes) == "cpu"
    assert urls.index_of("https://download.example/whl/cpu2/torch.whl", indexes) is None
    assert urls.index_of("https://files.pythonhosted.org/packages/x.whl", indexes) is None
    # The index's own page, a URL with credentials, and scheme and host in another case.
    assert urls.index_of("https://pypi.org/simple", indexes) == "pypi"
    assert urls.index_of("https://x:y@pypi.org/simple/torch/", indexes) == "pypi"
    assert urls.index_of("HTTPS://PyPI.org/simple/torch/", indexes) == "pypi"
    assert urls.index_of("https://download.example/whl/cpu/t.whl?x=1#sha256=ab", indexes) == "cpu"
    # Another scheme or port is another index; the first index a URL is under wins.
    assert urls.index_of("http://pypi.org/simple/torch/", indexes) is None
    assert urls.index_of("https://pypi.org:8443/simple/torch/", indexes) is None
    assert (
        urls.index_of("https://pypi.org/simple/a", [("root", "https://pypi.org"), *indexes])
        == "root"
    )


def test_same_host_ignores_credentials_and_case_but_not_the_port() -> None:
    assert urls.url_host("https://u:p@Files.Example:8080/a") == "files.example:8080"
    assert urls.url_host("file:///tmp/x") == ""
    assert urls.same_host("https://idx.example/simple", "https://tok@IDX.example/files/x.whl")
    assert not urls.same_host("https://idx.example/simple", "https://idx.example:8443/simple")


def test_path_under_needs_a_slash_after_the_base() -> None:
    assert urls.path_under("/whl/cpu/x.whl", "/whl/cpu/") and urls.path_under(
        "/whl/cpu", "/whl/cpu/"
    )
    assert not urls.path_under("/whl/cpu2/x.whl", "/whl/cpu")
    assert urls.path_under("/anything", "/") and urls.path_under("", "")


def test_a_credential_applies_on_its_scheme_and_host_only() -> None:
    credential = Credential("https://idx.example/simple", "u", "p")
    assert credential.on_host("https://IDX.example/files/a.whl")
    assert not credential.on_host("http://idx.example/files/a.whl")
    assert not credential.on_host("https://idx.example:444/files/a.whl")
