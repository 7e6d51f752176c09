"""The transcript: an execution's agent events → stored messages → notifications.

One ``Transcript`` per execution, fed in order by the lifecycle's event pump.
Streamed text is buffered per channel (``agent`` answer, ``thought``) and
written by the ``TextWriter`` with every other session's (``take_updates``), or
by ``flush`` when the turn needs it written now, or by the turn's close in its
own transaction (``take_updates`` again).  Text that starts a message is an
insert (``Store.add_message``); text that grows one is always ``_grow``'s
update, written by ``Store.update_messages`` (or the close's transaction) and
announced by ``Notifier.messages_updated``: consecutive chunks cost one
store write and one ``session.message.updated`` — or, for connections
subscribed with ``text_appends``, one ``session.message.appended`` carrying
only the new text at its UTF-16 offset.  A tool call, a plan or
a permission card is a message of its own; text after a tool call or a
permission starts a new text message.  The store publishes what it writes;
the permission notifications are published here.

A long answer is written as several messages of at most about
``SEGMENT_UNITS`` each.  One turn's text is capped (``max_turn_output``, UTF-8 bytes, every channel
together): what the agent streams beyond it is dropped here, before it is
buffered, stored or sent, and one status message says so; the turn goes on
(and is cancelled as any other).  Why here: every chunk of agent text passes
this one place, and what is never buffered costs no disk (a message row
rewritten as it grows) and no bandwidth (each subscriber's updates).

Turn control (a turn's end, cancel, escalation) is not here: that is the
lifecycle's.  This module only writes down what the agent said.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Final

import trio

from protocols.events import (
    AgentEvent,
    MessageChunk,
    PermissionRequested,
    PermissionResolved,
    PermissionWithdrawn,
    PlanUpdated,
    ToolCallStarted,
    ToolCallUpdated,
    UserEcho,
)

from ..models import Message, TextAppend, utf16_len
from ..notify import Notifier
from ..storage.store import Store
from .tool_details import finished_stamp, tool_details

__all__ = ["OUTPUT_CUT_STATUS", "Transcript", "TurnText"]

log = logging.getLogger(__name__)

#: A streamed text message this long (UTF-16 units, about characters) is not
#: extended: the turn's next text starts another.  Every write of a growing
#: message rewrites all of it (its row, and its copy to a subscriber without
#: appends), so one long answer in one message costs the square of its length.
SEGMENT_UNITS: Final = 256 * 1024
#: The status message of a turn whose text reached the cap ({} = the cap).
OUTPUT_CUT_STATUS: Final = "Output over {} was cut; the turn goes on"


@dataclass(eq=False)
class TurnText:
    """What one turn has written so far: the open messages it may still extend."""

    session_id: str
    turn_id: str
    #: The agent text message being streamed, per channel (agent / thought).
    text: dict[str, Message] = field(default_factory=dict)
    #: Their content's length in UTF-16 units (``utf16_len``), kept as they
    #: grow so that an append's offset costs the chunk, not the whole message.
    text_units: dict[str, int] = field(default_factory=dict)
    pending_text: dict[str, str] = field(default_factory=dict)
    tools: dict[str, Message] = field(default_factory=dict)
    plan: Message | None = None
    #: Set while its text is being written (by the pump, or with other
    #: sessions' by the ``TextWriter``): a second write waits for it, so that
    #: writes of one message land, and are announced, in order.
    writing: trio.Event | None = None
    #: Channels whose message's last write failed: its next write is announced
    #: whole, not as an append (whose offset would skip what was never announced).
    resync: set[str] = field(default_factory=set)
    #: The agent text taken so far (UTF-8 bytes), and what was dropped past the cap.
    output_bytes: int = 0
    dropped_bytes: int = 0

    def not_written(self) -> None:
        """A write of its text failed: every open message is announced whole
        next time (the failed write had some of them; a whole one is never wrong)."""
        self.resync.update(self.text)


class Transcript:
    def __init__(self, store: Store, notify: Notifier, session_id: str, *,
                 max_turn_output: int = 8 * 1024 * 1024) -> None:
        self.store = store
        self.notify = notify
        self.session_id = session_id
        self.max_turn_output = max_turn_output
        #: Permission cards the agent is waiting on: its request id → the card.
        self.permissions: dict[str, Message] = {}

    async def record(self, turn: TurnText | None, ev: AgentEvent) -> None:
        """Write one event down (``turn`` is None outside a turn)."""
        match ev:
            case MessageChunk(text=text, channel=channel) if turn is not None:
                if turn.dropped_bytes:
                    turn.dropped_bytes += len(text)  # (characters: a count for the log)
                    return
                kept, cut = self._within_cap(turn, text)
                pending = turn.pending_text.get(channel, "")
                if kept and turn.text_units.get(channel, 0) + len(pending) >= SEGMENT_UNITS:
                    # Long enough: written, and what follows starts the next message.
                    await self.flush(turn)
                    turn.text.pop(channel, None)
                    turn.text_units.pop(channel, None)
                    pending = turn.pending_text.get(channel, "")
                if kept:
                    turn.pending_text[channel] = pending + kept
                if cut:
                    await self._say_cut(turn, len(text) - len(kept))
            case ToolCallStarted() if turn is not None:
                await self.flush(turn, close=True)
                turn.tools[ev.tool_call_id] = await self.store.add_message(
                    self.session_id, turn.turn_id, "agent", "tool_call", ev.title,
                    {"tool_call_id": ev.tool_call_id, "status": ev.status, "kind": ev.kind,
                     # The card's input, output, diff; when it finished.
                     **tool_details(ev.raw), **finished_stamp({}, ev.status)},
                )
            case ToolCallUpdated() if turn is not None:
                tool = turn.tools.get(ev.tool_call_id)
                if tool is not None:
                    meta = {**tool.metadata, "status": ev.status or tool.metadata.get("status")}
                    meta.update(tool_details(ev.raw))
                    meta.update(finished_stamp(tool.metadata, meta["status"]))
                    turn.tools[ev.tool_call_id] = await self._update(
                        tool, ev.title or tool.content, meta)
            case PlanUpdated() if turn is not None:
                content = "\n".join(str(e.get("content", "")) for e in ev.entries)
                meta = {"entries": list(ev.entries)}
                if turn.plan is None:
                    turn.plan = await self.store.add_message(
                        self.session_id, turn.turn_id, "agent", "plan", content, meta)
                else:
                    turn.plan = await self._update(turn.plan, content, meta)
            case PermissionRequested():
                # Also outside a turn: Auggie asks about workspace indexing right after
                # session/new, and takes no prompt until that question is answered.
                if turn is not None:
                    await self.flush(turn, close=True)
                msg = await self.store.add_message(
                    self.session_id, turn.turn_id if turn else None, "agent", "permission",
                    ev.title, {
                        "request_id": ev.request_id, "tool_call_id": ev.tool_call_id,
                        "status": "pending", "option_id": None,
                        "options": [{"option_id": o.option_id, "name": o.name, "kind": o.kind}
                                    for o in ev.options],
                        # What is asked (command, path, diff...), for the card to show.
                        "details": dict(ev.details),
                    },
                )
                self.permissions[ev.request_id] = msg
                self.notify.permission_requested(msg)
            case PermissionResolved(request_id=request_id, option_id=option_id):
                card = self.permissions.pop(request_id, None)
                if card is not None:
                    status = "cancelled" if option_id is None else "selected"
                    await self._update(card, card.content,
                                       {**card.metadata, "status": status, "option_id": option_id})
                    if option_id is None:
                        self.notify.permission_cancelled(self.session_id, request_id)
            case PermissionWithdrawn(request_id=request_id):
                # The agent took its question back ($/cancel_request, serverRequest/resolved).
                card = self.permissions.pop(request_id, None)
                if card is not None:
                    await self._update(card, card.content, {
                        **card.metadata, "status": "cancelled", "option_id": None,
                        "withdrawn": True})
                    self.notify.permission_cancelled(self.session_id, request_id)
            case UserEcho():
                pass  # the agent repeating the user's prompt: already stored as the user's
            case _:
                log.debug("not in the transcript: %r", ev)

    def _within_cap(self, turn: TurnText, text: str) -> tuple[str, bool]:
        """What of ``text`` fits the turn's cap (all of it, or a prefix cut at a
        character), counted; and whether it was cut."""
        size = len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
        room = self.max_turn_output - turn.output_bytes
        if size <= room:
            turn.output_bytes += size
            return text, False
        turn.output_bytes = self.max_turn_output
        return text.encode("utf-8", "surrogatepass")[:room].decode("utf-8", "ignore"), True

    async def _say_cut(self, turn: TurnText, dropped: int) -> None:
        """The cap is reached: what fits is written, then the status message;
        everything the agent streams after it in this turn is dropped."""
        turn.dropped_bytes = max(1, dropped)
        await self.flush(turn, close=True)
        limit = _amount(self.max_turn_output)
        log.warning("session %s turn %s: the agent's text reached %s; the rest is dropped",
                    self.session_id, turn.turn_id, limit)
        await self.store.add_message(
            self.session_id, turn.turn_id, "system", "status", OUTPUT_CUT_STATUS.format(limit),
            {"output_cut": True, "limit_bytes": self.max_turn_output, "variant": "warning"})

    async def reopen_turn(self, turn_id: str) -> TurnText:
        """A running turn another backend wrote down (taken over after a
        restart): what its next events extend — its tool cards, its plan, its
        open permission cards, and its text message if that is its latest."""
        turn = TurnText(session_id=self.session_id, turn_id=turn_id)
        last: Message | None = None
        for msg in await self.store.list_messages(self.session_id):
            if msg.turn_id != turn_id or msg.role != "agent":
                continue
            last = msg
            tool_call_id = msg.metadata.get("tool_call_id")
            if msg.kind == "tool_call" and isinstance(tool_call_id, str):
                turn.tools[tool_call_id] = msg
            elif msg.kind == "plan":
                turn.plan = msg
            elif msg.kind == "permission" and msg.metadata.get("status") == "pending":
                self.permissions[str(msg.metadata.get("request_id"))] = msg
        if last is not None and last.kind == "text":
            channel = str(last.metadata.get("channel", "agent"))
            turn.text[channel] = last
            turn.text_units[channel] = utf16_len(last.content)  # what appends count from
        return turn

    async def flush(self, turn: TurnText, *, close: bool = False) -> None:
        """Write the buffered text; ``close``: the next text starts a new message."""
        while turn.writing is not None:
            await turn.writing.wait()
        writing = turn.writing = trio.Event()
        try:
            for channel, text in list(turn.pending_text.items()):
                if text and channel not in turn.text:
                    # A new message: its row is inserted (that gives it its id).
                    turn.pending_text[channel] = ""
                    meta = {"channel": channel} if channel != "agent" else {}
                    turn.text[channel] = await self.store.add_message(
                        turn.session_id, turn.turn_id, "agent", "text", text, meta)
                    turn.text_units[channel] = utf16_len(text)
            # What only grew is written as the ``TextWriter`` writes it (and the
            # close takes it, ``take_updates``): one ``update_messages``.  (A
            # channel whose first text came during an insert above is left for
            # the next write: its pump marked it.)
            grown = _grown(turn)
            if grown:
                try:
                    await self.store.update_messages(grown)
                except BaseException:
                    turn.not_written()
                    raise
            if close:
                # Text after a tool call or a permission card starts a new message.
                turn.text.clear()
                turn.text_units.clear()
        finally:
            turn.writing = None
            writing.set()

    @staticmethod
    def take_updates(turn: TurnText) -> list[tuple[Message, TextAppend | None]] | None:
        """The buffered text as updates of the messages it extends, taken now
        (the turn's state already says they are written); None if a channel's
        text starts a new message (that is ``flush``'s) or a write is under way."""
        if turn.writing is not None or any(
                text and channel not in turn.text for channel, text in turn.pending_text.items()):
            return None
        return _grown(turn)

    async def _update(self, msg: Message, content: str, metadata: dict[str, Any]) -> Message:
        new = _changed(msg, content, metadata)
        await self.store.update_message(new)
        return new


def _grown(turn: TurnText) -> list[tuple[Message, TextAppend | None]]:
    """Every message of the turn its buffered text grows, as updates to write
    (the text taken from the buffer); a channel with no message yet is left."""
    return [_grow(turn, channel, turn.text[channel])
            for channel, text in list(turn.pending_text.items())
            if text and channel in turn.text]


def _grow(turn: TurnText, channel: str, current: Message) -> tuple[Message, TextAppend | None]:
    """``channel``'s message with its buffered text appended (taken from the
    buffer), and the append to announce."""
    text, turn.pending_text[channel] = turn.pending_text[channel], ""
    offset = turn.text_units[channel]
    turn.text_units[channel] = offset + utf16_len(text)
    # A surrogate pair cut between two flushes: the stored half was U+FFFD and
    # becomes the character, which is no append; nor is text after a failed write.
    appended = None if channel in turn.resync or _ends_in_high_surrogate(current.content) \
        else TextAppend(offset, text)
    turn.resync.discard(channel)
    msg = turn.text[channel] = _changed(current, current.content + text, current.metadata)
    return msg, appended


def _changed(msg: Message, content: str, metadata: dict[str, Any]) -> Message:
    """``msg`` with new content and metadata (its id, place and time kept)."""
    return Message(id=msg.id, session_id=msg.session_id, turn_id=msg.turn_id, role=msg.role,
                   kind=msg.kind, content=content, metadata=metadata,
                   created_at=msg.created_at)


def _ends_in_high_surrogate(text: str) -> bool:
    return bool(text) and "\ud800" <= text[-1] <= "\udbff"


def _amount(size: int) -> str:
    """Bytes as a person reads them: "8 MiB", "512 KiB", "100 bytes"."""
    for unit, scale in (("MiB", 1024 * 1024), ("KiB", 1024)):
        if size >= scale:
            return f"{size / scale:.3g} {unit}"
    return f"{size} bytes"
