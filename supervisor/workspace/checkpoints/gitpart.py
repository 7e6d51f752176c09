"""The configuration part of the project's own ``.git``: read without following a link
(blocking; run it in a worker thread) and added to a checkpoint's trees.

Git skips every ``.git`` of a work tree, so the shadow repository never sees the
project's own: an agent's hook planted in ``.git/hooks`` (or ``core.hooksPath``,
``core.fsmonitor``, an alias or an ``includeIf`` in ``.git/config``) survived a revert
and ran at the person's next ``git commit``, as the person, outside every sandbox.
So each snapshot also reads what git *runs or reads as configuration* there and
stores it under the name ``.git`` in the checkpoint's tree (git refuses ``.git`` in
an index, not in a tree ``mktree`` writes): ``diff-tree`` then lists those files
among the turn's changes (``.git/hooks/pre-commit``), and a restore writes them back
or removes them like any other file (``files``: no link followed).  Git's own
objects, refs, ``HEAD``, index and logs are the person's history and are left out.

Taken, at the project's git dir and at each git dir below it (``worktrees/<name>``,
``modules/<path>``, any depth of submodule): the files ``config``,
``config.worktree``, ``commondir`` and ``gitdir``, the trees ``hooks``, ``info``,
``remotes`` and ``branches`` (legacy remote configuration), ``rebase-merge``,
``rebase-apply`` and ``sequencer`` (their todo lists hold ``exec`` lines that git
runs), and ``objects/info/alternates`` and ``http-alternates`` (where git reads
objects from).  A ``.git`` that is a file (a worktree's or submodule's pointer) or a
link is taken as that file or link.  A link anywhere is taken as a link, never
followed; where a directory is expected (``hooks``, ``modules``, ``objects``) a link
is taken as the link, so one planted there is removed by a revert.

A file whose content is not saved (over the size limit, over the whole part's
budget, unreadable, not a regular file) is still recorded by name (``data`` None):
its name goes into the presence tree, so a revert removes it if the turn made it and
overwrites it if it was there before: in ``.git`` the person's configuration wins
over content an agent made too large to save.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import stat
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from .model import CheckpointError, SkippedFile, parse_batch

__all__ = ["GIT_NAME", "GitPart", "PartFile", "graft", "in_git_part", "read_git_part",
           "worktree_pointer"]

GIT_NAME: Final = ".git"
_FILES: Final = frozenset({"config", "config.worktree", "commondir", "gitdir"})
_TREES: Final = frozenset({"hooks", "info", "remotes", "branches", "rebase-merge",
                           "rebase-apply", "sequencer"})
_ALTERNATES: Final = ("alternates", "http-alternates")
#: Nesting of git dirs (submodules of submodules, a module's name with slashes) and
#: of directories inside a taken tree: deeper is a unit (``unstorable``), removed
#: whole by a revert if it was not there.
_MAX_DEPTH: Final = 32
#: Content saved in all (the rest is recorded by name only).
_BUDGET: Final = 64 * 1024 * 1024
_DIR_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
_READ_FLAGS: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_EMPTY_BLOB: Final = "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"
_TREE_MODE: Final = "40000"


#: A linked worktree's pointers in its repository (``worktrees/<name>/commondir`` and
#: ``gitdir``): they belong to a work tree elsewhere, perhaps another session's,
#: made or removed while this one ran.
_WORKTREE_POINTER: Final = re.compile(r"\.git/(?:.+/)?worktrees/[^/]+/(?:commondir|gitdir)")


def worktree_pointer(path: str) -> bool:
    """Whether ``path`` is a linked worktree's pointer: a restore puts back one that
    was changed, and never creates or deletes one (that would cut another work
    tree off from its repository, or leave a dangling one)."""
    return _WORKTREE_POINTER.fullmatch(path) is not None


def in_git_part(path: str) -> bool:
    """Whether ``path`` (relative to the work tree) is the project's ``.git`` or in it."""
    return path == GIT_NAME or path.startswith(GIT_NAME + "/")


@dataclass(frozen=True, slots=True)
class PartFile:
    """One file of the part: its path from the work tree (``.git/hooks/pre-commit``),
    its git mode, and its bytes (a link's target), or None when they are not saved."""

    path: str
    mode: str
    data: bytes | None


