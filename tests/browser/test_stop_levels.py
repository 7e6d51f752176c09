"""Issue 42 on the page (DESIGN.md §18), on a desktop window and on a phone: stop after this
step, the stop receipt under a stopped turn (and ending the processes a turn left running),
a stop now that joins a stop waiting for its step (across a reload), and stop all."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("playwright.sync_api")

from playwright.sync_api import Locator, Page, WebSocket, expect

from tests.support.serverproc import BlockingServerProcess

from .configs import LONG_PENDING_TOML
from .ui import (
    Person,
    create_task,
    ensure_mounted,
    get_session,
    open_page,
    open_person,
    shot,
    wait_until,
)

pytestmark = pytest.mark.browser

AFTER_STEP = "Stopping after this step…"


def assert_fits(page: Page, control: Locator) -> None:
    """The control is on screen, big enough to tap, and the page does not scroll sideways."""
    width = page.evaluate("() => window.innerWidth")
    assert page.evaluate("() => document.documentElement.scrollWidth") <= width
    box = control.bounding_box()
    assert box is not None and box["height"] >= 32 and box["width"] >= 40, box
    assert box["x"] >= 0 and box["x"] + box["width"] <= width + 0.5, box


def sent_cancels(page: Page) -> list[dict[str, Any]]:
    """The payload of every `agent.cancel` the page sends from now on (reloads included)."""
    payloads: list[dict[str, Any]] = []

    def on_socket(ws: WebSocket) -> None:
        def on_sent(frame: str | bytes) -> None:
            try:
                data = json.loads(frame)
            except ValueError:
                return
            if isinstance(data, dict) and data.get("action") == "agent.cancel":
                payloads.append(data.get("payload") or {})

        ws.on("framesent", on_sent)

    page.on("websocket", on_socket)
    return payloads


def test_stop_after_this_step_lets_the_step_finish_and_leaves_a_receipt(
    server: Any, new_context: Any, view: str
) -> None:
    task_id = create_task(server, f"After the step {view}")
    person = open_person(server, new_context, view, f"/tasks/{task_id}")
    page = person.page
    person.launch_session("mock")
    after_step = page.get_by_test_id("stop-after-step-button")
    expect(after_step).to_be_hidden()  # nothing runs
    person.start_turn("/steps 3 1500")
    cards = page.get_by_test_id("tool-call-card")
    expect(cards.first).to_contain_text("step 1 of 3", timeout=10_000)
    expect(after_step).to_be_visible()
    assert_fits(page, after_step)
    assert_fits(page, person.cancel_button)
    person.press(after_step)

    # The stop waits for the running step: said with its title; the control still stops now.
    note = page.get_by_test_id("cancel-phase-note")
    expect(note).to_have_text(re.compile(rf"^{AFTER_STEP} \(step 1 of 3: sleep 1\.5\)$"))
    expect(page.get_by_test_id("selected-session-state")).to_have_text("Stopping after this step")
    expect(after_step).to_be_hidden()
    expect(person.cancel_button).to_be_enabled()
    expect(person.cancel_button).to_have_attribute("aria-label", "Stop now")
    shot(page, f"stop-after-step-{view}")

    # The step finishes, the next one never starts, and the receipt says so.
    person.expect_settled(timeout=15_000)
    receipt = page.get_by_test_id("stop-receipt")
    expect(receipt).to_have_count(1)
    expect(receipt).to_contain_text("Stopped after the step in")
    expect(receipt).to_contain_text("1 tool call finished")
    expect(cards).to_have_count(1)
    expect(cards.first).to_have_attribute("data-status", "completed")
    expect(page.get_by_test_id("message-list")).to_contain_text("step 1 of 3 done.")
    expect(page.get_by_test_id("message-list")).not_to_contain_text("step 2 of 3")
    # Once the processes left are known the receipt is updated in place: none here.
    expect(receipt).not_to_contain_text("…", timeout=10_000)
    expect(page.get_by_test_id("kill-strays-button")).to_have_count(0)
    receipt.scroll_into_view_if_needed()
    assert_fits(page, receipt)
    shot(page, f"stop-receipt-{view}")


def test_stop_now_joins_a_stop_waiting_for_its_step_after_a_reload(
    server: Any, new_context: Any
) -> None:
    task_id = create_task(server, "Join the wait")
    page = open_page(new_context, "desktop")
    cancels = sent_cancels(page)  # before the page's first socket opens
    person = Person(page, server)
    person.login(f"/tasks/{task_id}")
    sid = person.launch_session("mock")
    person.start_turn("/steps 2 20000")
    expect(page.get_by_test_id("tool-call-card")).to_contain_text("step 1 of 2", timeout=10_000)
    person.press(page.get_by_test_id("stop-after-step-button"))
    note = page.get_by_test_id("cancel-phase-note")
    expect(note).to_have_text(re.compile(rf"^{AFTER_STEP}"))

    # A reload shows the same wait from the session's own record (its cancel_progress).
    page.reload()
    ensure_mounted(page)
    expect(note).to_have_text(re.compile(rf"^{AFTER_STEP} \(step 1 of 2: sleep 20\)$"))
    expect(page.get_by_test_id("stop-after-step-button")).to_be_hidden()

    # Esc in the input is the ordinary cancel: here it stops now, long before the step ends.
    person.chat_input.focus()
    person.chat_input.press("Escape")
    person.expect_settled(timeout=10_000)
    assert [c.get("when") for c in cancels] == ["after_step", "now"], cancels
    receipt = page.get_by_test_id("stop-receipt")
    expect(receipt).to_contain_text("1 tool call cancelled")
    expect(receipt).not_to_contain_text("after the step")
    assert get_session(server, sid)["state"] != "RUNNING"


def test_the_receipt_lists_a_process_left_running_and_ends_it(
    server: Any, new_context: Any, view: str
) -> None:
    task_id = create_task(server, f"Strays {view}")
    person = open_person(server, new_context, view, f"/tasks/{task_id}")
    page = person.page
    person.launch_session("mock")
    person.send("/stray")
    expect(page.get_by_test_id("message-list")).to_contain_text(
        re.compile(r"stray pid \d+"), timeout=15_000)
    person.expect_settled(timeout=15_000)
    person.start_turn("/delay 30000")
    person.press(person.cancel_button)
    person.expect_settled(timeout=15_000)
    receipt = page.get_by_test_id("stop-receipt")
    expect(receipt).to_contain_text("1 process still running", timeout=10_000)
    expect(page.get_by_test_id("stop-receipt-strays")).to_contain_text("sleep 600")
    kill = page.get_by_test_id("kill-strays-button")
    assert_fits(page, kill)
    shot(page, f"stop-receipt-strays-{view}")
    person.press(kill)
    expect(page.get_by_test_id("kill-strays-result")).to_have_text("Ended 1 process")
    expect(kill).to_have_count(0)


def test_stop_all_stops_every_running_turn_after_asking(
    server: Any, new_context: Any, view: str
) -> None:
    task_id = create_task(server, f"Stop all {view}")
    person = open_person(server, new_context, view, f"/tasks/{task_id}")
    page = person.page
    sessions = []
    for _ in range(2):
        sessions.append(person.launch_session("mock"))
        person.start_turn("/delay 30000")
    page.goto(server.url_for("/"))
    ensure_mounted(page)
    stop_all = page.get_by_test_id("stop-all-button")
    expect(stop_all).to_be_enabled(timeout=10_000)
    assert_fits(page, stop_all)
    person.press(stop_all)
    dialog = page.get_by_test_id("stop-all-dialog")
    expect(dialog).to_be_visible()
    expect(dialog.get_by_role("heading")).to_have_text("Stop 2 running turns?")
    shot(page, f"stop-all-question-{view}")
    # "Keep running" asks nothing of the server: both still run.
    person.press(page.get_by_test_id("stop-all-cancel"))
    expect(dialog).to_be_hidden()
    assert all(get_session(server, sid)["state"] == "RUNNING" for sid in sessions)
    person.press(stop_all)
    person.press(page.get_by_test_id("stop-all-confirm"))
    expect(page.get_by_test_id("stop-all-summary")).to_have_text("Stopped 2 turns", timeout=20_000)
    expect(stop_all).to_be_disabled(timeout=10_000)  # nothing runs any more
    shot(page, f"stop-all-done-{view}")
    assert all(get_session(server, sid)["state"] != "RUNNING" for sid in sessions)


def test_the_receipt_undoes_the_turns_files_and_resumes_the_parked_queue(
    server_factory: Callable[..., BlockingServerProcess], new_context: Any, view: str
) -> None:
    server = server_factory(toml=LONG_PENDING_TOML, checkpoints=True)
    task_id = create_task(server, f"Receipt actions {view}")
    person = open_person(server, new_context, view, f"/tasks/{task_id}")
    page = person.page
    person.launch_session("mock")
    where = page.get_by_test_id("work-dir").locator(".work-path")
    expect(where).to_have_attribute("title", re.compile(r"^/.+"))  # drawn once the session is
    folder = Path(where.get_attribute("title") or "")
    person.start_turn("/edits 60")
    wait_until(lambda: len(list(folder.glob("edit-*.txt"))) >= 2, page)
    person.send("after the stop")  # queued behind the running turn
    expect(page.get_by_test_id("queue-list")).to_contain_text("after the stop")
    person.press(person.cancel_button)
    person.expect_settled(timeout=15_000)
    written = len(list(folder.glob("edit-*.txt")))
    receipt = page.get_by_test_id("stop-receipt")
    expect(receipt).to_contain_text(f"{written} files changed", timeout=15_000)
    expect(receipt).to_contain_text("1 queued")
    receipt.scroll_into_view_if_needed()
    shot(page, f"stop-receipt-actions-{view}")

    # Undo is the page's revert: its question first, then the turn's files go.
    person.press(receipt.get_by_test_id("stop-receipt-undo"))
    dialog = page.get_by_test_id("revert-dialog")
    expect(dialog).to_be_visible(timeout=10_000)
    person.press(dialog.get_by_test_id("revert-confirm-button"))
    expect(person.status_messages().filter(has_text="Files restored")).to_have_count(
        1, timeout=15_000)
    assert not list(folder.glob("edit-*.txt"))
    expect(receipt).to_contain_text("(put back)")
    expect(receipt.get_by_test_id("stop-receipt-undo")).to_have_count(0)

    # Resume runs the parked queue: the queued message starts its turn.
    person.press(receipt.get_by_test_id("stop-receipt-resume"))
    expect(receipt.get_by_test_id("stop-receipt-resume")).to_have_count(0)
    sent = page.get_by_test_id("message-list").locator('[data-role="user"]')
    expect(sent.filter(has_text="after the stop")).to_have_count(1, timeout=15_000)
    expect(page.get_by_test_id("queue-list")).to_be_hidden(timeout=15_000)



def test_the_receipt_counts_the_subagents_stopped_with_the_turn(
    server: Any, new_context: Any, view: str
) -> None:
    """The turn's children are stopped with it: the receipt counts them, and once the page
    has seen them end it does not say they still run (the close's receipt may list a child
    still stopping in both)."""
    task_id = create_task(server, f"Children {view}")
    person = open_person(server, new_context, view, f"/tasks/{task_id}")
    page = person.page
    person.launch_session("mock-acp2")
    person.start_turn("/subagents 2 30000")
    expect(page.get_by_test_id("subagent-row")).to_have_count(2, timeout=10_000)
    person.press(person.cancel_button)
    person.expect_settled(timeout=15_000)
    receipt = page.get_by_test_id("stop-receipt")
    expect(receipt).to_contain_text("2 subagents stopped")
    expect(receipt).not_to_contain_text("still running", timeout=10_000)
    expect(receipt.get_by_test_id("stop-receipt-subagent-stop")).to_have_count(0)
    expect(page.get_by_test_id("subagent-row")).to_have_count(0)
    shot(page, f"stop-receipt-subagents-{view}")
