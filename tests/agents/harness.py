"""Drive one real agent through Turnvisor's adapter, against the fake provider.

``agent_session`` starts the CLI with ``protocols.process.start_agent_process``
(its own process group), wraps its pipes in ``protocols.adapters.make_adapter``,
runs the stdout reader and an event collector in a nursery it owns, and opens a
session.  On exit the whole group is torn down with ``terminate_group`` and the
test fails if any process of the agent (the group, or a descendant seen while
it ran) is still alive.
"""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import trio

from protocols.adapters import (
    AcpVersion,
    AgentAdapter,
    AgentRequestError,
    Restored,
    RestoreUnsupported,
    make_adapter,
)
from protocols.events import (
    AgentEvent,
    AgentNotice,
    MessageChunk,
    PermissionRequested,
    SubagentChanged,
    TurnEnded,
)
from protocols.process import start_agent_process, terminate_group
from supervisor.profiles import BUILTIN_PROFILES
from tests.fake_provider import FakeProvider, StreamRecord

from .cli import AGENTS_DIR
from .homes import launch

__all__ = ["AgentUnderTest", "CancelResult", "agent_session", "assert_gone", "descendants",
           "group_members"]

#: Start-up (initialize + session/new) of the slowest CLI takes ~3 s here.
START_S = 45.0


