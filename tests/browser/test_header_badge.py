"""The header's state badge is read whole, on a phone as on a desktop: every state a turn goes
through ("Stopping after this step", "Cancelling", "Stopping an unresponsive agent", "Needs
approval", "Last turn failed", a failed start, and "… (last known)" once the server is gone)
shows all its words, in the window, over no other control. (The link-down states, "Host
unreachable" and "Waiting for the agent's host", are checked by test_link_down.py.)

Driven by the real backend and the mock agent: `/tool 600000` is a running tool a stop after
this step waits for; `/hang` ignores the cancel, so it stays "Cancelling" for this server's
`cancel_join_s` and then turns late."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("playwright.sync_api")

from playwright.sync_api import Page, expect

from .ui import Person, assert_badge_whole, create_task, open_person, shot

pytestmark = pytest.mark.browser

#: "Cancelling" lasts 15 s (long enough to look at under load), then the cancel is late and
#: waits a minute: stop-now-button ends it.
SLOW_CANCEL_TOML = """\
[timeouts]
cancel_join_s = 15.0
cancel_escalate_s = 60.0
cancel_operation_s = 120.0

[agents.broken]
protocol = "acp"
command = ["sh", "-c", "echo 'ANTHROPIC_API_KEY is not set' >&2; exit 3"]
sandbox = "none"
"""


def assert_title_readable(page: Page) -> None:
    """The heading's title may give up room to the badge, not all of it."""
    width: float = page.evaluate(
        "() => document.querySelector('.chat-heading .chat-title').getBoundingClientRect().width")
    assert width >= 48, f"the session's title is squeezed to {width} px"


#: What cuts the selected session's row in the strip: its badge's text, or its ⋯ button off
#: the window or under the badge.
STRIP_PROBLEMS = """() => {
  const row = document.querySelector('[data-testid="session-item"][aria-current="page"]')
    .closest('.session-row');
  const badge = row.querySelector('[data-testid="session-state"]');
  const more = row.querySelector('[data-testid="session-actions"]');
  const b = badge.getBoundingClientRect(), m = more.getBoundingClientRect();
  const problems = [];
  if (badge.scrollWidth > badge.clientWidth || badge.scrollHeight > badge.clientHeight + 1)
    problems.push(`badge cut: ${badge.scrollWidth}x${badge.scrollHeight} in `
      + `${badge.clientWidth}x${badge.clientHeight}`);
  if (m.right > window.innerWidth + 0.5)
    problems.push(`the ⋯ button leaves the window: ${m.right}`);
  if (b.right > m.left + 0.5) problems.push('the badge runs under the ⋯ button');
  return problems;
}"""


def check_strip(person: Person, label: str) -> None:
    """On a phone, the strip behind the header's menu says the selected session's state whole
    too, its ⋯ button in reach."""
    person.open_menu()
    expect(person.page.locator(
        '[data-testid="session-item"][aria-current="page"] [data-testid="session-state"]'
    )).to_have_text(label)
    problems = person.page.evaluate(STRIP_PROBLEMS)
    assert not problems, (label, problems)
    person.close_menu()


def check_sidebar(person: Person, label: str) -> None:
    """On a desktop, the sidebar's row may cut a long state to its line: its tooltip then says
    it whole."""
    badge = person.page.locator(
        '[data-testid="session-item"][aria-current="page"] [data-testid="session-state"]')
    expect(badge).to_have_text(label)
    cut = badge.evaluate("b => b.scrollWidth > b.clientWidth")
    if cut:
        expect(badge).to_have_attribute("title", label)


def check_row(person: Person, view: str, label: str) -> None:
    """The selected session's row says its state: the phone's strip, the desktop's sidebar."""
    if view == "phone":
        check_strip(person, label)
    else:
        check_sidebar(person, label)


def check(person: Person, label: str, name: str, timeout_ms: int = 10_000) -> None:
    assert_badge_whole(person.page, label, timeout_ms=timeout_ms)
    assert_title_readable(person.page)
    shot(person.page, f"badge-{name}")


def test_the_state_badge_says_every_turn_state_whole(
    server_factory: Any, new_context: Any, view: str
) -> None:
    srv = server_factory(toml=SLOW_CANCEL_TOML)
    task_id = create_task(srv, f"Badge {view}")
    person = open_person(srv, new_context, view, f"/tasks/{task_id}")
    page = person.page
    person.launch_session()
    check(person, "Waiting for input", f"idle-{view}")

    person.start_turn("/tool 600000")
    check(person, "Running", f"running-{view}")
    after_step = page.get_by_test_id("stop-after-step-button")
    expect(page.get_by_test_id("tool-call-card").first).to_be_visible(timeout=10_000)
    person.press(after_step)
    check(person, "Stopping after this step", f"after-step-{view}")
    check_row(person, view, "Stopping after this step")
    if view == "phone":
        # Typing folds the heading's buttons away: the name and the state share the line.
        person.chat_input.tap()
        person.chat_input.fill("a draft")
        expect(page.locator(".page--task.is-typing")).to_have_count(1)
        check(person, "Stopping after this step", f"after-step-typing-{view}")
        person.chat_input.fill("")
        person.chat_input.blur()
        expect(page.locator(".page--task.is-typing")).to_have_count(0)
    person.press(person.cancel_button)  # a stop now joins it: the tool's turn ends
    person.expect_settled(timeout=30_000)

    person.start_turn("/permission")
    check(person, "Needs approval", f"approval-{view}")
    person.press(person.cancel_button)
    person.expect_settled(timeout=30_000)

    person.start_turn("/hang")
    person.press(person.cancel_button)
    check(person, "Cancelling", f"cancelling-{view}")
    check(person, "Stopping an unresponsive agent", f"late-{view}", timeout_ms=40_000)
    check_row(person, view, "Stopping an unresponsive agent")
    # Offline, the state is the last one heard and says so: the longest words the badge has.
    srv.stop()
    check(person, "Stopping an unresponsive agent (last known)", f"late-offline-{view}")


def test_the_state_badge_of_a_failed_turn_and_a_failed_start(
    server_factory: Any, new_context: Any, view: str
) -> None:
    srv = server_factory(toml=SLOW_CANCEL_TOML)
    task_id = create_task(srv, f"Failed badge {view}")
    person = open_person(srv, new_context, view, f"/tasks/{task_id}")
    page = person.page
    person.launch_session()
    person.send("/crash")
    check(person, "Last turn failed", f"turn-failed-{view}")

    person.open_menu()
    page.get_by_test_id("agent-select").select_option("broken")
    person.press(page.get_by_test_id("new-session-button"))
    expect(page.get_by_test_id("retry-start-button")).to_be_visible(timeout=30_000)
    person.close_menu()
    check(person, "Failed", f"failed-start-{view}")
