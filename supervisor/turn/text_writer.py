"""Streamed text of every session, written together.

The pump buffers a turn's streamed chunks in its ``TurnText`` and marks it
here.  ``TextWriter.run`` writes what all marked turns buffered at most every
``stream_flush_s``: one transaction for every message that grew, then their
notifications queued together, so that a connection following many sessions
gets them in one write.  After a quiet spell the first text is written at
once (a stream's first words are not held back); a turn's end, a tool call or
a permission card still flush the turn's text themselves, in order with what
follows (``Transcript.flush`` waits for a write under way).

Why: with a hundred sessions streaming, a transaction and a frame per chunk per
session was most of the server's CPU per chunk; the batch costs one commit and
one ``send`` per connection per period instead.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable

import trio

from ..models import Message, TextAppend
from ..storage.store import Store
from .transcript import Transcript, TurnText

__all__ = ["Failed", "TextWriter"]

log = logging.getLogger(__name__)

#: Told when a marked turn's text could not be written (its execution's to handle).
Failed = Callable[[Exception], None]


class TextWriter:
    def __init__(self, store: Store, period_s: float) -> None:
        self.store = store
        self.period_s = period_s
        self._marked: dict[TurnText, tuple[Transcript, Failed]] = {}
        self._wake = trio.Event()
        self._written_at = -math.inf
        #: Writes done, and the messages they carried (the bench and tests read them).
        self.batches = 0
        self.messages = 0

    def mark(self, transcript: Transcript, turn: TurnText, failed: Failed) -> None:
        """``turn`` has buffered text: write it with the next batch; ``failed``
        is told if that write fails (the text is kept, and carried by the next
        write of its message)."""
        self._marked[turn] = (transcript, failed)
        self._wake.set()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
                  ) -> None:
        task_status.started()
        while True:
            await self._wake.wait()
            self._wake = trio.Event()
            # (Past after a quiet spell: a checkpoint, and the text goes at once.)
            await trio.sleep_until(self._written_at + self.period_s)
            self._written_at = trio.current_time()
            marked, self._marked = self._marked, {}
            await self._write(marked)

    async def _write(self, marked: dict[TurnText, tuple[Transcript, Failed]]) -> None:
        updates: list[tuple[Message, TextAppend | None]] = []
        taken: list[TurnText] = []
        first_words: list[TurnText] = []
        writing = trio.Event()
        for turn in marked:
            if not any(turn.pending_text.values()):
                continue  # flushed by its pump meanwhile
            grown = Transcript.take_updates(turn)
            if grown is None:
                first_words.append(turn)
                continue
            turn.writing = writing
            taken.append(turn)
            updates += grown
        try:
            if updates:
                await self.store.update_messages(updates)
                self.batches += 1
                self.messages += len(updates)
        except Exception as exc:
            # Kept in memory: the next write of each message carries it, whole.
            for turn in taken:
                turn.not_written()
                marked[turn][1](exc)
        finally:
            for turn in taken:
                if turn.writing is writing:
                    turn.writing = None
            writing.set()
        # A message to start (rare: a stream's first words, a turn's first text
        # after a tool call), or a turn its pump was writing: one at a time.
        for turn in first_words:
            transcript, failed = marked[turn]
            try:
                await transcript.flush(turn)
            except Exception as exc:
                failed(exc)
