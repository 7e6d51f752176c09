"""Newline framing for agent stdio, apart from any JSON or connection state.

Agents write one JSON document per line.  A line is bytes up to ``\\n``; a
trailing ``\\r`` is tolerated.  The buffer is bounded: a line longer than
``max_line_bytes`` is discarded as it streams in (never held whole) and
reported once, so an agent that writes a 20 MB line cannot exhaust memory and
the lines after it are still read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, TypeAlias

__all__ = ["DEFAULT_MAX_LINE_BYTES", "Line", "LineDecoder", "LineTooLong", "StreamEnded"]

#: 8 MiB: large enough for a tool call that carries a whole file, small
#: enough that a runaway agent costs a bounded amount of memory.
DEFAULT_MAX_LINE_BYTES: Final = 8 * 1024 * 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class Line:
    data: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class LineTooLong:
    """A line exceeded the limit; its bytes were dropped up to its newline."""

    size: int
    limit: int


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamEnded:
    """End of stream.  ``partial`` holds an unterminated last line, if any."""

    partial: bytes


FrameEvent: TypeAlias = Line | LineTooLong | StreamEnded


class LineDecoder:
    """Split a byte stream into lines.  ``feed(b"")`` means end of stream."""

    def __init__(self, *, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> None:
        self.max_line_bytes = max_line_bytes
        self._buf = bytearray()
        # While discarding an oversized line: how many bytes it has had so far.
        self._discarding: int | None = None
        self._ended = False

    def feed(self, data: bytes) -> list[FrameEvent]:
        if self._ended:
            return []
        out: list[FrameEvent] = []
        if not data:
            self._ended = True
            partial = bytes(self._buf)
            self._buf.clear()
            if self._discarding is not None:
                out.append(LineTooLong(size=self._discarding, limit=self.max_line_bytes))
            elif len(partial.removesuffix(b"\r")) > self.max_line_bytes:
                # Held one byte past the limit for a CR, but no LF came.
                out.append(LineTooLong(size=len(partial), limit=self.max_line_bytes))
                partial = b""
            out.append(StreamEnded(partial=partial))
            return out
        start = 0
        while start < len(data):
            nl = data.find(b"\n", start)
            end = len(data) if nl < 0 else nl
            if self._discarding is not None:
                self._discarding += end - start
                if nl >= 0:
                    out.append(LineTooLong(size=self._discarding, limit=self.max_line_bytes))
                    self._discarding = None
            else:
                self._buf += data[start:end]
                if nl >= 0:
                    raw = bytes(self._buf)
                    self._buf.clear()
                    # The limit is on the line, not on its terminator: a line
                    # of exactly the limit may end in CRLF.
                    line = raw.removesuffix(b"\r")
                    if len(line) > self.max_line_bytes:
                        out.append(LineTooLong(size=len(raw), limit=self.max_line_bytes))
                    elif line.strip():
                        out.append(Line(data=line))
                elif self._over_limit():
                    self._discarding = len(self._buf)
                    self._buf.clear()
            if nl < 0:
                break
            start = nl + 1
        return out

    def _over_limit(self) -> bool:
        """Whether the unterminated line in the buffer can no longer fit.

        One byte past the limit is allowed while it is a CR (its LF may be in
        the next chunk), so the buffer never holds more than limit + 1 bytes.
        """
        over = len(self._buf) - self.max_line_bytes
        return over > 1 or (over == 1 and self._buf[-1] != 0x0D)
