"""A running turn shows it works, a late cancel counts down, and a message can steer the turn
(issue 29, DESIGN.md §9, §15), on a desktop window and on a phone."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest

pytest.importorskip("playwright.sync_api")

from playwright.sync_api import expect

from .ui import create_task, open_person, shot

pytestmark = pytest.mark.browser

#: A `/hang` turn ignores the cancel: late after 0.5 s, stopped 6 s after the cancel.
COUNTDOWN_TOML = """\
[timeouts]
cancel_join_s = 0.5
cancel_escalate_s = 6.0
cancel_operation_s = 20.0
"""

#: The same, but the agent would be waited for a minute: stop-now-button cuts it short.
PATIENT_TOML = """\
[timeouts]
cancel_join_s = 0.5
cancel_escalate_s = 60.0
cancel_operation_s = 90.0
"""


def test_working_indicator_and_steer_into_a_codex_turn(
    server: Any, new_context: Any, view: str
) -> None:
    task_id = create_task(server, f"Steer {view}")
    person = open_person(server, new_context, view, f"/tasks/{task_id}")
    person.launch_session("mock-codex")
    indicator = person.page.get_by_test_id("working-indicator")
    expect(indicator).to_be_hidden()
    person.start_turn("/delay 8000")
    expect(indicator).to_be_visible()
    expect(indicator).to_have_text(
        re.compile(r"^Working · \d+ s — (Writing|Waiting for the agent)"))
    expect(indicator).to_have_text(re.compile(r"Working · [2-9] s"), timeout=6_000)  # it ticks
    if view == "desktop":
        expect(person.page.locator(".composer-hint")).to_have_text(
            "Enter queues · Alt+Enter steers into the turn · Esc cancels")
    steer = person.page.get_by_test_id("steer-button")
    expect(steer).to_be_visible()
    shot(person.page, f"working-steer-{view}")
    person.chat_input.fill("turn left")
    person.press(steer)
    expect(person.chat_input).to_have_value("")
    conversation = person.page.get_by_test_id("message-list")
    expect(conversation).to_contain_text("steered: turn left", timeout=10_000)
    expect(person.page.get_by_test_id("queue-list")).to_be_hidden()
    person.expect_settled(timeout=15_000)
    expect(indicator).to_be_hidden()


def test_an_acp_agent_that_cannot_steer_queues_and_says_so(
    server: Any, new_context: Any, view: str
) -> None:
    task_id = create_task(server, f"No steer {view}")
    person = open_person(server, new_context, view, f"/tasks/{task_id}")
    person.launch_session("mock")
    person.start_turn("/delay 8000")
    steer = person.page.get_by_test_id("steer-button")
    expect(steer).to_be_visible()
    person.chat_input.fill("go right")
    if view == "desktop":
        person.chat_input.press("Alt+Enter")  # the steer's shortcut
    else:
        person.press(steer)
    note = person.page.get_by_test_id("composer-note")
    expect(note).to_contain_text("cannot take a message into a running turn", timeout=10_000)
    expect(person.page.get_by_test_id("queued-message")).to_have_text(re.compile("go right"))
    expect(steer).to_be_hidden()  # offered no more for this agent


def test_a_late_cancel_counts_down_to_the_stop(
    server_factory: Any, new_context: Any, view: str
) -> None:
    srv = server_factory(toml=COUNTDOWN_TOML)
    task_id = create_task(srv, f"Countdown {view}")
    person = open_person(srv, new_context, view, f"/tasks/{task_id}")
    person.launch_session()
    person.start_turn("/hang")
    countdown = person.page.get_by_test_id("escalation-countdown")
    person.press(person.cancel_button)
    person.expect_cancelling()
    expect(person.page.get_by_test_id("working-indicator")).to_be_hidden()
    expect(countdown).to_be_visible(timeout=5_000)
    expect(countdown).to_have_text(re.compile(r"it is stopped in [1-6] s"))
    first = int(countdown.get_attribute("data-seconds") or "0")
    expect(countdown).not_to_have_attribute("data-seconds", str(first), timeout=3_000)
    assert int(countdown.get_attribute("data-seconds") or "99") < first
    shot(person.page, f"escalation-countdown-{view}")
    person.expect_settled(timeout=15_000)
    expect(countdown).to_be_hidden()


def test_stop_now_stops_a_hung_agent_without_a_second_cancel(
    server_factory: Any, new_context: Any, view: str
) -> None:
    srv = server_factory(toml=PATIENT_TOML)
    task_id = create_task(srv, f"Stop now {view}")
    person = open_person(srv, new_context, view, f"/tasks/{task_id}")
    person.launch_session()
    person.start_turn("/hang")
    sent: list[str] = []
    person.page.on("websocket", lambda ws: ws.on("framesent", lambda f: sent.append(str(f))))
    person.page.reload()  # the socket opened after the listener: its frames are counted
    person.expect_cancel_ready(timeout=10_000)
    person.press(person.cancel_button)
    countdown = person.page.get_by_test_id("escalation-countdown")
    expect(countdown).to_have_text(re.compile(r"stopped in (5\d|60) s"), timeout=5_000)
    started = time.monotonic()
    person.press(countdown.get_by_test_id("stop-now-button"))
    person.expect_settled(timeout=10_000)
    assert time.monotonic() - started < 10
    expect(person.status_messages().last).to_contain_text("Turn cancelled by user")
    expect(person.status_messages().last).to_contain_text("had to be stopped")
    assert sum('"agent.cancel"' in f for f in sent) == 1, sent
    assert sum('"agent.stop_now"' in f for f in sent) == 1, sent
