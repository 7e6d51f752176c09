"""What both client cores share: the JSON-RPC connection, the event queue and
the bytes the core writes on its own.

A core's ``_handle`` turns one ``RpcEvent`` into zero or more client events
(appended to ``_events``) and may queue replies of its own (``_outgoing``:
errors for calls it does not serve, answers owed at a turn's end); the
transport drains them with ``next_event`` and ``data_to_send``.
"""

from __future__ import annotations

from collections import deque
from typing import TypeAlias

from .events import AgentEvent
from .framing import DEFAULT_MAX_LINE_BYTES
from .jsonrpc import (
    NEED_DATA,
    Dialect,
    ErrorResponse,
    NeedData,
    PeerClosed,
    Response,
    RpcConnection,
    RpcEvent,
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

    def next_event(self) -> ClientEvent | NeedData:
        while not self._events:
            ev = self.rpc.next_event()
            if isinstance(ev, NeedData):
                return NEED_DATA
            self._handle(ev)
        return self._events.popleft()

    def _handle(self, ev: RpcEvent) -> None:
        raise NotImplementedError
