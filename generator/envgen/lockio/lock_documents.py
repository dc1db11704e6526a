"""The parsed documents of a lock's yml and sources.toml, kept in envgen's cache by the sha256 of
each file's text.

libyaml parses a real-sized yml (237 pip packages on each of two platforms, about 220 kB) in about
50 ms of CPU, which is most of what `show`, `why`, `tree`, `export`, `lock --check` and a re-lock's
read of its previous lock cost beyond starting Python (`diff` reads two); msgspec's JSON decoder
reads the same document back in about 2 ms. tomllib parses the sources.toml beside it (about 9 kB)
in about 1.2 ms; its document is read back in about 0.06 ms.

Only the parse is kept, never a verdict: what is read back is the plain data the parser gave, and
the file's schema validates it on every read as it would a fresh parse. An entry is written only for
a document the schema accepted, so it holds nothing JSON cannot say exactly (mappings with string
keys, lists, strings, integers, booleans, null: neither schema has a float or a date): read back, it
is the very data the parser gives. A text that does not parse or validate is parsed, and refused,
every time. An entry that cannot be read or decoded is ignored (the file is parsed, and the entry
written again); where the cache cannot be written, nothing is kept.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path
from typing import Any, Literal

import msgspec

from envgen import atomic
from envgen.errors import InputError
from envgen.inputs.files import read_input_text
from envgen.project import cache_dir

log = logging.getLogger(__name__)

# The cache's folder of documents (project.CACHE_ENTRIES names it for `envgen cache clean`).
ENTRY = "lock-documents"

# Which file a text is, and the folder of its documents: the same text parsed as YAML and as TOML
# gives two documents.
Kind = Literal["yml", "sources"]


def _entry(kind: Kind, text: str) -> Path:
    digest = hashlib.sha256(text.encode()).hexdigest()
    return cache_dir() / ENTRY / kind / digest[:2] / f"{digest}.json"


def cached_document(kind: Kind, text: str) -> dict[str, Any] | None:
    """The document of the `kind` file `text` as kept when a read of the same text validated it;
    None when none is kept or the entry does not read as one."""
    path = _entry(kind, text)
    if not path.is_file():
        return None
    try:
        document = msgspec.json.decode(read_input_text(path, hint=""))
    except (InputError, msgspec.DecodeError) as exc:
        log.debug("%s: not used (%s)", path, exc)
        return None
    return document if isinstance(document, dict) else None


def keep_document(kind: Kind, text: str, document: dict[str, Any]) -> None:
    """Keep the `document` of the `kind` file `text`, which its schema accepted (in place of an
    entry that did not read)."""
    path = _entry(kind, text)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic.write_file(path, msgspec.json.encode(document))
    except OSError as exc:
        log.debug("%s: not kept (%s)", path, exc)
