"""The ignore rules a shadow repository adds to the cwd's own ``.gitignore`` files: those
of the user's repository that contains the cwd (blocking; run it in a worker thread).

Git reads the ``.gitignore`` files inside its work tree (the cwd) by itself.  When the cwd
is inside a user's repository, that repository also ignores by its ``info/exclude`` and by
the ``.gitignore`` files of the directories above the cwd; those rules are rewritten here
relative to the cwd.  A pattern without a slash applies at any depth and is kept as it
is; an anchored one is kept if its leading components match the cwd's path below the
file's directory, with that part removed; one that would ignore the cwd itself or
everything in it (a home directory's dotfiles repository ignoring ``*``), or that cannot be
rewritten (``**`` inside the prefix), is left out.  Files are read as data
(regular files only, opened non-blocking: a FIFO planted in their place cannot hang us).
"""

from __future__ import annotations

import fnmatch
import os
import stat
from pathlib import Path
from typing import Final

__all__ = ["repository_excludes", "translate"]

#: An ignore file larger than this is not read.
MAX_IGNORE_BYTES: Final = 1024 * 1024
#: Patterns that ignore everything (what a repository of dotfiles in a home directory
#: says): applied to a cwd below, they would leave checkpoints empty.
_EVERYTHING: Final = frozenset({"*", "**", "/*", "/**"})
#: How far up a repository is looked for.
MAX_DEPTH: Final = 64


def _read_small(path: Path) -> str:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return ""
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_IGNORE_BYTES:
            return ""
        return os.read(fd, MAX_IGNORE_BYTES).decode("utf-8", "surrogateescape")
    except OSError:
        return ""
    finally:
        os.close(fd)


def translate(line: str, prefix: tuple[str, ...]) -> str | None:
    """``line`` of an ignore file whose directory is ``prefix`` above the cwd, as a
    pattern relative to the cwd; None if it does not apply there (or is no pattern)."""
    line = line.rstrip("\n").rstrip("\r")
    if not line.strip() or line.startswith("#"):
        return None
    negated = line.startswith("!")
    body = line[1:] if negated else line
    dir_only = body.endswith("/")
    core = body[:-1] if dir_only else body
    if not negated and core.strip() in _EVERYTHING:
        return None  # a dotfiles repository's "ignore all": it would ignore the cwd
    if not prefix or "/" not in core or core.startswith("**/"):
        return line
    parts = core.lstrip("/").split("/")
    if len(parts) <= len(prefix):
        return None  # it names the cwd or a directory above it
    for pattern, name in zip(parts, prefix, strict=False):
        if pattern == "**" or not fnmatch.fnmatchcase(name, pattern):
            return None
    rest = "/".join(parts[len(prefix):])
    return f"{'!' if negated else ''}/{rest}{'/' if dir_only else ''}"


def _git_dir(top: Path) -> Path | None:
    dot_git = top / ".git"
    try:
        st = os.lstat(dot_git)
    except OSError:
        return None
    if stat.S_ISDIR(st.st_mode):
        return dot_git
    text = _read_small(dot_git).strip()
    if not text.startswith("gitdir:"):
        return None
    git_dir = top / text.removeprefix("gitdir:").strip()
    common = _read_small(git_dir / "commondir").strip()
    return git_dir / common if common else git_dir


def repository_excludes(work_tree: Path) -> str:
    """The patterns of the repository containing ``work_tree`` (itself included) that
    git would not read from the work tree; '' if there is no such repository."""
    cwd = work_tree.resolve()
    top = cwd
    for _ in range(MAX_DEPTH):
        if os.path.lexists(top / ".git"):
            break
        if top.parent == top:
            return ""
        top = top.parent
    else:
        return ""
    git_dir = _git_dir(top)
    below = cwd.relative_to(top).parts
    sources: list[tuple[str, tuple[str, ...]]] = []
    if git_dir is not None:
        sources.append((_read_small(git_dir / "info" / "exclude"), below))
    for depth in range(len(below)):
        directory = top.joinpath(*below[:depth])
        sources.append((_read_small(directory / ".gitignore"), below[depth:]))
    out: list[str] = []
    for text, prefix in sources:
        out += [p for line in text.splitlines() if (p := translate(line, prefix)) is not None]
    return "\n".join(out)
