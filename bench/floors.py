"""Floor (a): the mock agent driven directly over its pipes, cancel → ``cancelled``.

``AdapterFloor`` drives one mock agent through Turnvisor's own adapter
(protocols.adapters), in the caller's trio run.  Run as a program, this
module measures one implementation in a process of its own, so the
side-by-side with the official ACP SDK (bench/acp_sdk_peer.py, asyncio) is
measured the same way for both::

    python -m bench.floors --impl turnvisor|acp-sdk [--protocol acp|codex] --samples N

prints ``{"impl": ..., "samples_ms": [...]}`` on stdout.  One sample: a
``/delay 30000`` prompt runs, its first chunk arrives, then the time from just
before the cancel is written to the moment ``prompt`` returns ``cancelled``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import trio

from protocols.acp import AcpVersion
from protocols.adapters import AgentAdapter, make_adapter
from protocols.events import MessageChunk, TurnEnded
from protocols.process import start_agent_process, terminate_group

__all__ = ["DELAY_PROMPT", "REPO_ROOT", "AdapterFloor", "mock_agent_command", "open_floor"]

REPO_ROOT = Path(__file__).resolve().parent.parent
DELAY_PROMPT = "/delay 30000"


def mock_agent_command(protocol: str) -> list[str]:
    return [sys.executable, "-m", "protocols.mock_agent", "--protocol", protocol]


class AdapterFloor:
    def __init__(self, adapter: AgentAdapter) -> None:
        self.adapter = adapter
        self._first_chunk = trio.Event()
        self._turn_ended = trio.Event()

    async def drain_events(self) -> None:
        async for ev in self.adapter.events:
            if isinstance(ev, MessageChunk):
                self._first_chunk.set()
            elif isinstance(ev, TurnEnded):
                self._turn_ended.set()

    async def sample(self) -> float:
        """One cancel, in milliseconds."""
        self._first_chunk = trio.Event()
        self._turn_ended = trio.Event()
        result: list[tuple[float, TurnEnded]] = []

        async def prompt() -> None:
            ended = await self.adapter.prompt(DELAY_PROMPT)
            result.append((time.perf_counter(), ended))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(prompt)
            with trio.fail_after(10):
                await self._first_chunk.wait()
            t0 = time.perf_counter()
            await self.adapter.cancel()
        # The turn's events are drained before the next sample arms its first chunk.
        with trio.fail_after(10):
            await self._turn_ended.wait()
        ended_at, ended = result[0]
        if ended.stop_reason != "cancelled":
            raise RuntimeError(f"the turn ended with {ended.stop_reason!r}, not cancelled")
        return (ended_at - t0) * 1000


@asynccontextmanager
async def open_floor(protocol: str, command: Sequence[str] | None = None,
                     acp_version: AcpVersion = "auto") -> AsyncIterator[AdapterFloor]:
    """A mock agent started, initialized and with a session, in its own group;
    ``command``/``acp_version``: a profile's (``mock-acp2`` speaks v2 when offered 2)."""
    argv = list(command) if command is not None else mock_agent_command(protocol)
    proc = await start_agent_process(argv, cwd=str(REPO_ROOT))
    try:
        assert proc.stdin is not None and proc.stdout is not None
        adapter = make_adapter("acp" if protocol == "acp" else "codex", proc.stdin, proc.stdout,
                               acp_version=acp_version)
        floor = AdapterFloor(adapter)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(adapter.connection.run)
            nursery.start_soon(floor.drain_events)
            await adapter.initialize()
            await adapter.new_session(str(REPO_ROOT))
            yield floor
            nursery.cancel_scope.cancel()
    finally:
        await terminate_group(proc, grace_s=1.0)


async def _turnvisor(protocol: str, samples: int, warmup: int) -> list[float]:
    async with open_floor(protocol) as floor:
        out = [await floor.sample() for _ in range(samples + warmup)]
    return out[warmup:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.floors")
    parser.add_argument("--impl", choices=("turnvisor", "acp-sdk"), required=True)
    parser.add_argument("--protocol", choices=("acp", "codex"), default="acp")
    parser.add_argument("--samples", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args(argv)
    if args.impl == "turnvisor":
        samples = trio.run(_turnvisor, args.protocol, args.samples, args.warmup)
    else:
        if args.protocol != "acp":
            parser.error("the ACP SDK speaks ACP only")
        from .acp_sdk_peer import run_samples  # asyncio: only in this process

        samples = run_samples(mock_agent_command("acp"), str(REPO_ROOT), args.samples,
                              args.warmup)
    json.dump({"impl": args.impl, "protocol": args.protocol, "samples_ms": samples}, sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