@dataclass(slots=True)
class GitPart:
    #: False when the work tree has no ``.git`` at all.
    found: bool = False
    files: list[PartFile] = field(default_factory=list)
    #: Directories that could not be listed (``unreadable``) or go too deep
    #: (``unstorable``).
    skipped: list[SkippedFile] = field(default_factory=list)


class _Reader:
    def __init__(self, max_file: int, deadline: float) -> None:
        self.part = GitPart()
        self.max_file = max_file
        self.deadline = deadline
        self.budget = _BUDGET

    def _tick(self) -> None:
        if time.monotonic() > self.deadline:
            raise TimeoutError("the project's .git holds too much to read in time")

    def leaf(self, fd: int, name: str, path: str, st: os.stat_result) -> None:
        """Record one non-directory entry of ``fd``."""
        if stat.S_ISLNK(st.st_mode):
            self.part.files.append(PartFile(path, "120000", os.fsencode(
                os.readlink(name, dir_fd=fd))))
            return
        mode = "100755" if st.st_mode & stat.S_IXUSR else "100644"
        data: bytes | None = None
        if stat.S_ISREG(st.st_mode) and st.st_size <= min(self.max_file, self.budget):
            data = _read(fd, name, st.st_size)
            if data is not None:
                self.budget -= len(data)
        self.part.files.append(PartFile(path, mode, data))

    def take(self, fd: int, name: str, path: str, depth: int) -> None:
        """Record ``name`` of ``fd`` whole: a file, a link, or a directory and all it
        holds (iteratively; each directory reopened from ``fd`` one component at a
        time, so few descriptors are open however wide the tree; at most
        ``_MAX_DEPTH`` levels)."""
        try:
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            return
        if not stat.S_ISDIR(st.st_mode):
            self.leaf(fd, name, path, st)
            return
        stack = [[name]]
        while stack:
            self._tick()
            parts = stack.pop()
            rel = "/".join([path.rpartition("/")[0], *parts]).lstrip("/")
            if depth + len(parts) > _MAX_DEPTH:
                self.part.skipped.append(SkippedFile(path=rel, size=0, reason="unstorable"))
                continue
            sub = _open_dir(fd, parts)
            if sub is None:
                self.unreadable(rel)
                continue
            try:
                for entry in sorted(os.listdir(sub)):
                    est = os.stat(entry, dir_fd=sub, follow_symlinks=False)
                    if stat.S_ISDIR(est.st_mode):
                        stack.append([*parts, entry])
                    else:
                        self.leaf(sub, entry, f"{rel}/{entry}", est)
            except OSError:
                self.unreadable(rel)
            finally:
                os.close(sub)

    def unreadable(self, rel: str) -> None:
        self.part.skipped.append(SkippedFile(path=rel, size=0, reason="unreadable"))

    def git_dir(self, fd: int, path: str, depth: int) -> None:
        """The configuration of the git dir open as ``fd`` (named ``path``)."""
        self._tick()
        try:
            names = sorted(os.listdir(fd))
        except OSError:
            self.unreadable(path)
            return
        for name in names:
            rel = f"{path}/{name}"
            if name in _FILES or name in _TREES:
                self.take(fd, name, rel, depth + 1)
            elif name == "objects":
                self.inside(fd, name, rel, depth, functools.partial(self._alternates, rel=rel))
            elif name in ("worktrees", "modules"):
                self.inside(fd, name, rel, depth, functools.partial(
                    self._each_git_dir, rel=rel, depth=depth + 1, nested=name == "modules"))

    def inside(self, fd: int, name: str, rel: str, depth: int,
                then: Callable[[int], None]) -> None:
        """Run ``then`` on directory ``name`` of ``fd``; a link or file there (git
        would follow the link) is recorded as itself."""
        try:
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            return
        if not stat.S_ISDIR(st.st_mode):
            self.leaf(fd, name, rel, st)
            return
        if depth >= _MAX_DEPTH:
            self.part.skipped.append(SkippedFile(path=rel, size=0, reason="unstorable"))
            return
        try:
            sub = os.open(name, _DIR_FLAGS, dir_fd=fd)
        except OSError:
            self.unreadable(rel)
            return
        try:
            then(sub)
        finally:
            os.close(sub)

    def _alternates(self, objects: int, rel: str) -> None:
        def each(info: int) -> None:
            for name in _ALTERNATES:
                self.take(info, name, f"{rel}/info/{name}", 1)
        self.inside(objects, "info", f"{rel}/info", 0, each)

    def _each_git_dir(self, fd: int, rel: str, depth: int, *, nested: bool) -> None:
        """Each directory of ``fd`` is a git dir; under ``modules`` (``nested``), one
        without a ``HEAD`` is a level of a module's name (``a/b``) and is looked into."""
        try:
            names = sorted(os.listdir(fd))
        except OSError:
            self.unreadable(rel)
            return
        for name in names:
            def visit(sub: int, here: str = f"{rel}/{name}") -> None:
                if nested and not _has(sub, "HEAD"):
                    self._each_git_dir(sub, here, depth + 1, nested=True)
                else:
                    self.git_dir(sub, here, depth)
            self.inside(fd, name, f"{rel}/{name}", depth, visit)


