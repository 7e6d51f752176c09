"""The agentctl event stream, as data: frames to and from ``protocols.events``.

Sans-IO (no sockets, no tasks): the server (``web.agentctl``) encodes with
``event_frame``; the client (``supervisor.executors.agentctl``) feeds each text
message to a ``StreamDecoder``, which checks the sequence and returns a
``Frame``.

Every frame is a JSON object with a ``type``.  Frames that are part of the log
carry ``seq`` (1, 2, 3... per agentctl process, never reused) and ``turn`` (the
agentctl turn id the event belongs to, or null); a client that sees a ``seq``
other than ``last + 1`` has missed events.  Types:

- the agent's events, named by their ``protocols.events`` class
  (``MessageChunk``, ``ToolCallStarted``, ``TurnEnded``...), fields as in the
  dataclass (tuples become lists);
- agentctl's own log entries (``CONTROL_TYPES``): ``AgentStarted {pid}``,
  ``AgentExited {returncode, error, session_id}``, ``SessionStarted {session_id, owner}``,
  ``TurnStarted``, ``OfflineCancel {turn_id, offline_s}`` (the turn cancelled
  because no client was connected that long, DESIGN.md §20);
- unnumbered frames, never in the log: ``Hello`` (first frame of every
  connection: ``last_seq``, ``oldest_seq``, the status), ``Gap`` (``from``,
  ``to``: a reconnecting client asked for events no longer kept) and
  ``Heartbeat`` (``last_seq``; sent when the stream is idle, so a client can
  bound its wait on a silent connection).

Resuming: a client that read up to seq N (a backend restarted while its
agent's turn ran on) connects with ``?after=N`` and decodes with
``StreamDecoder(after=N)``: the log entries after N come first (the replay
ring agentctl keeps whether or not anyone is connected), then the live ones,
with no seq skipped.  A turn's end is a log entry like any other
(``TurnEnded`` stamped with the turn), so a prompt that was in flight at the
agent when the client went away ends, for the resumed client, with that
entry — its ACP ``session/prompt`` response or Codex ``turn/completed``,
which agentctl itself awaited.  ``Hello.resumed`` says whether the stream
really continues after N: false when entries after N are no longer kept, or
when the log is not the one N was read from (agentctl restarted).

A subscriber that falls behind is closed with ``CLOSE_FELL_BEHIND`` and a
reason naming the last seq it was sent; it reconnects with ``?after=<seq>``.

The other way, client → agentctl, on the same connection (an agentctl that
reads them lists their types in ``Hello.accepts``): ``Cancel {turn_id,
session_id?}`` — write the protocol cancel of that turn now (a cancel without
an HTTP request: DESIGN.md §20).  agentctl answers each on the stream, in
order with the events and never in the log (unnumbered, that connection's
alone): ``CancelWritten {turn_id, running}`` (written, or no such turn runs:
``running`` false), ``CancelFailed {turn_id, error}``, and ``FrameRefused
{error}`` for a frame it cannot read (the stream goes on).  ``decode_request``
reads a client frame, ``cancel_frame``/``cancel_reply``/``refusal_frame``
write them.
"""

from __future__ import annotations

import dataclasses
import json
import typing
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

from protocols.events import (
    STOP_REASONS,
    AgentEvent,
    AgentNotice,
    CommandsChanged,
    MessageChunk,
    OptionsChanged,
    OtherUpdate,
    PermissionOption,
    PermissionRequested,
    PermissionResolved,
    PlanUpdated,
    SubagentActivity,
    SubagentChanged,
    SubagentState,
    TitleChanged,
    ToolCallStarted,
    ToolCallUpdated,
    TurnEnded,
    UsageUpdated,
)

__all__ = [
    "CLOSE_FELL_BEHIND",
    "CLOSE_GOING_AWAY",
    "CONTROL_TYPES",
    "EVENT_TYPES",
    "MAX_REQUEST_CHARS",
    "REQUEST_TYPES",
    "TOKEN_ENV",
    "TOKEN_HEADER",
    "CancelAck",
    "CancelRequest",
    "Control",
    "Frame",
    "FrameRefused",
    "Heartbeat",
    "Hello",
    "LoggedEvent",
    "StreamDecoder",
    "WireError",
    "cancel_frame",
    "cancel_reply",
    "decode_event",
    "decode_request",
    "event_frame",
    "refusal_frame",
]

