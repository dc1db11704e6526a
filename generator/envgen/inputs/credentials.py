"""The credentials using a lock needs: its channels' and indexes' (from channels/, `${VAR}`
expanded) and its git sources' (the matrix's URLs). A lock records none of them, so they are read
again, here, at each use."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from envgen.credentials import NO_CREDENTIALS, Credentials, LockCredentials
from envgen.inputs.channels import expand_url, read_channel
from envgen.model import Channel, Index, Lock, Matrix


def channel_credentials(
    channels: Iterable[Channel | Index], environ: Mapping[str, str]
) -> Credentials:
    """The credentials the channels' and indexes' URLs carry, `${VAR}` expanded (an unset one:
    InputError)."""
    kinds = {Channel: "conda channel", Index: "index"}
    return Credentials.of(
        expand_url(c.url, f"{kinds[type(c)]} {c.name}", environ) for c in channels
    )


def lock_credentials(
    lock: Lock, channels_dir: Path, matrix: Matrix | None, environ: Mapping[str, str]
) -> LockCredentials:
    """Everything installing `lock` may need to send: for each channel and index it names, the
    credentials of its file in `channels_dir` (literal or `${VAR}`) and of the `${VAR}` reference
    the lock keeps; for its git sources, those the matrix's URLs carry (`matrix` None: none)."""

    def of(named: Sequence[Channel | Index]) -> Credentials:
        found: list[Channel | Index] = []
        for place in named:
            path = channels_dir / f"{place.name}.toml"
            current = read_channel(path)[0] if path.is_file() else None
            if current is not None and isinstance(current, type(place)):
                found.append(current)
        return channel_credentials([*found, *named], environ)

    sources = Credentials.of(s.url for s in matrix.sources) if matrix else NO_CREDENTIALS
    return LockCredentials(conda=of(lock.channels), pip=of(lock.indexes), git=sources)
