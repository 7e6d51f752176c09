"""The shared cancel control, one test per scenario of
spec/cancel-turn-progress-requirements.txt (issue 5), on desktop and on a phone.

Long pending windows come from `/hang` (the mock agent ignores the cancel): the default test
server escalates it after `cancel_escalate_s` (10 s, configs.LONG_PENDING_TOML), so the
backend operation lives long enough to navigate, reload and open tabs, then settles.
"""

from __future__ import annotations

import re
import time
from typing import Any

import pytest

pytest.importorskip("playwright.sync_api")

from playwright.sync_api import expect

from tests.support.serverproc import BlockingServerProcess

from .configs import FAILING_CANCEL_TOML, LONG_PENDING_TOML
from .conftest import ARTIFACTS
from .ui import CANCELLED_STATUS, CancellationLog, Person, create_task, get_session, wait_until

pytestmark = pytest.mark.browser


def open_person(
    server: BlockingServerProcess,
    new_context: Any,
    device: dict[str, Any],
    task_id: str,
    log: CancellationLog | None = None,
) -> Person:
    page = new_context(**device["options"]).new_page()
    if log is not None:
        log.attach(page)  # before the page opens its socket
    person = Person(page, server, touch=device["name"] == "mobile")
    person.login(f"/tasks/{task_id}")
    layout = "compact" if device["name"] == "mobile" else "desktop"
    expect(page.get_by_test_id("composer")).to_have_attribute("data-layout", layout)
    return person


def test_activation_disables_at_once_and_backend_runs_one_cancellation(
    server: BlockingServerProcess, new_context: Any, device: dict[str, Any]
) -> None:
    """GIVEN a running turn, WHEN the user activates the cancel control, THEN it is disabled at
    once, shows progress, and the backend runs one guarded cancellation."""
    task_id = create_task(server, "Immediate disable")
    log = CancellationLog()
    person = open_person(server, new_context, device, task_id, log)
    sid = person.launch_session()
    person.start_turn("/hang")

    if person.touch:
        person.press(person.cancel_button)
    else:
        now = person.activate_cancel_now()
        assert now == {
            "disabled": True,
            "text": "Cancelling...",
            "label": "Cancelling...",
            "spinner": True,
        }
    person.expect_cancelling()

    # One operation: pending goes true once, and false once when it settles (escalation).
    wait_until(lambda: any(not p for p, _ in log.for_session(sid)), person.page, timeout_ms=30_000)
    transitions = log.for_session(sid)
    assert [p for p, _ in transitions] == [True, False], transitions
    assert transitions[1][1] == transitions[0][1] + 1
    person.expect_settled()
    expect(person.status_messages().filter(has_text=CANCELLED_STATUS)).to_have_count(1)


def test_acknowledged_cancel_settles_within_two_seconds(
    server: BlockingServerProcess, new_context: Any, device: dict[str, Any]
) -> None:
    """An acknowledged cancel (`/delay`) settles the control: spinner gone, input ready, ≤ 2 s."""
    task_id = create_task(server, "Acknowledged cancel")
    person = open_person(server, new_context, device, task_id)
    person.launch_session()
    person.start_turn("/delay 30000")
    started = time.monotonic()
    person.press(person.cancel_button)
    person.expect_settled(timeout=2_000)
    assert time.monotonic() - started < 2.5  # the 2 s bound plus Playwright's polling slack
    status = person.status_messages().filter(has_text=CANCELLED_STATUS)
    expect(status).to_have_count(1)
    # Asked for and done: information, not a warning (issue 41).
    expect(status).to_have_attribute("data-variant", "info")
    # The input takes a new prompt at once.
    person.send("after the cancel")
    expect(person.page.get_by_test_id("message-list")).to_contain_text("after the cancel")


def test_esc_in_the_chat_input_cancels_the_running_turn(
    server: BlockingServerProcess, new_context: Any
) -> None:
    task_id = create_task(server, "Esc cancels")
    person = Person(new_context().new_page(), server)
    person.login(f"/tasks/{task_id}")
    person.launch_session()
    person.start_turn("/hang")
    person.chat_input.press("Escape")
    person.expect_cancelling()


