"""The page tells you when you are needed (issue 29, DESIGN.md §15), desktop and phone.

A failed "New session" selects the failed session and nothing typed afterwards goes to another
one; "Needs approval" and "Cancelling" reach the rows of every tab; the tab's title mark, the
`attention-badge` and opt-in browser notifications (Chromium's Notification API, the permission
granted through Playwright) speak only for sessions the person is not looking at.
"""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

pytest.importorskip("playwright.sync_api")

from playwright.sync_api import expect

from tests.support.serverproc import BlockingServerProcess as ServerProcess

from .configs import LONG_PENDING_TOML
from .conftest import VIEWS
from .ui import Person, create_task, ensure_mounted, open_person, shot

pytestmark = pytest.mark.browser

#: A profile whose agent cannot start, as one with a missing key: it says why and exits.
BROKEN_TOML = LONG_PENDING_TOML + """
[agents.broken]
protocol = "acp"
command = ["sh", "-c", "echo 'ANTHROPIC_API_KEY is not set' >&2; exit 3"]
sandbox = "none"
"""

#: Records every `new Notification(...)` the page makes (the real one still runs).
RECORD_NOTIFICATIONS = """
(() => {
  const Real = window.Notification;
  window.__notes = [];
  class Recording extends Real {
    constructor(title, options) {
      super(title, options);
      window.__notes.push({title, body: options?.body ?? ""});
    }
  }
  Object.defineProperty(Recording, "permission", { get: () => Real.permission });
  Recording.requestPermission = (...a) => Real.requestPermission(...a);
  window.Notification = Recording;
})();
"""


def messages_of(server: ServerProcess, session_id: str) -> list[dict[str, Any]]:
    resp = httpx.get(server.url_for(f"/api/v1/task-sessions/{session_id}/messages"),
                     headers={"Authorization": f"Bearer {server.token}"}, timeout=10)
    resp.raise_for_status()
    rows: list[dict[str, Any]] = resp.json()["messages"]
    return rows


def launch_failing(person: Person) -> str:
    """New session with the broken agent; returns the id of the (failed) session it selects."""
    before = set(person.session_ids())
    person.open_menu()  # on a phone the agent row is behind the header's menu
    person.page.get_by_test_id("agent-select").select_option("broken")
    person.press(person.page.get_by_test_id("new-session-button"))
    items = person.page.get_by_test_id("session-item")
    expect(items).to_have_count(len(before) + 1, timeout=30_000)
    (new_id,) = set(person.session_ids()) - before
    expect(person.session_item(new_id)).to_have_attribute("aria-current", "page", timeout=15_000)
    return new_id


def test_a_failed_start_selects_the_failed_session_and_keeps_words_from_the_old_agent(
    server_factory: Any, new_context: Any, view: str
) -> None:
    srv = server_factory(toml=BROKEN_TOML)
    task_id = create_task(srv, "Failed start")
    person = open_person(srv, new_context, view, f"/tasks/{task_id}")
    old = person.launch_session("mock")
    person.send("first words")
    expect(person.page.get_by_test_id("message-list")).to_contain_text("first words",
                                                                       timeout=15_000)

    failed = launch_failing(person)
    page = person.page
    expect(page).to_have_url(re.compile(rf"[?&]session={re.escape(failed)}"))
    header = page.get_by_test_id("selected-session-state")
    expect(header).to_have_text("Failed")
    expect(page.get_by_test_id("session-status-reason")).to_contain_text(
        "ANTHROPIC_API_KEY is not set")
    expect(page.get_by_test_id("retry-start-button")).to_be_visible()
    expect(page.get_by_test_id("page-error")).to_be_hidden()  # the session says why
    # Said once (issue 41): the header, not again as a pill in the conversation.
    expect(page.get_by_text("ANTHROPIC_API_KEY is not set")).to_have_count(1)
    expect(page.get_by_test_id("message-list").get_by_test_id("status-message")).to_have_count(0)
    # Typed right after the failure: Send is off for the failed session and the draft stays;
    # nothing goes to the old agent, and the reason is not repeated in the composer.
    person.chat_input.fill("not for the old agent")
    expect(page.get_by_test_id("send-button")).to_be_disabled()
    expect(page.get_by_test_id("composer-note")).to_have_text(
        "Send is off: this session's agent did not start.")
    person.chat_input.press("Enter")
    page.wait_for_timeout(500)
    expect(person.chat_input).to_have_value("not for the old agent")
    expect(page.get_by_test_id("composer-error")).to_be_hidden()
    assert all("not for the old agent" not in m["content"] for m in messages_of(srv, old))
    assert all("not for the old agent" not in m["content"] for m in messages_of(srv, failed))
    # What to do: the agent wants a key, so the help says to log in, and where it is set up.
    help_link = page.get_by_test_id("agent-help-link")
    expect(help_link).to_have_text("broken needs you to log in")
    person.press(help_link)
    expect(page.get_by_test_id("agent-help")).to_contain_text("[agents.broken]")
    expect(page.get_by_test_id("agent-help")).to_contain_text("turnvisor.toml")
    expect(page.get_by_test_id("agent-help")).to_contain_text("Retry start")
    shot(page, f"failed-start-{view}")
    page.emulate_media(color_scheme="dark")
    shot(page, f"failed-start-{view}-dark")
    page.emulate_media(color_scheme="light")
    expect(page.get_by_test_id("message-list")).to_contain_text(
        "No messages: its agent did not start")
    # The task list shows the failed session (another device).
    lister = open_person(srv, new_context, view, "/")
    expect(lister.task_link(task_id).get_by_test_id("task-status")).to_have_text(
        "2 sessions · 1 failed")
    shot(lister.page, f"failed-start-task-list-{view}")

    # Retry start: a new session of the same agent, selected; it fails too, and says so.
    person.press(person.page.get_by_test_id("retry-start-button"))
    expect(person.page.get_by_test_id("session-item")).to_have_count(3, timeout=30_000)
    (again,) = set(person.session_ids()) - {old, failed}
    expect(person.session_item(again)).to_have_attribute("aria-current", "page", timeout=15_000)
    expect(header).to_have_text("Failed")


