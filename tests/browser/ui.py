"""What a person does in the Turnvisor UI, as helpers over Playwright's sync API.

Every locator uses the stable test ids and labels of DESIGN.md §8; nothing here reaches into
the page's JavaScript state. Setup that is not under test (creating a task) goes through REST.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
from playwright.sync_api import Locator, Page, WebSocket, expect

from tests.support.serverproc import BlockingServerProcess

from .conftest import ARTIFACTS, VIEWS

CANCEL = "Cancel agent"
CANCELLING = "Cancelling..."
CANCELLED_STATUS = "Turn cancelled by user"


def create_task(server: BlockingServerProcess, title: str) -> str:
    resp = httpx.post(
        server.url_for("/api/v1/tasks"),
        json={"title": title},
        headers={"Authorization": f"Bearer {server.token}"},
        timeout=10,
    )
    resp.raise_for_status()
    task_id: str = resp.json()["id"]
    return task_id


def get_session(server: BlockingServerProcess, session_id: str) -> dict[str, Any]:
    resp = httpx.get(
        server.url_for(f"/api/v1/task-sessions/{session_id}"),
        headers={"Authorization": f"Bearer {server.token}"},
        timeout=10,
    )
    resp.raise_for_status()
    data: dict[str, Any] = resp.json()
    return data


@dataclass
class CancellationLog:
    """Every `session.cancellation_changed` the page's socket received, in order."""

    frames: list[dict[str, Any]] = field(default_factory=list)

    def attach(self, page: Page) -> None:
        def on_socket(ws: WebSocket) -> None:
            def on_frame(payload: str | bytes) -> None:
                try:
                    frame = json.loads(payload)
                except ValueError:
                    return
                if frame.get("action") == "session.cancellation_changed":
                    self.frames.append(frame["payload"])

            ws.on("framereceived", on_frame)

        page.on("websocket", on_socket)

    def for_session(self, session_id: str) -> list[tuple[bool, int]]:
        return [
            (f["cancellation_pending"], f["cancellation_revision"])
            for f in self.frames
            if f.get("session_id") == session_id
        ]


