"""The mock agent in-process, over a Trio memory stream, for MockClock tests.

Timeout paths (join window, escalation, operation deadline) need virtual time,
which a real subprocess cannot follow, so these tests put the mock agent's own
machine (protocols/mock/machine.py: the same behaviours as ``python -m
protocols.mock_agent``, ``/pause <ms>`` included) at the process boundary and
drive it with ``trio.current_time()``.  Sessions are named ``fake-N`` (N: the
launch) and kept in one ``MemoryStore`` per launcher, as processes share a state
directory.  ``FakeLauncher(resumable=True)`` offers ACP ``session/resume`` (else
no restore at all); ``hang_restores``: how many restore requests go unanswered,
for a restore's timeout and cancel.  Each agent speaks its profile's dialect, as
the real mock does: ``mock`` ACP 1, ``mock-acp2`` ACP up to 2 (its
``--acp-version``), ``mock-codex`` the Codex app-server protocol.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio
import trio.testing

from protocols.adapters import AcpAdapter, AgentAdapter, CodexAdapter
from protocols.mock.base import CloseOut, Exit, Out
from protocols.mock.machine import MockMachine
from protocols.mock.sessions import MemoryStore
from supervisor.executors import LaunchedAgent
from supervisor.profiles import AgentProfile


class FakeAgent:
    """One launched agent: the machine, and what it saw (``prompts``, ``cancels``,
    ``resumed``: the session ids it was asked to restore)."""

    def __init__(self, stream: trio.abc.Stream, launcher: FakeLauncher, cwd: str,
                 profile: AgentProfile) -> None:
        self.stream = stream
        name = f"fake-{len(launcher.agents)}"
        args = list(profile.command)
        acp_max_version = (int(args[args.index("--acp-version") + 1])
                           if "--acp-version" in args else 1)
        self.machine = MockMachine(
            profile.protocol, launcher.store,
            restore=frozenset({"resume"}) if launcher.resumable else frozenset(),
            acp_max_version=acp_max_version,
            new_id=lambda: name, answer_restore=launcher.answer_restore, cwd=cwd)

    @property
    def prompts(self) -> list[str]:
        return self.machine.prompts

    @property
    def cancels(self) -> int:
        return self.machine.cancels

    @property
    def resumed(self) -> list[str]:
        return self.machine.resumed

    async def flush(self) -> bool:
        """Carry out the machine's effects; False once the agent is gone (``/crash``)."""
        for effect in self.machine.effects():
            match effect:
                case Out(data=data):
                    await self.stream.send_all(data)
                case Exit() | CloseOut():
                    return False
                case _:
                    pass
        return not self.machine.closed

    async def serve(self) -> None:
        machine = self.machine
        while await self.flush():
            wake = machine.next_wakeup()
            with trio.move_on_at(math.inf if wake is None else wake):
                data = await self.stream.receive_some(65536)
                machine.receive_data(bytes(data), trio.current_time())
            machine.advance(trio.current_time())
        await self.stream.aclose()


class FakeLauncher:
    """Launches FakeAgents; keeps them so tests can look at what they received."""

    def __init__(self, *, resumable: bool = False, hang_restores: int = 0) -> None:
        self.agents: list[FakeAgent] = []
        self.resumable = resumable
        self.hang_restores = hang_restores
        self.store = MemoryStore()

    def answer_restore(self) -> bool:
        if self.hang_restores > 0:
            self.hang_restores -= 1
            return False
        return True

    @asynccontextmanager
    async def __call__(self, profile: AgentProfile, cwd: str,
                       session_id: str) -> AsyncIterator[LaunchedAgent]:
        client, agent_side = trio.testing.memory_stream_pair()
        agent = FakeAgent(agent_side, self, cwd, profile)
        self.agents.append(agent)
        adapter: AgentAdapter = (
            CodexAdapter(client, client, thread_params=dict(profile.thread_params))
            if profile.protocol == "codex"
            else AcpAdapter(client, client, acp_version=profile.acp_version))
        async with trio.open_nursery() as nursery:
            nursery.start_soon(agent.serve)
            try:
                yield LaunchedAgent(adapter=adapter)
            finally:
                nursery.cancel_scope.cancel()
                await client.aclose()
