"""What the bus has queued for a subscriber, the one way: ``queued`` (the frames
as text, in order) and ``queued_json`` (each parsed).  Reading stops at the
first empty poll and never waits: a test calls these once what it drives has
happened (after a ``wait_state`` or the awaited call), so a frame that is
missing is missing, not late."""

from __future__ import annotations

import json
from typing import Any

import trio

from supervisor.bus import Subscriber

__all__ = ["queued", "queued_json"]


def queued(sub: Subscriber) -> list[str]:
    """Every frame ``sub`` has queued so far (taken: a second call sees only newer ones)."""
    frames: list[str] = []
    while True:
        try:
            frames.append(sub.receive_nowait())
        except trio.WouldBlock:
            return frames


def queued_json(sub: Subscriber) -> list[dict[str, Any]]:
    """``queued``, each frame parsed."""
    return [json.loads(frame) for frame in queued(sub)]
