"""An in-process ACP agent over a Trio memory stream, for MockClock tests.

Timeout paths (join window, escalation, operation deadline) need virtual
time, which a real subprocess cannot follow, so these tests put this Trio
twin of the mock agent at the process boundary.  It speaks the same wire
format (through protocols.jsonrpc) and follows the same prompt table
subset: ``/delay``, ``/slow``, ``/hang``, ``/dropcancel`` (ignores the first
cancel), echo.  With ``FakeLauncher(resumable=True)`` it advertises ACP
``session/resume`` and answers it (``hang_restores``: how many of those it
never answers, for a restore's timeout and cancel).  The integration tests
run the real mock agent as a subprocess.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio
import trio.testing

from protocols.adapters import AcpAdapter
from protocols.jsonrpc import (
    Dialect,
    IncomingNotification,
    IncomingRequest,
    NeedData,
    PeerClosed,
    RpcConnection,
)
from supervisor.executors import LaunchedAgent
from supervisor.profiles import AgentProfile


class FakeAgent:
    def __init__(self, stream: trio.abc.Stream, launcher: FakeLauncher | None = None) -> None:
        self.stream = stream
        self.launcher = launcher
        #: Its session id: unique per launched agent (``fake-N``), else ``fake``;
        #: a resumed session keeps the id asked for.
        self.session_id = "fake" if launcher is None else f"fake-{len(launcher.agents)}"
        #: Session ids this agent was asked to resume.
        self.resumed: list[str] = []
        self.rpc = RpcConnection(Dialect.JSONRPC2, first_id=0)
        self.cancelled = trio.Event()
        self.turn_id: Any = None
        self.prompts: list[str] = []
        self.cancels = 0
        #: Cancels still to be ignored (``/dropcancel``).
        self.drop_cancels = 0

    async def send(self, data: bytes) -> None:
        await self.stream.send_all(data)

    async def chunk(self, text: str) -> None:
        await self.send(self.rpc.send_notification("session/update", {
            "sessionId": self.session_id, "update": {"sessionUpdate": "agent_message_chunk",
                                             "content": {"type": "text", "text": text}}}))

    async def turn(self, rid: Any, text: str) -> None:
        words = text.split()
        ms = int(words[1]) if len(words) > 1 and words[1].isdigit() else 1000
        stop = "end_turn"
        if words and words[0] == "/hang":
            await trio.sleep_forever()
        elif words and words[0] in ("/delay", "/slow", "/dropcancel"):
            honour = words[0] != "/slow"
            deadline = trio.current_time() + ms / 1000
            n = 0
            while trio.current_time() < deadline:
                if honour and self.cancelled.is_set():
                    break
                await self.chunk(f"chunk{n} ")
                n += 1
                with trio.move_on_after(0.1):
                    if honour:
                        await self.cancelled.wait()
                    else:
                        await trio.sleep_forever()
            if self.cancelled.is_set():
                stop = "cancelled"
        else:
            await self.chunk(text)
        await self.send(self.rpc.send_response(rid, {"stopReason": stop}))

    async def serve(self) -> None:
        async with trio.open_nursery() as nursery:
            while True:
                data = await self.stream.receive_some(65536)
                self.rpc.receive_data(bytes(data))
                while not isinstance(ev := self.rpc.next_event(), NeedData):
                    match ev:
                        case PeerClosed():
                            nursery.cancel_scope.cancel()
                            return
                        case IncomingRequest(id=rid, method="initialize"):
                            result: dict[str, Any] = {"protocolVersion": 1}
                            if self.launcher is not None and self.launcher.resumable:
                                result["agentCapabilities"] = {
                                    "sessionCapabilities": {"resume": {}}}
                            await self.send(self.rpc.send_response(rid, result))
                        case IncomingRequest(id=rid, method="session/resume", params=params):
                            self.resumed.append(params["sessionId"])
                            launcher = self.launcher
                            if launcher is not None and launcher.hang_restores > 0:
                                launcher.hang_restores -= 1
                            else:
                                self.session_id = params["sessionId"]
                                await self.send(self.rpc.send_response(rid, {}))
                        case IncomingRequest(id=rid, method="session/new"):
                            await self.send(self.rpc.send_response(
                                rid, {"sessionId": self.session_id}))
                        case IncomingRequest(id=rid, method="session/prompt", params=params):
                            text = params["prompt"][0]["text"]
                            self.prompts.append(text)
                            self.cancelled = trio.Event()
                            self.drop_cancels = 1 if text.startswith("/dropcancel") else 0
                            nursery.start_soon(self.turn, rid, text)
                        case IncomingNotification(method="session/cancel"):
                            self.cancels += 1
                            if self.drop_cancels > 0:
                                self.drop_cancels -= 1
                            else:
                                self.cancelled.set()
                        case _:
                            pass


class FakeLauncher:
    """Launches FakeAgents; keeps them so tests can look at what they received."""

    def __init__(self, *, resumable: bool = False, hang_restores: int = 0) -> None:
        self.agents: list[FakeAgent] = []
        self.resumable = resumable
        self.hang_restores = hang_restores

    @asynccontextmanager
    async def __call__(self, profile: AgentProfile, cwd: str,
                       session_id: str) -> AsyncIterator[LaunchedAgent]:
        client, agent_side = trio.testing.memory_stream_pair()
        agent = FakeAgent(agent_side, self)
        self.agents.append(agent)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(agent.serve)
            try:
                yield LaunchedAgent(adapter=AcpAdapter(client, client))
            finally:
                nursery.cancel_scope.cancel()
                await client.aclose()
