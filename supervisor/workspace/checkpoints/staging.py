"""What a snapshot stages: the paths ``git status`` lists as changed since the shadow
index, and what it leaves out (pure but for ``lstat``; run it in a worker thread)."""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .model import SkippedFile

__all__ = ["Changed", "changed_files"]


@dataclass(frozen=True, slots=True)
class Changed:
    #: Paths to stage (changed or added since the shadow index), large ones out.
    paths: list[str]
    skipped: tuple[SkippedFile, ...]
    #: Paths that leave the shadow index: deleted (or now behind a symlink, where git
    #: sees them deleted too), and tracked files grown too large.
    removals: list[str]


def changed_files(work_tree: Path, status: bytes, limit: int,
                   units: Sequence[str] = ()) -> Changed:
    """From ``status --porcelain=v2 -z --no-renames``: what to stage, and what is left
    out (listed by every snapshot): files over ``limit`` bytes, nested repositories.
    Paths in (or equal to) ``units`` are never staged (git would refuse them)."""
    unit_set = set(units)
    paths: list[str] = []
    skipped: dict[str, SkippedFile] = {}
    removals: list[str] = []
    root = os.fspath(work_tree)
    real_dirs: dict[str, bool] = {"": True}
    for record in status.split(b"\0"):
        kind = record[:2]
        if kind == b"? ":
            path, tracked_now = record[2:].decode("utf-8", "surrogateescape"), False
            if path.endswith("/"):
                # With -uall only a nested repository is listed as a directory: its
                # files are its own repository's business (and staging one with no
                # commit fails), so it is left out and listed.
                skipped[path[:-1]] = SkippedFile(path=path[:-1], size=0, reason="repository")
                continue
        elif kind == b"1 ":
            # "1 XY sub mH mI mW hH hI path": the path is the 9th field (it may hold spaces).
            fields = record.split(b" ", 8)
            if len(fields) < 9 or fields[1][1:2] == b".":
                continue  # the work tree matches the shadow index
            path, tracked_now = fields[8].decode("utf-8", "surrogateescape"), True
        else:
            continue
        if unit_set and _under_unit(path, unit_set):
            if tracked_now:
                removals.append(path)
            continue
        if not _in_real_dirs(root, path.rpartition("/")[0], real_dirs):
            removals.append(path)
            continue
        try:
            st = os.lstat(os.path.join(root, path))
        except OSError:
            removals.append(path)
            continue
        if stat.S_ISREG(st.st_mode) and (
                st.st_size > limit or not os.access(os.path.join(root, path), os.R_OK)):
            # One unreadable file must not fail the whole snapshot (git add would).
            skipped[path] = SkippedFile(path=path, size=st.st_size,
                                        reason="too_large" if st.st_size > limit
                                        else "unreadable")
            if tracked_now:
                removals.append(path)
        else:
            paths.append(path)
    return Changed(paths, tuple(skipped[p] for p in sorted(skipped)), removals)


def _under_unit(path: str, units: set[str]) -> bool:
    head = path
    while head:
        if head in units:
            return True
        head = head.rpartition("/")[0]
    return False


def _in_real_dirs(root: str, directory: str, known: dict[str, bool]) -> bool:
    """Whether ``directory`` (relative) and each directory above it are real
    directories, no symlink among them (memoized in ``known``).  Iterative: a tree
    thousands of levels deep must not exhaust the interpreter's recursion limit."""
    pending: list[str] = []
    head = directory
    while head not in known:
        pending.append(head)
        head = head.rpartition("/")[0]
    ok = known[head]
    for name in reversed(pending):
        if ok:
            try:
                ok = stat.S_ISDIR(os.lstat(os.path.join(root, name)).st_mode)
            except OSError:
                ok = False
        known[name] = ok
    return known[directory]
