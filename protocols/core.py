"""What both client cores share: the JSON-RPC connection, the event queue and
the bytes the core writes on its own.

Each dialect's core (``AcpClient``, ``CodexClient``) reads its own messages in
its ``next_event``: one ``RpcEvent`` at a time from ``rpc`` into zero or more
client events (appended to ``_events``), with replies of its own queued in
``_outgoing`` (errors for calls it does not serve, answers owed at a turn's
end).  The transport drains them with ``next_event`` and ``data_to_send``.
This base calls nothing of a dialect's: the dialect calls down into it.
"""

from __future__ import annotations

from collections import deque
from typing import TypeAlias

from .events import AgentEvent
from .framing import DEFAULT_MAX_LINE_BYTES
from .jsonrpc import (
    Dialect,
    ErrorResponse,
    PeerClosed,
    Response,
    RpcConnection,
)
from .turnstate import TurnMachine

__all__ = ["ClientEvent", "CoreBase"]

ClientEvent: TypeAlias = AgentEvent | Response | ErrorResponse | PeerClosed


class CoreBase:
    def __init__(self, dialect: Dialect, *, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
                 first_id: int = 1) -> None:
        self.rpc = RpcConnection(dialect, max_line_bytes=max_line_bytes, first_id=first_id)
        self.turn = TurnMachine()
        self._events: deque[ClientEvent] = deque()
        self._outgoing = bytearray()

    def data_to_send(self) -> bytes:
        """Replies the core made on its own."""
        out = bytes(self._outgoing)
        self._outgoing.clear()
        return out

    def receive_data(self, data: bytes) -> None:
        """Bytes from the agent; ``b""`` means its stdout closed."""
        self.rpc.receive_data(data)

