"""lock_pypi against two real PEP 503 indexes on 127.0.0.1 ("pypi" and "extra"), with the real
uv."""

from __future__ import annotations

import hashlib
import logging
import shutil
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
from envgen.errors import InputError, ResolutionError, VerificationError
from envgen.example.http import serve_directory
from envgen.example.wheels import FixtureDist, build_index
from envgen.model import (
    Index,
    LockedSource,
    Matrix,
    Origin,
    Override,
    PipEntry,
    PipPackage,
    Source,
    TracedRequirement,
)
from envgen.resolve.pypi.stage import PypiLock

from tests.support.builders import at, lock_pip, make_matrix
from tests.support.closed import closed_port
from tests.support.tls import serve_tls

MATRIX = "env-templates/test.toml"
AARCH64 = "cp311-cp311-manylinux_2_28_aarch64"
X86_64 = "cp311-cp311-manylinux_2_28_x86_64"

PYPI_DISTS = (
    FixtureDist(
        "app", "1.0", requires=("dep>=1", "xonly ; platform_machine == 'x86_64'", "plus[fast]")
    ),
    FixtureDist("dep", "1.0"),
    FixtureDist("dep", "1.1"),
    FixtureDist("xonly", "2.0"),
    FixtureDist("plus", "1.0", requires=("speedy ; extra == 'fast'",)),
    FixtureDist("speedy", "0.5", tags=()),
    # The decoy: a higher version of the package the explicit index serves.
    FixtureDist("tr", "9.9.9"),
    FixtureDist("torch", "2.10.0", tags=(AARCH64,)),
    FixtureDist(
        "torch", "2.10.0", tags=(X86_64,), requires=("nvidia-fake ; platform_machine == 'x86_64'",)
    ),
    FixtureDist("nvidia-fake", "1.0"),
    FixtureDist("fastlib", "1.0", tags=(AARCH64, "cp311-cp311-manylinux_2_34_aarch64")),
    FixtureDist("newlib", "1.0", tags=(AARCH64,)),
    FixtureDist("newlib", "2.0", tags=("cp311-cp311-manylinux_2_34_aarch64",)),
)
EXTRA_DISTS = (
    FixtureDist("tr", "3.2.2"),
    FixtureDist("torch", "2.10.0+cpu", tags=(X86_64,)),
    FixtureDist("torch", "2.10.0+cpu", build="3", tags=(X86_64,)),
)


