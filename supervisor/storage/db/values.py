"""What every part of the database shares: its errors, ids, timestamps, text
as SQLite takes it, and the shape of a turn's close."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ...models import Message, QueueState, Session, SessionState, StopReason, TurnState

__all__ = ["ClosedRow", "QueueFull", "StoreError", "StoreUnavailable", "TurnClose", "new_id",
           "now", "storable"]


class StoreError(Exception):
    pass


class StoreUnavailable(StoreError):
    """The database did not take a write in time (locked elsewhere, disk trouble)."""



class QueueFull(StoreError):
    """The session's queue already holds its maximum of entries."""


@dataclass(frozen=True)
class TurnClose:
    """One turn's close, as ``Db.close_turn`` takes it."""

    turn_id: str
    state: TurnState
    stop_reason: StopReason
    status: tuple[str, dict[str, Any]] | None = None
    session_state: SessionState = SessionState.WAITING_FOR_INPUT
    park_queue: bool = False
    text: tuple[Message, ...] = ()


#: (closed by this call, the status message added, the session if this call
#: moved it, the queue's state if this call parked it).
ClosedRow = tuple[bool, Message | None, Session | None, QueueState | None]


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def new_id() -> str:
    return str(uuid.uuid4())


def storable(text: str) -> str:
    """``text`` as SQLite can take it (UTF-8).  Agents' JSON may carry lone
    surrogates — a JavaScript agent that cuts a string between the halves of
    an emoji sends each half escaped — which have no UTF-8 form: pairs split
    across chunks are rejoined, halves left alone become U+FFFD."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text

