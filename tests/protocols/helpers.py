"""Helpers shared by the protocols tests.

``ConnectionPair`` joins a sans-IO client core to an agent-side
``RpcConnection`` by a fake link, in the manner of h11's
h11's ``helpers.py::ConnectionPair``: what one side writes is fed to the other,
and the test asserts both the exact bytes and what the peer parsed from them.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

import trio

import protocols
from protocols.adapters import AcpAdapter, AgentAdapter, CodexAdapter, ProtocolName
from protocols.events import AgentEvent, MessageChunk, TurnEnded
from protocols.jsonrpc import Dialect, NeedData, RpcConnection, RpcEvent

__all__ = [
    "MOCK_AGENT",
    "REPO_ROOT",
    "TRANSCRIPTS",
    "ConnectionPair",
    "RecordingSendStream",
    "RunningAgent",
    "SteeredTurn",
    "drain",
    "parse_lines",
    "read_chunks",
    "steer_mid_turn",
]

REPO_ROOT = Path(protocols.__file__).resolve().parent.parent
MOCK_AGENT = (sys.executable, "-m", "protocols.mock_agent")
#: Real agent traffic: the reference next to the checkout (``../shared``).
SHARED_TRANSCRIPTS = REPO_ROOT.parent / "shared" / "reference" / "agent-transcripts"
#: The repository's copy of it, read where ``../shared`` is absent (a clean clone in CI).
FIXTURE_TRANSCRIPTS = REPO_ROOT / "tests" / "fixtures" / "agent-transcripts"
TRANSCRIPTS = SHARED_TRANSCRIPTS if SHARED_TRANSCRIPTS.is_dir() else FIXTURE_TRANSCRIPTS

E_co = TypeVar("E_co", covariant=True)
E = TypeVar("E")


class EventSource(Protocol[E_co]):
    def receive_data(self, data: bytes) -> None: ...
    def next_event(self) -> E_co | NeedData: ...


class ClientCoreLike(EventSource[E_co], Protocol[E_co]):
    def data_to_send(self) -> bytes: ...


C = TypeVar("C", bound="ClientCoreLike[Any]")


def drain(core: EventSource[E]) -> list[E]:
    """Every event the core has ready, stopping at NEED_DATA."""
    out: list[E] = []
    while not isinstance(ev := core.next_event(), NeedData):
        out.append(ev)
    return out


def parse_lines(data: bytes) -> list[Any]:
    """Decode newline-delimited JSON, insisting that every message is one whole line."""
    assert not data or data.endswith(b"\n"), data
    return [json.loads(line) for line in data.splitlines()]


class ConnectionPair(Generic[C]):
    """A client core and the agent's side of the link, an ``RpcConnection``
    in the server role (the same core the mock agent uses)."""

    def __init__(self, client: C, dialect: Dialect) -> None:
        self.client = client
        self.agent = RpcConnection(dialect, first_id=0)

    def to_agent(self, data: bytes) -> list[RpcEvent]:
        """Deliver bytes the client wrote; return what the agent parsed."""
        self.agent.receive_data(data)
        return drain(self.agent)

    def to_client(self, data: bytes) -> list[object]:
        """Deliver bytes the agent wrote; return the client's events."""
        self.client.receive_data(data)
        return drain(self.client)


class RecordingSendStream(trio.abc.SendStream):
    """Pass-through to the agent's stdin that keeps a copy of every byte
    written, so adapter tests can assert the exact lines on the real wire."""

    def __init__(self, inner: trio.abc.SendStream) -> None:
        self.inner = inner
        self.data = bytearray()

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self.inner.send_all(data)
        self.data += data

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def aclose(self) -> None:
        await self.inner.aclose()

    def lines(self) -> list[Any]:
        return parse_lines(bytes(self.data))


@dataclass
class RunningAgent:
    """A mock agent subprocess driven through an adapter, its reader running."""

    protocol: ProtocolName
    proc: trio.Process
    adapter: AcpAdapter | CodexAdapter
    #: Every byte the adapter wrote to the agent's stdin.
    written: RecordingSendStream
    #: The agent's stderr so far (drained by the fixture).
    stderr: bytearray = field(default_factory=bytearray)


async def read_chunks(adapter: AgentAdapter, until: type[AgentEvent], into: list[str]) -> None:
    """Receives the adapter's events up to the first of type `until`, keeping the text of every
    message chunk among them (the `until` event's own included) in `into`."""
    while True:
        ev = await adapter.events.receive()
        if isinstance(ev, MessageChunk):
            into.append(ev.text)
        if isinstance(ev, until):
            return


@dataclass
class SteeredTurn:
    """What `steer_mid_turn` saw of one steered turn."""

    #: The turn's end, as the adapter's `prompt` returned it.
    ended: TurnEnded
    #: Every chunk the turn streamed, before and after the steer.
    chunks: list[str]
    #: The adapter's `operation_id` (Codex: the turn id) when the steer went out.
    operation_id: str | None
    #: The steer request on the wire: the one line written with method `method`.
    line: dict[str, Any]


async def steer_mid_turn(
    adapter: AgentAdapter, written: RecordingSendStream, prompt: str, text: str, method: str
) -> SteeredTurn:
    """Runs `prompt` as a turn, steers it with `text` once its first chunk arrived, and reads
    its chunks to the end of the turn."""
    chunks: list[str] = []
    ended: list[TurnEnded] = []

    async def run() -> None:
        ended.append(await adapter.prompt(prompt))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run)
        await read_chunks(adapter, MessageChunk, chunks)
        operation_id = adapter.operation_id
        await adapter.steer(text)
        [line] = [m for m in written.lines() if m.get("method") == method]
        await read_chunks(adapter, TurnEnded, chunks)
    [end] = ended
    return SteeredTurn(end, chunks, operation_id, line)
