"""The cancellation progress projection (DESIGN.md §6, spec: data model).

Per session: a reference count (pending = count > 0) and a revision that
moves only on 0→1 and 1→0.  Entries are never deleted, so a revision never
goes back.  ``begin``/``release`` contain no ``await``: in Trio that makes
each one atomic, so the pair is always read consistently and the transitions
reach ``publish`` in the order they happened, with no lock at all.  A publish
that fails is logged and ignored: the projection (and the cancel) is what
counts; a snapshot repairs any client that missed it.  Not persisted: after a
restart nothing is pending.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["CancellationProjection", "Progress"]

log = logging.getLogger(__name__)


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
    def __init__(self, publish: Callable[[str, Progress], None]) -> None:
        self._entries: dict[str, _Entry] = {}
        self._publish = publish

    def get(self, session_id: str) -> Progress:
        entry = self._entries.get(session_id)
        if entry is None:
            return Progress(False, 0)
        return Progress(entry.refs > 0, entry.revision)

    def begin(self, session_id: str) -> Progress:
        entry = self._entries.setdefault(session_id, _Entry())
        entry.refs += 1
        if entry.refs == 1:
            entry.revision += 1
            self._emit(session_id, Progress(True, entry.revision))
        return Progress(True, entry.revision)

    def release(self, session_id: str) -> Progress:
        entry = self._entries.get(session_id)
        if entry is None or entry.refs == 0:
            raise RuntimeError(f"release without begin for session {session_id}")
        entry.refs -= 1
        if entry.refs == 0:
            entry.revision += 1
            self._emit(session_id, Progress(False, entry.revision))
        return Progress(entry.refs > 0, entry.revision)

    def _emit(self, session_id: str, progress: Progress) -> None:
        try:
            self._publish(session_id, progress)
        except Exception:
            log.exception("publishing cancellation progress failed (session %s)", session_id)
