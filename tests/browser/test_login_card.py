"""DESIGN.md §19 on the page, on a desktop window and on a phone: a session whose agent needs a
login shows the `login-card` with the agent's methods; a key goes in a password field that is
cleared once sent (the agent's refusal is said inline), the terminal method shows the command to
run, and once logged in the card goes and the session runs turns."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("playwright.sync_api")

from playwright.sync_api import expect

from .test_session_offers import agent_said, assert_fits
from .ui import create_task, get_session, open_person, shot

pytestmark = pytest.mark.browser

#: One profile per window: a login is kept in the agent's home, shared by the module's server.
AGENTS = {"desktop": "mock-login", "phone": "mock-login-acp2"}


def test_the_login_card(server: Any, new_context: Any, view: str) -> None:
    task_id = create_task(server, f"Login {view}")
    person = open_person(server, new_context, view, f"/tasks/{task_id}")
    page = person.page
    sid = person.launch_session(AGENTS[view])
    card = page.get_by_test_id("login-card")
    expect(card).to_be_visible(timeout=15_000)
    expect(page.get_by_test_id("selected-session-state")).to_have_text("Needs login")
    expect(card.get_by_test_id("login-error")).to_be_hidden()  # asked for, nothing failed yet
    # Nothing can be sent meanwhile: Send is off, and the composer says why.
    person.chat_input.fill("too early")
    expect(page.get_by_test_id("send-button")).to_be_disabled()
    expect(page.get_by_text("Send is off until the agent is logged in")).to_be_visible()
    buttons = card.get_by_test_id("login-method")
    expect(buttons).to_have_count(2)
    key_button = card.locator('[data-testid="login-method"][data-method-id="mock-key"]')
    key_input = card.get_by_test_id("login-key")
    expect(key_input).to_have_attribute("type", "password")
    command = card.get_by_test_id("login-command")
    expect(command).to_contain_text("--sign-in")
    expect(command).to_contain_text("HOME=")
    for control in (key_button, key_input):
        assert_fits(page, control)
    shot(page, f"login-card-{view}")

    # No key: said inline, nothing sent.
    person.press(key_button)
    expect(card.get_by_test_id("login-error")).to_contain_text("Enter the key")
    # A key the agent refuses: its reason inline, the field emptied, the card still there.
    key_input.fill("wrong-key")
    person.press(key_button)
    expect(card.get_by_test_id("login-error")).to_contain_text("not valid", timeout=20_000)
    expect(key_input).to_have_value("")
    assert get_session(server, sid)["auth"]["required"] is True

    key_input.fill("mk-page-key")
    person.press(key_button)
    expect(card).to_be_hidden(timeout=20_000)
    assert get_session(server, sid)["auth"] is None
    # The key is not in the page any more.
    assert "mk-page-key" not in page.content()
    agent_said(person, "hello after login", "hello after login")