def test_pending_survives_switching_task_and_back(
    server: BlockingServerProcess, new_context: Any, device: dict[str, Any]
) -> None:
    """GIVEN cancellation pending for task A, WHEN the user opens task B and returns to A,
    THEN A's control still shows progress and stays disabled."""
    task_b = create_task(server, "Task B elsewhere")
    task_a = create_task(server, "Task A cancelling")
    person = open_person(server, new_context, device, task_a)
    sid = person.launch_session()
    person.start_turn("/hang")
    person.press(person.cancel_button)
    person.expect_cancelling()

    person.press(person.page.get_by_role("link", name="← Tasks"))
    person.press(person.task_link(task_b))
    expect(person.page).to_have_url(re.compile(rf"/tasks/{task_b}"))
    expect(person.page.get_by_role("status")).to_have_count(0)  # B shows nothing of A's cancel

    person.press(person.page.get_by_role("link", name="← Tasks"))
    person.press(person.task_link(task_a))
    expect(person.session_item(sid)).to_have_attribute("aria-current", "page")
    person.expect_cancelling()


def test_reload_and_tab_replacement_hydrate_pending_on_first_paint(
    server: BlockingServerProcess, new_context: Any, device: dict[str, Any]
) -> None:
    """GIVEN the backend reports cancellation pending, WHEN the user reloads or replaces the page,
    THEN the first hydrated state shows the disabled animated control, without waiting for a new
    transition. The reloaded page's WebSocket is held silent to prove the state came from boot."""
    task_id = create_task(server, "Reload while cancelling")
    person = open_person(server, new_context, device, task_id)
    sid = person.launch_session()
    person.start_turn("/hang")
    person.press(person.cancel_button)
    person.expect_cancelling()
    # The control turns on the click, before the backend has the cancel: wait for it there.
    wait_until(lambda: get_session(server, sid)["cancellation_pending"] is True, person.page)

    # A socket that never reaches the server: nothing can arrive but the embedded boot state.
    person.page.route_web_socket(re.compile(r"/ws$"), lambda ws: None)
    person.page.reload()
    person.expect_cancelling(timeout=15_000)
    person.page.unroute_all()

    # Replacing the tab: close it, open a fresh one on the same session.
    context = person.page.context
    url = person.page.url
    person.page.close()
    replacement = Person(context.new_page(), server, touch=person.touch)
    replacement.page.goto(url)
    replacement.expect_cancelling(timeout=15_000)


def test_second_tab_shows_the_same_pending_state(
    server: BlockingServerProcess, new_context: Any, device: dict[str, Any]
) -> None:
    """GIVEN one tab has an accepted cancellation pending, WHEN a second authorized tab opens the
    same session, THEN it shows the same pending state (also live, for a tab already open)."""
    task_id = create_task(server, "Two tabs")
    first = open_person(server, new_context, device, task_id)
    sid = first.launch_session()
    first.start_turn("/hang")
    # A tab in another browser profile, already open before the cancel: it follows live.
    watcher = open_person(server, new_context, device, task_id)
    watcher.open_task(task_id, sid)
    watcher.expect_cancel_ready()

    first.press(first.cancel_button)
    first.expect_cancelling()
    watcher.expect_cancelling()

    # A tab opened afterwards hydrates the same state.
    late = open_person(server, new_context, device, task_id)
    late.open_task(task_id, sid)
    late.expect_cancelling(timeout=15_000)

    # All of them settle together when the backend's operation does.
    for person in (first, watcher, late):
        person.expect_settled(timeout=30_000)


