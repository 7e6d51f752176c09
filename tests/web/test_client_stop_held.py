"""``turnvisor stop``'s receipt line says how long a stop was held for the agent's host
(DESIGN.md §20: the receipt's ``link_down_ms``), and says nothing of it otherwise."""

from __future__ import annotations

from typing import Any

from web.client.stop import receipt_line

BASE: dict[str, Any] = {"outcome": "cancelled", "confirmed_ms": 12400.0,
                        "tool_calls": {"finished": [], "cancelled": []}}


def test_a_held_stop_says_how_long() -> None:
    assert receipt_line(BASE | {"link_down_ms": 12345.6}) == (
        "stopped in 12400 ms · held 12.3 s for the agent's host")


def test_a_stop_never_held_says_nothing_of_it() -> None:
    assert receipt_line(BASE | {"link_down_ms": None}) == "stopped in 12400 ms"
    assert receipt_line(BASE) == "stopped in 12400 ms"
