"""The cancel latency bench's harness: its parameters, and ``Bench``: the server under
test, its connections and sessions, one cancel sample.

The phases are in modules of their own, each importing this one (bench/latency.py,
bench/scale.py, bench/streaming.py, bench/queued.py, bench/restored.py,
bench/checkpointed.py, bench/peer_e2e.py, bench/stop_levels.py), run in order by
bench/phases.py; the command line is bench/cancel_latency.py.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import trio

from supervisor.profiles import BUILTIN_PROFILES
from tests.support.serverproc import ServerProcess
from tests.support.ws import (
    Pending,
    WsClient,
    is_agent_output,
    is_cancellation,
    is_state,
    open_client,
)

from .floors import DELAY_PROMPT
from .lean_client import open_lean_client
from .measure import ms
from .real_agents import REAL_AGENTS, RealSetup, RealTurn

__all__ = ["FULL", "MOCK_PROFILES", "PHASES", "QUICK", "Bench", "Params"]

MOCK_PROFILES = sorted(n for n, p in BUILTIN_PROFILES.items()
                       if "protocols.mock_agent" in p.command)
PHASES = ("latency", "memory", "busy", "burst", "storm", "fanout", "streaming", "queued",
          "restored", "checkpointed", "peer", "peer_e2e", "stop_levels")
#: The phases that need the pool of idle sessions.


@dataclass(frozen=True)
class Params:
    samples: int
    warmup: int
    busy_levels: tuple[int, ...]
    busy_samples: int
    busy_blocks: int
    burst_sizes: tuple[int, ...]
    storm_requests: int
    storm_conns: int
    fanout_sizes: tuple[int, ...]
    fanout_reps: int
    memory_checkpoints: tuple[int, ...]
    peer_samples: int
    peer_blocks: int
    streaming_sessions: int
    streaming_window_s: float
    queued_samples: int
    restored_samples: int
    #: Files in the checkpointed phase's projects.
    checkpoint_files: int
    peer_e2e_samples: int
    peer_e2e_blocks: int
    #: Stops after the step per mock dialect (bench/stop_levels.py).
    stop_step_samples: int
    #: Streaming sessions stopped by one stop all.
    stop_all_sessions: int

    @property
    def pool(self) -> int:
        return max(*self.busy_levels, *self.burst_sizes, *self.memory_checkpoints,
                   self.streaming_sessions)


FULL = Params(samples=300, warmup=10, busy_levels=(0, 10, 50), busy_samples=100,
              busy_blocks=5, burst_sizes=(10, 50, 100), storm_requests=1000, storm_conns=10,
              fanout_sizes=(1, 100, 1000), fanout_reps=5, memory_checkpoints=(50, 100),
              peer_samples=400, peer_blocks=4, streaming_sessions=100, streaming_window_s=5.0,
              queued_samples=200, restored_samples=100, checkpoint_files=10_000,
              peer_e2e_samples=400,
              peer_e2e_blocks=4, stop_step_samples=100, stop_all_sessions=50)
QUICK = Params(samples=30, warmup=3, busy_levels=(0, 10), busy_samples=20, busy_blocks=2,
               burst_sizes=(10,), storm_requests=1000, storm_conns=10,
               fanout_sizes=(1, 100), fanout_reps=3, memory_checkpoints=(10,),
               peer_samples=40, peer_blocks=2, streaming_sessions=20, streaming_window_s=3.0,
               queued_samples=20, restored_samples=15, checkpoint_files=2_000,
               peer_e2e_samples=40, peer_e2e_blocks=2, stop_step_samples=15,
               stop_all_sessions=50)

class Bench:
    def __init__(self, server: ServerProcess, nursery: trio.Nursery, params: Params,
                 agents: list[str], real: RealSetup | None = None,
                 client: str = "lean", project_root: Path | None = None) -> None:
        self.server = server
        #: Where the checkpointed phase makes its projects (a root of the server's).
        self.project_root = project_root
        #: The requesting connections' client: "lean" (bench/lean_client.py) or
        #: "trio-websocket".
        self.client = client
        #: The fake provider and homes of the real agents (None: mock agents only).
        self.real = real
        self.nursery = nursery
        self.p = params
        self.agents = agents
        self.main: WsClient
        self.task_id = ""
        #: Per session: each e2e sample's (request written, response read) on
        #: this host's monotonic clock, to place the server's stages between them.
        self.e2e_clock: dict[str, list[tuple[float, float]]] = {}
        #: Per agent: the protocol its latency session negotiated (the session DTO's).
        self.wire_protocols: dict[str, str | None] = {}
        self.http = httpx.Client(base_url=server.url, timeout=30,
                                 headers={"Authorization": f"Bearer {server.token}"})

    # -- helpers --------------------------------------------------------------

    async def conn(self, nursery: trio.Nursery | None = None) -> WsClient:
        if self.client == "lean":
            host, port = self.server.url.removeprefix("http://").rsplit(":", 1)
            return await open_lean_client(nursery or self.nursery, host, int(port),
                                          self.server.token, keep=False)
        return await open_client(nursery or self.nursery, self.server, keep=False)

    def mock_agents(self) -> list[str]:
        """The measured dialects that are mock agents (the queued, restored and peer
        phases need the mock's commands)."""
        return [a for a in self.agents if a in MOCK_PROFILES]

    async def launch(self, agent: str) -> str:
        dto = await self.main.call("session.launch", {"task_id": self.task_id, "agent": agent})
        return str(dto["id"])

    async def launch_many(self, agent: str, n: int, limit: int = 4) -> list[str]:
        out: list[str] = []
        sem = trio.Semaphore(limit)

        async def one() -> None:
            async with sem:
                out.append(await self.launch(agent))

        async with trio.open_nursery() as nursery:
            for _ in range(n):
                nursery.start_soon(one)
        return out

    async def stages(self, session_id: str, limit: int = 256) -> list[dict[str, Any]]:
        def get() -> list[dict[str, Any]]:
            r = self.http.get("/api/v1/debug/cancel-stages",
                              params={"session_id": session_id, "limit": limit})
            r.raise_for_status()
            ops: list[dict[str, Any]] = r.json()["operations"]
            return ops
        return await trio.to_thread.run_sync(get)

    def real_turn(self, agent: str) -> RealTurn | None:
        if agent not in REAL_AGENTS:
            return None
        assert self.real is not None
        return RealTurn(self.real.provider)

    async def start_turn(self, conn: WsClient, session_id: str, prompt: str,
                         first_output: Callable[[str], Callable[[dict[str, Any]], bool]]
                         = is_agent_output) -> None:
        """Send the prompt and return once its first output reached ``conn``."""
        first = conn.watch(first_output(session_id))
        await conn.call("message.add", {"session_id": session_id, "content": prompt})
        await first.wait(30)

    async def e2e_sample(self, conn: WsClient, session_id: str,
                         real: RealTurn | None = None,
                         before_cancel: Callable[[], Awaitable[None]] | None = None,
                         ) -> dict[str, float]:
        """One cancel after the first chunk (real agents: the first model token);
        ms from the request to each stage.  ``before_cancel`` runs between the first
        chunk and the cancel (the queued phase queues a message there)."""
        if real is None:
            await self.start_turn(conn, session_id, DELAY_PROMPT)
        else:
            await self.start_turn(conn, session_id, real.prompt, real.first_output)
            real.before_cancel()
        if before_cancel is not None:
            await before_cancel()
        w_true = conn.watch(is_cancellation(session_id, True))
        w_false = conn.watch(is_cancellation(session_id, False))
        w_wait = conn.watch(is_state(session_id, "WAITING_FOR_INPUT"))
        pending = await conn.send("agent.cancel", {"session_id": session_id})
        frame = await pending.wait(30)
        if frame["type"] != "response":
            raise RuntimeError(f"agent.cancel failed: {frame}")
        t0 = pending.sent_at
        self.e2e_clock.setdefault(session_id, []).append((t0, pending.answered_at))
        out = {
            "pending_true": ms(await w_true.wait() - t0),
            "response": ms(pending.answered_at - t0),
            "pending_false": ms(await w_false.wait() - t0),
            "waiting": ms(await w_wait.wait() - t0),
        }
        if real is not None:
            out.update(await real.after_cancel())
        return out

    async def cancel_all(self, conn: WsClient, sessions: list[str]) -> list[Pending]:
        pendings = [await conn.send("agent.cancel", {"session_id": sid}) for sid in sessions]
        for p in pendings:
            await p.wait(60)
        return pendings

    async def ping_sample(self, conn: WsClient) -> float:
        pending = await conn.send("ping")
        await pending.wait()
        return pending.ms
