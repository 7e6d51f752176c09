"""What needs you survives a reload and shows on every device (issue 41, DESIGN.md §15),
desktop and phone.

A turn that ends in a session the page is not showing marks that session; the mark is the
backend's, so a reload, a second tab and another device show it too, and opening the session
in any one of them clears it in all. A turn that ends while the page shows it is seen at once.
A waiting approval still says "Needs approval" after a reload.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

pytest.importorskip("playwright.sync_api")

from playwright.sync_api import expect

from tests.support.serverproc import BlockingServerProcess as ServerProcess

from .ui import (
    Person,
    create_task,
    ensure_mounted,
    get_session,
    open_person,
    shot,
    wait_until,
)

pytestmark = pytest.mark.browser


def shots(page: Any, name: str) -> None:
    """Light and dark pictures of what the person sees, to look at."""
    shot(page, name)
    page.emulate_media(color_scheme="dark")
    shot(page, f"{name}-dark")
    page.emulate_media(color_scheme="light")


def mark_of(person: Person, session_id: str) -> Any:
    return person.session_item(session_id).get_by_test_id("session-attention")


def test_a_turn_that_ended_unseen_stays_marked_everywhere_until_opened(
    server: ServerProcess, new_context: Any, view: str
) -> None:
    title = f"Unseen turn {view}"
    task_id = create_task(server, title)
    person = open_person(server, new_context, view, f"/tasks/{task_id}")
    a = person.launch_session()
    b = person.launch_session()

    # A turn in B, shown while it ends: seen at once, nothing marked.
    person.start_turn("/delay 300")
    person.expect_settled(timeout=15_000)
    expect(mark_of(person, b)).to_have_count(0)
    # The page clears it by telling the backend it saw the session (seen.js): not
    # the same step as drawing no mark, so the backend's answer is waited for.
    wait_until(lambda: get_session(server, b)["attention"] is None, person.page)

    # B's next turn ends while the page shows A: B is marked, with the badge and the title.
    person.start_turn("/delay 1500")
    person.chat_input.blur()  # on a phone the strip folds away while the input has the focus
    person.select_session(a)
    expect(mark_of(person, b)).to_have_text("Turn ended", timeout=15_000)
    badge = person.page.get_by_test_id("attention-badge")
    expect(badge).to_have_text("1 session needs you")
    expect(badge).to_have_attribute("title", f"{title} · mock: finished its turn")
    expect(person.page).to_have_title(re.compile(rf"^\(1\) {re.escape(title)}"))
    expect(mark_of(person, a)).to_have_count(0)
    person.session_item(b).scroll_into_view_if_needed()  # the phone's strip scrolls sideways
    expect(mark_of(person, b)).to_be_visible()
    shots(person.page, f"attention-kept-{view}")

    # A reload still shows it.
    person.page.reload()
    ensure_mounted(person.page)
    expect(person.session_item(a)).to_have_attribute("aria-current", "page")
    expect(mark_of(person, b)).to_have_text("Turn ended")
    expect(badge).to_have_text("1 session needs you")

    # Another device: the task list says so and names the task; then the task, on A.
    other = open_person(server, new_context, view, "/")
    row = other.task_link(task_id).get_by_test_id("task-status")
    expect(row).to_have_text("Turn ended")
    expect(row).to_have_attribute("title", f"{title} · mock: finished its turn")
    other_badge = other.page.get_by_test_id("attention-badge")
    expect(other_badge).to_have_text("1 session needs you")
    shots(other.page, f"attention-kept-task-list-{view}")
    other.open_task(task_id, a)
    expect(mark_of(other, b)).to_have_text("Turn ended")

    # Opening B on the other device clears it on the first one, and in the task list.
    other.select_session(b)
    expect(mark_of(other, b)).to_have_count(0)
    expect(mark_of(person, b)).to_have_count(0, timeout=10_000)
    expect(badge).to_be_hidden()
    expect(person.page).not_to_have_title(re.compile(r"^\(1\)"))
    assert get_session(server, b)["attention"] is None
    person.page.goto(server.url_for("/"))
    ensure_mounted(person.page)
    expect(person.task_link(task_id).get_by_test_id("task-status")).to_have_text("2 sessions")


def test_a_waiting_approval_says_so_after_a_reload(
    server: ServerProcess, new_context: Any, view: str
) -> None:
    task_id = create_task(server, f"Approval kept {view}")
    person = open_person(server, new_context, view, f"/tasks/{task_id}")
    asking = person.launch_session()
    person.send("/permission")
    expect(person.page.get_by_test_id("permission-card")).to_have_count(1, timeout=15_000)
    person.chat_input.blur()
    other = person.launch_session()

    person.page.reload()
    ensure_mounted(person.page)
    expect(person.session_item(other)).to_have_attribute("aria-current", "page")
    expect(person.session_item(asking).get_by_test_id("session-state")).to_have_text(
        "Needs approval")
    expect(person.page.get_by_test_id("attention-badge")).to_have_attribute(
        "title", f"Approval kept {view} · mock: asks for your approval")
    person.select_session(asking)
    expect(person.page.get_by_test_id("selected-session-state")).to_have_text("Needs approval")
    # Looking does not answer it: another device still sees it waiting.
    lister = open_person(server, new_context, view, "/")
    expect(lister.task_link(task_id).get_by_test_id("task-status")).to_have_text(
        "Needs approval")
    assert get_session(server, asking)["attention"] == "approval"
    person.press(person.page.get_by_test_id("permission-card").get_by_role("button",
                                                                           name="Allow"))
    expect(lister.task_link(task_id).get_by_test_id("task-status")).not_to_have_text(
        "Needs approval", timeout=15_000)
