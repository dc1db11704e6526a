"""A conda prefix created (or updated) from one platform's locked conda packages, by rattler."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import rattler
import rattler.exceptions

from envgen import network
from envgen.credentials import NO_CREDENTIALS, Credentials
from envgen.errors import EnvgenError, InputError, NetworkError, Unreached, VerificationError
from envgen.installer.tools import named_hosts, unreachable_hosts
from envgen.model import CondaEntry
from envgen.redact import redact_text
from envgen.resolve.conda.stage import rattler_client, repodata_record

log = logging.getLogger(__name__)

# rattler reports download, hash and link failures alike through these.
_INSTALL_ERRORS = (
    rattler.exceptions.InstallerError,
    rattler.exceptions.TransactionError,
    rattler.exceptions.LinkError,
    rattler.exceptions.IoError,
    rattler.exceptions.CacheDirError,
)


def install_conda(
    entries: Sequence[CondaEntry],
    prefix: Path,
    *,
    cache: Path,
    limits: network.Limits,
    credentials: Credentials = NO_CREDENTIALS,
) -> None:
    """Create (or update) the conda prefix `prefix` from one platform's locked entries.

    Packages are downloaded into `cache/conda/pkgs`; rattler checks each http(s) download against
    its sha256, within the network `limits`. `credentials` go with the downloads from their
    channels' hosts, as headers (the URLs carry none).
    """
    platforms = sorted({e.platform for e in entries})
    if len(platforms) != 1:
        got = ", ".join(platforms) or "none"
        raise InputError(
            f"installing into {prefix} needs the conda entries of one platform; got {got}",
            hint="pass Lock.conda_for(platform)",
        )
    platform = platforms[0]
    log.info("installing %d conda packages for %s into %s", len(entries), platform, prefix)
    work = rattler.install(
        [repodata_record(e) for e in entries],
        prefix,
        cache_dir=cache / "conda" / "pkgs",
        platform=rattler.Subdir(platform),
        show_progress=False,
        execute_link_scripts=False,
        client=rattler_client(credentials, limits),
    )

    def over() -> EnvgenError:
        took = f"took more than {network.seconds('budget', limits)}"
        return NetworkError(
            f"installing the locked conda packages for {platform} {took}",
            hint=f"check the channels and the network; {network.raise_hint('budget', limits)}",
            hosts=[Unreached(host, took) for host in named_hosts(" ".join(e.url for e in entries))],
            platform=platform,
        )

    try:
        network.run_bounded(work, budget=limits.budget, over=over)
    except _INSTALL_ERRORS as exc:
        raise _failure(str(exc), platform, prefix, credentials, limits) from exc


def _failure(
    said: str, platform: str, prefix: Path, credentials: Credentials, limits: network.Limits
) -> EnvgenError:
    """What rattler's failure means: a host not reached (NetworkError), else a verdict on the
    lock or the channel (VerificationError)."""
    said = redact_text(said, credentials.secrets)
    unreachable = unreachable_hosts(
        said, f"downloading the locked conda packages for {platform}", limits, platform
    )
    if unreachable is not None:
        network.abandoned.set()
        return unreachable
    failed = f"installing the locked conda packages for {platform} into {prefix} failed"
    return VerificationError(
        f"{failed}:\n{said.strip()}",
        hint="a hash mismatch means the channel serves other bytes than were locked: re-lock "
        "or fix the channel; otherwise check the channel is reachable",
    )
