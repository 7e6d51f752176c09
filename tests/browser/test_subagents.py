"""DESIGN.md §13 in the page: a running turn's subagents, one `subagent-row` each with its own
Stop; stopping one child leaves the parent's turn and the other child running (desktop, and a
phone, where the rows must fit the window and their Stop is a 40 px target)."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("playwright.sync_api")

from playwright.sync_api import expect

from .ui import create_task, open_person, shot

pytestmark = pytest.mark.browser


def test_stop_one_subagent_from_its_row(server: Any, new_context: Any, view: str) -> None:
    task_id = create_task(server, "Subagents")
    person = open_person(server, new_context, view, f"/tasks/{task_id}")
    person.launch_session("mock-acp2")
    person.start_turn("/subagents 2 6000")
    rows = person.page.get_by_test_id("subagent-row")
    expect(rows).to_have_count(2, timeout=10_000)
    first, second = rows.nth(0), rows.nth(1)
    expect(first).to_contain_text("Subagent 1")
    expect(first).to_contain_text("Running")
    stop = first.get_by_test_id("subagent-stop-button")
    if view == "phone":
        box = stop.bounding_box()
        assert box is not None and box["height"] >= 40, box
        width = person.page.evaluate("() => document.scrollingElement.scrollWidth")
        assert width <= 390, f"the page scrolls sideways: {width}"
    person.press(stop)
    expect(first).to_have_attribute("data-state", "cancelled", timeout=5_000)
    expect(first).to_contain_text("Stopped")
    expect(first.get_by_test_id("subagent-stop-button")).to_be_hidden()
    # The parent's turn goes on, and so does the other child, with its own Stop.
    expect(second).to_have_attribute("data-state", "running")
    expect(second.get_by_test_id("subagent-stop-button")).to_be_enabled()
    expect(person.page.get_by_test_id("working-indicator")).to_be_visible()
    expect(person.cancel_button).to_be_visible()
    shot(person.page, f"subagent-rows-{view}")
    person.expect_settled(timeout=15_000)
    expect(rows).to_have_count(0)
