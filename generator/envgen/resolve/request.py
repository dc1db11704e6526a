"""A re-lock as asked: the matrix, the previous lock as read, the digests of the matrix's files, and
what may move; the sources that move and the commits kept follow from them (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from envgen.resolve.movable import NOTHING, Movable, sources_to_update

if TYPE_CHECKING:
    from envgen.model import Lock, LockedSource, Matrix


@dataclass(frozen=True)
class Relock:
    """One env to re-lock. `previous` is its lock on disk (None when there is none, or when every
    source moves and it did not read); `files` the digests of the matrix, the matrices it extends
    and its channel files, by component ("matrix", "base:<env>", "channel:<name>"), as read when the
    re-lock began."""

    matrix: Matrix
    previous: Lock | None = None
    files: Mapping[str, str] = field(default_factory=dict)
    update: Movable = NOTHING
    upgrade: Movable = NOTHING

    @property
    def moving(self) -> Movable:
        """The sources that move to their ref's current commit."""
        return sources_to_update(self.matrix, self.update, self.upgrade)

    @property
    def kept(self) -> dict[str, LockedSource]:
        """The previous lock's sources by name, whose commits are kept unless they move (none when
        every source moves)."""
        if self.previous is None or self.moving.everything:
            return {}
        return {s.source.name: s for s in self.previous.sources}
