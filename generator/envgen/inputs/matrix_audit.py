"""The [audit] section of a matrix: the advisories `envgen audit` is told to ignore, each with the
reason a reviewer reads (`[audit.ignore]`, `ID = "reason"`)."""

from __future__ import annotations

import re
from typing import Any

from envgen.inputs.matrix_sections import SectionReader
from envgen.inputs.toml_reader import KeyPath, get_str, get_table

# An advisory's id as the services write them: GHSA-9wx4-h78v-vm56, CVE-2024-35195, PYSEC-2023-74.
ADVISORY_ID = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:[-_.:][A-Za-z0-9]+)+")
_MAX_ID = 100


class AuditSectionReader(SectionReader):
    """[audit]: `ignore`, advisory id -> why the finding is accepted (a reason is required)."""

    def audit_ignores(self, data: dict[str, Any]) -> tuple[tuple[str, str], ...]:
        table = self.section(data, ("audit",), ("ignore",))
        if table is None:
            return ()
        found: dict[str, tuple[str, str]] = {}
        for advisory, value in get_table(self.p, table, ("audit", "ignore")).items():
            path: KeyPath = ("audit", "ignore", advisory)
            if len(advisory) > _MAX_ID or not ADVISORY_ID.fullmatch(advisory):
                self.p.add(
                    path,
                    f"{advisory[:_MAX_ID]!r} is not an advisory id (GHSA-9wx4-h78v-vm56, "
                    "CVE-2024-35195, PYSEC-2023-74)",
                )
                continue
            if isinstance(value, str) and not value.strip():
                self.p.add(path, 'say why the advisory is ignored: ID = "reason"')
                continue
            reason = get_str(self.p, table["ignore"], path)
            if reason is None:
                continue
            if advisory.upper() in found:
                self.p.add(path, f"'{advisory}' is ignored twice (ids are compared upper case)")
                continue
            found[advisory.upper()] = (advisory, reason.strip())
        return tuple(sorted(found.values(), key=lambda item: item[0].upper()))