def test_another_running_session_stays_independent_and_enabled(
    server: BlockingServerProcess, new_context: Any, device: dict[str, Any]
) -> None:
    """GIVEN one session has a pending cancellation, WHEN the user views another running session,
    THEN that session's control stays independent and enabled."""
    task_id = create_task(server, "Two sessions")
    person = open_person(server, new_context, device, task_id)
    other = person.launch_session()
    person.start_turn("/delay 60000")
    cancelled = person.launch_session()
    person.start_turn("/hang")
    person.press(person.cancel_button)
    person.expect_cancelling()

    # Selecting a session is in-page navigation: no reload (the marker survives), URL follows.
    person.page.evaluate("() => { window.__noReload = true; }")
    person.select_session(other)
    expect(person.page).to_have_url(re.compile(rf"[?&]session={other}"))
    person.expect_cancel_ready()
    assert person.page.evaluate("() => window.__noReload") is True

    person.select_session(cancelled)
    person.expect_cancelling()
    person.page.go_back()
    expect(person.page).to_have_url(re.compile(rf"[?&]session={other}"))
    person.expect_cancel_ready()
    # And it can be cancelled in its own right.
    person.press(person.cancel_button)
    person.expect_settled(timeout=5_000)


def test_repeated_activation_runs_one_backend_operation(
    server: BlockingServerProcess, new_context: Any, device: dict[str, Any]
) -> None:
    """GIVEN a cancellation is pending, WHEN another cancel request arrives for that session,
    THEN the backend runs no second cancellation and keeps progress until the owner settles."""
    task_id = create_task(server, "Repeated activation")
    log = CancellationLog()
    person = open_person(server, new_context, device, task_id, log)
    sid = person.launch_session()
    person.start_turn("/hang")
    person.press(person.cancel_button)
    person.expect_cancelling()

    # Same-page repeats are ignored: a forced click on the disabled control, Esc in the input.
    person.cancel_button.dispatch_event("click")
    person.chat_input.press("Escape")
    # A duplicate transport request (the race the spec allows), from a second socket.
    answer = person.page.evaluate(
        r"""(sid) => new Promise((resolve) => {
            // Authenticated as the page is: its token from this origin's storage.
            const token = localStorage.getItem('turnvisor.token');
            const b64 = btoa(token).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
            const ws = new WebSocket(`${location.origin.replace('http', 'ws')}/ws`,
                                     ['turnvisor', 'turnvisor.bearer.' + b64]);
            const request = {id: 'dup-1', type: 'request', action: 'agent.cancel',
                             payload: {session_id: sid}, timestamp: new Date().toISOString()};
            ws.onopen = () => ws.send(JSON.stringify(request));
            ws.onmessage = (e) => {
                const f = JSON.parse(e.data);
                if (f.id === 'dup-1') { resolve(f.type); ws.close(); }
            };
            setTimeout(() => resolve('no answer within 40 s'), 40000);
        })""",
        sid,
    )
    # The duplicate joined the one operation: it answered only when that settled.
    assert answer == "response"
    wait_until(lambda: any(not p for p, _ in log.for_session(sid)), person.page, timeout_ms=30_000)
    assert [p for p, _ in log.for_session(sid)] == [True, False]
    person.expect_settled()
    expect(person.status_messages().filter(has_text=CANCELLED_STATUS)).to_have_count(1)


def test_failed_cancel_clears_and_becomes_retryable(
    server_factory: Any, new_context: Any, device: dict[str, Any]
) -> None:
    """GIVEN cancellation rejects or times out while the session remains running, WHEN pending
    is cleared, THEN the control becomes retryable (and the request's error is shown)."""
    server = server_factory(toml=FAILING_CANCEL_TOML)
    task_id = create_task(server, "Failing cancel")
    person = open_person(server, new_context, device, task_id)
    sid = person.launch_session()
    person.start_turn("/hang")
    person.press(person.cancel_button)
    person.expect_cancelling()

    person.expect_cancel_ready(timeout=15_000)
    expect(person.page.get_by_test_id("composer-error")).to_be_visible()
    assert get_session(server, sid)["state"] == "RUNNING"
    # Retry: the control works again.
    person.press(person.cancel_button)
    person.expect_cancelling()


