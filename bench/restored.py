"""Phase ``restored``: cancelling a turn of a session whose agent was restored.

Per dialect, a fresh session (so the latency sessions keep their agents), with
pairs of samples alternating:

- plain: the usual ``/delay 30000`` turn cancelled after its first chunk;
- restored: first the session's agent process is killed (SIGKILL, as a crash) and
  the bench waits for the server to announce it (``state_changed`` with
  ``agent_live`` false); then the prompt starts a new agent process, which restores
  the conversation (ACP ``session/resume``, Codex ``thread/resume``: the mock agent
  persists its sessions, DESIGN.md §10), and its turn is cancelled after its
  first chunk, measured as the plain one.

The agent of the session is the mock-agent process among the server's
descendants that appeared while the session launched, then while each
restored prompt ran.  Also reported: prompt → first chunk on a restore, and how
many restores failed (the status message with ``metadata.resumed`` false).
"""

from __future__ import annotations

import signal
from typing import TYPE_CHECKING, Any

import psutil
import trio

from tests.support.ws import Frame, is_agent_output, now

from .interleave import Sample, interleave
from .measure import log, ms
from .stats import paired, summary

if TYPE_CHECKING:
    from tests.support.serverproc import ServerProcess

    from .harness import Bench

__all__ = ["restored"]


def mock_agents(server: ServerProcess) -> dict[int, psutil.Process]:
    out: dict[int, psutil.Process] = {}
    for p in server.agents():
        try:
            if "protocols.mock_agent" in " ".join(p.cmdline()):
                out[p.pid] = p
        except psutil.Error:
            continue
    return out


def newest(procs: list[psutil.Process]) -> psutil.Process:
    if not procs:
        raise RuntimeError("no new mock agent process appeared for the session")
    return max(procs, key=lambda p: p.create_time())


async def new_agent(server: ServerProcess, before: set[int]) -> psutil.Process:
    """The mock agent started since ``before`` was taken (it may take a moment to exec)."""
    with trio.fail_after(10):
        while True:
            fresh = [p for pid, p in mock_agents(server).items() if pid not in before]
            if fresh:
                return newest(fresh)
            await trio.sleep(0.02)


def agent_stopped(session_id: str) -> Any:
    def pred(f: Frame) -> bool:
        p = f.get("payload") or {}
        return (f.get("action") == "session.state_changed"
                and p.get("session_id") == session_id and p.get("agent_live") is False)
    return pred


class RestoreFailures:
    """A watch predicate that never matches while counting the status messages that
    say a restore failed; ``stop()`` makes it match the next frame, which removes it."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.count = 0
        self.stopped = False

    def __call__(self, f: Frame) -> bool:
        if self.stopped:
            return True
        p = f.get("payload") or {}
        meta = (p.get("message") or {}).get("metadata") or {}
        if (f.get("action") == "session.message.added"
                and p.get("session_id") == self.session_id and meta.get("resumed") is False):
            self.count += 1
        return False


async def restored(bench: Bench) -> dict[str, Any]:
    main, server = bench.main, bench.server
    out: dict[str, Any] = {"samples_per_kind": bench.p.restored_samples, "dialects": {}}
    for agent in bench.mock_agents():
        before = set(mock_agents(server))
        sid = await bench.launch(agent)
        await main.call("session.subscribe", {"session_id": sid})
        current = [await new_agent(server, before)]
        await bench.e2e_sample(main, sid)  # its first turn (the session exists on disk)
        restore_ms: list[float] = []
        failures = RestoreFailures(sid)
        main.watch(failures)

        async def plain(sid: str = sid) -> Sample:
            return await bench.e2e_sample(main, sid)

        async def after_restore(sid: str = sid, current: list[psutil.Process] = current,
                                restore_ms: list[float] = restore_ms) -> Sample:
            stopped = main.watch(agent_stopped(sid))
            try:
                current[0].send_signal(signal.SIGKILL)
            except psutil.NoSuchProcess:
                pass
            await stopped.wait(10)
            before = set(mock_agents(server))
            first = main.watch(is_agent_output(sid))
            t0 = now()
            sample = await bench.e2e_sample(main, sid)
            restore_ms.append(ms(first.at - t0))
            current[0] = await new_agent(server, before)
            return sample

        plain_s, restored_s = await interleave(f"restored {agent}", bench.p.restored_samples,
                                               bench.p.warmup, plain, after_restore)
        failures.stopped = True
        d = paired([s["response"] for s in plain_s], [s["response"] for s in restored_s],
                   "restored")
        d["pending_true"] = paired([s["pending_true"] for s in plain_s],
                                   [s["pending_true"] for s in restored_s], "restored")
        d["prompt_to_first_chunk_on_restore_ms"] = summary(restore_ms[-len(restored_s):])
        d["restore_failed"] = failures.count
        d["samples_ms"] = {"plain": [s["response"] for s in plain_s],
                           "restored": [s["response"] for s in restored_s]}
        out["dialects"][agent] = d
        log(f"restored {agent}: e2e p50 plain {d['plain_ms']['p50']} ms, restored "
            f"{d['restored_ms']['p50']} ms (ratio {d['ratio_p50']}); restore → first chunk "
            f"p50 {d['prompt_to_first_chunk_on_restore_ms'].get('p50')} ms; "
            f"{failures.count} restore(s) failed")
    return out
