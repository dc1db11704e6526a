"""The [watch] section of a matrix: the upstream pages it encodes, its sources' release refs."""

from __future__ import annotations

from typing import Any

from envgen.commits import is_full_commit
from envgen.inputs.matrix_sections import SectionReader
from envgen.inputs.toml_reader import (
    KeyPath,
    as_table,
    check_keys,
    did_you_mean,
    get_str,
    get_str_list,
    get_table,
    type_name,
)
from envgen.inputs.untrusted import (
    commit_problem,
    git_url_problem,
    ref_pattern_problem,
    ref_problem,
    submodule_path_problem,
)
from envgen.model import Page, Source, Watch

_PAGE_KEYS = ("url", "ref", "path", "blob", "commit")


class WatchSectionReader(SectionReader):
    """[watch]: `pages` (an array of tables) and `releases` (source name -> ref patterns)."""

    def watch(self, data: dict[str, Any], sources: tuple[Source, ...]) -> Watch:
        path: KeyPath = ("watch",)
        table = self.section(data, path, ("pages", "releases"))
        if table is None:
            return Watch()
        return Watch(pages=self.pages(table), releases=self.releases(table, sources))

    def pages(self, table: dict[str, Any]) -> tuple[Page, ...]:
        value = table.get("pages", [])
        if not isinstance(value, list):
            wanted = "an array of tables ([[watch.pages]])"
            self.p.add(("watch", "pages"), f"expected {wanted}, got {type_name(value)}")
            return ()
        pages: list[Page] = []
        for position, item in enumerate(value):
            page = self.page(("watch", "pages", position), item)
            if page is None:
                continue
            if any((p.url, p.ref, p.path) == (page.url, page.ref, page.path) for p in pages):
                twice = f"page {page.path} at {page.ref} is listed twice"
                self.p.add(("watch", "pages", position), twice)
                continue
            pages.append(page)
        return tuple(pages)

    def page(self, path: KeyPath, item: object) -> Page | None:
        """One page record; every value checked as one that cannot reach git as an option."""
        record = as_table(self.p, path, item)
        if record is None:
            return None
        before = len(self.p.items)
        check_keys(self.p, path, record, _PAGE_KEYS, _PAGE_KEYS)
        values = {key: get_str(self.p, record, (*path, key)) for key in _PAGE_KEYS}
        checks = {
            "url": git_url_problem,
            "ref": _moving_ref_problem,
            "path": _path_problem,
            "blob": _blob_problem,
            "commit": commit_problem,
        }
        for key, check in checks.items():
            value = values[key]
            if value is not None and (problem := check(value)):
                self.p.add((*path, key), problem)
        found = {key: value for key, value in values.items() if value is not None}
        if len(self.p.items) > before or len(found) < len(_PAGE_KEYS):
            return None
        commits = {key: found[key].lower() for key in ("blob", "commit")}
        return Page(url=found["url"], ref=found["ref"], path=found["path"], **commits)

    def releases(
        self,
        table: dict[str, Any],
        sources: tuple[Source, ...],
    ) -> tuple[tuple[str, tuple[str, ...]], ...]:
        """Per source the patterns of its release refs: sources of the matrix, each pattern once."""
        names = [s.name for s in sources]
        out: list[tuple[str, tuple[str, ...]]] = []
        for name in get_table(self.p, table, ("watch", "releases")):
            path: KeyPath = ("watch", "releases", name)
            if name not in names:
                known = f"{did_you_mean(name, names)}; sources: {', '.join(names) or 'none'}"
                self.p.add(path, f"unknown source '{name}'{known}")
                continue
            written = table["releases"]
            patterns = get_str_list(self.p, written, path)
            if isinstance(written[name], list) and not written[name]:
                self.p.add(path, 'name a pattern ("releases/v*"), or leave the source out')
            good = []
            for key, pattern in patterns:
                if problem := ref_pattern_problem(pattern):
                    self.p.add(key, problem)
                else:
                    good.append(pattern)
            if good:
                out.append((name, tuple(dict.fromkeys(good))))
        return tuple(sorted(out))


def _path_problem(path: str) -> str | None:
    if path.startswith("-"):
        return f"{path!r} starts with '-'; give the page's path from the repository root"
    return submodule_path_problem(path)


def _blob_problem(blob: str) -> str | None:
    if is_full_commit(blob):
        return None
    return f"{blob!r} is not a full 40-hex blob id (git rev-parse <commit>:<path>)"


def _moving_ref_problem(ref: str) -> str | None:
    """A page is watched on a branch or tag: a commit never moves."""
    if is_full_commit(ref):
        return f"'{ref}' is a commit, which never moves: watch the page on a branch or tag (main)"
    return ref_problem(ref)
