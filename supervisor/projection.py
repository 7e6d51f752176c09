"""The cancellation progress projection (DESIGN.md §6, spec: data model).

Per session: a reference count (pending = count > 0) and a revision that
moves only on 0→1 and 1→0.  Entries are never deleted, so a revision never
goes back.  ``begin``/``release`` contain no ``await``: in Trio that makes
each one atomic, so the pair is always read consistently, with no lock at
all.  Each returns the new value when it moved (0→1, 1→0) and None when it
did not: the caller publishes the transitions it made, in the order it made
them (this module calls nothing).  Not persisted: after a restart nothing is
pending.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CancellationProjection", "Progress"]


@dataclass(frozen=True, slots=True)
class Progress:
    pending: bool
    revision: int


class _Entry:
    __slots__ = ("refs", "revision")

    def __init__(self) -> None:
        self.refs = 0
        self.revision = 0


class CancellationProjection:
    def __init__(self) -> None:
        self._entries: dict[str, _Entry] = {}

    def get(self, session_id: str) -> Progress:
        entry = self._entries.get(session_id)
        if entry is None:
            return Progress(False, 0)
        return Progress(entry.refs > 0, entry.revision)

    def begin(self, session_id: str) -> Progress | None:
        """One more cancel of the session; its new value if pending rose."""
        entry = self._entries.setdefault(session_id, _Entry())
        entry.refs += 1
        if entry.refs != 1:
            return None
        entry.revision += 1
        return Progress(True, entry.revision)

    def release(self, session_id: str) -> Progress | None:
        """One cancel fewer; its new value if pending fell."""
        entry = self._entries.get(session_id)
        if entry is None or entry.refs == 0:
            raise RuntimeError(f"release without begin for session {session_id}")
        entry.refs -= 1
        if entry.refs != 0:
            return None
        entry.revision += 1
        return Progress(False, entry.revision)
