"""The effects a re-lock goes through, each behind a small interface (pypa/installer's source and
destination): git sources pinned, conda specs solved, uv run, indexes asked,
release archives locked. The re-lock core
(resolve/pipeline.py) calls only these; `Resolvers.real` gives envgen's own, a head start
(resolve/head_start.py) stands in for two of them, and a test gives fakes.

Light on purpose: the implementations are imported by `Resolvers.real`, not here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from envgen.model import CondaEntry, LockedArchive, LockedSource, Matrix
    from envgen.resolve.conda.stage import CondaSolve
    from envgen.resolve.movable import Movable
    from envgen.resolve.pypi.stage import IndexReader
    from envgen.resolve.pypi.uv_compile import UvRunner
    from envgen.resolve.settings import Settings


class SourcePinner(Protocol):
    """Pins every source of a matrix (and the git requirements they bring) to a commit, in install
    order: a source `kept` records keeps its commit unless `update` covers it."""

    def pin(
        self,
        matrix: Matrix,
        kept: Mapping[str, LockedSource],
        update: Movable,
    ) -> tuple[LockedSource, ...]: ...


class CondaSolver(Protocol):
    """Solves a matrix's conda specs for one platform, keeping `preferred` records where the specs
    allow."""

    def solve(
        self,
        matrix: Matrix,
        platform: str,
        preferred: Sequence[CondaEntry],
    ) -> CondaSolve: ...


class ArchiveLocker(Protocol):
    """Locks the release archives of a matrix (their wheels, hashed, with their requirements),
    keeping the sha256 `previous` records for an unchanged URL."""

    def lock(
        self, matrix: Matrix, previous: Sequence[LockedArchive]
    ) -> tuple[LockedArchive, ...]: ...


@dataclass(frozen=True)
class Resolvers:
    """Every effect a re-lock has but reading and writing its files (the command's)."""

    sources: SourcePinner
    conda: CondaSolver
    uv: UvRunner
    indexes: IndexReader
    # None where no matrix has archives (a test's fakes).
    archives: ArchiveLocker | None = None

    @classmethod
    def real(cls, settings: Settings) -> Resolvers:
        """git, rattler, uv and HTTP, as `settings` say."""
        from envgen.resolve.archives.members import ArchiveFetcher
        from envgen.resolve.conda.stage import RattlerSolver
        from envgen.resolve.pypi.indexes import Indexes
        from envgen.resolve.pypi.uv_compile import PlainRunner
        from envgen.resolve.sources.pins import GitPinner

        indexes = Indexes(settings.cache, settings.limits, offline=settings.offline)
        uv = PlainRunner(settings.limits.budget)
        archives = ArchiveFetcher(settings)
        return cls(GitPinner(settings), RattlerSolver(settings), uv, indexes, archives)
