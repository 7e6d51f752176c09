"""Phase ``peer_e2e``: Turnvisor's end-to-end cancel against what a user would build instead.

The peer (bench/peer_ws_server.py, asyncio, a process of its own) is a minimal
WebSocket server driving the same mock agent (ACP) through the official ACP SDK.
The bench client measures both the same way: a ``/delay 30000`` turn, its first
chunk reached the client, then ``agent.cancel`` request → response.  Blocks of
samples alternate between the two (the order flips each block), so both see the
same drift of a shared machine; reported: both summaries and ours / peer.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import trio

from supervisor.profiles import BUILTIN_PROFILES
from tests.support.ws import WsClient, open_client

from .floors import DELAY_PROMPT, REPO_ROOT
from .measure import log
from .stats import percentile, summary

if TYPE_CHECKING:
    from .harness import Bench

__all__ = ["peer_e2e"]

START_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class PeerEndpoint:
    ws_url: str
    token: str = "unused"  # the peer has no authorization


async def _listening_port(proc: trio.Process) -> int:
    assert proc.stdout is not None
    buf = b""
    with trio.fail_after(START_TIMEOUT_S):
        while b"\n" not in buf:
            chunk = await proc.stdout.receive_some(1024)
            if not chunk:
                raise RuntimeError(f"the peer server exited (rc={await proc.wait()})")
            buf += chunk
    line = buf.split(b"\n", 1)[0].decode()
    if not line.startswith("listening "):
        raise RuntimeError(f"the peer server printed {line!r}")
    return int(line.split()[1])


async def peer_sample(bench: Bench, conn: WsClient, session_id: str) -> float:
    await bench.start_turn(conn, session_id, DELAY_PROMPT)
    pending = await conn.send("agent.cancel", {"session_id": session_id})
    frame = await pending.wait(30)
    if frame["type"] != "response":
        raise RuntimeError(f"the peer's agent.cancel failed: {frame}")
    return pending.ms


async def peer_e2e(bench: Bench, sessions: dict[str, str]) -> dict[str, Any]:
    acp = [a for a in bench.mock_agents() if BUILTIN_PROFILES[a].protocol == "acp"]
    if not acp:
        return {"skipped": "the peer speaks ACP: run with an ACP mock agent (mock)"}
    if importlib.util.find_spec("websockets") is None:
        # A venv from before the bench extra had it: say so rather than lose the run.
        log("peer_e2e skipped: websockets is not installed (pip install -e '.[bench]')")
        return {"skipped": "websockets is not installed (pip install -e '.[bench]')"}
    ours_sid = sessions[acp[0]]
    p = bench.p
    per_block = max(p.peer_e2e_samples // p.peer_e2e_blocks, 1)
    proc = await trio.lowlevel.open_process(
        [sys.executable, "-m", "bench.peer_ws_server"], stdout=subprocess.PIPE,
        cwd=str(REPO_ROOT))
    samples: dict[str, list[float]] = {"turnvisor": [], "peer": []}
    blocks: dict[str, list[float]] = {"turnvisor": [], "peer": []}
    try:
        port = await _listening_port(proc)
        conn = await open_client(bench.nursery, PeerEndpoint(f"ws://127.0.0.1:{port}/ws"),
                                 keep=False)
        try:
            peer_sid = str((await conn.call("session.launch", {}))["id"])

            async def ours() -> float:
                return (await bench.e2e_sample(bench.main, ours_sid))["response"]

            async def theirs() -> float:
                return await peer_sample(bench, conn, peer_sid)

            take = {"turnvisor": ours, "peer": theirs}
            for fn in take.values():  # warm both paths
                for _ in range(p.warmup):
                    await fn()
            for block in range(p.peer_e2e_blocks):
                order = ["turnvisor", "peer"] if block % 2 == 0 else ["peer", "turnvisor"]
                for impl in order:
                    got = [await take[impl]() for _ in range(per_block)]
                    samples[impl] += got
                    blocks[impl].append(round(percentile(got, 50), 3))
                log(f"peer_e2e: block {block + 1}/{p.peer_e2e_blocks}")
        finally:
            await conn.aclose()
    finally:
        # Its connection closed, the peer stops its agent and exits.
        with trio.move_on_after(10):
            await proc.wait()
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        if proc.stdout is not None:
            await proc.stdout.aclose()
    tv, peer = summary(samples["turnvisor"]), summary(samples["peer"])
    out = {
        "agent": acp[0],
        "peer": "minimal asyncio WebSocket server (websockets) + the ACP SDK",
        "turnvisor_e2e_ms": tv, "peer_e2e_ms": peer,
        "ratio_p50_turnvisor_vs_peer": round(tv["p50"] / peer["p50"], 3),
        "ratio_p99_turnvisor_vs_peer": round(tv["p99"] / peer["p99"], 3),
        "blocks": p.peer_e2e_blocks, "block_p50_ms": blocks, "samples_ms": samples,
    }
    log(f"peer_e2e: p50 turnvisor {tv['p50']} ms, peer {peer['p50']} ms "
        f"(ratio {out['ratio_p50_turnvisor_vs_peer']})")
    return out
