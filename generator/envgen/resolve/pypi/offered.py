"""The releases each package's own index offers, as the resolver sees them, asked concurrently.

A package pinned to an index comes from that index only; any other from the first default index
that has it (uv's first-index strategy: the others are never asked for it). Explicit indexes serve
only the packages pinned to them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from packaging.version import Version

from envgen import network
from envgen.errors import EnvgenError
from envgen.inputs.channels import IndexAccess

if TYPE_CHECKING:
    # The index client (requests, urllib3, ssl) is imported when offers are fetched: `status`
    # imports this module for `Offer` and fetches nothing without --watch.
    from envgen.resolve.pypi.index_client import IndexClient

# Index pages fetched at once: PyPI's largest take seconds to send, and there may be a hundred.
JOBS = 8


@dataclass(frozen=True)
class Offer:
    """The releases one index offers of a package."""

    index: str
    versions: tuple[Version, ...]


@dataclass(frozen=True)
class Offers:
    """What was found per package: its offer, or why its index could not be asked (`errors`: name ->
    message naming the URL). A package no index has is in neither."""

    found: Mapping[str, Offer] = field(default_factory=dict)
    errors: Mapping[str, str] = field(default_factory=dict)

    def versions(self, name: str) -> tuple[Version, ...] | None:
        offer = self.found.get(name)
        return offer.versions if offer is not None else None

    def index(self, name: str) -> str | None:
        offer = self.found.get(name)
        return offer.index if offer is not None else None


class OfferReader(Protocol):
    """What explaining a conflict asks the indexes (`index_client.Indexes`, a test's fake): the
    offer of each package of `wanted` (name -> the indexes it may come from, in order)."""

    def offers(
        self, wanted: Mapping[str, Sequence[IndexAccess]], indexes: Sequence[IndexAccess]
    ) -> Offers: ...


def candidate_indexes(
    name: str,
    pinned: str | None,
    indexes: Sequence[IndexAccess],
) -> tuple[IndexAccess, ...]:
    """The indexes `name` may come from, first one first: its pinned index alone, else the default
    indexes."""
    if pinned is not None:
        return tuple(i for i in indexes if i.name == pinned)
    return tuple(i for i in indexes if not i.explicit)


def _offer(client: IndexClient, name: str, indexes: Sequence[IndexAccess]) -> Offer | None:
    from envgen.resolve.pypi.index_client import fetch_filenames, file_versions

    for index in indexes:
        files = fetch_filenames(client, index, name)
        if files is not None:
            return Offer(index.name, tuple(sorted(file_versions(files))))
    return None


def fetch_offers(
    wanted: Mapping[str, Sequence[IndexAccess]],
    indexes: Sequence[IndexAccess],
    limits: network.Limits,
    *,
    jobs: int = JOBS,
) -> Offers:
    """The offer of each package of `wanted` (name -> the indexes it may come from, in order), asked
    `jobs` at a time through one client with every index's credentials and trusted host, within
    the network `limits`."""
    found: dict[str, Offer] = {}
    errors: dict[str, str] = {}

    def ask(name: str) -> None:
        try:
            offer = _offer(client, name, wanted[name])
        except EnvgenError as exc:
            errors[name] = exc.message
            return
        if offer is not None:
            found[name] = offer

    if not wanted:
        return Offers()
    from envgen.resolve.pypi.index_client import IndexClient

    pool = ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="envgen-pages")
    with IndexClient(indexes, limits) as client, pool:
        list(pool.map(ask, sorted(wanted)))
    return Offers(dict(sorted(found.items())), dict(sorted(errors.items())))
