"""How many transactions reached a SQLite database's file: its write-ahead log
read as SQLite's file format defines it (https://sqlite.org/fileformat2.html,
"The WAL File Format"), not a counter of the product's.

Every transaction that commits appends its pages to the ``-wal`` file as
frames; its last frame is a *commit frame* (a non-zero "database size after
commit" in the frame's header).  The frames of the log's current generation
carry the header's salts and a checksum that chains from the header through
every frame, so stale frames of an earlier generation (left behind a
checkpoint's reset) are not counted.

``WalCommits(path)`` marks where the log is; ``since()`` is how many
transactions committed after the mark.  A checkpoint that reset the log in
between makes the count impossible: ``since()`` then fails the test (the
store's own checkpoints run only every so many commits, or by hand).
"""

from __future__ import annotations

import struct
from pathlib import Path

__all__ = ["WalCommits", "wal_commits"]

_MAGIC_LE, _MAGIC_BE = 0x377F0682, 0x377F0683
_HEADER, _FRAME_HEADER = 32, 24
_MASK = 0xFFFFFFFF


def _checksum(data: bytes, big_endian: bool, s0: int, s1: int) -> tuple[int, int]:
    words = struct.unpack(f"{'>' if big_endian else '<'}{len(data) // 4}I", data)
    for i in range(0, len(words), 2):
        s0 = (s0 + words[i] + s1) & _MASK
        s1 = (s1 + words[i + 1] + s0) & _MASK
    return s0, s1


def wal_commits(db_path: Path) -> tuple[tuple[int, int], int]:
    """The log's generation (its salts) and the commit frames in it."""
    wal = Path(f"{db_path}-wal")
    data = wal.read_bytes() if wal.exists() else b""
    if len(data) < _HEADER:
        return (0, 0), 0
    magic, _version, page_size, _seq, salt1, salt2, c0, c1 = struct.unpack(">8I", data[:_HEADER])
    if magic not in (_MAGIC_LE, _MAGIC_BE):
        raise ValueError(f"{wal} is not a SQLite write-ahead log (magic {magic:#x})")
    big_endian = magic == _MAGIC_BE
    if _checksum(data[:24], big_endian, 0, 0) != (c0, c1):
        return (0, 0), 0  # a header being rewritten: an empty log
    s0, s1 = c0, c1
    commits = 0
    offset = _HEADER
    while offset + _FRAME_HEADER + page_size <= len(data):
        _page, after_commit, f_salt1, f_salt2, f0, f1 = struct.unpack(
            ">6I", data[offset:offset + _FRAME_HEADER])
        if (f_salt1, f_salt2) != (salt1, salt2):
            break  # an earlier generation's frame: the log ends here
        s0, s1 = _checksum(data[offset:offset + 8], big_endian, s0, s1)
        page = data[offset + _FRAME_HEADER:offset + _FRAME_HEADER + page_size]
        s0, s1 = _checksum(page, big_endian, s0, s1)
        if (s0, s1) != (f0, f1):
            break
        commits += after_commit != 0
        offset += _FRAME_HEADER + page_size
    return (salt1, salt2), commits


class WalCommits:
    """The transactions committed to ``db_path`` from now on."""

    def __init__(self, db_path: Path) -> None:
        self.path = db_path
        self._generation, self._start = wal_commits(db_path)

    def since(self) -> int:
        generation, commits = wal_commits(self.path)
        assert generation == self._generation or self._start == 0, (
            f"{self.path}'s log was reset by a checkpoint since the mark: no count")
        return commits - (self._start if generation == self._generation else 0)