def test_approval_and_cancelling_reach_every_tab_with_the_title_mark_and_notifications(
    server: ServerProcess, new_context: Any, view: str
) -> None:
    task_id = create_task(server, f"Attention {view}")
    ctx = new_context(**VIEWS[view], permissions=["notifications"])
    ctx.add_init_script(RECORD_NOTIFICATIONS)
    page = ctx.new_page()
    person = Person(page, server, touch=view == "phone")
    person.login(f"/tasks/{task_id}")
    first = person.launch_session()
    second = person.launch_session()
    toggle = page.get_by_test_id("notify-toggle")
    person.press(toggle)
    expect(toggle).to_have_attribute("aria-pressed", "true")

    # A second tab on the task list.
    lister = open_person(server, new_context, view, "/")
    row = lister.task_link(task_id).get_by_test_id("task-status")

    # The first session asks while it is looked at: its rows say so, nobody is notified.
    person.select_session(first)
    cards = page.get_by_test_id("permission-card")
    person.send("/permission")
    expect(cards).to_have_count(1, timeout=15_000)
    person.select_session(second)
    expect(person.session_item(first).get_by_test_id("session-state")).to_have_text(
        "Needs approval")
    expect(row).to_have_text("Needs approval", timeout=10_000)
    assert page.evaluate("window.__notes.length") == 0  # asked while looked at: no news
    # It still needs the person: the badge says so, naming the task (issue 41).
    expect(page.get_by_test_id("attention-badge")).to_have_text("1 session needs you")
    expect(page.get_by_test_id("attention-badge")).to_have_attribute(
        "title", f"Attention {view} · mock: asks for your approval")
    person.select_session(first)
    person.press(cards.last.get_by_role("button", name="Allow"))
    expect(row).not_to_have_text("Needs approval", timeout=10_000)

    # Its next turn ends, and the queued one asks, while the second is shown: that is news.
    person.start_turn("/delay 1500")
    person.chat_input.fill("/permission")
    person.chat_input.press("Enter")
    person.chat_input.blur()  # on a phone the strip folds away while the input has the focus
    person.select_session(second)
    badge = page.get_by_test_id("attention-badge")
    expect(badge).to_have_text("1 session needs you", timeout=15_000)
    expect(page).to_have_title(re.compile(rf"^\(1\) Attention {view}"))
    expect(row).to_have_text("Needs approval", timeout=15_000)
    # The first session's own row too: the page left it before it asked (issue 29).
    expect(person.session_item(first).get_by_test_id("session-state")).to_have_text(
        "Needs approval", timeout=15_000)
    page.wait_for_function("window.__notes.length >= 2")
    notes = page.evaluate("window.__notes")
    assert [n["title"] for n in notes] == [
        "Session 1 finished its turn", "Session 1 asks for your approval"], notes
    assert notes[0]["body"] == f"Task: Attention {view}"
    shot(page, f"attention-badge-{view}")
    person.press(badge)
    expect(person.session_item(first)).to_have_attribute("aria-current", "page")
    expect(badge).to_be_hidden()
    expect(page).to_have_title(re.compile(r"^\(!\) Attention"))  # the shown one asks
    person.press(cards.last.get_by_role("button", name="Allow"))
    expect(row).not_to_have_text("Needs approval", timeout=10_000)
    person.expect_settled(timeout=15_000)

    # Cancelling shows on the other tab's row too.
    person.start_turn("/hang")
    person.press(person.cancel_button)
    expect(row).to_have_text("Cancelling", timeout=10_000)
    expect(row).not_to_have_text("Cancelling", timeout=30_000)
    ensure_mounted(lister.page)
