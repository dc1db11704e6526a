"""Lock → locks/<env>.<platform>.requirements.txt, pip-tools' hash-pinned format, and reading one
back; every requirement line pinned by sha256 that envgen writes is rendered here (pure)."""

from __future__ import annotations

import re

import msgspec
from packaging.requirements import InvalidRequirement
from packaging.requirements import Requirement as Pep508

from envgen.digests import short_digest
from envgen.errors import InputError
from envgen.inputs.untrusted import one_line
from envgen.lockio.exports.common import (
    direct_url,
    entry_index,
    header,
    origins,
    trusted_hosts,
)
from envgen.lockio.exports.names import requirements_name
from envgen.model import Lock, Matrix, PipEntry
from envgen.names import package_key
from envgen.redact import strip_credentials, written_url


def _is_direct(lock: Lock, entry: PipEntry) -> bool:
    """Named by URL: a package of an explicit index (so pip never searches that index for anything
    else) or a wheel the matrix gives by URL."""
    index = entry_index(lock, entry)
    return index is None or index.explicit


def _usage(lock: Lock, platform: str) -> list[str]:
    python = lock.python_for(platform)
    version = ".".join(python.split(".")[:2]) if python else "the locked python"
    name = requirements_name(lock.env, platform)
    sources = ", ".join(s.source.name for s in lock.sources)
    lines = [
        "#",
        f"# Install into a fresh python {version} venv on {platform}, every artifact "
        "checked against its sha256:",
        f"#   python -m pip install --require-hashes --no-deps -r locks/{name}",
    ]
    if sources:
        lines += [
            f"# The git sources ({sources}) come from the recipe, not from this file (pip's",
            "# hash-checking mode refuses git URLs); install them afterwards with",
            f'#   sh locks/{lock.env}.install.sh --prefix "$VIRTUAL_ENV"',
        ]
    if lock.pending:
        lines.append(
            one_line(f"# Pending, not installable yet: {', '.join(p.name for p in lock.pending)}")
        )
    return [*lines, *archive_lines(lock, platform), "#"]


def archive_lines(lock: Lock, platform: str, comment: str = "#") -> list[str]:
    """The wheels the recipe takes from release archives on `platform` (pip takes no wheel out of an
    archive), and what the lock leaves out there on purpose, as comment lines."""
    lines = []
    archives = lock.archives_for(platform)
    if archives:
        lines.append(f"{comment} Wheels of release archives, installed by the recipe (by sha256):")
    for archive in archives:
        lines.append(f"{comment}   {archive.name}: {archive.url} sha256:{archive.sha256}")
        for m in archive.members:
            lines.append(f"{comment}     {m.name}=={m.version} {m.path} sha256:{m.sha256}")
    for exclusion in (e for e in lock.exclusions if e.applies(platform)):
        why = f"{exclusion.name}: {exclusion.reason}"
        lines.append(one_line(f"{comment} Left out on purpose: {why}"))
    return lines


def _options(lock: Lock, platform: str) -> list[str]:
    entries = lock.pip_for(platform)
    defaults = [written_url(i.url) for i in lock.indexes if not i.explicit]
    if not defaults or all(_is_direct(lock, e) for e in entries):
        lines = ["--no-index"]
    else:
        lines = [
            f"--index-url {defaults[0]}",
            *(f"--extra-index-url {url}" for url in defaults[1:]),
        ]
    return lines + [f"--trusted-host {host}" for host in trusted_hosts(lock, entries)]


def _via(reasons: tuple[str, ...]) -> list[str]:
    whys = tuple(map(one_line, reasons))
    if not whys:
        return []
    if len(whys) == 1:
        return [f"    # via {whys[0]}"]
    return ["    # via", *(f"    #   {why}" for why in whys)]


def hashed_requirement(pin: str, sha256: str, *, continued: bool = False) -> str:
    """One requirement pinned by sha256 as pip's hash-checking mode reads it: `pin
    --hash=sha256:...` on one line, or with `continued` the hash on a continuation line."""
    joint = " \\\n    " if continued else " "
    return f"{pin}{joint}--hash=sha256:{sha256}"


def render_find_links(lock: Lock, platform: str) -> str:
    """The pip part of `platform` as `name==version --hash=sha256:...` lines sorted by name: what
    pip or uv installs with `--no-index --find-links` from a directory of the locked artifacts (a
    bundle's `pip/`, for the recipe's `--bundle` and `install --from-bundle`)."""
    entries = sorted(lock.pip_for(platform), key=lambda e: e.name)
    return "".join(hashed_requirement(f"{e.name}=={e.version}", e.sha256) + "\n" for e in entries)


