"""The agentctl event stream resumed after a seq (``StreamDecoder(after=N)``):
the replayed entries continue the numbering from N; ``Hello.resumed`` says
whether every entry after N follows (kept, and the same agentctl process)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from protocols.agentctl_wire import (
    Heartbeat,
    Hello,
    LoggedEvent,
    StreamDecoder,
    WireError,
    event_frame,
)
from protocols.events import MessageChunk, TurnEnded


def _hello(last: int, oldest: int) -> str:
    return json.dumps({"type": "Hello", "last_seq": last, "oldest_seq": oldest})


def _logged(seq: int, event: Any, turn: str = "t1") -> str:
    return json.dumps({"seq": seq, "turn": turn, **event_frame(event)})


def test_a_resumed_stream_replays_from_after_and_ends_with_the_turn_end() -> None:
    decoder = StreamDecoder(after=5)
    hello = decoder.receive(_hello(last=8, oldest=1))
    assert isinstance(hello, Hello) and hello.resumed is True
    frames = [decoder.receive(_logged(6, MessageChunk(text="a"))),
              decoder.receive(_logged(7, MessageChunk(text="b"))),
              decoder.receive(_logged(8, TurnEnded(stop_reason="end_turn")))]
    assert [f.seq for f in frames if isinstance(f, LoggedEvent)] == [6, 7, 8]
    last = frames[-1]
    assert isinstance(last, LoggedEvent) and last.turn == "t1"
    assert last.event == TurnEnded(stop_reason="end_turn")
    # Then the live log goes on, still checked.
    assert isinstance(decoder.receive(_logged(9, MessageChunk(text="c"))), LoggedEvent)
    with pytest.raises(WireError, match="skipped"):
        decoder.receive(_logged(11, MessageChunk(text="e")))


def test_nothing_missed_is_a_resume_too() -> None:
    decoder = StreamDecoder(after=8)
    hello = decoder.receive(_hello(last=8, oldest=9))
    assert isinstance(hello, Hello) and hello.resumed is True
    assert isinstance(decoder.receive(_logged(9, MessageChunk(text="x"))), LoggedEvent)


def test_entries_no_longer_kept_are_not_a_resume_and_the_gap_is_followed() -> None:
    decoder = StreamDecoder(after=2)
    hello = decoder.receive(_hello(last=10, oldest=7))
    assert isinstance(hello, Hello) and hello.resumed is False
    assert isinstance(decoder.receive(json.dumps({"type": "Gap", "from": 3, "to": 6})),
                      Heartbeat)
    assert isinstance(decoder.receive(_logged(7, MessageChunk(text="x"))), LoggedEvent)


def test_a_restarted_agentctl_is_not_a_resume() -> None:
    """Seqs are per agentctl process: one that restarted is behind ``after``."""
    decoder = StreamDecoder(after=500)
    hello = decoder.receive(_hello(last=3, oldest=1))
    assert isinstance(hello, Hello) and hello.resumed is False
    assert isinstance(decoder.receive(_logged(4, MessageChunk(text="x"))), LoggedEvent)


def test_a_fresh_stream_says_nothing_about_resuming() -> None:
    decoder = StreamDecoder()
    hello = decoder.receive(_hello(last=40, oldest=1))
    assert isinstance(hello, Hello) and hello.resumed is None
    assert isinstance(decoder.receive(_logged(41, MessageChunk(text="x"))), LoggedEvent)