@pytest.fixture(scope="module")
def index_roots(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("indexes")
    build_index(base / "pypi", PYPI_DISTS)
    build_index(base / "extra", EXTRA_DISTS)
    return base / "pypi", base / "extra"


@pytest.fixture(scope="module")
def urls(index_roots: tuple[Path, Path]) -> Iterator[tuple[str, str]]:
    with serve_directory(index_roots[0]) as pypi, serve_directory(index_roots[1]) as extra:
        yield f"{pypi}/simple", f"{extra}/simple"


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    return tmp_path / "cache"


def pypi_matrix(
    pypi: str, extra: str, packages: tuple[PipPackage, ...], overrides: tuple[Override, ...] = ()
) -> Matrix:
    """Two indexes, the second explicit: the decoy setup of the fixture packages."""
    indexes = (Index("pypi", pypi), Index("extra", extra, explicit=True))
    return make_matrix(
        "test",
        path=MATRIX,
        platforms=("linux-aarch64", "linux-64"),
        indexes=indexes,
        packages=packages,
        overrides=overrides,
    )


def locked_source(name: str, distribution: str, *lines: str) -> LockedSource:
    source = Source(
        name=name, url=f"https://example.invalid/{name}.git", ref="main", distribution=distribution
    )
    reqs = tuple(
        TracedRequirement(text, Origin(file="requirements-npu.txt", line=i, source=name))
        for i, text in enumerate(lines, start=1)
    )
    return LockedSource(source=source, commit="a" * 40, requirements=reqs)


def by_name(lock: PypiLock) -> dict[str, PipEntry]:
    return {e.name: e for e in lock.entries}


def test_explicit_index_beats_a_higher_decoy_pinned_or_not(
    urls: tuple[str, str], cache: Path
) -> None:
    pypi, extra = urls
    for spec in ("==3.2.2", ""):
        matrix = pypi_matrix(
            pypi, extra, (PipPackage("tr", spec, index=(("linux-aarch64", "extra"),)),)
        )
        tr = by_name(lock_pip(matrix, "linux-aarch64", "3.11", (), at(cache)))["tr"]
        assert (tr.version, tr.index) == ("3.2.2", "extra")
        assert tr.url.startswith(extra.removesuffix("simple"))
        assert tr.url.endswith("/tr-3.2.2-py3-none-any.whl")
    unpinned = pypi_matrix(pypi, extra, (PipPackage("tr"),))
    free = by_name(lock_pip(unpinned, "linux-aarch64", "3.11", (), at(cache)))
    assert free["tr"].version == "9.9.9"


def test_a_source_requirement_on_a_pinned_name_also_comes_from_the_explicit_index(
    urls: tuple[str, str], cache: Path
) -> None:
    pypi, extra = urls
    matrix = pypi_matrix(pypi, extra, (PipPackage("tr", index=(("linux-aarch64", "extra"),)),))
    verl = locked_source("verl", "verl", "tr")
    capped = by_name(lock_pip(matrix, "linux-aarch64", "3.11", (verl,), at(cache)))
    assert capped["tr"].version == "3.2.2"


def test_index_pinned_on_one_platform_only(urls: tuple[str, str], cache: Path) -> None:
    pypi, extra = urls
    matrix = pypi_matrix(
        pypi, extra, (PipPackage("torch", "==2.10.0", index=(("linux-64", "extra"),)),)
    )
    x86 = by_name(lock_pip(matrix, "linux-64", "3.11", (), at(cache)))
    arm = by_name(lock_pip(matrix, "linux-aarch64", "3.11", (), at(cache)))
    assert (x86["torch"].version, x86["torch"].index) == ("2.10.0+cpu", "extra")
    assert "nvidia-fake" not in x86
    assert (arm["torch"].version, arm["torch"].index) == ("2.10.0", "pypi")
    assert arm["torch"].url.endswith("manylinux_2_28_aarch64.whl")
    # Two wheels of torch fit x86_64 (a build-tag rebuild): the rebuild is chosen, every time.
    assert x86["torch"].url.endswith("torch-2.10.0+cpu-3-cp311-cp311-manylinux_2_28_x86_64.whl")
    assert lock_pip(matrix, "linux-64", "3.11", (), at(cache)).entries == tuple(x86.values())


def test_without_the_pin_x86_64_gets_the_cuda_style_build(
    urls: tuple[str, str], cache: Path
) -> None:
    matrix = pypi_matrix(*urls, (PipPackage("torch", "==2.10.0"),))
    x86 = by_name(lock_pip(matrix, "linux-64", "3.11", (), at(cache)))
    assert x86["torch"].version == "2.10.0"
    assert x86["torch"].depends == (("nvidia-fake", ""),)
    assert "nvidia-fake" in x86


def test_marker_dependencies_extras_sdists_and_depends(
    urls: tuple[str, str], cache: Path, caplog: pytest.LogCaptureFixture
) -> None:
    matrix = pypi_matrix(*urls, (PipPackage("app", "==1.0"),))
    with caplog.at_level(logging.WARNING):
        arm = lock_pip(matrix, "linux-aarch64", "3.11", (), at(cache))
    x86 = lock_pip(matrix, "linux-64", "3.11", (), at(cache))
    assert [e.name for e in arm.entries] == ["app", "dep", "plus", "speedy"]
    assert [e.name for e in x86.entries] == ["app", "dep", "plus", "speedy", "xonly"]
    entries = by_name(arm)
    assert entries["app"].depends == (("dep", ">=1"), ("plus", ""))
    assert dict(by_name(x86)["app"].depends)["xonly"] == ""
    # plus[fast] was asked for, so its extra's dependency counts.
    assert entries["plus"].depends == (("speedy", ""),)
    assert entries["dep"].version == "1.1"
    speedy = entries["speedy"]
    assert speedy.sdist and speedy.url.endswith("speedy-0.5.tar.gz") and len(speedy.sha256) == 64
    assert not any(e.sdist for e in arm.entries if e.name != "speedy")
    assert any("speedy" in r.message and "builds from source" in r.message for r in caplog.records)
    assert all(e.platform == "linux-aarch64" and e.index == "pypi" for e in arm.entries)


def test_glibc_floor_excludes_newer_manylinux(urls: tuple[str, str], cache: Path) -> None:
    matrix = pypi_matrix(*urls, (PipPackage("fastlib"), PipPackage("newlib")))
    entries = by_name(lock_pip(matrix, "linux-aarch64", "3.11", (), at(cache)))
    assert entries["fastlib"].url.endswith("fastlib-1.0-cp311-cp311-manylinux_2_28_aarch64.whl")
    assert entries["newlib"].version == "1.0"
    raised = msgspec.structs.replace(matrix, glibc="2.34")
    entries = by_name(lock_pip(raised, "linux-aarch64", "3.11", (), at(cache)))
    assert entries["fastlib"].url.endswith("manylinux_2_34_aarch64.whl")
    assert entries["newlib"].version == "2.0"


def test_sources_provide_names_and_git_requirements_stay_out(
    urls: tuple[str, str], cache: Path
) -> None:
    matrix = pypi_matrix(*urls, (PipPackage("torch-npu", pending="not yet published"),))
    verl = locked_source(
        "verl",
        "verl",
        "dep",
        "TransferQueue @ git+https://example.invalid/TransferQueue.git@main",
        "torch_npu==2.10.0",
        "nosuch-megatron>=0.12",
    )
    megatron = locked_source("megatron-lm", "nosuch_megatron")
    entries = by_name(lock_pip(matrix, "linux-aarch64", "3.11", (verl, megatron), at(cache)))
    assert list(entries) == ["dep"]


def test_constraints_of_a_source_limit_versions_without_requiring(
    urls: tuple[str, str], cache: Path
) -> None:
    matrix = pypi_matrix(*urls, ())
    verl = locked_source("verl", "verl", "dep")
    origin = Origin(file="constraints.txt", line=1, source="verl")
    limits = (
        TracedRequirement("dep<1.1", origin, constraint=True),
        TracedRequirement("xonly==2.0", origin, constraint=True),
    )
    verl = msgspec.structs.replace(verl, requirements=verl.requirements + limits)
    entries = by_name(lock_pip(matrix, "linux-64", "3.11", (verl,), at(cache)))
    assert {name: e.version for name, e in entries.items()} == {"dep": "1.0"}


def test_a_url_requirement_of_a_source_is_attributed_to_no_index(
    index_roots: tuple[Path, Path], urls: tuple[str, str], cache: Path
) -> None:
    pypi, extra = urls
    url = f"{pypi.removesuffix('/simple')}/files/dep-1.0-py3-none-any.whl"
    verl = locked_source("verl", "verl", f"dep @ {url}")
    (dep,) = lock_pip(pypi_matrix(pypi, extra, ()), "linux-64", "3.11", (verl,), at(cache)).entries
    assert (dep.version, dep.url, dep.index) == ("1.0", url, None)


def test_a_package_locked_by_url_keeps_its_url_and_hash(
    index_roots: tuple[Path, Path], urls: tuple[str, str], cache: Path
) -> None:
    pypi, extra = urls
    wheel = index_roots[0] / "files" / "app-1.0-py3-none-any.whl"
    sha256 = hashlib.sha256(wheel.read_bytes()).hexdigest()
    url = f"{pypi.removesuffix('/simple')}/files/{wheel.name}"
    private = PipPackage("app", url=url, sha256=sha256, marker="platform_machine == 'x86_64'")
    matrix = pypi_matrix(pypi, extra, (private,))
    x86 = by_name(lock_pip(matrix, "linux-64", "3.11", (), at(cache)))
    assert (x86["app"].url, x86["app"].sha256, x86["app"].index) == (url, sha256, None)
    assert {"dep", "plus", "speedy", "xonly"} <= set(x86)
    assert lock_pip(matrix, "linux-aarch64", "3.11", (), at(cache)).entries == ()
    tampered = pypi_matrix(pypi, extra, (msgspec.structs.replace(private, sha256="0" * 64),))
    with pytest.raises(VerificationError, match=r"pip\.packages\.app\.sha256"):
        lock_pip(tampered, "linux-64", "3.11", (), at(cache))


def test_conflict_names_both_origins(urls: tuple[str, str], cache: Path) -> None:
    matrix = pypi_matrix(*urls, (PipPackage("dep", "==1.0"),))
    verl = locked_source("verl", "verl", "tr", "dep>=1.1")
    with pytest.raises(ResolutionError) as raised:
        lock_pip(matrix, "linux-aarch64", "3.11", (verl,), at(cache))
    text = str(raised.value)
    assert "linux-aarch64" in text
    assert f"{MATRIX}: pip.packages.dep.version" in text
    assert "source verl: requirements-npu.txt:2" in text
    assert "requirements-npu.txt:1" not in text
    assert "[overrides.dep]" in text
    assert raised.value.exit_code == 3


def test_an_astral_plane_character_reaches_uv_as_toml(urls: tuple[str, str], cache: Path) -> None:
    """A requirement and an override whose markers hold a character outside the Basic Multilingual
    Plane: the generated pyproject.toml and uv.toml carry it as TOML allows (JSON's surrogate-pair
    escape is not TOML: uv refused the file)."""
    marker = "platform_release != '\U0001f600'"
    override = Override("dep", f"dep==1.0 ; {marker}", "pinned \U0001f600", transitive=True)
    matrix = pypi_matrix(*urls, (PipPackage("app", "==1.0"),), overrides=(override,))
    verl = locked_source("verl", "verl", f"xonly ; {marker}")
    entries = by_name(lock_pip(matrix, "linux-aarch64", "3.11", (verl,), at(cache)))
    assert (entries["dep"].version, entries["xonly"].version) == ("1.0", "2.0")


def test_override_is_applied_and_records_what_it_replaced(
    urls: tuple[str, str], cache: Path, caplog: pytest.LogCaptureFixture
) -> None:
    override = Override("dep", "dep==1.0", "dep 1.1 breaks the rollout")
    # The matrix's own pin on dep is replaced as the sources' requirements are, and recorded
    # with them; app's `dep>=1` is third-party metadata, which a scoped override leaves in force
    # (1.0 meets it).
    matrix = pypi_matrix(
        *urls, (PipPackage("app", "==1.0"), PipPackage("dep", ">=0.5")), overrides=(override,)
    )
    verl = locked_source("verl", "verl", "dep>=1.1", "dep ; platform_machine == 'x86_64'")
    with caplog.at_level(logging.WARNING):
        lock = lock_pip(matrix, "linux-aarch64", "3.11", (verl,), at(cache))
    assert by_name(lock)["dep"].version == "1.0"
    (applied,) = lock.overrides
    assert applied.override == override
    replaced = {(r.text, str(r.origin)) for r in applied.replaced}
    assert replaced == {
        ("dep>=0.5", f"{MATRIX}: pip.packages.dep.version"),
        ("dep>=1.1", "source verl: requirements-npu.txt:1"),
    }
    (warning,) = [r.getMessage() for r in caplog.records if "override" in r.getMessage()]
    assert warning == (
        "linux-aarch64: override dep==1.0, locked 1.0: replaces dep>=1.1 "
        "(source verl: requirements-npu.txt:1); 1 already satisfied "
        "(reason: dep 1.1 breaks the rollout)"
    )


def test_basic_auth_index_and_no_credential_leaks(
    index_roots: tuple[Path, Path],
    urls: tuple[str, str],
    cache: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pypi, _ = urls
    with serve_directory(index_roots[1], auth="alice:s3cr3t-t0ken") as base:
        host = base.removeprefix("http://")
        monkeypatch.setenv("EXTRA_TOKEN", "s3cr3t-t0ken")
        package = PipPackage("tr", "==3.2.2", index=(("linux-aarch64", "extra"),))
        for url in (
            f"http://alice:s3cr3t-t0ken@{host}/simple",
            f"http://alice:${{EXTRA_TOKEN}}@{host}/simple",
        ):
            by_url = pypi_matrix(pypi, url, (package,))
            lock = lock_pip(by_url, "linux-aarch64", "3.11", (), at(cache))
            (tr,) = lock.entries
            assert (tr.version, tr.index) == ("3.2.2", "extra")
            assert tr.url == f"http://{host}/files/tr-3.2.2-py3-none-any.whl"
            assert "s3cr3t" not in repr(lock) and "alice" not in repr(lock)
        wrong = pypi_matrix(pypi, f"http://alice:wr0ng-t0ken@{host}/simple", (package,))
        with pytest.raises(ResolutionError) as raised:
            lock_pip(wrong, "linux-aarch64", "3.11", (), at(tmp_cache(cache)))
        assert "wr0ng-t0ken" not in str(raised.value) and f"***@{host}" in str(raised.value)
    monkeypatch.delenv("EXTRA_TOKEN")
    missing = pypi_matrix(pypi, "http://alice:${EXTRA_TOKEN}@127.0.0.1:9/simple", (package,))
    with pytest.raises(InputError, match=r"index extra.*EXTRA_TOKEN"):
        lock_pip(missing, "linux-aarch64", "3.11", (), at(cache))


def tmp_cache(cache: Path) -> Path:
    """A cache of its own, so uv cannot answer from what an authorised run stored."""
    return cache.with_name(cache.name + "-other")


def test_unreachable_index_names_the_redacted_url(urls: tuple[str, str], cache: Path) -> None:
    pypi, extra = urls
    dead = f"http://bob:hunter22@127.0.0.1:{closed_port()}/pypi/simple/"
    matrix = msgspec.structs.replace(
        pypi_matrix(pypi, extra, (PipPackage("dep"),)), indexes=(Index("mirror", dead),)
    )
    with pytest.raises(ResolutionError) as raised:
        lock_pip(matrix, "linux-aarch64", "3.11", (), at(cache))
    text = str(raised.value)
    assert "index mirror" in text and dead.replace("bob:hunter22", "***") in text
    assert "hunter22" not in text and "bob" not in text
    assert "linux-aarch64" in text


def test_depends_come_from_the_wheel_itself_without_pep_658(tmp_path: Path, cache: Path) -> None:
    build_index(tmp_path / "bare", PYPI_DISTS, metadata=False)
    assert not list((tmp_path / "bare" / "files").glob("*.metadata"))
    with serve_directory(tmp_path / "bare") as base:
        matrix = pypi_matrix(
            f"{base}/simple", f"{base}/simple-extra", (PipPackage("app", "==1.0"),)
        )
        entries = by_name(lock_pip(matrix, "linux-64", "3.11", (), at(cache)))
    assert entries["app"].depends == (("dep", ">=1"), ("plus", ""), ("xonly", ""))
    assert entries["plus"].depends == (("speedy", ""),)


def test_offline_relock_from_cache(
    index_roots: tuple[Path, Path], tmp_path: Path, cache: Path
) -> None:
    # Its own copy and server, so the server can be stopped before the offline run.
    root = tmp_path / "pypi"
    shutil.copytree(index_roots[0], root)
    with serve_directory(root) as base:
        matrix = pypi_matrix(
            f"{base}/simple", f"{base}/simple-extra", (PipPackage("app", "==1.0"),)
        )
        online = lock_pip(matrix, "linux-aarch64", "3.11", (), at(cache))
    offline = lock_pip(matrix, "linux-aarch64", "3.11", (), at(cache, offline=True))
    assert offline == online
    with pytest.raises(ResolutionError, match="offline"):
        lock_pip(matrix, "linux-aarch64", "3.11", (), at(tmp_cache(cache), offline=True))


@pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning")
def test_trusted_host_reaches_an_index_whose_certificate_is_not_verified(
    index_roots: tuple[Path, Path], urls: tuple[str, str], tmp_path: Path
) -> None:
    pypi, _ = urls
    package = PipPackage("tr", "==3.2.2", index=(("linux-aarch64", "extra"),))
    with serve_tls(index_roots[1], tmp_path / "certs") as base:
        untrusted = pypi_matrix(pypi, f"{base}/simple", (package,))
        with pytest.raises(
            ResolutionError, match=r"index extra at https://127\.0\.0\.1:\d+/simple"
        ) as raised:
            lock_pip(untrusted, "linux-aarch64", "3.11", (), at(tmp_path / "cache-untrusted"))
        assert "set trusted_host in channels/extra.toml" in str(raised.value)
        host = base.removeprefix("https://")
        trusted = msgspec.structs.replace(
            untrusted,
            indexes=(
                Index("pypi", pypi),
                Index("extra", f"{base}/simple", explicit=True, trusted_host=host),
            ),
        )
        # A fresh cache: the metadata of tr is read from the TLS server too.
        (tr,) = lock_pip(trusted, "linux-aarch64", "3.11", (), at(tmp_path / "cache")).entries
    assert (tr.version, tr.index, tr.url) == (
        "3.2.2",
        "extra",
        f"{base}/files/tr-3.2.2-py3-none-any.whl",
    )
