"""Issue 43 on the page (DESIGN.md §19), on a desktop window and on a phone: the agent's options
in the composer (a mode and a model picked there reach the agent's next turn; Codex's apply with
the next turn and say so; a refusal is said and the select goes back), the `/` menu driven by
the keyboard, the usage badge, the agent's title; and issue 42's cancel figures in the agent
picker (DESIGN.md §18)."""

from __future__ import annotations

import re
from typing import Any

import pytest

pytest.importorskip("playwright.sync_api")

from playwright.sync_api import Locator, Page, expect

from .ui import Person, option_select, person_on_new_task, shot

pytestmark = pytest.mark.browser


def agent_said(person: Person, prompt: str, expected: str | re.Pattern[str]) -> None:
    """Runs ``prompt`` as a turn and waits for the agent's answer to contain ``expected``."""
    answers = person.page.locator('[data-role="agent"]')
    before = answers.count()
    person.send(prompt)
    expect(answers).to_have_count(before + 1, timeout=15_000)
    expect(answers.last).to_contain_text(expected, timeout=15_000)
    person.expect_settled(timeout=15_000)


def assert_fits(page: Page, control: Locator, *, tapped: bool = True) -> None:
    """On screen, tall enough to tap (``tapped``), and the page does not scroll sideways."""
    width = page.evaluate("() => window.innerWidth")
    assert page.evaluate("() => document.documentElement.scrollWidth") <= width
    box = control.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width + 0.5, box
    if tapped:
        assert box["height"] >= (44 if width < 640 else 30), box


def started(person: Person, agent: str) -> str:
    """A session of ``agent`` whose agent has started and said its options (the composer's row
    is hidden until then: nothing to choose from)."""
    row = person.page.get_by_test_id("composer-options")
    expect(person.chat_input).to_be_visible()
    expect(row).to_be_hidden()  # no session yet
    sid = person.launch_session(agent)
    expect(row).to_be_visible(timeout=15_000)
    return sid


def test_pick_a_mode_and_a_model(server: Any, new_context: Any, view: str) -> None:
    person = person_on_new_task(server, new_context, view, f"Options {view}")
    page = person.page
    started(person, "mock")
    mode, model = option_select(page, "mode"), option_select(page, "model")
    expect(mode).to_be_visible(timeout=10_000)
    expect(mode).to_have_accessible_name("Mode")
    expect(model).to_have_accessible_name("Model")
    expect(mode).to_have_value("default")
    expect(model).to_have_value("mock-fast")
    expect(mode.locator("option")).to_have_text(["Default", "Plan", "YOLO"])
    for control in (mode, model):
        assert_fits(page, control)
    expect(page.get_by_test_id("options-more")).to_be_hidden()  # nothing else offered

    mode.select_option("plan")
    model.select_option("mock-smart")
    # ACP takes them at once: no "next turn" hint, and the agent's next turn runs with them.
    expect(mode).to_be_enabled()
    expect(model).to_be_enabled()
    expect(page.get_by_test_id("option-hint")).to_be_hidden()
    expect(page.get_by_test_id("option-error")).to_be_hidden()
    agent_said(person, "/options", "mode=plan model=mock-smart")
    shot(page, f"composer-options-{view}")

    # A reload shows the choice from the session's DTO.
    page.reload()
    expect(option_select(page, "mode")).to_have_value("plan", timeout=10_000)
    expect(option_select(page, "model")).to_have_value("mock-smart")


def test_codex_options_apply_with_the_next_turn(server: Any, new_context: Any, view: str) -> None:
    person = person_on_new_task(server, new_context, view, f"Codex options {view}")
    page = person.page
    started(person, "mock-codex")
    model, effort = option_select(page, "model"), option_select(page, "reasoning_effort")
    expect(model).to_be_visible(timeout=10_000)
    expect(effort).to_be_visible()
    expect(effort).to_have_accessible_name("Reasoning effort")
    # The approval policy waits behind "More".
    policy = option_select(page, "approval_policy")
    more = page.get_by_test_id("options-more")
    expect(policy).to_be_hidden()
    expect(more).to_have_attribute("aria-expanded", "false")
    person.press(more)
    expect(more).to_have_attribute("aria-expanded", "true")
    expect(policy).to_be_visible()
    assert_fits(page, policy)

    model.select_option("mock-smart")
    hint = page.get_by_test_id("option-hint")
    expect(hint).to_have_text("Model: from the next turn")
    effort.select_option("high")  # the smart model's efforts
    expect(hint).to_have_text("Model, Reasoning effort: from the next turn")
    shot(page, f"composer-options-codex-{view}")
    agent_said(person, "/options", re.compile(r"mock-smart.*high", re.S))
    expect(hint).to_be_hidden()  # that turn ran with them
    expect(model).to_have_value("mock-smart")


