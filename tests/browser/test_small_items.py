"""Issue 29's smaller items seen in the page, desktop and phone: a permission the agent took
back says so (not "Cancelled with the turn", the turn went on), and every time shown carries its
day ("Today 12:04"; the full date and year on hover)."""

from __future__ import annotations

import re
from typing import Any

import pytest

pytest.importorskip("playwright.sync_api")

from playwright.sync_api import expect

from .ui import create_task, open_person

pytestmark = pytest.mark.browser


def test_a_withdrawn_permission_and_dated_times(server: Any, new_context: Any, view: str) -> None:
    task_id = create_task(server, f"Small items {view}")
    person = open_person(server, new_context, view, f"/tasks/{task_id}")
    person.launch_session()
    person.send("/withdraw")
    card = person.page.get_by_test_id("permission-card")
    expect(card).to_have_attribute("data-outcome", "Withdrawn by the agent", timeout=15_000)
    expect(card).to_contain_text("Withdrawn by the agent")
    expect(card).not_to_contain_text("Cancelled with the turn")
    expect(person.page.locator('[data-role="agent"]').last).to_contain_text("withdrawn")

    times = person.page.get_by_test_id("message-list").locator("time")
    expect(times.first).to_have_text(re.compile(r"^Today \d"))
    title = times.first.get_attribute("title") or ""
    assert re.search(r"\b20\d\d\b", title), title
    session_time = person.page.locator(".session-time").first
    if view == "desktop":  # the phone's strip leaves the time out
        expect(session_time).to_have_text(re.compile(r"^Today \d"))


def test_a_long_task_title_keeps_its_width(server: Any, new_context: Any, view: str) -> None:
    """Beside its status and time a task's title was squeezed to a letter or two a line on a
    phone: it takes the row's width, the status and time go under it."""
    task_id = create_task(server, f"Edit the demo project, then undo a wrong path ({view})")
    person = open_person(server, new_context, view, "/")
    item = person.task_link(task_id)
    title = item.get_by_test_id("task-title")
    expect(title).to_be_visible()
    box, row = title.bounding_box(), item.bounding_box()
    assert box is not None and row is not None
    assert box["width"] >= 0.6 * row["width"], (box, row)
    assert box["height"] <= 3 * 26, box  # two lines at most on the phone, one on the desktop


def test_the_sidebar_names_the_agent_whole(server: Any, new_context: Any, view: str) -> None:
    """Beside a long state badge the sidebar cut the agent's name to "m…": on the desktop the
    row gives it a line of its own (wrapping, never cut); the phone's one-line strip leaves it
    to the chat header, which names it whole."""
    task_id = create_task(server, f"Agent names {view}")
    person = open_person(server, new_context, view, f"/tasks/{task_id}")
    sid = person.launch_session("mock-codex")
    person.start_turn("/delay 20000")
    person.chat_input.fill("queued behind the turn")
    person.chat_input.press("Enter")
    person.chat_input.blur()
    row = person.session_item(sid)
    expect(row.get_by_test_id("session-queued")).to_have_text("1 queued")
    expect(row.get_by_test_id("session-state")).to_have_text("Running")
    if view == "desktop":
        agent = row.get_by_test_id("session-agent")
        expect(agent).to_have_text("mock-codex")
        assert agent.evaluate("e => e.scrollWidth <= e.clientWidth + 1"), "the name is cut"
        badge = row.get_by_test_id("session-state")
        assert badge.evaluate("e => e.scrollWidth <= e.clientWidth + 1"), "the badge is cut"
    else:
        expect(row.get_by_test_id("session-agent")).to_be_hidden()
    expect(person.page.locator(".chat-title")).to_have_text(re.compile(r"· mock-codex$"))
    person.press(person.cancel_button)
    person.expect_settled(timeout=15_000)
