"""A lock's YAML and TOML documents kept in the cache by the sha256 of each text
(lockio/lock_documents.py): read back instead of parsed, validated all the same, never trusted over
the file."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from envgen.errors import InputError
from envgen.inputs import files
from envgen.lockio import conda_lock_yml, sources_toml
from envgen.lockio.conda_lock_yml import parse_lock_yml, render_lock_yml
from envgen.lockio.sources_toml import parse_sources_toml, render_sources_toml

from tests.support.builders import sample_lock


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ENVGEN_CACHE_DIR", str(tmp_path / "cache"))
    _forget()
    return tmp_path / "cache"


def _forget() -> None:
    """Nothing of a text read before kept in this process: the next read goes to the cache."""
    conda_lock_yml.load_lock_yml.cache_clear()
    conda_lock_yml.parse_lock_yml.cache_clear()


def _kept(cache: Path, text: str, kind: str = "yml") -> Path:
    digest = hashlib.sha256(text.encode()).hexdigest()
    return cache / "lock-documents" / kind / digest[:2] / f"{digest}.json"


def _no_yaml(monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(text: str) -> object:
        raise AssertionError("the YAML was parsed")

    monkeypatch.setattr(files, "safe_yaml", refused)
    monkeypatch.setattr(conda_lock_yml, "safe_yaml", refused)
    _forget()


def test_a_text_read_again_is_not_parsed_and_reads_the_same(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = render_lock_yml(sample_lock())
    first = parse_lock_yml(text, "a5.yml")
    assert _kept(cache, text).is_file()
    _no_yaml(monkeypatch)
    assert parse_lock_yml(text, "a5.yml") == first
    # one byte more is another text: parsed
    with pytest.raises(AssertionError, match="the YAML was parsed"):
        parse_lock_yml(text + "\n", "a5.yml")


def test_a_kept_document_that_no_longer_validates_or_reads_is_parsed_again(cache: Path) -> None:
    text = render_lock_yml(sample_lock())
    first = parse_lock_yml(text, "a5.yml")
    kept = _kept(cache, text)
    for damaged in (b'{"version": 1, "metadata": {}, "package": []}', b"{not json", b"[]"):
        kept.write_bytes(damaged)
        _forget()
        assert parse_lock_yml(text, "a5.yml") == first
    assert b'"envgen_input_hash"' in kept.read_bytes()  # written again from the yml


def test_a_text_the_schema_refuses_is_refused_each_time_and_never_kept(cache: Path) -> None:
    text = render_lock_yml(sample_lock()).replace("manager: pip", "manager: npm", 1)
    for _ in range(2):
        with pytest.raises(InputError, match="a5.yml: not a conda-lock version 1 file"):
            parse_lock_yml(text, "a5.yml")
    assert not _kept(cache, text).exists()


def test_a_cache_that_cannot_be_written_keeps_nothing_and_the_lock_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("")
    monkeypatch.setenv("ENVGEN_CACHE_DIR", str(blocked))
    text = render_lock_yml(sample_lock())
    assert parse_lock_yml(text, "a5.yml").input_hash == sample_lock().input_hash


def test_a_kept_entry_that_is_a_symlink_is_not_followed(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = render_lock_yml(sample_lock())
    first = parse_lock_yml(text, "a5.yml")
    kept = _kept(cache, text)
    elsewhere = tmp_path / "elsewhere.json"
    kept.rename(elsewhere)
    kept.symlink_to(elsewhere)
    _no_yaml(monkeypatch)
    with pytest.raises(AssertionError, match="the YAML was parsed"):
        parse_lock_yml(text, "a5.yml")
    assert first.input_hash


# --- the sources.toml -----------------------------------------------------------------------------


def _no_toml(monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(text: str) -> object:
        raise AssertionError("the TOML was parsed")

    monkeypatch.setattr(sources_toml.tomllib, "loads", refused)


def test_a_sources_toml_read_again_is_not_parsed_and_reads_the_same(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = render_sources_toml(sample_lock())
    first = parse_sources_toml(text, "a5.sources.toml")
    assert _kept(cache, text, "sources").is_file()
    assert not _kept(cache, text).exists()  # the same text as a yml is another document
    _no_toml(monkeypatch)
    assert parse_sources_toml(text, "a5.sources.toml") == first
    with pytest.raises(AssertionError, match="the TOML was parsed"):
        parse_sources_toml(text + "\n", "a5.sources.toml")


def test_a_kept_sources_document_that_no_longer_validates_or_reads_is_parsed_again(
    cache: Path,
) -> None:
    text = render_sources_toml(sample_lock())
    first = parse_sources_toml(text, "a5.sources.toml")
    kept = _kept(cache, text, "sources")
    for damaged in (b'{"schema": 1, "env": "a5"}', b"{not json", b"[]"):
        kept.write_bytes(damaged)
        assert parse_sources_toml(text, "a5.sources.toml") == first
    assert b'"input-hash"' in kept.read_bytes()  # written again from the file


def test_a_sources_toml_the_schema_refuses_is_refused_alike_each_time_and_never_kept(
    cache: Path,
) -> None:
    text = render_sources_toml(sample_lock()).replace('env = "', 'env = 1 #"', 1)
    said = []
    for _ in range(2):
        with pytest.raises(InputError) as refused:
            parse_sources_toml(text, "a5.sources.toml")
        said.append(str(refused.value))
    assert said[0] == said[1] and "a5.sources.toml" in said[0]
    assert not _kept(cache, text, "sources").exists()