#: The environment variable both sides read the bearer token from.
TOKEN_ENV: Final = "TURNVISOR_AGENTCTL_TOKEN"
#: Where agentctl also takes its token (``Bearer <token>``) when a relay in
#: between authenticates with ``Authorization`` itself and consumes it (the
#: Kubernetes API server's Pod proxy deletes it once it has authenticated).
TOKEN_HEADER: Final = "X-Turnvisor-Agentctl-Token"
#: WebSocket close codes (4000-4999 are the application's).
CLOSE_FELL_BEHIND: Final = 4001
CLOSE_GOING_AWAY: Final = 1001

EVENT_TYPES: Final[dict[str, type[Any]]] = {
    cls.__name__: cls
    for cls in (MessageChunk, ToolCallStarted, ToolCallUpdated, PlanUpdated,
                PermissionRequested, PermissionResolved, TurnEnded, OtherUpdate, AgentNotice,
                SubagentChanged, SubagentActivity, OptionsChanged, CommandsChanged, UsageUpdated,
                TitleChanged)
}
CONTROL_TYPES: Final = frozenset({"AgentStarted", "AgentExited", "SessionStarted", "TurnStarted",
                                  "OfflineCancel"})
#: The client → agentctl frames an agentctl reads (its Hello's ``accepts``).
REQUEST_TYPES: Final = ("Cancel",)
#: A client frame's size cap: a cancel is a few hundred bytes.
MAX_REQUEST_CHARS: Final = 4096


class WireError(ValueError):
    """A frame that does not decode into an event (the peer's fault)."""


def _plain(value: Any) -> Any:
    if isinstance(value, PermissionOption):
        return {"option_id": value.option_id, "name": value.name, "kind": value.kind}
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    return value


def event_frame(ev: AgentEvent) -> dict[str, Any]:
    """``{"type": <class name>, <field>: <value>...}`` (JSON-ready)."""
    frame: dict[str, Any] = {"type": type(ev).__name__}
    for f in dataclasses.fields(ev):
        frame[f.name] = _plain(getattr(ev, f.name))
    return frame


def _str(frame: dict[str, Any], key: str, *, optional: bool = False) -> Any:
    value = frame.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise WireError(f"{frame.get('type')}.{key} must be a string")
    return value


def _dict(frame: dict[str, Any], key: str) -> dict[str, Any]:
    value = frame.get(key) or {}
    if not isinstance(value, dict):
        raise WireError(f"{frame.get('type')}.{key} must be an object")
    return value


def _objects(frame: dict[str, Any], key: str) -> tuple[dict[str, Any], ...]:
    value = frame.get(key)
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise WireError(f"{frame.get('type')}.{key} must be a list of objects")
    return tuple(value)