class Person:
    """One person in one browser tab; `touch` taps instead of clicking (mobile emulation)."""

    def __init__(self, page: Page, server: BlockingServerProcess, *, touch: bool = False) -> None:
        self.page = page
        self.server = server
        self.touch = touch

    # --- navigation ---------------------------------------------------------------------------
    def login(self, path: str = "/") -> None:
        """First visit with `?token=`; the page's script stores it (localStorage) and drops it."""
        self.page.goto(self.server.login_url(path))
        ensure_mounted(self.page)

    def open_task(self, task_id: str, session_id: str | None = None) -> None:
        query = f"?session={session_id}" if session_id else ""
        self.page.goto(self.server.url_for(f"/tasks/{task_id}{query}"))

    def task_link(self, task_id: str) -> Locator:
        """The link to a task in the task list (by id: titles need not be unique)."""
        return self.page.get_by_test_id("task-list").locator(
            f'[data-testid="task-item"][data-task-id="{task_id}"]'
        )

    def press(self, target: Locator) -> None:
        self.reveal(target)
        if self.touch:
            target.tap()
        else:
            target.click()

    # --- the phone's header menu (issue 41: the strip, the agent row and "Works in" fold) -----
    def open_menu(self) -> None:
        """Opens the phone's header menu if it is folded (nothing to do on a desktop)."""
        button = self.page.get_by_test_id("header-menu-button")
        button.wait_for(state="attached")  # the page is drawn (hidden on a desktop)
        if button.is_visible() and button.get_attribute("aria-expanded") != "true":
            button.tap() if self.touch else button.click()
            expect(button).to_have_attribute("aria-expanded", "true")

    def close_menu(self) -> None:
        """Folds the phone's header menu again if it is open."""
        button = self.page.get_by_test_id("header-menu-button")
        if button.is_visible() and button.get_attribute("aria-expanded") == "true":
            button.tap() if self.touch else button.click()
            expect(button).to_have_attribute("aria-expanded", "false")

    def reveal(self, target: Locator) -> None:
        """A control folded behind the phone's header menu is reached as a person does: the
        menu first."""
        if target.is_visible() or not self.page.get_by_test_id("header-menu-button").is_visible():
            return
        if target.evaluate("el => Boolean(el.closest('.sidebar, .work-dir'))"):
            self.open_menu()

    # --- the task page ------------------------------------------------------------------------
    @property
    def cancel_button(self) -> Locator:
        return self.page.get_by_test_id("cancel-agent-button")

    @property
    def chat_input(self) -> Locator:
        return self.page.get_by_test_id("chat-input")

    def session_item(self, session_id: str) -> Locator:
        """A session's row in the strip; on a phone the strip is behind the header's menu, so
        looking for a row opens it, as a person would."""
        if self.touch:
            self.open_menu()
        return self._item(session_id)

    def _item(self, session_id: str) -> Locator:
        return self.page.locator(f'[data-testid="session-item"][data-session-id="{session_id}"]')

    def session_ids(self) -> list[str]:
        items = self.page.get_by_test_id("session-item")
        return [items.nth(i).get_attribute("data-session-id") or "" for i in range(items.count())]

    def launch_session(self, agent: str = "mock") -> str:
        """Starts a session with the agent select and the New session button; returns its id."""
        before = set(self.session_ids())
        self.open_menu()
        self.page.get_by_test_id("agent-select").select_option(agent)
        self.press(self.page.get_by_test_id("new-session-button"))
        items = self.page.get_by_test_id("session-item")
        expect(items).to_have_count(len(before) + 1, timeout=30_000)
        (new_id,) = set(self.session_ids()) - before
        expect(self._item(new_id)).to_have_attribute("aria-current", "page")
        expect(self.page).to_have_url(re.compile(rf"[?&]session={re.escape(new_id)}"))
        return new_id

    def send(self, text: str) -> None:
        self.chat_input.fill(text)
        self.press(self.page.get_by_test_id("send-button"))

    def start_turn(self, prompt: str) -> None:
        """Sends a prompt and waits for the turn to run: the cancel control appears, enabled."""
        self.send(prompt)
        expect(self.cancel_button).to_be_visible(timeout=15_000)
        self.expect_cancel_ready()

    def select_session(self, session_id: str) -> None:
        self.press(self.session_item(session_id))
        expect(self._item(session_id)).to_have_attribute("aria-current", "page")

    # --- what the cancel control shows --------------------------------------------------------
    def expect_cancelling(self, timeout: float = 5_000) -> None:
        """Disabled, progress spinner (role=status), label and accessible name "Cancelling..."."""
        button = self.cancel_button
        expect(button).to_be_visible(timeout=timeout)
        expect(button).to_be_disabled(timeout=timeout)
        expect(button).to_have_text(CANCELLING, timeout=timeout)
        expect(button).to_have_accessible_name(CANCELLING, timeout=timeout)
        expect(button.get_by_role("status")).to_be_visible(timeout=timeout)

    def expect_cancel_ready(self, timeout: float = 5_000) -> None:
        """Shown, enabled, "Cancel agent", no spinner: a running turn that can be cancelled."""
        button = self.cancel_button
        expect(button).to_be_visible(timeout=timeout)
        expect(button).to_be_enabled(timeout=timeout)
        expect(button).to_have_text(CANCEL, timeout=timeout)
        expect(button).to_have_accessible_name(CANCEL, timeout=timeout)
        expect(self.page.get_by_role("status")).to_have_count(0, timeout=timeout)

    def expect_settled(self, timeout: float = 5_000) -> None:
        """The turn is over: no control, no spinner, the input takes a new prompt."""
        expect(self.cancel_button).to_be_hidden(timeout=timeout)
        expect(self.page.get_by_role("status")).to_have_count(0, timeout=timeout)
        expect(self.chat_input).to_be_editable(timeout=timeout)

    def activate_cancel_now(self) -> dict[str, Any]:
        """Clicks the control from inside the page and reads it back in the same task: proves
        the disable and spinner happen synchronously, before any backend answer can arrive."""
        result: dict[str, Any] = self.page.evaluate(
            """() => {
                const b = document.querySelector('[data-testid="cancel-agent-button"]');
                b.click();
                const s = b.querySelector('[role="status"]');
                return {disabled: b.disabled, text: b.textContent.trim(),
                        label: b.getAttribute('aria-label'),
                        spinner: Boolean(s) && !s.hidden && s.getClientRects().length > 0};
            }"""
        )
        return result

    def status_messages(self) -> Locator:
        return self.page.get_by_test_id("status-message")


def open_page(new_context: Callable[..., Any], view: str) -> Page:
    """A page in a new browser context (its own cookie jar) of the VIEWS window `view`."""
    page: Page = new_context(**VIEWS[view]).new_page()
    log_page(page)
    return page


