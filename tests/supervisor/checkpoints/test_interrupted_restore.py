"""A restore killed half-way (SIGKILL, as a crash of the backend): no file is ever half
written, the journal says a restore did not finish, and ``recover`` finishes it."""

from __future__ import annotations

import functools
import os
import signal
import sys
from pathlib import Path

import trio

from .support import repo_for, tree_bytes

FILES = 1500
TEST_S = 60.0


async def test_a_killed_restore_leaves_whole_files_and_recover_finishes_it(
        tmp_path: Path) -> None:
    project = tmp_path / "project"
    for i in range(FILES):
        path = project / f"d{i % 20}" / f"f{i}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"original {i}\n" * 200)
    repo = repo_for(tmp_path, project)
    start = await repo.snapshot("start")
    original = tree_bytes(project)
    for i in range(FILES):
        (project / f"d{i % 20}" / f"f{i}.txt").write_text(f"the agent's {i}\n" * 100)
    changed = tree_bytes(project)

    journal = tmp_path / "data" / "checkpoints" / "s1.git" / "restore-journal.json"
    with trio.fail_after(TEST_S):
        async with trio.open_nursery() as nursery:
            proc = await nursery.start(functools.partial(trio.run_process, [
                sys.executable, "-m", "tests.supervisor.checkpoints.restore_child",
                str(tmp_path / "data"), str(project), start.commit], check=False))
            # Killed once the first file is back: half-way through the writes.
            first = project / "d0" / "f0.txt"
            while not journal.exists() or first.read_bytes() != original["d0/f0.txt"]:
                await trio.sleep(0.002)
            os.kill(proc.pid, signal.SIGKILL)
    assert proc.returncode == -signal.SIGKILL

    now = tree_bytes(project)
    restored = [k for k, v in now.items() if k.endswith(".txt") and v == original[k]]
    assert 0 < len(restored) < FILES
    for rel, data in now.items():
        if not rel.endswith(".txt"):
            continue  # a directory, or a temporary file the kill left
        assert data in (original[rel], changed[rel]), f"{rel} is half written"
    fresh = repo_for(tmp_path, project)
    interrupted = fresh.interrupted_restore()
    assert interrupted is not None and interrupted["target"] == start.commit

    result = await fresh.recover()
    assert result is not None
    assert tree_bytes(project) == original
    assert fresh.interrupted_restore() is None
    # The safety checkpoint is the one taken before the killed restore began.
    assert result.safety.commit == interrupted["safety"]
    await fresh.restore(result.safety)
    assert tree_bytes(project) == changed
