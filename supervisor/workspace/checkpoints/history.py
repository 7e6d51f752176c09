"""A session's history in its shadow repository (DESIGN.md §12, §15): what the
session's own turns changed, and what changed between them, which is not the
session's (a hand edit, another session working in the same directory).

The caller names the stretches: each own entry's ``(before, after)`` commits, and each
gap from one entry's end to the next one's start.  Only git objects are read and
written here (no work tree, no shadow index), so no repository lock is needed.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

from .gitpart import in_git_part
from .model import GITLINK_MODE, Checkpoint, parse_tree_diff
from .shadow import ShadowRepo

__all__ = ["OwnChanges", "changed_between", "changes_something", "own_changes"]

_NULL: Final = "0" * 40


class _Loads:
    """Checkpoints by commit, each read once per question."""

    def __init__(self, repo: ShadowRepo) -> None:
        self.repo = repo
        self._known: dict[str, Checkpoint] = {}

    async def __call__(self, commit: str) -> Checkpoint:
        if commit not in self._known:
            self._known[commit] = await self.repo.load(commit)
        return self._known[commit]


async def changed_between(repo: ShadowRepo, gaps: Iterable[tuple[str, str]]) -> set[str]:
    """Every path that differs across any of ``gaps`` (``(old, new)`` commits): its
    content, its existence (ignored files too, by the presence trees), either side of
    a rename."""
    load = _Loads(repo)
    found: set[str] = set()
    for old_id, new_id in gaps:
        old, new = await load(old_id), await load(new_id)
        if old.tree == new.tree and old.present == new.present:
            continue
        for change in await repo.changes(old, new):
            found.add(change.path)
            if change.old_path is not None:
                found.add(change.old_path)
    return found


async def changes_something(repo: ShadowRepo, before: str, after: str | None) -> bool:
    """Whether a span changed any file (one with no end yet: it may have)."""
    if after is None:
        return True
    old, new = await repo.load(before), await repo.load(after)
    return old.tree != new.tree or old.present != new.present


@dataclass(frozen=True, slots=True)
class OwnChanges:
    files: list[dict[str, Any]]
    diff: str


async def own_changes(repo: ShadowRepo, spans: Iterable[tuple[str, str]],
                      outside: set[str]) -> OwnChanges:
    """The sum of ``spans`` (the session's own entries, in order): each file from its
    state before the first span that changed it to its state after the last one, a
    file that ends as it began left out; ``outside`` marks files also changed
    between them."""
    first: dict[str, tuple[str, str]] = {}  # path -> (mode, blob) before (null: absent)
    last: dict[str, tuple[str, str]] = {}
    for old, new in spans:
        if old == new:
            continue
        out = await repo._git("diff-tree", "-r", "-z", "--raw", "--no-renames", old, new)
        for e in parse_tree_diff(out)[0]:
            if GITLINK_MODE in (e.src_mode, e.dst_mode):
                continue
            first.setdefault(e.path, (e.src_mode, e.src_blob))
            last[e.path] = (e.dst_mode, e.dst_blob)
    net = {p: (first[p], last[p]) for p in last if first[p] != last[p]}
    # Two trees of only those files, so one diff says what the session changed.
    # (git refuses ``.git`` in an index: such files are listed, their diff not shown.)
    plain = {p: v for p, v in net.items() if not in_git_part(p)}
    before = await _tree(repo, {p: b for p, (b, _) in plain.items()})
    after = await _tree(repo, {p: a for p, (_, a) in plain.items()})
    files: list[dict[str, Any]] = []
    diff = ""
    if before != after:
        old_cp = Checkpoint(commit=before, tree=before, label="", git_part=True)
        new_cp = Checkpoint(commit=after, tree=after, label="", git_part=True)
        files = [c.to_json() for c in await repo.changes(old_cp, new_cp)]
        diff = await repo.diff(old_cp, new_cp)
    for path, (b, a) in sorted(net.items()):
        if path not in plain:
            status = ("added" if b[1] == _NULL else "deleted" if a[1] == _NULL
                      else "modified")
            files.append({"path": path, "status": status, "additions": 0, "deletions": 0})
    for f in files:
        if f["path"] in outside or f.get("old_path") in outside:
            f["outside"] = True
    return OwnChanges(files=sorted(files, key=lambda f: str(f["path"])), diff=diff)


async def _tree(repo: ShadowRepo, entries: dict[str, tuple[str, str]]) -> str:
    """The tree holding ``entries`` (path -> (mode, blob); null blobs left out)."""
    rows = [f"{mode} {blob}\t{path}".encode("utf-8", "surrogateescape") + b"\0"
            for path, (mode, blob) in sorted(entries.items()) if blob != _NULL]
    index = repo.git_dir / f"history-index-{secrets.token_hex(6)}"
    index.unlink(missing_ok=True)
    if rows:  # (no index file at all: the empty tree)
        await repo._git("update-index", "-z", "--index-info", stdin=b"".join(rows),
                        index=index)
    try:
        return (await repo._git("write-tree", index=index)).decode().strip()
    finally:
        index.unlink(missing_ok=True)