def test_a_refused_choice_is_said_and_the_select_goes_back(server: Any, new_context: Any) -> None:
    person = person_on_new_task(server, new_context, "desktop", "Refused option")
    page = person.page
    started(person, "mock")
    model = option_select(page, "model")
    expect(model).to_have_value("mock-fast", timeout=10_000)
    # A choice the agent no longer offers (the list on the page is stale).
    model.evaluate("""s => s.append(new Option("Gone", "mock-gone"))""")
    model.select_option("mock-gone")
    error = page.get_by_test_id("option-error")
    expect(error).to_contain_text("Could not set Model")
    expect(error).to_contain_text("not a choice")
    expect(model).to_have_value("mock-fast")
    agent_said(person, "/options", "model=mock-fast")
    # The agent's own change (session.options.changed) moves its select.
    mode = option_select(page, "mode")
    expect(mode).to_have_value("default")
    agent_said(person, "/agentset mode yolo", "mode is now yolo")
    expect(mode).to_have_value("yolo")
    expect(error).to_contain_text("Could not set Model")  # said until the next choice
    mode.select_option("plan")
    expect(error).to_be_hidden()
    agent_said(person, "/options", "mode=plan model=mock-fast")


def test_the_command_menu_by_keyboard_and_the_usage_badge(
    server: Any, new_context: Any, view: str
) -> None:
    person = person_on_new_task(server, new_context, view, f"Commands {view}")
    page = person.page
    started(person, "mock")
    menu = page.get_by_test_id("command-menu")
    badge = page.get_by_test_id("usage-badge")
    items = menu.get_by_test_id("command-item")
    expect(badge).to_be_hidden()  # no usage said yet
    person.chat_input.click() if not person.touch else person.chat_input.tap()
    page.keyboard.type("/")
    expect(menu).to_be_visible()
    expect(items.first).to_contain_text("/delay")
    expect(items.filter(has_text="/usage")).to_contain_text("Report token usage")
    assert items.count() >= 10, items.all_inner_texts()
    assert_fits(page, menu)
    shot(page, f"command-menu-{view}")

    page.keyboard.type("s")  # "/s": names starting with s first, then containing it
    expect(items.first).to_have_attribute("data-command", "slow")
    expect(items.first).to_have_attribute("aria-selected", "true")
    page.keyboard.press("ArrowDown")
    expect(items.nth(1)).to_have_attribute("aria-selected", "true")
    expect(items.first).to_have_attribute("aria-selected", "false")
    page.keyboard.press("ArrowUp")
    page.keyboard.press("ArrowUp")  # wraps to the last
    expect(items.last).to_have_attribute("aria-selected", "true")
    page.keyboard.press("Escape")  # closes the menu; nothing else
    expect(menu).to_be_hidden()
    expect(person.chat_input).to_have_value("/s")
    page.keyboard.type("e")
    expect(menu).to_be_visible()
    page.keyboard.press("Backspace")
    page.keyboard.type("us")  # "/sus": nothing
    expect(menu).to_be_hidden()
    page.keyboard.press("Backspace")
    page.keyboard.press("Backspace")
    page.keyboard.press("Backspace")
    page.keyboard.type("usa")
    expect(items).to_have_count(1)
    page.keyboard.press("Tab")  # picks it
    expect(person.chat_input).to_have_value("/usage ")
    expect(person.chat_input).to_be_focused()
    expect(menu).to_be_hidden()
    hint = page.get_by_test_id("command-hint")
    expect(hint).to_be_visible()
    expect(hint).to_have_text("/usage [tokens used]")
    shot(page, f"command-hint-{view}")
    page.keyboard.type("84000")
    expect(hint).to_be_hidden()
    page.keyboard.press("Enter")  # the menu is closed: Enter sends "/usage 84000"
    expect(badge).to_have_text("Context 42% · $0.84", timeout=15_000)
    expect(badge).to_have_attribute("title", re.compile("84,000 of 200,000 tokens"))
    shot(page, f"usage-badge-{view}")
    person.expect_settled(timeout=15_000)
    assert_fits(page, badge, tapped=False)
    # Enter picks from the menu too, and a reload keeps the badge (the session's DTO).
    person.chat_input.fill("")
    page.keyboard.type("/opt")
    page.keyboard.press("Enter")
    expect(person.chat_input).to_have_value("/options ")
    page.keyboard.press("Enter")
    expect(page.locator('[data-role="agent"]').last).to_contain_text("mode=default",
                                                                     timeout=15_000)
    page.reload()
    expect(page.get_by_test_id("usage-badge")).to_have_text("Context 42% · $0.84",
                                                            timeout=10_000)
    # A click (a tap on the phone) picks too, and the focus stays in the input.
    person.chat_input.click() if not person.touch else person.chat_input.tap()
    page.keyboard.type("/rec")
    person.press(page.get_by_test_id("command-item").filter(has_text="/recall"))
    expect(person.chat_input).to_have_value("/recall ")
    expect(person.chat_input).to_be_focused()
    expect(page.get_by_test_id("command-menu")).to_be_hidden()