def _has(fd: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=fd, follow_symlinks=False)
    except OSError:
        return False
    return True


def _open_dir(fd: int, parts: list[str]) -> int | None:
    """``parts`` below ``fd``, opened one component at a time (``O_NOFOLLOW``)."""
    current = os.dup(fd)
    try:
        for part in parts:
            child = os.open(part, _DIR_FLAGS, dir_fd=current)
            os.close(current)
            current = child
    except OSError:
        os.close(current)
        return None
    return current


def _read(fd: int, name: str, size: int) -> bytes | None:
    """The bytes of regular file ``name`` (None if it cannot be read, or is no longer
    a regular file of at most ``size`` bytes: a FIFO put there cannot hang us)."""
    try:
        rfd = os.open(name, _READ_FLAGS, dir_fd=fd)
    except OSError:
        return None
    try:
        st = os.fstat(rfd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > size:
            return None
        chunks: list[bytes] = []
        left = size + 1
        while left > 0 and (chunk := os.read(rfd, min(left, 1 << 20))):
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        return data if len(data) <= size else None
    except OSError:
        return None
    finally:
        os.close(rfd)


def read_git_part(work_tree: str, *, max_file: int, deadline: float) -> GitPart:
    """The configuration part of ``work_tree``'s own ``.git`` (see the module's text).
    ``TimeoutError`` past ``deadline`` (``time.monotonic()``)."""
    reader = _Reader(max_file, deadline)
    root = os.open(work_tree, _DIR_FLAGS)
    try:
        try:
            st = os.stat(GIT_NAME, dir_fd=root, follow_symlinks=False)
        except FileNotFoundError:
            return reader.part
        reader.part.found = True
        if stat.S_ISDIR(st.st_mode):
            reader.inside(root, GIT_NAME, GIT_NAME, 0,
                           lambda fd: reader.git_dir(fd, GIT_NAME, 0))
        else:
            reader.leaf(root, GIT_NAME, GIT_NAME, st)
    finally:
        os.close(root)
    reader.part.files.sort(key=lambda f: f.path)
    return reader.part


# -- into the checkpoint's trees ------------------------------------------------------

#: ``git(args, stdin)``: a git command on the shadow repository, its output.
GitCall = Callable[[list[str], bytes], Awaitable[bytes]]
#: One tree entry: (mode as git writes it in a tree, name, object id).
_Entry = tuple[str, bytes, str]


def _object_id(kind: str, body: bytes) -> str:
    return hashlib.sha1(f"{kind} {len(body)}\0".encode() + body).hexdigest()


def _sort_key(entry: _Entry) -> bytes:
    # Git's tree order: a directory's name compares as if it ended with "/".
    return entry[1] + b"/" if entry[0] == _TREE_MODE else entry[1]


def _tree_body(entries: list[_Entry]) -> bytes:
    return b"".join(f"{mode} ".encode() + name + b"\0" + bytes.fromhex(oid)
                    for mode, name, oid in sorted(entries, key=_sort_key))


def _mktree_input(entries: list[_Entry]) -> bytes:
    kinds = {_TREE_MODE: "tree", "160000": "commit"}
    return b"".join(f"{mode} {kinds.get(mode, 'blob')} {oid}\t".encode() + name + b"\0"
                    for mode, name, oid in sorted(entries, key=_sort_key)) + b"\0"


def _parse_tree(body: bytes) -> list[_Entry]:
    """A tree object's entries (``mode SP name NUL id``)."""
    out: list[_Entry] = []
    i = 0
    while i < len(body):
        space = body.index(b" ", i)
        nul = body.index(b"\0", space)
        out.append((body[i:space].decode(), body[space + 1:nul], body[nul + 1:nul + 21].hex()))
        i = nul + 21
    return out


class _Trees:
    """Trees to write, children first, each with the id git will give it."""

    def __init__(self) -> None:
        self.pending: list[tuple[str, list[_Entry]]] = []

    def add(self, entries: list[_Entry]) -> str:
        oid = _object_id("tree", _tree_body(entries))
        self.pending.append((oid, entries))
        return oid

    def build(self, files: dict[str, tuple[str, str]]) -> _Entry | None:
        """The ``.git`` entry of a root holding ``files`` (path → (mode, blob)), its
        subtrees added; None if there are none."""
        if not files:
            return None
        if GIT_NAME in files:
            mode, oid = files[GIT_NAME]
            return mode, _name(GIT_NAME), oid
        dirs: dict[str, list[_Entry]] = {GIT_NAME: []}
        for path, (mode, oid) in files.items():
            parent, _, name = path.rpartition("/")
            dirs.setdefault(parent, []).append((mode, _name(name), oid))
            while parent != GIT_NAME:
                parent = parent.rpartition("/")[0]
                dirs.setdefault(parent, [])
        # Deepest first: a directory's tree needs its subdirectories' ids.
        for directory in sorted(dirs, key=lambda d: d.count("/"), reverse=True):
            if directory != GIT_NAME:
                up, _, name = directory.rpartition("/")
                dirs[up].append((_TREE_MODE, _name(name), self.add(dirs[directory])))
        return _TREE_MODE, _name(GIT_NAME), self.add(dirs[GIT_NAME])


def _name(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


async def graft(git: GitCall, git_dir: Path, tree: str, present: str,
                part: GitPart) -> tuple[str, str]:
    """``tree`` and ``present`` with the part added under ``.git`` (its saved files in
    ``tree``, every name in ``present``): the new ids."""
    if not part.files:
        return tree, present
    saved = [f for f in part.files if f.data is not None]
    blobs = {f.path: _object_id("blob", f.data) for f in saved if f.data is not None}
    await _write_blobs(git, git_dir, saved, blobs)
    trees = _Trees()
    content = trees.build({f.path: (f.mode, blobs[f.path]) for f in saved})
    names = trees.build({f.path: ("100644", _EMPTY_BLOB) for f in part.files})
    roots = parse_batch(await git(["cat-file", "--batch"], f"{tree}\n{present}\n".encode()))
    out = []
    for root, entry in ((tree, content), (present, names)):
        entries = [e for e in _parse_tree(roots[root]) if e[1] != _name(GIT_NAME)]
        out.append(trees.add([*entries, entry]) if entry is not None else root)
    written = (await git(["mktree", "--batch", "-z", "--missing"],
                         b"".join(_mktree_input(e) for _, e in trees.pending))).split()
    if [w.decode() for w in written] != [oid for oid, _ in trees.pending]:
        raise CheckpointError("the trees of the project's .git were not stored as computed")
    return out[0], out[1]


async def _write_blobs(git: GitCall, git_dir: Path, saved: list[PartFile],
                       blobs: dict[str, str]) -> None:
    """Store the blobs the repository lacks (loose objects: ours are never packed):
    written to files of our own, then one ``hash-object -w``."""
    objects = git_dir / "objects"
    missing = {blobs[f.path]: f.data for f in saved
               if f.data is not None
               and not (objects / blobs[f.path][:2] / blobs[f.path][2:]).exists()}
    if not missing:
        return
    tmp = git_dir / "git-part-tmp"
    tmp.mkdir(exist_ok=True)
    try:
        paths = []
        for oid, data in missing.items():
            path = tmp / oid
            path.write_bytes(data or b"")
            paths.append(str(path))
        ids = (await git(["hash-object", "-w", "--no-filters", "--stdin-paths"],
                         "".join(p + "\n" for p in paths).encode())).split()
    finally:
        for path in tmp.iterdir():
            path.unlink()
    if sorted(i.decode() for i in ids) != sorted(missing):
        raise CheckpointError("the files of the project's .git were not stored as computed")
