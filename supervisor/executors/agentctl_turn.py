"""A turn this backend started behind agentctl, and what became of its cancel, as data.

``PendingTurn`` is shared by the adapter (which starts the turn and hands its
cancel over) and the link (which reads the turn's end and agentctl's answer to
its ``Cancel`` frame off the event stream).  Neither calls the other back:
the link writes what it read into the turn (``ended``, ``frame``), and whoever
needs it reads it there — the cancel operation waits on ``FrameAnswer.came``
beside the turn's end (supervisor/session/cancellation.py), the link's return
reads ``owed`` and ``frame`` to send a cancel again (DESIGN.md §20).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import trio

from protocols.agentctl_wire import CancelAck
from protocols.events import TurnEnded

__all__ = ["FrameAnswer", "PendingTurn"]


@dataclass(eq=False)
class FrameAnswer:
    """One ``Cancel`` frame of a turn and agentctl's answer to it (``ack``),
    which comes on the stream in order with the events.  Until it comes the
    cancel is owed to a cut link's return (agentctl's cancel of one turn is
    idempotent, so sending it again is safe)."""

    #: Whether the frame was handed to the stream's writer (False: no frame;
    #: the cancel went, or goes, over HTTP).
    sent: bool = False
    ack: CancelAck | None = None
    #: Set when ``ack`` is in.
    came: trio.Event = field(default_factory=trio.Event)

    @property
    def unanswered(self) -> bool:
        return self.sent and self.ack is None

    @property
    def error(self) -> str | None:
        """agentctl's words when it could not write the cancel (None: it did,
        or no answer came yet)."""
        return None if self.ack is None else self.ack.error

    def answer(self, ack: CancelAck) -> None:
        """Record agentctl's answer (the first one counts: one per frame)."""
        if self.ack is None:
            self.ack = ack
            self.came.set()


@dataclass(eq=False)
class PendingTurn:
    """agentctl's id of a turn this client started, and its end when it comes."""

    id: str
    done: trio.Event = field(default_factory=trio.Event)
    ended: TurnEnded | None = None
    #: Set once ``POST /prompt`` has been answered (or failed).  A cancel waits
    #: for it: the two requests may travel on different connections, and a
    #: cancel that overtook its prompt would find no turn and be lost.
    answered: trio.Event = field(default_factory=trio.Event)
    #: The turn's last ``Cancel`` frame (a fresh one per frame sent).
    frame: FrameAnswer = field(default_factory=FrameAnswer)
    #: A cancel that met the link down: held, sent first when the link returns.
    owed: bool = False

    @property
    def cancel_due_on_return(self) -> bool:
        """Whether the link's return must send this turn's cancel (again): one
        held while it was down, or a frame the cut may have swallowed."""
        return not self.done.is_set() and (self.owed or self.frame.unanswered)
