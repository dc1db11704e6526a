"""When uv finds no resolution: every conflict of the direct layer at once, then uv's explanation.

uv stops at the first conflict it meets. The direct layer (the matrix's pins, the sources'
requirements, the overrides as scoped) is checked package by package against the releases each
package's own index offers, so one run names them all, each with every origin and the override that
would settle it. A successful uv run proves the direct layer satisfiable, so the pages are asked
only after uv failed: a re-lock that succeeds pays nothing for this.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from packaging.requirements import Requirement

from envgen.errors import ConflictError
from envgen.inputs.channels import IndexAccess
from envgen.names import package_key
from envgen.resolve.pypi.conflicts import asked, conflict_record, describe_conflicts, find_conflicts
from envgen.resolve.pypi.offered import OfferReader, candidate_indexes
from envgen.resolve.pypi.uv_compile import Inputs

log = logging.getLogger(__name__)


def explain_conflicts(
    failure: ConflictError,
    matrix_path: str,
    inputs: Inputs,
    indexes: Sequence[IndexAccess],
    platform: str,
    environment: Mapping[str, str],
    reader: OfferReader,
) -> ConflictError:
    """uv's failure with the direct layer's conflicts first, from the releases `reader` finds
    offered; `failure` itself when the direct layer has none (the conflict lies deeper, in
    third-party metadata: uv's explanation is the story)."""
    index_for = dict(inputs.index_for)
    direct = set(inputs.direct)
    names = [n for n in asked(inputs.requirements, environment) if n not in direct]
    wanted = {n: candidate_indexes(n, index_for.get(n), indexes) for n in names}
    offers = reader.offers(wanted, indexes)
    for name, error in offers.errors.items():
        log.debug("%s: the releases of %s are unknown: %s", platform, name, error)
    requirements = [r for r in inputs.requirements if _name(r.text) not in direct]
    conflicts = find_conflicts(requirements, offers.versions, environment)
    if not conflicts:
        return failure
    found = {c.name: offers.index(c.name) or "its index" for c in conflicts}
    message = f"{describe_conflicts(conflicts, platform, found)}\nthen uv says:\n{failure.said}"
    return ConflictError(
        message,
        hint=f"settle every conflict above in {matrix_path}, then lock again",
        conflicts=tuple(conflict_record(c, platform, offers.index(c.name)) for c in conflicts),
        said=failure.said,
    )


def _name(text: str) -> str:
    return package_key(Requirement(text).name)
