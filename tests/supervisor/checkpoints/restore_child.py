"""A process that restores a checkpoint, for the test that kills it half-way:
``python -m tests.supervisor.checkpoints.restore_child DATA PROJECT COMMIT``."""

from __future__ import annotations

import sys
from pathlib import Path

import trio

from supervisor.workspace.checkpoints import ShadowRepo


async def main(data: Path, project: Path, commit: str) -> None:
    repo = ShadowRepo.for_session(data, "s1", project)
    await repo.restore(await repo.load(commit))


if __name__ == "__main__":
    trio.run(main, Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3])