def open_person(
    server: BlockingServerProcess, new_context: Callable[..., Any], view: str, path: str
) -> Person:
    """A person in a new browser context of the window `view`, logged in at `path` with the
    page drawn; on the phone they tap instead of clicking."""
    person = Person(open_page(new_context, view), server, touch=view == "phone")
    person.login(path)
    return person


def person_on_new_task(
    server: BlockingServerProcess, new_context: Callable[..., Any], view: str, title: str
) -> Person:
    """A new task titled `title`, and a person (``open_person``) on its page."""
    return open_person(server, new_context, view, f"/tasks/{create_task(server, title)}")


def option_select(page: Page, option_id: str) -> Locator:
    """The composer's select of the agent's option `option_id` (model, mode, effort, ...)."""
    return page.locator(f'[data-testid="option-select"][data-option-id="{option_id}"]')


def log_page(page: Page) -> None:
    """Prints what the page itself complained about: shown with a failure's captured output."""
    page.on("pageerror", lambda e: print(f"[page error] {e}"))
    page.on("console", lambda m: print(f"[console {m.type}] {m.text}"))
    page.on("requestfailed", lambda r: print(f"[request failed] {r.url} {r.failure}"))


def shot(page: Page, name: str) -> None:
    """A screenshot of the window as test-output/browser/<name>.png, to look at afterwards."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"))


def wait_until(predicate: Callable[[], bool], page: Page, timeout_ms: int = 10_000) -> None:
    """Polls a Python-side condition while letting Playwright dispatch events."""
    waited = 0
    while not predicate():
        if waited >= timeout_ms:
            raise AssertionError("condition not met in time")
        page.wait_for_timeout(100)
        waited += 100


def ensure_mounted(page: Page) -> None:
    """Waits for the app to draw its page; reloads once if it did not.

    On this shared machine other jobs add and remove network interfaces (containers,
    sandboxes); Chromium then aborts requests in flight with ERR_NETWORK_CHANGED, and a page
    whose module graph lost a file stays blank. That is the machine, not the page: load again."""
    mounted = page.locator("#app > .page, [data-testid='error-page']")
    try:
        mounted.first.wait_for(timeout=10_000)
    except Exception:
        print("[test] the page did not mount (see request failures above); reloading once")
        page.reload()
        mounted.first.wait_for(timeout=15_000)


#: What keeps the header's state badge from being read whole, measured in the page: text cut
#: (an ellipsis: wider or taller than its box), the badge outside the window, or over another
#: control of the heading line or the composer's cancel control.
_BADGE_PROBLEMS = """() => {
  const badge = document.querySelector('[data-testid="selected-session-state"]');
  if (!badge || badge.hidden || badge.getClientRects().length === 0) return ['badge not shown'];
  const problems = [];
  const r = badge.getBoundingClientRect();
  if (badge.scrollWidth > badge.clientWidth)
    problems.push(`cut: ${badge.scrollWidth} px of text in ${badge.clientWidth}`);
  if (badge.scrollHeight > badge.clientHeight + 1)
    problems.push(`cut: ${badge.scrollHeight} px tall in ${badge.clientHeight}`);
  if (r.left < 0 || r.right > window.innerWidth + 0.5 || r.top < 0)
    problems.push(`outside the window: ${r.left}..${r.right}`);
  const others = [...badge.parentElement.children].filter((el) => el !== badge);
  const cancel = document.querySelector('[data-testid="cancel-agent-button"]');
  if (cancel) others.push(cancel);
  for (const el of others) {
    const o = el.getBoundingClientRect();
    if (el.hidden || o.width === 0 || o.height === 0) continue;
    const overlap = Math.min(r.right, o.right) - Math.max(r.left, o.left) > 0.5 &&
      Math.min(r.bottom, o.bottom) - Math.max(r.top, o.top) > 0.5;
    if (overlap) problems.push(`over ${el.dataset.testid || el.className}`);
  }
  return problems;
}"""


def assert_badge_whole(page: Page, label: str, timeout_ms: int = 10_000) -> None:
    """The header's state badge says `label`, and a person reads all of it: no ellipsis, in
    the window, over no other control of its line nor the cancel control."""
    badge = page.get_by_test_id("selected-session-state")
    expect(badge).to_have_text(label, timeout=timeout_ms)
    problems: list[str] = []

    def whole() -> bool:
        problems[:] = page.evaluate(_BADGE_PROBLEMS)
        return not problems

    try:
        wait_until(whole, page, timeout_ms=2_000)
    except AssertionError:
        raise AssertionError(f"the state badge {label!r} is not read whole: {problems}") from None
