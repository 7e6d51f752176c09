"""Issue 41 item 9: the task page by keyboard. Keys for cancel-and-undo (Alt+U), stop now
(Alt+S), new task (Alt+N), the next / previous session (Alt+↓ / Alt+↑) and the latest turn's
changes (Alt+C), all listed by `?`; from the composer `revert-turn-button` is reached in at
most five keys; the focus never falls to the page's body after an action; every control shows
the same focus ring. Written as a person's key presses and what has the focus after each."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("playwright.sync_api")

from playwright.sync_api import Page, expect

from tests.support.serverproc import BlockingServerProcess

from .test_projects_changes import _create_task_with_project, project_server  # noqa: F401
from .test_turn_progress import PATIENT_TOML
from .ui import create_task, open_person, shot, wait_until

pytestmark = pytest.mark.browser


def focused(page: Page) -> str:
    """What has the focus: its test id, else its tag (BODY when the focus was dropped)."""
    return str(page.evaluate(
        "() => { const a = document.activeElement;"
        " return a?.dataset?.testid || a?.tagName || ''; }"))


def expect_focus_kept(page: Page) -> None:
    page.wait_for_timeout(150)  # a re-render may drop it a moment later
    assert focused(page) not in ("BODY", "HTML", ""), focused(page)


def test_from_the_composer_revert_is_two_keys_away_and_undo_has_a_key(
    project_server: tuple[BlockingServerProcess, Path], new_context: Any  # noqa: F811
) -> None:
    server, project = project_server
    person = open_person(server, new_context, "desktop", "/")
    page, kb = person.page, person.page.keyboard
    _create_task_with_project(person, "Keys", project)  # after "Use this directory": see below
    person.launch_session()
    person.send("/write a.txt hello")
    card = page.get_by_test_id("turn-changes")
    expect(card).to_have_count(1, timeout=20_000)

    person.chat_input.focus()
    keys = ["Alt+c", "Tab"]
    for key in keys:
        kb.press(key)
    assert len(keys) <= 5
    revert = card.get_by_test_id("revert-turn-button")
    expect(revert).to_be_focused()
    # The revert asks in a dialog; closing it gives the focus back to the button.
    kb.press("Enter")
    dialog = page.get_by_test_id("revert-dialog")
    expect(dialog).to_be_visible()
    kb.press("Escape")
    expect(dialog).to_be_hidden()
    expect(revert).to_be_focused()

    # Alt+U is the "Cancel and undo" button: it asks first (the revert dialog), then cancels
    # and reverts. The turn's files go, and the focus stays on the page.
    person.chat_input.focus()
    person.start_turn("/edits 50")
    wait_until(lambda: len(list(project.glob("edit-*.txt"))) >= 2, page)
    kb.press("Alt+u")
    expect(dialog).to_be_visible()
    page.get_by_test_id("revert-confirm-button").click()
    person.expect_settled(timeout=20_000)
    restored = person.status_messages().filter(has_text="Files restored")
    expect(restored).to_have_count(1, timeout=15_000)
    assert not list(project.glob("edit-*.txt"))
    expect_focus_kept(page)


def test_use_this_directory_keeps_the_focus(
    project_server: tuple[BlockingServerProcess, Path], new_context: Any  # noqa: F811
) -> None:
    server, project = project_server
    person = open_person(server, new_context, "desktop", "/")
    page = person.page
    page.get_by_test_id("project-browse-button").click()
    page.locator('[data-testid="project-dir"][data-name="demo"]').click()
    expect(page.get_by_test_id("project-path")).to_have_attribute("data-path", str(project))
    page.get_by_test_id("project-use").focus()
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("project-chosen")).to_have_attribute("data-path", str(project))
    expect(page.get_by_test_id("project-browse-button")).to_be_focused()


def test_session_keys_the_sheet_and_the_focus_after_each(server: Any, new_context: Any) -> None:
    task_id = create_task(server, "Two sessions")
    person = open_person(server, new_context, "desktop", f"/tasks/{task_id}")
    page, kb = person.page, person.page.keyboard
    first = person.launch_session()
    second = person.launch_session()
    person.chat_input.focus()
    kb.press("Alt+ArrowUp")
    expect(person.session_item(first)).to_have_attribute("aria-current", "page")
    expect(page).to_have_url(re.compile(rf"session={first}"))
    expect(person.chat_input).to_be_focused()  # a switch keeps the place one types in
    kb.press("Alt+ArrowDown")
    expect(person.session_item(second)).to_have_attribute("aria-current", "page")
    expect(person.chat_input).to_be_focused()
    # A switch by clicking the strip leaves the focus on the row clicked, not on the body.
    person.session_item(first).click()
    expect_focus_kept(page)

    # While typing, a plain letter is a letter; Alt+letter is a key and types nothing.
    person.chat_input.focus()
    kb.type("u")
    kb.press("Alt+s")
    expect(person.chat_input).to_have_value("u")
    person.chat_input.fill("")

    # `?` lists every key.
    kb.press("Shift+Tab")  # off the input: there `?` is a character
    kb.press("?")
    sheet = page.get_by_test_id("shortcut-help")
    expect(sheet).to_be_visible()
    for key in ("Esc", "Alt+U", "Alt+S", "Alt+C", "Alt+↓ / Alt+↑", "Alt+N", "Alt+Enter", "?"):
        expect(sheet.locator("kbd", has_text=re.compile(rf"^{re.escape(key)}$"))).to_have_count(1)
    shot(page, "shortcut-help-41")
    kb.press("Escape")
    expect(sheet).to_be_hidden()
    expect_focus_kept(page)

    # A cancel by key: the turn stops and the focus stays in the composer.
    person.chat_input.focus()
    person.start_turn("/delay 60000")
    kb.press("Escape")
    person.expect_settled(timeout=10_000)
    expect(person.chat_input).to_be_focused()
    # Esc from elsewhere on the page cancels too, and the focus does not fall to the body.
    person.start_turn("/delay 60000")
    page.get_by_test_id("changes-view-button").focus()
    kb.press("Escape")
    person.expect_settled(timeout=10_000)
    expect_focus_kept(page)

    # Alt+N: a new task, its title field ready to type in.
    kb.press("Alt+n")
    expect(page).to_have_url(re.compile(r"/$"))
    expect(page.get_by_test_id("new-task-title")).to_be_focused()


def test_alt_s_stops_an_agent_that_does_not_answer(server_factory: Any, new_context: Any) -> None:
    srv = server_factory(toml=PATIENT_TOML)
    task_id = create_task(srv, "Stop now by key")
    person = open_person(srv, new_context, "desktop", f"/tasks/{task_id}")
    person.launch_session()
    person.chat_input.focus()
    person.start_turn("/hang")
    person.page.keyboard.press("Escape")
    countdown = person.page.get_by_test_id("escalation-countdown")
    expect(countdown).to_be_visible(timeout=5_000)
    started = time.monotonic()
    person.page.keyboard.press("Alt+s")
    person.expect_settled(timeout=10_000)
    assert time.monotonic() - started < 10
    expect(person.status_messages().last).to_contain_text("had to be stopped")
    # Escalated, the cancel is a warning still (a plain one is information: test_cancel_control).
    expect(person.status_messages().last).to_have_attribute("data-variant", "warning")
    expect_focus_kept(person.page)


def test_every_control_shows_the_same_focus_ring(server: Any, new_context: Any) -> None:
    task_id = create_task(server, "Focus ring")
    person = open_person(server, new_context, "desktop", f"/tasks/{task_id}")
    person.launch_session()
    person.send("/tool read")
    page = person.page
    expect(page.locator(".tool-card").first).to_be_visible(timeout=10_000)
    page.locator(".back-link").focus()
    seen: dict[str, str] = {}
    for _ in range(25):
        page.keyboard.press("Tab")
        ring = page.evaluate("""() => {
            const a = document.activeElement;
            const s = getComputedStyle(a);
            return [a.dataset.testid || a.className || a.tagName, s.outlineStyle, s.outlineWidth];
        }""")
        name, style, width = ring
        if name == "BODY":
            break  # past the last control: the focus left for the browser's own
        seen[name] = f"{style} {width}"
        assert style == "solid" and width == "2px", (name, style, width)
    assert len(seen) >= 8, seen
