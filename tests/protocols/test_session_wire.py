"""The session events (options, commands, usage, title) on agentctl's event stream
(protocols/agentctl_wire.py).  A set relayed through agentctl: tests/agentctl/test_relays.py."""

from __future__ import annotations

import json
from typing import Any

import pytest

from protocols.agentctl_wire import WireError, decode_event, event_frame
from protocols.events import (
    AgentEvent,
    CommandsChanged,
    OptionsChanged,
    TitleChanged,
    UsageUpdated,
)

OPTION = {"id": "mode", "name": "Mode", "category": "mode", "type": "select",
          "current": "plan", "choices": [{"value": "plan", "name": "Plan", "description": None}]}


@pytest.mark.parametrize("event", [
    OptionsChanged(options=(OPTION,)),
    CommandsChanged(commands=({"name": "debug", "description": "d", "input_hint": None},)),
    UsageUpdated(usage={"input_tokens": 1, "output_tokens": 2, "context_used": 3,
                        "context_size": 4, "cost": {"amount": 0.5, "currency": "USD"}}),
    TitleChanged(title="Fix it"),
], ids=lambda e: type(e).__name__)
def test_session_events_cross_the_stream_whole(event: AgentEvent) -> None:
    assert decode_event(json.loads(json.dumps(event_frame(event)))) == event


@pytest.mark.parametrize("frame", [
    {"type": "OptionsChanged", "options": {"id": "mode"}},
    {"type": "OptionsChanged", "options": ["mode"]},
    {"type": "CommandsChanged"},
    {"type": "UsageUpdated", "usage": [1, 2]},
    {"type": "TitleChanged", "title": None},
])
def test_malformed_session_frames_are_refused(frame: dict[str, Any]) -> None:
    with pytest.raises(WireError):
        decode_event(frame)
