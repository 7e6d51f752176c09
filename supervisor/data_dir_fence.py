"""Project roots and projects never meet the data dir (DESIGN.md §17, issue 40
item 5).

The data dir holds every workspace's checkpoints (shadow repositories the
backend runs git on), the database and the tokens.  A directory an agent works
in that contains it lets the agent read and poison them (another workspace's
undo included); one inside it lets the agent plant configuration in its own
shadow repository.  So a project root, and a task's project, must neither hold
the data dir nor lie in it.

Compared by real path (symlinks and ``..`` resolved), then by identity, so the
same directories reached under another name (a bind mount, a second mount of
the file system) are caught as well: the (device, inode) of every directory on
the way up, and, for a bind mount of a directory below the data dir (whose way
up leads elsewhere), the place in its file system that each path is mounted
from (``/proc/self/mountinfo``).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

__all__ = ["DataDirFence", "Overlap"]

#: How a path meets the data dir: it is the data dir, holds it, or lies in it.
Overlap = Literal["is", "contains", "inside"]

_Identity = tuple[int, int]
#: Where a path lives: (the file system's major:minor, the path inside it).
_Source = tuple[str, str]
#: Mount points, longest first, and what each shows: (point, device, root).
_Mounts = tuple[tuple[str, str, str], ...]

_ESCAPE = re.compile(r"\\([0-7]{3})")


def _mounts() -> _Mounts:
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as f:
            lines = f.read().splitlines()
    except OSError:
        return ()

    def unescape(field: str) -> str:
        return _ESCAPE.sub(lambda m: chr(int(m.group(1), 8)), field)

    # A later mount on the same point hides the earlier one: keep the last.
    points: dict[str, tuple[str, str]] = {}
    for line in lines:
        fields = line.split(" ")
        if len(fields) >= 5:
            points[unescape(fields[4])] = (fields[2], unescape(fields[3]))
    return tuple((point, dev, root) for point, (dev, root)
                 in sorted(points.items(), key=lambda item: -len(item[0])))


def _source(real: str, mounts: _Mounts) -> _Source | None:
    for point, dev, root in mounts:
        path = Path(real)
        if path == Path(point) or path.is_relative_to(point):
            return dev, str(Path(root) / path.relative_to(point))
    return None


def _identity(path: str) -> _Identity | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def _chain(real: str) -> list[str]:
    """``real`` and each directory above it, up to ``/``."""
    out = [real]
    while True:
        parent = os.path.dirname(out[-1])
        if parent == out[-1]:
            return out
        out.append(parent)


@dataclass(frozen=True, slots=True)
class DataDirFence:
    """The data dir as it is now: its real path and identity, and the
    identities of the directories above it (computed once, checked many times)."""

    data_dir: str
    identity: _Identity | None
    above: frozenset[_Identity]
    mounts: _Mounts
    source: _Source | None

    @classmethod
    def of(cls, data_dir: str | os.PathLike[str]) -> DataDirFence:
        real = os.path.realpath(data_dir)
        above = {i for p in _chain(real)[1:] if (i := _identity(p)) is not None}
        mounts = _mounts()
        return cls(real, _identity(real), frozenset(above), mounts, _source(real, mounts))

    def meets(self, path: str | os.PathLike[str]) -> Overlap | None:
        """How ``path`` (symlinks followed) meets the data dir, or None."""
        real = os.path.realpath(path)
        data = Path(self.data_dir)
        here = Path(real)
        if here == data:
            return "is"
        if data.is_relative_to(here):
            return "contains"
        if here.is_relative_to(data):
            return "inside"
        own = _identity(real)
        if own is None:
            return None
        if own == self.identity:
            return "is"
        if own in self.above:
            return "contains"
        if self.identity is not None and any(
                _identity(p) == self.identity for p in _chain(real)[1:]):
            return "inside"
        source = _source(real, self.mounts)
        if source is None or self.source is None or source[0] != self.source[0]:
            return None
        there, data = Path(source[1]), Path(self.source[1])
        if there == data:
            return "is"
        if there.is_relative_to(data):
            return "inside"
        if data.is_relative_to(there):
            return "contains"
        return None

    def describe(self, overlap: Overlap) -> str:
        """The words for ``overlap`` (after the path's name)."""
        if overlap == "is":
            return f"is Turnvisor's data dir ({self.data_dir})"
        if overlap == "contains":
            return f"contains Turnvisor's data dir {self.data_dir}"
        return f"is inside Turnvisor's data dir {self.data_dir}"