def _state(pid: int) -> str | None:
    """The process state letter, None if there is no such process."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None


def descendants(root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    out: set[int] = set()
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in out:
                out.add(child)
                todo.append(child)
    return out


async def assert_gone(pgid: int, pids: set[int], *, within_s: float = 5.0) -> None:
    """The process group is gone (``os.killpg(pgid, 0)`` raises ProcessLookupError)
    and so is every pid in ``pids``.  Zombies waiting for init to reap them are
    waited for; at the deadline they count as dead, anything else fails."""
    deadline = time.monotonic() + within_s
    while True:
        alive = {p for p in pids if _state(p) is not None}
        try:
            os.killpg(pgid, 0)
            group = set(group_members(pgid))
        except ProcessLookupError:
            group = set()
        if not alive and not group:
            return
        if time.monotonic() > deadline:
            running = {p for p in alive | group if _state(p) not in (None, "Z", "X")}
            assert not running, f"agent processes left behind (group {pgid}): {running}"
            return
        await trio.sleep(0.05)


def group_members(pgid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    # Fields after the name: state, ppid, pgrp, session.
                    if int(f.read().rsplit(")", 1)[1].split()[2]) == pgid:
                        out.append(int(entry))
            except (OSError, IndexError, ValueError):
                continue
    return out


@dataclass
class CancelResult:
    ended: TurnEnded
    #: cancel() called → prompt() returned, in ms.
    latency_ms: float
    #: Provider streams that were open when the cancel was sent.
    open_streams: list[StreamRecord]
    cancel_at: float  # time.monotonic()


@dataclass
class AgentUnderTest:
    name: str
    adapter: AgentAdapter
    provider: FakeProvider
    cwd: str
    pid: int
    events: list[AgentEvent] = field(default_factory=list)
    #: Called for each PermissionRequested; returns the option id (None = cancelled)
    #: or ``...`` to leave the request pending.
    on_permission: Callable[[PermissionRequested], Any] | None = None
    seen_pids: set[int] = field(default_factory=set)
    stderr: bytearray = field(default_factory=bytearray)
    #: Raw stdio traffic: (time.monotonic(), "->" | "<-", bytes).
    wire: list[tuple[float, str, bytes]] = field(default_factory=list)
    #: ``agent_session(restore=...)``: how the conversation was reopened, or why
    #: not (then no session is open), and how long it took.
    restored: Restored | None = None
    restore_error: Exception | None = None
    restore_s: float = 0.0
    _changed: trio.Event = field(default_factory=trio.Event)

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def wait_until(self, predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
        """Wait for ``predicate`` (checked on every agent event and every 20 ms)."""
        try:
            with trio.fail_after(timeout_s):
                while not predicate():
                    with trio.move_on_after(0.02):
                        await self._changed.wait()
        except trio.TooSlowError:
            raise AssertionError(
                f"{self.name}: timed out after {timeout_s}s waiting for {what}; "
                f"events {self.events[-8:]!r}; streams {self.provider.snapshot()[-4:]!r}; "
                f"stderr {bytes(self.stderr[-1500:])!r}"
            ) from None

    def wire_tail(self, n: int = 12) -> str:
        t0 = self.wire[0][0] if self.wire else 0.0
        return "\n".join(f"{t - t0:8.3f} {d} {data[:300]!r}" for t, d, data in self.wire[-n:])

    def chunks(self, since: int = 0) -> list[str]:
        return [e.text for e in self.events[since:]
                if isinstance(e, MessageChunk) and e.channel == "agent"]

    def subagents(self) -> list[SubagentChanged]:
        """Every change of a child (subagent) the adapter reported, in order."""
        return [e for e in self.events if isinstance(e, SubagentChanged)]

    def permissions(self, since: int = 0) -> list[PermissionRequested]:
        return [e for e in self.events[since:] if isinstance(e, PermissionRequested)]

    async def prompt(self, text: str, timeout_s: float = 30.0) -> TurnEnded:
        try:
            with trio.fail_after(timeout_s):
                return await self.adapter.prompt(text)
        except trio.TooSlowError:
            raise AssertionError(
                f"{self.name}: the turn {text!r} did not end within {timeout_s}s; "
                f"events {self.events[-10:]!r}; streams {self.provider.snapshot()[-6:]!r}; "
                f"wire {self.wire_tail()}"
            ) from None

    async def prompt_and_cancel(
        self, text: str, ready: Callable[[], bool] | None, *, timeout_s: float = 30.0,
        what: str = "the turn to be under way",
    ) -> CancelResult:
        """Send ``text``; once ``ready()`` (at once if None), cancel; wait for the turn's end."""
        result: dict[str, Any] = {}

        async def run_prompt() -> None:
            ended = await self.adapter.prompt(text)
            result["t"] = time.monotonic()
            result["ended"] = ended

        try:
            with trio.fail_after(timeout_s):
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(run_prompt)
                    if ready is None:
                        # The prompt is written by the task just started: let it go first.
                        while not self.adapter.turn_running:
                            await trio.lowlevel.checkpoint()
                    else:
                        await self.wait_until(ready, timeout_s / 2, what)
                        assert "ended" not in result, f"{self.name}: turn ended before the cancel"
                    open_streams = [r for r in self.provider.main_streams() if r.open]
                    t0 = time.monotonic()
                    await self.adapter.cancel()
        except trio.TooSlowError:
            raise AssertionError(
                f"{self.name}: the cancelled turn did not end within {timeout_s}s; "
                f"events {self.events[-10:]!r}; streams {self.provider.snapshot()[-4:]!r}; "
                f"wire {self.wire_tail()}"
            ) from None
        return CancelResult(
            ended=result["ended"], latency_ms=(result["t"] - t0) * 1000,
            open_streams=open_streams, cancel_at=t0,
        )

    async def wait_aborted(self, streams: list[StreamRecord], timeout_s: float = 5.0) -> list[
        StreamRecord
    ]:
        """Wait until each of ``streams`` ended; return their final records."""
        ids = {r.id for r in streams}

        def done() -> bool:
            return all(not r.open for r in self.provider.snapshot() if r.id in ids)

        await self.wait_until(done, timeout_s, f"provider streams {sorted(ids)} to end")
        return [r for r in self.provider.snapshot() if r.id in ids]


class _TapSend(trio.abc.SendStream):
    """The agent's stdin, with what is written kept for failure messages."""

    def __init__(self, inner: trio.abc.SendStream, wire: list[tuple[float, str, bytes]]) -> None:
        self.inner, self.wire = inner, wire

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        self.wire.append((time.monotonic(), "->", bytes(data)))
        await self.inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def aclose(self) -> None:
        await self.inner.aclose()


