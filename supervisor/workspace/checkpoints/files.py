"""Writing a checkpoint's files back into a directory an agent can write (blocking; run it
in a worker thread).

Every path is walked from a descriptor of the root, one component at a time, with
``O_NOFOLLOW``: a symlink (or a file) where a directory should be is never followed, so
nothing outside the root is written or deleted, even if the agent swaps a directory for a
symlink while the restore runs.  Each file is written to a temporary name beside it and
renamed over the old one, so a reader (or a crash) sees the old or the new content, never
half of it.  Git does not write here: no attribute, filter or hook of the work tree runs.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Final

__all__ = ["Blocked", "FileWrite", "delete_files", "remove_trees", "write_files"]

_DIR_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
SYMLINK_MODE: Final = "120000"
EXECUTABLE_MODE: Final = "100755"


class Blocked(Exception):
    """A path could not be reached without following a symlink or replacing
    something unsaved; the message says what is in the way."""


@dataclass(frozen=True, slots=True)
class FileWrite:
    """One file to put back: its git mode (``100644``, ``100755``, ``120000``), its bytes,
    and whether it must not exist now (it was not in the safety checkpoint: whatever is
    there could not be saved, so it is kept)."""

    path: str
    mode: str
    data: bytes
    must_be_absent: bool = False


def _parent(root_fd: int, path: str, *, create: bool) -> tuple[int, str] | None:
    """A descriptor of ``path``'s directory (the caller closes it) and its last
    component; None if a directory is missing and ``create`` is false."""
    parts = path.split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise Blocked(f"{path}: not a plain relative path")
    fd = os.dup(root_fd)
    try:
        for n, part in enumerate(parts[:-1]):
            try:
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    os.close(fd)
                    return None
                try:
                    os.mkdir(part, 0o777, dir_fd=fd)
                except FileExistsError:
                    pass  # made meanwhile: opened (and checked) below like any other
                try:
                    child = os.open(part, _DIR_FLAGS, dir_fd=fd)
                except OSError as exc:
                    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                        raise Blocked(f"{'/'.join(parts[: n + 1])} is not a directory") from None
                    raise
            except OSError as exc:
                where = "/".join(parts[: n + 1])
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise Blocked(f"{where} is not a directory (a symlink or a file)") from None
                if exc.errno == errno.EACCES:
                    # (An agent's chmod 000 of a directory: that path is not
                    # restored, and the answer says so; the others are.)
                    raise Blocked(f"{where} cannot be opened: permission denied") from None
                raise
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd, parts[-1]


def delete_files(root: Path, paths: list[str]) -> tuple[list[str], list[tuple[str, str]]]:
    """Remove ``paths`` (files or symlinks, never what a symlink points at), then the
    directories that left empty.  Returns (deleted, kept with reasons)."""
    deleted: list[str] = []
    kept: list[tuple[str, str]] = []
    emptied: set[str] = set()
    root_fd = os.open(root, _DIR_FLAGS)
    try:
        for path in paths:
            try:
                found = _parent(root_fd, path, create=False)
            except Blocked as exc:
                kept.append((path, str(exc)))
                continue
            if found is None:
                continue
            fd, name = found
            try:
                os.unlink(name, dir_fd=fd)
                deleted.append(path)
            except FileNotFoundError:
                pass
            except IsADirectoryError:
                kept.append((path, "a directory is there now"))
            except OSError as exc:
                if exc.errno != errno.EPERM:
                    raise
                kept.append((path, "a directory is there now"))
            finally:
                os.close(fd)
            head = path.rpartition("/")[0]
            while head:
                emptied.add(head)
                head = head.rpartition("/")[0]
        _remove_emptied(root_fd, emptied)
    finally:
        os.close(root_fd)
    return deleted, kept


def _remove_emptied(root_fd: int, emptied: set[str]) -> None:
    """Remove those of ``emptied`` (relative directories) that are empty, deepest first."""
    for directory in sorted(emptied, key=lambda d: d.count("/"), reverse=True):
        try:
            found = _parent(root_fd, directory, create=False)
        except Blocked:
            continue
        if found is None:
            continue
        fd, name = found
        try:
            os.rmdir(name, dir_fd=fd)
        except OSError:
            pass  # not empty (or already gone): it stays
        finally:
            os.close(fd)


#: Entries one ``remove_trees`` call handles at most (a bound on a hostile tree).
_REMOVE_MAX: Final = 1_000_000


def remove_trees(root: Path, paths: list[str]) -> tuple[list[str], list[tuple[str, str]]]:
    """Remove each of ``paths`` whole (a file, or a directory and all it holds, at any
    depth).  Returns (removed, kept with reasons)."""
    removed: list[str] = []
    kept: list[tuple[str, str]] = []
    budget = [_REMOVE_MAX]
    root_fd = os.open(root, _DIR_FLAGS)
    try:
        for path in paths:
            try:
                found = _parent(root_fd, path, create=False)
            except Blocked as exc:
                kept.append((path, str(exc)))
                continue
            if found is None:
                continue
            fd, name = found
            try:
                if _remove_entry(fd, name, budget):
                    removed.append(path)
                else:
                    kept.append((path, "too many entries to remove"))
            except OSError as exc:
                kept.append((path, f"cannot remove it: {exc.strerror or exc}"))
            finally:
                os.close(fd)
        emptied: set[str] = set()
        for path in removed:
            head = path.rpartition("/")[0]
            while head and head not in emptied:
                emptied.add(head)
                head = head.rpartition("/")[0]
        _remove_emptied(root_fd, emptied)
    finally:
        os.close(root_fd)
    return removed, kept


def _remove_entry(fd: int, name: str, budget: list[int]) -> bool:
    """Remove ``name`` of ``fd`` whole; False if the budget ran out.  A subdirectory's
    entries are moved up into the directory being emptied (renames inside one
    directory tree), so however deep the tree goes, two descriptors are open and
    nothing recurses."""
    try:
        st = os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return True
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(name, dir_fd=fd)
        return True
    top = os.open(name, _DIR_FLAGS, dir_fd=fd)
    try:
        while entries := os.listdir(top):
            for entry in entries:
                budget[0] -= 1
                if budget[0] < 0:
                    return False
                st = os.stat(entry, dir_fd=top, follow_symlinks=False)
                if not stat.S_ISDIR(st.st_mode):
                    os.unlink(entry, dir_fd=top)
                    continue
                try:
                    os.rmdir(entry, dir_fd=top)
                    continue
                except OSError:
                    pass
                sub = os.open(entry, _DIR_FLAGS, dir_fd=top)
                try:
                    for inner in os.listdir(sub):
                        os.rename(inner, f".turnvisor-rm-{secrets.token_hex(8)}",
                                  src_dir_fd=sub, dst_dir_fd=top)
                finally:
                    os.close(sub)
                os.rmdir(entry, dir_fd=top)
    finally:
        os.close(top)
    os.rmdir(name, dir_fd=fd)
    return True


def _clear_directory_in_the_way(fd: int, name: str) -> bool:
    """True if ``name`` in ``fd`` is no directory now (an empty one is removed)."""
    try:
        st = os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return True
    if not stat.S_ISDIR(st.st_mode):
        return True
    try:
        os.rmdir(name, dir_fd=fd)
    except OSError:
        return False
    return True


def write_files(root: Path, files: list[FileWrite]) -> tuple[list[str], list[tuple[str, str]]]:
    """Write each file (creating its directories); returns (written, kept with reasons)."""
    written: list[str] = []
    kept: list[tuple[str, str]] = []
    root_fd = os.open(root, _DIR_FLAGS)
    try:
        for item in files:
            try:
                found = _parent(root_fd, item.path, create=True)
            except Blocked as exc:
                kept.append((item.path, str(exc)))
                continue
            assert found is not None
            fd, name = found
            try:
                if not _clear_directory_in_the_way(fd, name):
                    kept.append((item.path, "a directory with unsaved files is in the way"))
                    continue
                if item.must_be_absent and _exists(fd, name):
                    kept.append((item.path, "its current content was not saved (too large "
                                            "or ignored), so it was left as it is"))
                    continue
                _replace(fd, name, item)
                written.append(item.path)
            finally:
                os.close(fd)
    finally:
        os.close(root_fd)
    return written, kept


def _exists(fd: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def _replace(fd: int, name: str, item: FileWrite) -> None:
    tmp = f".{name[:200]}.turnvisor-{secrets.token_hex(6)}"
    if item.mode == SYMLINK_MODE:
        os.symlink(os.fsdecode(item.data), tmp, dir_fd=fd)
    else:
        wfd = os.open(tmp, _FILE_FLAGS, 0o777 if item.mode == EXECUTABLE_MODE else 0o666,
                      dir_fd=fd)
        try:
            view = memoryview(item.data)
            while view:
                view = view[os.write(wfd, view):]
        except BaseException:
            os.close(wfd)
            os.unlink(tmp, dir_fd=fd)
            raise
        os.close(wfd)
    try:
        os.rename(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
    except BaseException:
        os.unlink(tmp, dir_fd=fd)
        raise