def decode_event(frame: dict[str, Any]) -> AgentEvent:
    """The event a log frame carries; ``WireError`` if it is not one."""
    kind = frame.get("type")
    match kind:
        case "MessageChunk":
            channel = frame.get("channel", "agent")
            if channel not in ("agent", "thought", "user"):
                raise WireError(f"MessageChunk.channel {channel!r}")
            return MessageChunk(text=_str(frame, "text"), channel=channel,
                                message_id=_str(frame, "message_id", optional=True))
        case "ToolCallStarted":
            return ToolCallStarted(tool_call_id=_str(frame, "tool_call_id"),
                                   title=_str(frame, "title"),
                                   status=_str(frame, "status", optional=True) or "pending",
                                   kind=_str(frame, "kind", optional=True),
                                   raw=_dict(frame, "raw"))
        case "ToolCallUpdated":
            return ToolCallUpdated(tool_call_id=_str(frame, "tool_call_id"),
                                   status=_str(frame, "status", optional=True),
                                   title=_str(frame, "title", optional=True),
                                   raw=_dict(frame, "raw"))
        case "PlanUpdated":
            entries = frame.get("entries") or []
            if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
                raise WireError("PlanUpdated.entries must be a list of objects")
            return PlanUpdated(entries=tuple(entries))
        case "PermissionRequested":
            options = frame.get("options") or []
            if not isinstance(options, list) or not all(isinstance(o, dict) for o in options):
                raise WireError("PermissionRequested.options must be a list of objects")
            return PermissionRequested(
                request_id=_str(frame, "request_id"), title=_str(frame, "title"),
                options=tuple(PermissionOption(option_id=_str(o, "option_id"),
                                               name=_str(o, "name"), kind=_str(o, "kind"))
                              for o in options),
                tool_call_id=_str(frame, "tool_call_id", optional=True))
        case "PermissionResolved":
            return PermissionResolved(request_id=_str(frame, "request_id"),
                                      option_id=_str(frame, "option_id", optional=True))
        case "TurnEnded":
            reason = frame.get("stop_reason")
            if reason not in STOP_REASONS:
                raise WireError(f"TurnEnded.stop_reason {reason!r}")
            count = frame.get("subagents_cancelled", 0)
            return TurnEnded(stop_reason=reason, turn_id=_str(frame, "turn_id", optional=True),
                             error=_str(frame, "error", optional=True),
                             subagents_cancelled=count if type(count) is int else 0)
        case "SubagentActivity":
            return SubagentActivity(subagent_id=_str(frame, "subagent_id"),
                                    text=_str(frame, "text", optional=True) or "",
                                    tool=_str(frame, "tool", optional=True) or "")
        case "SubagentChanged":
            state = frame.get("state")
            if state not in typing.get_args(SubagentState):
                raise WireError(f"SubagentChanged.state {state!r}")
            return SubagentChanged(subagent_id=_str(frame, "subagent_id"),
                                   title=_str(frame, "title"),
                                   state=typing.cast(SubagentState, state),
                                   cancellable=frame.get("cancellable") is True,
                                   stop_reason=_str(frame, "stop_reason", optional=True),
                                   task=_str(frame, "task", optional=True) or "")
        case "OptionsChanged":
            return OptionsChanged(options=_objects(frame, "options"))
        case "CommandsChanged":
            return CommandsChanged(commands=_objects(frame, "commands"))
        case "UsageUpdated":
            return UsageUpdated(usage=_dict(frame, "usage"))
        case "TitleChanged":
            return TitleChanged(title=_str(frame, "title"))
        case "OtherUpdate":
            return OtherUpdate(kind=_str(frame, "kind"), payload=frame.get("payload"))
        case "AgentNotice":
            level = frame.get("level", "warning")
            if level not in ("info", "warning"):
                raise WireError(f"AgentNotice.level {level!r}")
            return AgentNotice(message=_str(frame, "message"), level=level)
    raise WireError(f"not an agent event: {kind!r}")