def test_the_agents_title_names_the_session(server: Any, new_context: Any, view: str) -> None:
    person = person_on_new_task(server, new_context, view, f"Titles {view}")
    page = person.page
    sid = person.launch_session("mock")
    heading = page.locator(".chat-title")
    expect(heading).to_have_text(re.compile(r"^Session 1"))
    agent_said(person, "/title Fixing the login bug", "title: Fixing the login bug")
    expect(heading).to_have_text("Fixing the login bug")
    expect(person.session_item(sid)).to_contain_text("Fixing the login bug")
    expect(page).to_have_title(re.compile("Titles"))  # the task's name stays the tab's


def test_the_picker_says_how_fast_each_agent_stops(
    server_factory: Any, new_context: Any, view: str
) -> None:
    srv = server_factory()
    person = person_on_new_task(srv, new_context, view, f"Figures {view}")
    page = person.page
    figures = page.get_by_test_id("agent-cancel-figures")
    person.launch_session("mock")
    expect(figures).to_be_hidden()  # never stopped yet
    receipts = page.get_by_test_id("stop-receipt")
    for i in range(3):
        person.start_turn("/delay 60000")
        person.press(person.cancel_button)
        person.expect_settled(timeout=15_000)
        # The figures count a stop once its receipt is complete.
        expect(receipts).to_have_count(i + 1)
        expect(receipts.last).not_to_contain_text("…", timeout=10_000)
    person.open_menu()
    select = page.get_by_test_id("agent-select")
    select.focus()  # a person opening the picker: it asks for the figures again
    expect(figures).to_have_text(re.compile(r"^Stops in ~\d+ ms \(p50 of 3\)$"))
    expect(figures).to_have_attribute("title", re.compile(r"p95 \d+ ms"))
    mock = select.locator('option[value="mock"]')
    expect(mock).to_have_attribute("title", re.compile(r"^Stops in ~\d+ ms \(p50 of 3\)"))
    # Another agent, never stopped here: nothing said for it.
    select.select_option("mock-codex")
    expect(figures).to_be_hidden()
    select.select_option("mock")
    expect(figures).to_be_visible()
    expect(page.get_by_test_id("agent-figures-note")).to_be_hidden()
    assert_fits(page, figures, tapped=False)
    shot(page, f"agent-figures-{view}")
    # A fresh page has them from its first connection.
    page.reload()
    person.open_menu()
    expect(page.get_by_test_id("agent-cancel-figures")).to_have_text(
        re.compile(r"p50 of 3"), timeout=10_000)
