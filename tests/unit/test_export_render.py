"""The pure exports: URLs safe to write, requirements.txt and pylock rendering and reading,
stale-file detection."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from envgen.errors import InputError, VerificationError
from envgen.lockio.exports.common import direct_url
from envgen.lockio.exports.derived import derived_files, derived_problems, installable
from envgen.lockio.exports.nix import render_nix
from envgen.lockio.exports.pylock import expected_pylock, parse_pylock, render_pylock
from envgen.lockio.exports.requirements_txt import (
    expected_requirements,
    parse_requirements,
    render_requirements,
)
from envgen.lockio.exports.sbom import render_cyclonedx
from envgen.model import (
    AppliedOverride,
    CondaEntry,
    Index,
    Lock,
    LockedSource,
    Override,
    Pending,
    PipEntry,
    Source,
    Submodule,
)
from envgen.redact import written_url

from tests.support.builders import make_lock

SHA_A, SHA_B, SHA_C = "a" * 64, "b" * 64, "c" * 64


def lock(**changes: object) -> Lock:
    indexes = (
        Index("pypi", "https://${PYPI_USER}:${PYPI_TOKEN}@pypi.example/simple"),
        Index(
            "extra",
            "https://${EXTRA_TOKEN}@extra.example/simple",
            explicit=True,
            trusted_host="extra.example",
        ),
    )
    pip = (
        PipEntry(
            "torch",
            "2.10.0",
            "linux-64",
            "https://pypi.example/f/torch-2.10.0-x86_64.whl",
            SHA_A,
            depends=(("numpy", ">=1.26"),),
            index="pypi",
        ),
        PipEntry(
            "numpy",
            "1.26.4",
            "linux-64",
            "https://pypi.example/f/numpy-1.26.4-x86_64.whl",
            SHA_B,
            index="pypi",
        ),
        PipEntry(
            "triton-ascend",
            "3.2.0",
            "linux-64",
            "https://extra.example/f/triton_ascend-3.2.0.whl",
            SHA_C,
            index="extra",
        ),
    )
    python = CondaEntry(
        "python",
        "3.11.9",
        "h0",
        "linux-64",
        "https://conda.example/python.conda",
        "d" * 32,
        "e" * 64,
    )
    values: dict[str, object] = {
        "env": "a5",
        "input_hash": "f" * 64,
        "conda": (python,),
        "pip": pip,
        "indexes": indexes,
    }
    return make_lock(**{**values, **changes})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("url", "written"),
    [
        ("https://${TOKEN}@host/simple", "https://${TOKEN}@host/simple"),
        ("https://user:${TOKEN}@host/simple", "https://user:${TOKEN}@host/simple"),
        ("https://user:s3cret@host/simple", "https://host/simple"),
        ("https://tok3n@host/simple", "https://host/simple"),
        ("https://user:pre${TOKEN}@host/simple", "https://host/simple"),
        ("https://host:8443/simple", "https://host:8443/simple"),
    ],
)
def test_only_credential_references_are_written(url: str, written: str) -> None:
    assert written_url(url) == written


def test_a_direct_reference_carries_its_index_credential_reference() -> None:
    triton = lock().pip[2]
    assert (
        direct_url(lock(), triton)
        == "https://${EXTRA_TOKEN}@extra.example/f/triton_ascend-3.2.0.whl"
    )


def test_requirements_pin_index_packages_by_version_and_explicit_ones_by_url() -> None:
    text = render_requirements(lock(), "linux-64")
    assert "--index-url https://${PYPI_USER}:${PYPI_TOKEN}@pypi.example/simple\n" in text
    assert "--trusted-host extra.example\n" in text
    assert "extra.example/simple" not in text
    assert "torch==2.10.0 \\\n    --hash=sha256:" + SHA_A in text
    assert (
        "triton-ascend @ https://${EXTRA_TOKEN}@extra.example/f/triton_ascend-3.2.0.whl \\\n"
        in text
    )
    assert "    # via torch\n" in text
    assert "python 3.11 venv" in text
    assert parse_requirements(text, "r") == expected_requirements(lock(), "linux-64")


@pytest.mark.parametrize("newline", ["\n", "\r", "\u2028", "\x0b", "\x1c"])
def test_a_multi_line_override_reason_stays_inside_its_comment(newline: str) -> None:
    # A reason is prose (the matrix allows newlines in it); pip splits lines on every one of these,
    # so a reason ending its `# via` comment would add an option line: another index, an editable
    # install.
    reason = (
        f"fixes a bug{newline}--index-url https://evil.example/simple{newline}-e "
        "git+https://evil.example/x"
    )
    hostile = lock(overrides=(AppliedOverride(Override("numpy", "numpy==1.26.4", reason)),))
    text = render_requirements(hostile, "linux-64")
    options = [line for line in text.splitlines() if line.startswith("-")]
    index = "--index-url https://${PYPI_USER}:${PYPI_TOKEN}@pypi.example/simple"
    assert options == [index, "--trusted-host extra.example"]
    assert (
        "    #   override numpy==1.26.4: fixes a bug --index-url "
        "https://evil.example/simple -e git+" in text
    )


def test_requirements_without_a_default_index_search_none() -> None:
    only_explicit = lock(pip=lock().pip[2:], indexes=lock().indexes[1:])
    assert "\n--no-index\n" in render_requirements(only_explicit, "linux-64")


def test_a_requirement_line_with_another_option_is_refused() -> None:
    with pytest.raises(InputError, match=r"r:2: only --hash options"):
        parse_requirements("# c\ntorch==1 --index-url https://evil/simple\n", "r")


def test_pylock_names_files_without_credentials() -> None:
    text = render_pylock(lock(), "linux-64")
    assert "${" not in text and "@" not in text.replace(" @ ", "")
    assert parse_pylock(text, "p") == expected_pylock(lock(), "linux-64")
    assert 'requires-python = "==3.11.*"' in text


def _write_all(where: Path, the_lock: Lock) -> None:
    for file in derived_files(the_lock, None):
        (where / file.name).write_text(file.text)


def test_fresh_derived_files_have_no_problems(tmp_path: Path) -> None:
    _write_all(tmp_path, lock())
    assert derived_problems(tmp_path, lock(), None) == []


def test_missing_edited_and_stale_derived_files_are_named(tmp_path: Path) -> None:
    _write_all(tmp_path, lock())
    (tmp_path / "pylock.a5-linux-64.toml").unlink()
    requirements = tmp_path / "a5.linux-64.requirements.txt"
    requirements.write_text(requirements.read_text().replace(SHA_B, "0" * 64))
    problems = derived_problems(tmp_path, lock(), None)
    assert problems[0].startswith(
        "locks/a5.linux-64.requirements.txt does not carry the yml's artifacts and hashes"
    )
    words = f"numpy: 1.26.4, sha256 000000000000 here, 1.26.4, sha256 {SHA_B[:12]} in the lock"
    assert words in problems[0]
    assert problems[1] == "locks/pylock.a5-linux-64.toml is missing"

    _write_all(tmp_path, lock())
    requirements.write_text(requirements.read_text().replace("# via torch", "# via something else"))
    assert derived_problems(tmp_path, lock(), None) == [
        "locks/a5.linux-64.requirements.txt was edited by hand (its artifacts match, "
        "its text differs from the "
        "lock's rendering)"
    ]

    _write_all(tmp_path, lock(input_hash="1" * 64))
    problems = derived_problems(tmp_path, lock(), None)
    assert problems == [
        "locks/a5.linux-64.requirements.txt belongs to another lock (input hash 111111111111)",
        "locks/pylock.a5-linux-64.toml belongs to another lock (input hash 111111111111)",
        "locks/a5.nix belongs to another lock (input hash 111111111111)",
    ]


def test_a_nix_file_with_another_hash_is_named(tmp_path: Path) -> None:
    _write_all(tmp_path, lock())
    nix = tmp_path / "a5.nix"
    nix.write_text(nix.read_text().replace(SHA_C, "0" * 64))
    (problem,) = derived_problems(tmp_path, lock(), None)
    wheel = "https://extra.example/f/triton_ascend-3.2.0.whl"
    assert problem == (
        "locks/a5.nix does not carry the yml's artifacts and hashes: "
        f"{wheel}: sha256 000000000000 here, sha256 {SHA_C[:12]} in the lock"
    )


def test_nix_strings_escape_interpolation_and_quotes() -> None:
    hostile = lock(pending=(Pending("x", 'a "quote" ${builtins.abort "no"} \\ end'),))
    text = render_nix(hostile)
    assert r'note = "a \"quote\" \${builtins.abort \"no\"} \\ end";' in text


def submodules_lock() -> Lock:
    """A source with a submodule (its URL with credentials) and a nested one, and a source without
    any."""
    kernels = Submodule("csrc/kernels", "https://user:s3cret@github.com/org/kernels.git", "1" * 40)
    grand = Submodule(
        "csrc/kernels/third_party/grand", "https://github.com/org/grand.git", "2" * 40
    )
    source = Source("vllm-ascend", "https://github.com/org/vllm-ascend.git", "main", "vllm_ascend")
    plain = LockedSource(
        Source("verl", "https://github.com/org/verl.git", "main", "verl"), "4" * 40
    )
    return make_lock(
        "a5", sources=(LockedSource(source, "3" * 40, submodules=(kernels, grand)), plain)
    )


@pytest.mark.skipif(
    shutil.which("nix-instantiate") is None, reason="nix-instantiate is not installed"
)
def test_the_nix_expression_names_each_submodule_at_its_gitlink(tmp_path: Path) -> None:
    text = render_nix(submodules_lock())
    assert "s3cret" not in text
    (tmp_path / "a5.nix").write_text(text)
    cmd = ["nix-instantiate", "--eval", "--strict", "--json", str(tmp_path / "a5.nix")]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    first, plain = json.loads(proc.stdout)["sources"]
    assert [(s["path"], s["rev"], s["fetchGit"]) for s in first["submodules"]] == [
        (
            "csrc/kernels",
            "1" * 40,
            {"url": "https://github.com/org/kernels.git", "rev": "1" * 40, "allRefs": True},
        ),
        (
            "csrc/kernels/third_party/grand",
            "2" * 40,
            {"url": "https://github.com/org/grand.git", "rev": "2" * 40, "allRefs": True},
        ),
    ]
    assert plain["submodules"] == []


def test_the_sbom_holds_each_submodule_as_a_component_of_its_source() -> None:
    text = render_cyclonedx(submodules_lock())
    components = {c["bom-ref"]: c for c in json.loads(text)["components"]}
    parts = components["source:vllm-ascend"]["components"]
    assert [(p["name"], p["version"], p["purl"].split("?vcs_url=")[1]) for p in parts] == [
        ("csrc/kernels", "1" * 40, f"git%2Bhttps://github.com/org/kernels.git%40{'1' * 40}"),
        (
            "csrc/kernels/third_party/grand",
            "2" * 40,
            f"git%2Bhttps://github.com/org/grand.git%40{'2' * 40}",
        ),
    ]
    assert "s3cret" not in text and "components" not in components["source:verl"]


def test_what_a_tool_reads_is_compared_when_a_lock_is_installed_as_it_is(tmp_path: Path) -> None:
    """`installable`: comments may differ (they name matrix keys), what pip or uv reads may not."""
    _write_all(tmp_path, lock())
    requirements = tmp_path / "a5.linux-64.requirements.txt"
    requirements.write_text(requirements.read_text().replace("# via torch", "# via something else"))
    assert derived_problems(tmp_path, lock(), None, as_read=True) == []
    assert installable(tmp_path, lock(), requirements.name) == requirements
    requirements.write_text(requirements.read_text() + "-r /elsewhere/more.txt\n")
    edited = f"locks/{requirements.name} was edited by hand"
    with pytest.raises(VerificationError, match=edited) as raised:
        installable(tmp_path, lock(), requirements.name)
    assert raised.value.hint == "`envgen lock a5 --force` writes it again"
    pylock = tmp_path / "pylock.a5-linux-64.toml"
    pylock.write_text(pylock.read_text() + "# a comment uv does not read\n")
    assert installable(tmp_path, lock(), pylock.name) == pylock
    version = 'lock-version = "1.0"'
    pylock.write_text(pylock.read_text().replace(version, f"{version}\nx = 1"))
    with pytest.raises(VerificationError, match="was edited by hand"):
        installable(tmp_path, lock(), pylock.name)
