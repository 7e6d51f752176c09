"""Sans-IO JSON-RPC over newline-delimited JSON, in both agent dialects.

ACP speaks JSON-RPC 2.0 (every message carries ``"jsonrpc": "2.0"``); the Codex
app-server speaks the same shape without that field.  ``RpcConnection`` does no
I/O: ``receive_data(bytes)`` buffers, ``next_event()`` returns one event or
``NEED_DATA``, and the ``send_*`` methods return the bytes to write.

Requests go both ways (agents call the client too), so the connection tracks
the ids it sent and matches responses to them; a response to an id it never
sent is reported, not raised.  Whatever the peer writes, ``next_event`` returns
an event: a non-JSON line becomes ``InvalidLine`` and the connection goes on,
as the mock agent's ``/garbage`` expects.  Only misuse by our own caller raises
(``LocalProtocolError``).
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Final, TypeAlias

from .framing import DEFAULT_MAX_LINE_BYTES, Line, LineDecoder, LineTooLong, StreamEnded

__all__ = [
    "NEED_DATA",
    "REQUEST_CANCELLED",
    "Dialect",
    "ErrorResponse",
    "IncomingNotification",
    "IncomingRequest",
    "InvalidLine",
    "LocalProtocolError",
    "NeedData",
    "PeerClosed",
    "Response",
    "RpcConnection",
    "RpcEvent",
    "UnmatchedResponse",
    "error_details",
    "error_text",
]

JSON = Any
RequestId = int | str

# JSON-RPC error codes.
PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603
#: The answer to a request its sender withdrew (LSP's code, adopted by ACP's
#: ``$/cancel_request``).
REQUEST_CANCELLED: Final = -32800


#: How long a short form of an error's ``data`` may be (``error_details``).
DETAILS_CHARS: Final = 300


def error_details(data: JSON) -> str | None:
    """A short form of a JSON-RPC error's ``data`` for a person, or None when
    it says nothing: its ``details`` (the ACP SDKs' ``RequestError``), else
    its ``message``, when ``data`` is an object; the text when it is a string.
    One line, at most ``DETAILS_CHARS`` characters."""
    text: object = data
    if isinstance(data, dict):
        text = data.get("details")
        if not isinstance(text, str) or not text.strip():
            text = data.get("message")
    if not isinstance(text, str):
        return None
    text = " ".join(text.split())
    if not text:
        return None
    return text if len(text) <= DETAILS_CHARS else text[:DETAILS_CHARS - 1] + "…"


def error_text(message: str, data: JSON) -> str:
    """An error's message with the short form of its ``data`` (``error_details``)
    when that adds something: what a person is shown of an agent's error."""
    details = error_details(data)
    if details is None or details in message:
        return message
    if not message.strip() or message in details:
        return details
    return f"{message}: {details}"


class Dialect(Enum):
    #: JSON-RPC 2.0 with the ``jsonrpc`` member (ACP).
    JSONRPC2 = "jsonrpc2"
    #: The Codex app-server variant: no ``jsonrpc`` member.
    CODEX = "codex"


class LocalProtocolError(Exception):
    """Our caller misused the connection (a bug on this side, not the agent's)."""


class NeedData:
    """The type of ``NEED_DATA``: nothing more can be decoded until more bytes come."""

    def __repr__(self) -> str:
        return "NEED_DATA"


NEED_DATA: Final = NeedData()


@dataclass(frozen=True, slots=True, kw_only=True)
class IncomingRequest:
    id: RequestId
    method: str
    params: JSON


@dataclass(frozen=True, slots=True, kw_only=True)
class IncomingNotification:
    method: str
    params: JSON


@dataclass(frozen=True, slots=True, kw_only=True)
class Response:
    id: RequestId
    method: str
    result: JSON


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorResponse:
    id: RequestId
    method: str
    code: int
    message: str
    data: JSON = None


@dataclass(frozen=True, slots=True, kw_only=True)
class UnmatchedResponse:
    """A response whose id we never sent (or already settled)."""

    id: JSON
    message: JSON


@dataclass(frozen=True, slots=True, kw_only=True)
class InvalidLine:
    """A line that is not a JSON-RPC message; the stream goes on after it."""

    reason: str
    line: bytes = field(repr=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class PeerClosed:
    """The agent's stdout ended.  ``pending`` lists requests left unanswered."""

    pending: tuple[tuple[RequestId, str], ...]


RpcEvent: TypeAlias = (
    IncomingRequest
    | IncomingNotification
    | Response
    | ErrorResponse
    | UnmatchedResponse
    | InvalidLine
    | PeerClosed
)

#: How much of a bad line an ``InvalidLine`` keeps for the log.
_SNIPPET: Final = 200


class RpcConnection:
    def __init__(
        self,
        dialect: Dialect,
        *,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        first_id: int = 1,
    ) -> None:
        self.dialect = dialect
        self._decoder = LineDecoder(max_line_bytes=max_line_bytes)
        self._events: deque[RpcEvent] = deque()
        self._next_id = first_id
        #: Requests we sent that are still waiting for an answer: id → method.
        self.pending: dict[RequestId, str] = {}
        self.closed = False

    # -- outgoing -----------------------------------------------------------

    def _encode(self, msg: dict[str, JSON]) -> bytes:
        if self.dialect is Dialect.JSONRPC2:
            msg = {"jsonrpc": "2.0", **msg}
        text = json.dumps(msg, separators=(",", ":"), ensure_ascii=False)
        try:
            return text.encode() + b"\n"
        except UnicodeEncodeError:
            # A lone surrogate (legal as a JSON escape, so an agent can send one
            # in an id or a method we echo back) has no UTF-8 form; \u-escaping
            # everything keeps the line valid JSON instead of raising.
            return json.dumps(msg, separators=(",", ":")).encode() + b"\n"

    def send_request(self, method: str, params: JSON = None) -> tuple[int, bytes]:
        if self.closed:
            raise LocalProtocolError(f"cannot send {method!r}: the agent's stream has ended")
        rid = self._next_id
        self._next_id += 1
        self.pending[rid] = method
        msg: dict[str, JSON] = {"id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        return rid, self._encode(msg)

    def send_notification(self, method: str, params: JSON = None) -> bytes:
        msg: dict[str, JSON] = {"method": method}
        if params is not None:
            msg["params"] = params
        return self._encode(msg)

    def send_response(self, rid: RequestId, result: JSON) -> bytes:
        return self._encode({"id": rid, "result": result})

    def send_error(self, rid: RequestId | None, code: int, message: str,
                   data: JSON = None) -> bytes:
        error: dict[str, JSON] = {"code": code, "message": message}
        if data is not None:
            error["data"] = data
        return self._encode({"id": rid, "error": error})

    def forget(self, rid: RequestId) -> None:
        """Stop waiting for ``rid``; a late answer becomes ``UnmatchedResponse``."""
        self.pending.pop(rid, None)

    # -- incoming -----------------------------------------------------------

    def receive_data(self, data: bytes) -> None:
        """Buffer bytes from the agent; ``b""`` means its stdout closed."""
        for frame in self._decoder.feed(data):
            match frame:
                case Line(data=line):
                    self._events.append(self._parse(line))
                case LineTooLong(size=size, limit=limit):
                    self._events.append(
                        InvalidLine(reason=f"line of {size} bytes exceeds {limit}", line=b"")
                    )
                case StreamEnded(partial=partial):
                    if partial.strip():
                        self._events.append(self._parse(partial))
                    self.closed = True
                    self._events.append(PeerClosed(pending=tuple(self.pending.items())))
                    self.pending.clear()

    def next_event(self) -> RpcEvent | NeedData:
        return self._events.popleft() if self._events else NEED_DATA

    def _parse(self, line: bytes) -> RpcEvent:
        try:
            msg = json.loads(line)
        except (ValueError, RecursionError) as exc:
            return InvalidLine(reason=f"not JSON: {exc}", line=line[:_SNIPPET])
        if not isinstance(msg, dict):
            return InvalidLine(reason="not a JSON object", line=line[:_SNIPPET])
        method = msg.get("method")
        rid = msg.get("id")
        if isinstance(method, str):
            params = msg.get("params")
            if "id" in msg and rid is not None:
                if not isinstance(rid, int | str) or isinstance(rid, bool):
                    return InvalidLine(reason="request id must be a string or number", line=line)
                return IncomingRequest(id=rid, method=method, params=params)
            return IncomingNotification(method=method, params=params)
        if "result" in msg or "error" in msg:
            key = rid if isinstance(rid, int | str) and not isinstance(rid, bool) else None
            sent = self.pending.pop(key, None) if key is not None else None
            if sent is None or key is None:
                return UnmatchedResponse(id=rid, message=msg)
            if "error" in msg:
                err = msg["error"]
                if not isinstance(err, dict):
                    err = {"code": INTERNAL_ERROR, "message": str(err)}
                code = err.get("code")
                return ErrorResponse(
                    id=key,
                    method=sent,
                    code=code if isinstance(code, int) else INTERNAL_ERROR,
                    message=str(err.get("message", "")),
                    data=err.get("data"),
                )
            return Response(id=key, method=sent, result=msg["result"])
        return InvalidLine(reason="neither a request, a notification nor a response", line=line)