def render_requirements(lock: Lock, platform: str, matrix: Matrix | None = None) -> str:
    """The pip packages of `platform`, one requirement each with the sha256 of the one artifact the
    lock chose.

    Packages of an explicit index (and wheels the matrix names by URL) are direct references, so no
    other index is searched for them; `# via` names why each package is there (`matrix` adds the
    matrix keys).
    """
    why = origins(lock, matrix, platform)
    overrides = {package_key(o.override.name): o.override for o in lock.overrides}
    lines = header(lock, f"The pip packages of env {lock.env} for {platform}, pinned by sha256.")
    lines += _usage(lock, platform)
    lines += _options(lock, platform)
    for entry in sorted(lock.pip_for(platform), key=lambda e: package_key(e.name)):
        name = package_key(entry.name)
        pin = (
            f"{name} @ {direct_url(lock, entry)}"
            if _is_direct(lock, entry)
            else f"{name}=={entry.version}"
        )
        lines += ["", hashed_requirement(pin, entry.sha256, continued=True)]
        reasons = why.get(name, ())
        if name in overrides:
            reasons += (f"override {overrides[name].requirement}: {overrides[name].reason}",)
        lines += _via(reasons)
    return "\n".join(lines) + "\n"


# --- reading one back
# -------------------------------------------------------------------------------------


class RequirementLine(msgspec.Struct, frozen=True, order=True):
    """One requirement of a hash-pinned file: the name, a version or a direct URL, and its
    hashes."""

    name: str
    version: str | None
    url: str | None
    hashes: tuple[str, ...]

    @property
    def detail(self) -> str:
        """The pin in words, without its name: its version or URL and its sha256 (12 digits)."""
        pinned = f"@ {self.url}" if self.url else self.version or "with no version"
        hashes = ", ".join(short_digest(h) for h in self.hashes) or "none"
        return f"{pinned}, sha256 {hashes}"


_COMMENT = re.compile(r"(^|\s+)#.*$")


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """The lines pip reads: comments removed, `\\` continuations joined; each with its first line
    number."""
    lines: list[tuple[int, str]] = []
    pending: tuple[int, str] | None = None
    for number, raw in enumerate(text.splitlines(), start=1):
        line = _COMMENT.sub("", raw) if "#" in raw else raw
        start, before = pending if pending else (number, "")
        if line.endswith("\\"):
            pending = (start, before + line[:-1] + " ")
            continue
        pending = None
        joined = (before + line).strip()
        if joined:
            lines.append((start, joined))
    return lines


def pip_reads(text: str) -> tuple[str, ...]:
    """What pip reads of a requirements file: its lines without comments, continuations joined."""
    return tuple(line for _, line in _logical_lines(text))


def parse_requirements(text: str, where: str) -> tuple[RequirementLine, ...]:
    """The requirements of a hash-pinned file, sorted; InputError names the line pip would also
    refuse."""
    pinned: list[RequirementLine] = []
    for number, line in _logical_lines(text):
        if line.startswith("-"):
            continue
        requirement, _, options = line.partition(" --")
        hashes = tuple(
            sorted(m.group(1) for m in re.finditer(r"--hash[= ]sha256:([0-9a-f]+)", line))
        )
        if options and not options.startswith("hash"):
            raise InputError(
                file=where,
                line=number,
                reason="only --hash options belong to a requirement",
                hint="re-lock",
            )
        try:
            parsed = Pep508(requirement.strip())
        except InvalidRequirement as exc:
            raise InputError(
                file=where,
                line=number,
                reason=f"not a requirement: {exc}",
                hint="re-run `envgen lock`",
            ) from exc
        version = next((s.version for s in parsed.specifier if s.operator == "=="), None)
        url = strip_credentials(parsed.url) if parsed.url else None
        pinned.append(RequirementLine(package_key(parsed.name), version, url, hashes))
    return tuple(sorted(pinned))


_PINNED = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)[ =@\\]")
_VIA = re.compile(r"^\s+# via (.+)$|^\s+#   (.+)$")
_MATRIX_KEY = re.compile(r"^\S+\.toml: pip\.packages\.\S+$")
_MATRIX_KEY_PART = ".toml: pip.packages."  # what every text _MATRIX_KEY matches holds


def matrix_keys(text: str) -> dict[str, tuple[str, ...]]:
    """Per canonical name, the matrix keys a requirements file's `# via` lines say pin it
    (`env-templates/a5.toml: pip.packages.torch`): what the file records of the matrix, which the
    lock itself does not. Lines of any other shape are not a pin's reason and are passed over."""
    found: dict[str, list[str]] = {}
    name = None
    for line in text.splitlines():
        pinned = _PINNED.match(line)
        if pinned:
            name = package_key(pinned.group(1))
            continue
        if _MATRIX_KEY_PART not in line:  # no matrix key: the other `# via` lines, the hashes
            continue
        via = _VIA.match(line)
        reason = via and (via.group(1) or via.group(2)).strip()
        if name and reason and _MATRIX_KEY.match(reason):
            found.setdefault(name, []).append(reason)
    return {key: tuple(keys) for key, keys in found.items()}


def expected_requirements(lock: Lock, platform: str) -> tuple[RequirementLine, ...]:
    """What a requirements file of `platform` must carry: the yml's artifacts and hashes, nothing
    else."""
    pinned = [
        RequirementLine(
            package_key(e.name),
            None if _is_direct(lock, e) else e.version,
            strip_credentials(e.url) if _is_direct(lock, e) else None,
            (e.sha256,),
        )
        for e in lock.pip_for(platform)
    ]
    return tuple(sorted(pinned))