def test_compact_mobile_composer_hydrates_after_reload(
    server: BlockingServerProcess, new_context: Any, playwright_instance: Any
) -> None:
    """GIVEN the compact mobile composer is active, WHEN cancellation is accepted and the page
    reloads, THEN its shared cancel control hydrates the same backend-owned progress state."""
    task_id = create_task(server, "Mobile reload")
    device = {"name": "mobile", "options": dict(playwright_instance.devices["Pixel 7"])}
    person = open_person(server, new_context, device, task_id)
    sid = person.launch_session()
    person.start_turn("/hang")
    person.press(person.cancel_button)
    person.expect_cancelling()
    # Drawn on the click: the reload must not beat the cancel to the backend.
    wait_until(lambda: get_session(server, sid)["cancellation_pending"] is True, person.page)
    person.page.reload()
    expect(person.page.get_by_test_id("composer")).to_have_attribute("data-layout", "compact")
    person.expect_cancelling(timeout=15_000)
    # One composer at a time: the test ids stay unique.
    expect(person.page.get_by_test_id("cancel-agent-button")).to_have_count(1)
    expect(person.page.get_by_test_id("chat-input")).to_have_count(1)


def test_backend_restart_exposes_no_stale_pending(
    server_factory: Any, new_context: Any, tmp_path: Any
) -> None:
    """GIVEN cancellation was pending before a backend restart, WHEN the server starts again,
    THEN no stale pending flag is exposed, neither to the open tab (after it reconnects) nor to a
    fresh load, and the recovered session state decides whether cancel can be retried."""
    data_dir = tmp_path / "restart-data"
    server = server_factory(toml=LONG_PENDING_TOML, data_dir=data_dir)
    task_id = create_task(server, "Restart while cancelling")
    person = Person(new_context().new_page(), server)
    person.login(f"/tasks/{task_id}")
    sid = person.launch_session()
    person.start_turn("/hang")
    person.press(person.cancel_button)
    person.expect_cancelling()

    server.stop()
    # Same port, so the open tab's reconnecting socket finds the new process.
    restarted = server_factory(toml=LONG_PENDING_TOML, data_dir=data_dir, port=server.port)
    expect(person.page.get_by_test_id("connection-status")).to_have_attribute(
        "data-status", "open", timeout=20_000
    )
    expect(person.page.get_by_role("status")).to_have_count(0, timeout=5_000)

    fresh = Person(new_context().new_page(), restarted)
    fresh.login(f"/tasks/{task_id}?session={sid}")
    expect(fresh.page.get_by_role("status")).to_have_count(0)
    assert get_session(restarted, sid)["cancellation_pending"] is False
    for p in (person, fresh):
        if get_session(restarted, sid)["state"] == "RUNNING":
            p.expect_cancel_ready()
        else:
            expect(p.cancel_button).to_be_hidden()


def test_screenshots_mid_cancel(
    server: BlockingServerProcess, new_context: Any, playwright_instance: Any
) -> None:
    """Pictures of desktop and mobile, after an acknowledged cancel (the warning badge) and mid
    cancel (the spinner), under test-output/browser/, to be looked at."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    devices = (
        ("desktop", {"viewport": {"width": 1280, "height": 800}}),
        ("mobile", dict(playwright_instance.devices["Pixel 7"])),
    )
    for name, options in devices:
        task_id = create_task(server, f"Screenshots on {name}")
        person = open_person(server, new_context, {"name": name, "options": options}, task_id)
        person.launch_session()
        person.start_turn("/delay 30000")
        person.press(person.cancel_button)
        person.expect_settled()
        expect(person.status_messages()).to_have_count(1)
        person.page.screenshot(path=str(ARTIFACTS / f"after-cancel-{name}.png"))

        person.start_turn("/hang")
        person.press(person.cancel_button)
        person.expect_cancelling()
        path = ARTIFACTS / f"mid-cancel-{name}.png"
        person.page.screenshot(path=str(path))
        assert path.stat().st_size > 0