# -- the client's side of the stream ---------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Hello:
    """The first frame of a connection: agentctl's status when it opened."""

    last_seq: int
    status: dict[str, Any]
    #: With ``StreamDecoder(after=N)``: whether every entry after N follows
    #: (None: the client did not resume).
    resumed: bool | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Heartbeat:
    """The stream is idle (unnumbered)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Control:
    """One of agentctl's own log entries (``CONTROL_TYPES``)."""

    seq: int
    kind: str
    turn: str | None
    data: dict[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class LoggedEvent:
    """An agent event, stamped with agentctl's turn id."""

    seq: int
    turn: str | None
    event: AgentEvent


@dataclass(frozen=True, slots=True, kw_only=True)
class CancelAck:
    """agentctl's answer to a ``Cancel`` frame (unnumbered): ``error`` None
    when the cancel was written (or no such turn was running: ``running``)."""

    turn_id: str
    running: bool = True
    error: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class FrameRefused:
    """agentctl could not read a frame the client sent (unnumbered)."""

    error: str


Frame: TypeAlias = Hello | Heartbeat | Control | LoggedEvent | CancelAck | FrameRefused


@dataclass(frozen=True, slots=True, kw_only=True)
class CancelRequest:
    """A client's ``Cancel`` frame: the protocol cancel of ``turn_id``, now."""

    turn_id: str
    session_id: str | None = None


def cancel_frame(turn_id: str, session_id: str | None = None) -> str:
    """The client's ``Cancel`` frame, as sent."""
    return json.dumps({"type": "Cancel", "turn_id": turn_id, "session_id": session_id})


def cancel_reply(turn_id: str, *, running: bool = True, error: str | None = None) -> str:
    """agentctl's answer to a ``Cancel``: ``CancelWritten``, or ``CancelFailed``
    with ``error``."""
    if error is not None:
        return json.dumps({"type": "CancelFailed", "turn_id": turn_id, "error": error})
    return json.dumps({"type": "CancelWritten", "turn_id": turn_id, "running": running})


def refusal_frame(error: str) -> str:
    return json.dumps({"type": "FrameRefused", "error": error})


def decode_request(message: str | bytes) -> CancelRequest:
    """A client → agentctl frame; ``WireError`` naming what is wrong with a bad one."""
    if not isinstance(message, str):
        raise WireError("unexpected binary message")
    if len(message) > MAX_REQUEST_CHARS:
        raise WireError(f"a client frame must be at most {MAX_REQUEST_CHARS} characters")
    frame = _object(message)
    kind = frame.get("type")
    if kind != "Cancel":
        raise WireError(f"not a client frame: {kind!r} (agentctl reads {', '.join(REQUEST_TYPES)})")
    turn_id = frame.get("turn_id")
    if not isinstance(turn_id, str) or not turn_id:
        raise WireError("Cancel.turn_id must be a non-empty string")
    return CancelRequest(turn_id=turn_id, session_id=_str(frame, "session_id", optional=True))


def _object(message: str) -> dict[str, Any]:
    """A text message as the JSON object every frame is."""
    try:
        frame = json.loads(message)
    except ValueError as exc:
        raise WireError(f"not JSON: {exc}") from None
    if not isinstance(frame, dict):
        raise WireError("a frame must be a JSON object")
    return frame


def _reply(kind: object, frame: dict[str, Any]) -> CancelAck | FrameRefused | None:
    """An unnumbered answer to a client frame, or None (not one)."""
    if kind == "FrameRefused":
        return FrameRefused(error=str(frame.get("error")))
    if kind not in ("CancelWritten", "CancelFailed"):
        return None
    turn_id = _str(frame, "turn_id")
    if kind == "CancelWritten":
        return CancelAck(turn_id=turn_id, running=frame.get("running") is not False)
    return CancelAck(turn_id=turn_id, error=str(frame.get("error") or "the cancel failed"))


class StreamDecoder:
    """Text messages of one event-stream connection → ``Frame`` values.

    The first message must be ``Hello``; after it every numbered frame must
    carry ``last + 1``.  Anything else — bad JSON, an unknown type, a skipped
    seq — raises ``WireError`` naming it: the client has lost events and must
    treat the link as lost.

    ``after``: the stream was opened with ``?after=<after>``; numbering goes
    on from there (the replayed entries first).  When agentctl cannot replay
    from there (``Hello.resumed`` false) it continues from what agentctl
    sends: its ``Gap`` frame, or its live log.
    """

    def __init__(self, *, after: int | None = None) -> None:
        self.last_seq: int | None = None
        self.after = after

    def receive(self, message: str | bytes) -> Frame:
        if not isinstance(message, str):
            raise WireError("unexpected binary message")
        frame = _object(message)
        kind = frame.get("type")
        if self.last_seq is None:
            if kind != "Hello":
                raise WireError("the event stream did not start with Hello")
            last = frame.get("last_seq", 0)
            oldest = frame.get("oldest_seq", last + 1)
            if not isinstance(last, int) or not isinstance(oldest, int):
                raise WireError("Hello.last_seq and oldest_seq must be integers")
            after = self.after
            if after is None:
                self.last_seq = last
                return Hello(last_seq=last, status=frame)
            # After ``after``: kept (oldest <= after + 1), and from this log
            # (seq numbers are per agentctl process: a restarted one is behind).
            if after > last:
                self.last_seq = last  # a restarted agentctl: its live log follows
                return Hello(last_seq=last, status=frame, resumed=False)
            # A Gap frame follows if the entries right after ``after`` are gone.
            self.last_seq = after
            return Hello(last_seq=last, status=frame,
                         resumed=after == last or oldest <= after + 1)
        seq = frame.get("seq")
        if seq is None:
            if kind == "Gap":
                # The entries up to ``to`` are gone (Hello.resumed said so): the
                # replay starts after them.
                to = frame.get("to")
                if not isinstance(to, int) or isinstance(to, bool):
                    raise WireError("Gap.to must be an integer")
                self.last_seq = to
            reply = _reply(kind, frame)
            if reply is not None:
                return reply
            return Heartbeat()  # Hello and Gap come only at the start
        if not isinstance(seq, int) or isinstance(seq, bool):
            raise WireError("seq must be an integer")
        if seq != self.last_seq + 1:
            raise WireError(f"the event stream skipped from seq {self.last_seq} to {seq}")
        self.last_seq = seq
        turn = frame.get("turn")
        if turn is not None and not isinstance(turn, str):
            raise WireError("turn must be a string or null")
        if kind in CONTROL_TYPES:
            return Control(seq=seq, kind=str(kind), turn=turn, data=frame)
        return LoggedEvent(seq=seq, turn=turn, event=decode_event(frame))
