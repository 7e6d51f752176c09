"""Turn control in the page (issue 13, DESIGN.md §9, §11), on a desktop window and on a phone.

Enter while the agent works queues the text; the queue above the composer is edited, reordered
(by keyboard too), emptied and sent now; a cancel parks the queue and the page says why and
offers Resume; a turn with no output gets the stall notice with its own Cancel; a cancel the agent
ignores says "Agent not responding — stopping it" and its status says the agent had to be stopped.

Each test starts its own server (``server_factory``) with the timeouts it needs, so the windows
it waits for are short and no test shares a queue with another.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

pytest.importorskip("playwright.sync_api")

from playwright.sync_api import Locator, Page, expect

from tests.support.serverproc import BlockingServerProcess as ServerProcess

from .ui import CANCELLING, Person, create_task, open_person, shot

pytestmark = pytest.mark.browser

#: Quick cancel windows: a `/hang` turn ignores the cancel, is `late` after 0.5 s and escalated
#: after 3 s.
QUICK_CANCEL_TOML = """\
[timeouts]
cancel_join_s = 0.5
cancel_escalate_s = 3.0
cancel_operation_s = 20.0
"""

#: A stall after 1 s of silence; a turn is given up as never started only much later.
STALL_TOML = QUICK_CANCEL_TOML + "stall_notice_s = 1.0\nnever_started_s = 120.0\n"

LATE_NOTE = "Agent not responding — stopping it"
LONG_TURN = "/delay 60000"  # streams for a minute, honours a cancel at once


def open_task_page(server: ServerProcess, new_context: Any, view: str, title: str) -> Person:
    """A person on the page of a new task named `title`."""
    return open_person(server, new_context, view, f"/tasks/{create_task(server, title)}")


def queue_entries(page: Page) -> Locator:
    return page.get_by_test_id("queue-list").get_by_test_id("queued-message")


def expect_queue(page: Page, texts: list[str]) -> None:
    expect(page.get_by_test_id("queue-list")).to_be_visible()
    expect(queue_entries(page).locator(".queued-text")).to_have_text(texts)


def enter(person: Person, text: str) -> None:
    """Types into the composer and presses Enter, as a person does while the agent works."""
    person.chat_input.fill(text)
    person.chat_input.press("Enter")
    expect(person.chat_input).to_have_value("")


def user_texts(page: Page) -> Locator:
    return page.get_by_test_id("message-list").locator('[data-role="user"]')


def expect_chip_uncovered(person: Person, session_id: str, text: str) -> None:
    """The session row's queued chip says `text`, lies inside the row's link and is what is
    drawn at both its ends: the ⋯ button beside the link once covered its end."""
    # On a phone the strip folds away while the input has the focus (issue 29): look up first.
    person.chat_input.blur()
    chip = person.session_item(session_id).get_by_test_id("session-queued")
    expect(chip).to_have_text(text)
    box, row = chip.bounding_box(), person.session_item(session_id).bounding_box()
    assert box is not None and row is not None
    assert row["x"] <= box["x"] and box["x"] + box["width"] <= row["x"] + row["width"], (box, row)
    y = box["y"] + box["height"] / 2
    for x in (box["x"] + 1, box["x"] + box["width"] - 1):
        assert person.page.evaluate(
            "([x, y]) => Boolean(document.elementFromPoint(x, y)"
            "?.closest('[data-testid=session-queued]'))", [x, y]), (x, y, box)


def test_enter_queues_while_running_then_edit_reorder_remove_park_and_resume(
    server_factory: Any, new_context: Any, view: str
) -> None:
    server = server_factory(toml=QUICK_CANCEL_TOML)
    person = open_task_page(server, new_context, view, "Queue")
    page = person.page
    sid = person.launch_session()
    person.start_turn(LONG_TURN)

    expect(page.get_by_test_id("send-button")).to_have_text("Queue")
    enter(person, "first queued")
    enter(person, "second queued")
    expect_queue(page, ["first queued", "second queued"])
    expect_chip_uncovered(person, sid, "2 queued")

    # Reorder from the keyboard: focus "Move up" on the second entry and press Enter.
    second = queue_entries(page).nth(1)
    second.get_by_test_id("move-up-button").focus()
    page.keyboard.press("Enter")
    expect_queue(page, ["second queued", "first queued"])
    # Focus stays with the moved entry (its Move up is now disabled, so another of its buttons).
    focused_entry = page.evaluate(
        "() => document.activeElement.closest('[data-testid=queued-message]')"
        "?.querySelector('.queued-text')?.textContent")
    assert focused_entry == "second queued"

    # Edit the (now second) first entry; Esc inside the editor does not cancel the turn.
    first = queue_entries(page).nth(1)
    person.press(first.get_by_test_id("edit-queued-button"))
    editor = page.get_by_test_id("queued-edit-input")
    expect(editor).to_be_focused()
    editor.press("Escape")
    expect(editor).to_be_hidden()
    person.expect_cancel_ready()
    person.press(queue_entries(page).nth(1).get_by_test_id("edit-queued-button"))
    editor.fill("first, edited")
    editor.press("Enter")
    expect_queue(page, ["second queued", "first, edited"])

    person.press(queue_entries(page).nth(0).get_by_test_id("remove-queued-button"))
    expect_queue(page, ["first, edited"])
    shot(page, f"queue-{view}")

    # A user cancel parks the queue: nothing queued runs, the page says why and offers Resume.
    person.press(person.cancel_button)
    person.expect_settled(timeout=15_000)
    expect(page.get_by_test_id("queue-paused")).to_have_text(
        re.compile("Paused after you stopped the agent"))
    toggle = page.get_by_test_id("auto-run-toggle")
    expect(toggle).to_have_text("Resume")
    expect(queue_entries(page)).to_have_count(1)
    expect(user_texts(page).filter(has_text="first, edited")).to_have_count(0)
    # "Waiting for input" beside the chip: the longest pair in the row.
    expect(person.session_item(sid).get_by_test_id("session-state")).to_have_text(
        "Waiting for input")
    expect_chip_uncovered(person, sid, "1 queued")
    shot(page, f"queue-paused-{view}")

    person.press(toggle)
    expect(page.get_by_test_id("queue-list")).to_be_hidden(timeout=15_000)
    expect(user_texts(page).filter(has_text="first, edited")).to_have_count(1, timeout=15_000)
    person.expect_settled(timeout=15_000)  # the echo turn ends by itself


def test_queued_head_runs_when_the_turn_ends_and_send_now_interrupts(
    server_factory: Any, new_context: Any, view: str
) -> None:
    server = server_factory(toml=QUICK_CANCEL_TOML)
    person = open_task_page(server, new_context, view, "Send now")
    page = person.page
    person.launch_session()

    # Auto-run: queued behind a short turn, it starts by itself when that turn ends.
    person.start_turn("/delay 6000")
    enter(person, "runs next")
    expect_queue(page, ["runs next"])
    expect(user_texts(page).filter(has_text="runs next")).to_have_count(1, timeout=20_000)
    expect(page.get_by_test_id("queue-list")).to_be_hidden()
    person.expect_settled(timeout=15_000)

    # Send now: the running turn is interrupted (not "cancelled by user") and the entry runs.
    person.start_turn(LONG_TURN)
    enter(person, "urgent")
    expect_queue(page, ["urgent"])
    person.press(queue_entries(page).first.get_by_test_id("send-now-button"))
    interrupted = person.status_messages().filter(has_text="Turn interrupted by a new message")
    expect(interrupted).to_have_count(1, timeout=15_000)
    expect(user_texts(page).filter(has_text="urgent")).to_have_count(1, timeout=15_000)
    expect(page.get_by_test_id("queue-list")).to_be_hidden()
    person.expect_settled(timeout=15_000)
    expect(person.status_messages().filter(has_text="cancelled by user")).to_have_count(0)


def test_stall_notice_offers_its_own_cancel_and_the_late_cancel_says_why(
    server_factory: Any, new_context: Any, view: str
) -> None:
    server = server_factory(toml=STALL_TOML)
    person = open_task_page(server, new_context, view, "Stall")
    page = person.page
    person.launch_session()
    person.start_turn("/hang")  # no agent event at all

    notice = page.get_by_test_id("stall-notice")
    expect(notice).to_be_visible(timeout=15_000)
    expect(notice).to_contain_text("No output from the agent")
    shot(page, f"stall-{view}")
    person.press(notice.get_by_test_id("stall-cancel-button"))
    expect(notice).to_be_hidden()
    person.expect_cancelling()

    # The agent ignores the cancel: after the join window the control says why it takes long,
    # and its button keeps "Cancelling..." (DESIGN.md §8).
    note = page.get_by_test_id("cancel-phase-note")
    expect(note).to_have_text(LATE_NOTE, timeout=10_000)
    expect(person.cancel_button).to_have_text(CANCELLING)
    shot(page, f"late-cancel-{view}")

    person.expect_settled(timeout=20_000)
    expect(note).to_be_hidden()
    expect(person.status_messages().last).to_contain_text("had to be stopped", timeout=10_000)
    expect(notice).to_be_hidden()


def test_late_cancel_note_without_a_stall(
    server_factory: Any, new_context: Any, view: str
) -> None:
    """The late phase needs no stall watchdog: a plain cancel of a `/hang` turn."""
    server = server_factory(toml=QUICK_CANCEL_TOML)
    person = open_task_page(server, new_context, view, "Late")
    person.launch_session()
    person.start_turn("/hang")
    note = person.page.get_by_test_id("cancel-phase-note")
    expect(note).to_be_hidden()
    person.press(person.cancel_button)
    person.expect_cancelling()
    expect(note).to_have_text(LATE_NOTE, timeout=10_000)
    expect(person.cancel_button).to_have_accessible_name(CANCELLING)
    person.expect_settled(timeout=20_000)
    status = person.status_messages().last
    expect(status).to_contain_text("Turn cancelled by user")
    expect(status).to_contain_text("had to be stopped")


def test_agent_asleep_after_the_idle_stop_and_the_next_message_wakes_it(
    server_factory: Any, new_context: Any, view: str
) -> None:
    server = server_factory(toml="[timeouts]\nidle_agent_s = 1.0\n")
    person = open_task_page(server, new_context, view, "Asleep")
    page = person.page
    sid = person.launch_session()
    header = page.get_by_test_id("selected-session-state")
    person.send("hello there")
    expect(header).to_have_text("Agent asleep", timeout=15_000)
    expect(header).to_have_attribute("data-status", "asleep")
    expect(person.session_item(sid).get_by_test_id("session-state")).to_have_text("Agent asleep")
    shot(page, f"asleep-{view}")
    person.send("/recall")
    expect(page.get_by_test_id("message-list").locator('[data-role="agent"]').filter(
        has_text="recall")).to_have_count(1, timeout=20_000)
