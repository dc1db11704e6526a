"""The names in locks/ of the files `envgen lock` derives from a lock, and the input hash each
file's header records: all the no-op lock reads of them, without the exporters (and packaging) it
never needs."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from envgen.errors import InputError
from envgen.lockio.store import read_derived

_INPUT_HASH = re.compile(r"envgen-input-hash: ([0-9a-f]+)|input-hash = \"([0-9a-f]+)\"")


def requirements_name(env: str, platform: str) -> str:
    return f"{env}.{platform}.requirements.txt"


def pylock_name(env: str, platform: str) -> str:
    return f"pylock.{env}-{platform}.toml"


def nix_name(env: str) -> str:
    return f"{env}.nix"


def derived_names(env: str, platforms: Sequence[str]) -> list[str]:
    """The names in locks/ of the files derived from the lock of `env` for `platforms`."""
    names = [name for p in platforms for name in (requirements_name(env, p), pylock_name(env, p))]
    return [*names, nix_name(env)]


def recorded_hash(text: str) -> str | None:
    """The input hash a derived file's text records (its header comment, or pylock's tool.envgen
    table)."""
    match = _INPUT_HASH.search(text)
    return (match.group(1) or match.group(2)) if match else None


def derived_texts(
    locks_dir: Path, env: str, platforms: Sequence[str], input_hash: str
) -> list[tuple[str, str]] | None:
    """Every derived file's name and text when each exists and names `input_hash`, else None (a
    cheap test, for the no-op lock: it renders nothing; `derived.derived_problems` compares each
    text with the lock's rendering)."""
    found = []
    for name in derived_names(env, platforms):
        try:
            text = read_derived(locks_dir, name)
        except InputError:
            return None
        if text is None or recorded_hash(text) != input_hash:
            return None
        found.append((name, text))
    return found
