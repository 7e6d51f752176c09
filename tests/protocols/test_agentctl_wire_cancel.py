"""The client → agentctl ``Cancel`` frame and agentctl's answers on the event
stream (protocols/agentctl_wire.py): encoded, decoded, and every bad frame
refused with one ``WireError`` naming what is wrong."""

from __future__ import annotations

import json
from typing import Any

import pytest

from protocols.agentctl_wire import (
    MAX_REQUEST_CHARS,
    REQUEST_TYPES,
    CancelAck,
    CancelRequest,
    FrameRefused,
    Heartbeat,
    LoggedEvent,
    StreamDecoder,
    WireError,
    cancel_frame,
    cancel_reply,
    decode_request,
    event_frame,
    refusal_frame,
)
from protocols.events import TurnEnded


def test_a_cancel_frame_round_trips() -> None:
    assert decode_request(cancel_frame("turn-1", "sess-1")) == CancelRequest(
        turn_id="turn-1", session_id="sess-1")
    assert decode_request(cancel_frame("turn-2")) == CancelRequest(turn_id="turn-2")
    assert "Cancel" in REQUEST_TYPES


@pytest.mark.parametrize(("message", "error"), [
    (b'{"type": "Cancel", "turn_id": "t"}', "unexpected binary message"),
    ("{not json", "not JSON"),
    ('["Cancel"]', "a frame must be a JSON object"),
    ('{"turn_id": "t"}', "not a client frame: None"),
    ('{"type": "Prompt", "turn_id": "t"}', "not a client frame: 'Prompt'"),
    ('{"type": "Cancel"}', "Cancel.turn_id must be a non-empty string"),
    ('{"type": "Cancel", "turn_id": ""}', "Cancel.turn_id must be a non-empty string"),
    ('{"type": "Cancel", "turn_id": 7}', "Cancel.turn_id must be a non-empty string"),
    ('{"type": "Cancel", "turn_id": "t", "session_id": 3}', "Cancel.session_id must be a string"),
    (json.dumps({"type": "Cancel", "turn_id": "t" * MAX_REQUEST_CHARS}),
     f"at most {MAX_REQUEST_CHARS} characters"),
])
def test_a_bad_client_frame_is_refused_by_name(message: str | bytes, error: str) -> None:
    with pytest.raises(WireError) as info:
        decode_request(message)
    assert error in str(info.value)


def _decoder() -> StreamDecoder:
    decoder = StreamDecoder()
    decoder.receive(json.dumps({"type": "Hello", "last_seq": 4, "oldest_seq": 1,
                                "accepts": list(REQUEST_TYPES)}))
    return decoder


@pytest.mark.parametrize(("message", "frame"), [
    (cancel_reply("t1"), CancelAck(turn_id="t1")),
    (cancel_reply("t1", running=False), CancelAck(turn_id="t1", running=False)),
    (cancel_reply("t1", error="agent not running"),
     CancelAck(turn_id="t1", error="agent not running")),
    (refusal_frame("not JSON: x"), FrameRefused(error="not JSON: x")),
])
def test_agentctls_answers_decode_unnumbered(message: str, frame: Any) -> None:
    decoder = _decoder()
    assert decoder.receive(message) == frame
    # Never in the log: the numbering goes on where it was.
    logged = decoder.receive(json.dumps({"seq": 5, "turn": "t1",
                                         **event_frame(TurnEnded(stop_reason="cancelled"))}))
    assert isinstance(logged, LoggedEvent) and logged.seq == 5


def test_an_answer_without_its_turn_is_a_bad_frame() -> None:
    with pytest.raises(WireError, match=r"CancelWritten\.turn_id must be a string"):
        _decoder().receive('{"type": "CancelWritten"}')


def test_an_unknown_unnumbered_frame_is_still_a_heartbeat() -> None:
    # (A newer agentctl's frame an older backend does not know: skipped, not fatal.)
    assert _decoder().receive('{"type": "SomethingNew"}') == Heartbeat()
