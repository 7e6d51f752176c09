"""DESIGN.md §13 in the page: a running turn's subagents, one `subagent-row` each with its own
Stop; stopping one child leaves the parent's turn and the other child running (desktop, and a
phone, where the rows must fit the window and their Stop is a 40 px target)."""

from __future__ import annotations

import re
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


def test_subagents_leave_a_trace_in_the_transcript(
    server: Any, new_context: Any, view: str
) -> None:
    """Issue 41 item 7: while they work, each row says what the child does; once the turn is
    over the conversation keeps a line per child (one "stopped by you"), which opens to what it
    did, and still does after a reload."""
    task_id = create_task(server, "Subagent traces")
    person = open_person(server, new_context, view, f"/tasks/{task_id}")
    person.launch_session("mock-acp2")
    person.start_turn("/subagents 2 4000")
    rows = person.page.get_by_test_id("subagent-row")
    expect(rows).to_have_count(2, timeout=10_000)
    first = rows.nth(0)
    # Its task (the agent's description of it) and its last activity: its tool, then its text.
    expect(first.get_by_test_id("subagent-task")).to_have_text("mock subagent")
    expect(first.get_by_test_id("subagent-activity")).to_contain_text(
        re.compile(r"cat notes-1\.txt|Subagent 1 chunk"), timeout=5_000)
    activity = first.get_by_test_id("subagent-activity")
    expect(activity).to_contain_text("Subagent 1 chunk", timeout=5_000)
    shot(person.page, f"subagent-activity-{view}")
    person.press(first.get_by_test_id("subagent-stop-button"))
    expect(first).to_have_attribute("data-state", "cancelled", timeout=5_000)
    person.expect_settled(timeout=15_000)
    expect(rows).to_have_count(0)

    traces = person.page.get_by_test_id("subagent-trace")

    def check_traces() -> None:
        expect(traces).to_have_count(2, timeout=5_000)
        stopped = traces.filter(has_text="Subagent 1")
        finished = traces.filter(has_text="Subagent 2")
        expect(stopped.get_by_test_id("subagent-trace-outcome")).to_have_text("stopped by you")
        expect(finished.get_by_test_id("subagent-trace-outcome")).to_have_text("finished")
        # Compact: closed until opened; opened, it shows the child's own output and its tool.
        output = stopped.get_by_test_id("subagent-trace-output")
        expect(output).to_be_hidden()
        person.press(stopped.locator("summary"))
        expect(output).to_be_visible()
        expect(output).to_contain_text("Subagent 1 chunk0")
        expect(stopped).to_contain_text("cat notes-1.txt")
        expect(output).not_to_contain_text("Subagent 2")

    check_traces()
    shot(person.page, f"subagent-traces-{view}")
    person.page.emulate_media(color_scheme="dark")
    shot(person.page, f"subagent-traces-{view}-dark")
    person.page.emulate_media(color_scheme="light")
    person.page.reload()
    check_traces()
