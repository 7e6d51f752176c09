"""A directory standing in for the host's temporary directory (everyone's,
sticky, short), and a data dir too deep for a unix socket path, whose sockets
go there instead: what the tests of the backend's private directories under
/tmp share (tests/security/test_private_dirs.py, tests/ssh/)."""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

__all__ = ["deep_data_dir", "shared_tempdir", "tempdir_of_this_process"]


@contextmanager
def shared_tempdir() -> Iterator[Path]:
    """A sticky, world-writable directory, as /tmp is, with a short path (a
    socket path goes in it); removed with what was left in it, whoever owns it."""
    shared = Path(tempfile.mkdtemp(prefix="tv-"))
    os.chmod(shared, 0o1777)
    try:
        yield shared
    finally:
        # rm, not shutil.rmtree: a test leaves symlinks and other users' dirs in it.
        subprocess.run(["rm", "-rf", str(shared)], check=False)


@contextmanager
def tempdir_of_this_process(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """``shared_tempdir`` made this process's temporary directory: what is left
    in it is this test's to see, not another run's."""
    with shared_tempdir() as shared:
        monkeypatch.setattr(tempfile, "tempdir", str(shared))
        yield shared


def deep_data_dir(root: Path) -> Path:
    """A data dir under ``root`` too deep for a unix socket path: its sockets
    go to the temporary dir."""
    return root.joinpath("a-data-dir-deep-enough", "that-its-socket-path",
                         "would-be-longer-than-sun-path", "allows")