class _TapReceive(trio.abc.ReceiveStream):
    def __init__(self, inner: trio.abc.ReceiveStream, wire: list[tuple[float, str, bytes]]) -> None:
        self.inner, self.wire = inner, wire

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        data = await self.inner.receive_some(max_bytes)
        self.wire.append((time.monotonic(), "<-", bytes(data)))
        return data

    async def aclose(self) -> None:
        await self.inner.aclose()


async def _collect(agent: AgentUnderTest) -> None:
    last_scan = 0.0
    async for ev in agent.adapter.events:
        agent.events.append(ev)
        if isinstance(ev, PermissionRequested) and agent.on_permission is not None:
            choice = agent.on_permission(ev)
            if choice is not ...:
                await agent.adapter.respond_permission(ev.request_id, choice)
        if time.monotonic() - last_scan > 0.2:
            # Children the agent started (and may orphan) must die with it too.
            agent.seen_pids |= descendants(agent.pid)
            last_scan = time.monotonic()
        agent._notify()


async def _drain_stderr(proc: trio.Process, sink: bytearray) -> None:
    assert proc.stderr is not None
    try:
        async for chunk in proc.stderr:
            sink += chunk
            del sink[:-20000]
    except (trio.ClosedResourceError, trio.BrokenResourceError):
        pass


@asynccontextmanager
async def agent_session(
    name: str,
    provider: FakeProvider,
    tmp: Path,
    *,
    thread_params: dict[str, Any] | None = None,
    on_permission: Callable[[PermissionRequested], Any] | None = None,
    restore: str | None = None,
    persist: bool = False,
    acp_version: AcpVersion | None = None,
) -> AsyncIterator[AgentUnderTest]:
    """``restore``: an agent session id to reopen (``restore_session``) instead
    of opening a new one; the agent's home and cwd under ``tmp`` are the same
    as the earlier session's (started with ``persist``, as this one).
    ``acp_version``: the profile's unless given."""
    spec = launch(name, provider.url, tmp, persist=persist)
    if spec is None:
        pytest.skip(f"{name} CLI is not installed in {AGENTS_DIR} "
                    "(run scripts/install_agents.sh)")
    params = {**spec.thread_params, **(thread_params or {})}
    proc = await start_agent_process(spec.command, env=spec.env, cwd=spec.cwd)
    assert proc.stdin is not None
    assert proc.stdout is not None
    wire: list[tuple[float, str, bytes]] = []
    agent = AgentUnderTest(
        name=name,
        adapter=make_adapter(BUILTIN_PROFILES[name].protocol, _TapSend(proc.stdin, wire),
                             _TapReceive(proc.stdout, wire), thread_params=params,
                             acp_version=(BUILTIN_PROFILES[name].acp_version
                                          if acp_version is None else acp_version)),
        provider=provider, cwd=spec.cwd, pid=proc.pid, on_permission=on_permission, wire=wire,
    )
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(agent.adapter.connection.run)
            nursery.start_soon(_collect, agent)
            nursery.start_soon(_drain_stderr, proc, agent.stderr)
            with trio.fail_after(START_S):
                await agent.adapter.initialize()
                if restore is None:
                    await agent.adapter.new_session(spec.cwd)
                else:
                    started = time.monotonic()
                    try:
                        agent.restored = await agent.adapter.restore_session(restore, spec.cwd)
                    except (RestoreUnsupported, AgentRequestError) as exc:
                        agent.restore_error = exc
                    agent.restore_s = time.monotonic() - started
            agent.seen_pids |= descendants(proc.pid)
            yield agent
            # Everything the real agent sent was understood: no line we could not parse,
            # no message of a shape the schema rejects, no agent call we refused.
            notices = [e.message for e in agent.events
                       if isinstance(e, AgentNotice)
                       and (e.level == "warning" or "unexpected" in e.message)]
            assert not notices, f"{name}: protocol notices {notices}"
            agent.seen_pids |= descendants(proc.pid)
            nursery.cancel_scope.cancel()
    finally:
        agent.seen_pids |= descendants(proc.pid)
        await terminate_group(proc, grace_s=2.0)
        await assert_gone(proc.pid, agent.seen_pids | {proc.pid})
