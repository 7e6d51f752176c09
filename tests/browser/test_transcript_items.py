"""Issue 41 item 10 on the page: a code block has a Copy button (Tab reaches it); offline, Enter
and Esc say right in the composer that they did nothing, and the working clock stops (paused,
last known) instead of counting on a turn the page cannot see. Desktop and phone."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("playwright.sync_api")

from playwright.sync_api import expect

from .configs import LONG_PENDING_TOML
from .ui import create_task, open_person, shot

pytestmark = pytest.mark.browser

CODE = "Run this:\n\n```python\nprint('copied')\n```\n"


def test_a_code_block_copies_its_code(server: Any, new_context: Any, view: str) -> None:
    task_id = create_task(server, f"Copy {view}")
    person = open_person(server, new_context, view, f"/tasks/{task_id}")
    person.page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    person.launch_session()
    person.send(CODE)  # the mock agent echoes it, as Markdown
    agent = person.page.get_by_test_id("message-list").locator('[data-role="agent"]').last
    copy = agent.get_by_test_id("copy-code-button")
    expect(copy).to_be_visible(timeout=15_000)
    if view == "desktop":  # by keyboard: focused, Enter copies
        copy.focus()
        person.page.keyboard.press("Enter")
    else:
        person.press(copy)
    expect(copy).to_have_text("Copied")
    assert person.page.evaluate("() => navigator.clipboard.readText()") == "print('copied')\n"
    expect(copy).to_have_text("Copy", timeout=5_000)
    shot(person.page, f"code-copy-{view}")


def test_offline_the_composer_says_what_enter_and_esc_did_not_do(
    server_factory: Any, new_context: Any, view: str
) -> None:
    srv = server_factory(toml=LONG_PENDING_TOML)
    task_id = create_task(srv, f"Offline keys {view}")
    person = open_person(srv, new_context, view, f"/tasks/{task_id}")
    person.launch_session()
    person.start_turn("/delay 60000")
    working = person.page.get_by_test_id("working-indicator")
    expect(working).to_contain_text("Working")
    srv.stop()
    expect(person.page.get_by_test_id("connection-banner")).to_be_visible(timeout=10_000)
    # The clock stops where the page last heard the turn, and says so.
    expect(working).to_contain_text("clock paused", timeout=3_000)
    expect(working).to_contain_text("last known")
    before = working.inner_text()
    person.page.wait_for_timeout(2_200)
    assert working.inner_text() == before
    note = person.page.get_by_test_id("composer-note")
    person.chat_input.fill("typed while offline")
    person.chat_input.press("Enter")
    expect(note).to_be_visible()
    expect(note).to_contain_text("Offline: not sent")
    expect(person.chat_input).to_have_value("typed while offline")
    person.chat_input.press("Escape")
    expect(note).to_contain_text("Offline: the cancel cannot reach the server")
    shot(person.page, f"offline-composer-{view}")
