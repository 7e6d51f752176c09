"""Phase ``checkpointed``: turn checkpoints do not slow a cancel (issue 33).

Per mock dialect, pairs of cancel samples alternate between two sessions of one server:

- plain: the dialect's latency session (no project: no checkpoints);
- checkpointed: a session of a task whose ``project_dir`` is a project of
  ``checkpoint_files`` files (``bench.checkpoints.make_project``), so each turn takes
  its snapshot before the prompt and its after-snapshot once it closed
  (DESIGN.md §12).  Every third turn first rewrites ten of its files, so the
  after-snapshot has real work to do right behind the cancel it follows.

The e2e is measured as in the latency phase (first chunk → ``agent.cancel`` →
response): the snapshot before the prompt comes before the first chunk, so only
what the checkpoints cost the cancel itself can show.  Target: checkpointed p50 ≤
1.1 times the paired plain p50.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from .checkpoints import make_project
from .interleave import Sample, interleave
from .measure import log
from .stats import paired

if TYPE_CHECKING:
    from .harness import Bench

__all__ = ["checkpointed", "project_toml"]


def project_toml(root: Path) -> str:
    """The server's configuration: ``root`` is where the phase's projects live."""
    return f"[projects]\nroots = [{str(root)!r}]\n"


async def checkpointed(bench: Bench, sessions: dict[str, str], root: Path) -> dict[str, Any]:
    main = bench.main
    files = bench.p.checkpoint_files
    out: dict[str, Any] = {"samples_per_kind": bench.p.queued_samples, "files": files,
                           "dialects": {}}
    for agent in bench.mock_agents():
        project = root / agent
        paths = make_project(project, files)
        task = await main.call("task.create", {"title": f"checkpointed {agent}",
                                               "project_dir": str(project)})
        dto = await main.call("session.launch", {"task_id": task["id"], "agent": agent})
        sid = str(dto["id"])
        await main.call("session.subscribe", {"session_id": sid})
        await bench.e2e_sample(main, sid)  # its first snapshot (every file) is not measured
        turns = [0]

        async def plain(agent: str = agent) -> Sample:
            return await bench.e2e_sample(main, sessions[agent])

        async def with_checkpoints(sid: str = sid, paths: list[Path] = paths,
                                   turns: list[int] = turns) -> Sample:
            turns[0] += 1
            if turns[0] % 3 == 0:
                for path in paths[:10]:
                    path.write_text(path.read_text() + f"# turn {turns[0]}\n")
            return await bench.e2e_sample(main, sid)

        plain_s, ckpt_s = await interleave(f"checkpointed {agent}", bench.p.queued_samples,
                                           bench.p.warmup, plain, with_checkpoints)
        d = paired([s["response"] for s in plain_s], [s["response"] for s in ckpt_s],
                   "checkpointed")
        d["pending_true"] = paired([s["pending_true"] for s in plain_s],
                                   [s["pending_true"] for s in ckpt_s], "checkpointed")
        d["samples_ms"] = {"plain": [s["response"] for s in plain_s],
                           "checkpointed": [s["response"] for s in ckpt_s]}
        out["dialects"][agent] = d
        log(f"checkpointed {agent}: e2e p50 plain {d['plain_ms']['p50']} ms, checkpointed "
            f"{d['checkpointed_ms']['p50']} ms (ratio {d['ratio_p50']})")
    return out
