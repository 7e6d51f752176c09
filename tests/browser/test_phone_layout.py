"""The phone keeps room for the conversation (issue 29): the message box grows with its text,
the header folds away while typing, wide tables scroll sideways instead of breaking words, and
the new controls never push the page sideways or shrink under 40 px."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("playwright.sync_api")

from playwright.sync_api import Page, expect

from .ui import create_task, open_person, shot

pytestmark = pytest.mark.browser

TABLE = (
    "| name | description |\n|---|---|\n"
    "| supercalifragilisticexpialidocious | antidisestablishmentarianism internationalization |"
)


def box_height(page: Page, selector: str) -> float:
    height: float = page.evaluate(
        f"() => document.querySelector({selector!r}).getBoundingClientRect().height")
    return height


def test_the_composer_grows_and_the_header_folds_while_typing(
    server: Any, new_context: Any
) -> None:
    task_id = create_task(server, "Typing on a phone")
    person = open_person(server, new_context, "phone", f"/tasks/{task_id}")
    person.launch_session()
    page = person.page
    one_line = person.chat_input.bounding_box()
    assert one_line is not None
    header = box_height(page, ".topbar") + box_height(page, ".sidebar") + box_height(
        page, ".chat-header")
    person.chat_input.tap()
    person.chat_input.fill("first line\nsecond line\nthird line\nfourth line")
    grown = person.chat_input.bounding_box()
    assert grown is not None and grown["height"] > one_line["height"] + 30, (one_line, grown)
    assert grown["height"] <= 844 / 3 + 1
    expect(page.locator(".sidebar")).to_be_hidden()  # folded while typing
    typing_header = box_height(page, ".topbar") + box_height(page, ".chat-header")
    # (The strip is folded behind the header's menu already, issue 41: the header is one line.)
    assert typing_header <= 110 and typing_header <= header, (header, typing_header)
    shot(page, "phone-typing")
    # A long text scrolls inside the box rather than growing it past a third of the window.
    person.chat_input.fill("\n".join(f"line {i}" for i in range(40)))
    tall = person.chat_input.bounding_box()
    assert tall is not None and tall["height"] <= 844 / 3 + 1, tall
    person.press(page.get_by_test_id("send-button"))
    expect(person.chat_input).to_have_value("")
    person.chat_input.blur()
    expect(page.get_by_test_id("changes-view-button")).to_be_visible()  # unfolded
    expect(page.locator(".sidebar")).to_be_hidden()  # behind the menu, as before typing
    small = person.chat_input.bounding_box()
    assert small is not None and small["height"] < grown["height"], small


def test_a_wide_table_scrolls_sideways_with_whole_words(
    server: Any, new_context: Any, view: str
) -> None:
    task_id = create_task(server, f"Tables {view}")
    person = open_person(server, new_context, view, f"/tasks/{task_id}")
    person.launch_session()
    person.send(TABLE)  # the mock agent echoes it: rendered as Markdown
    table = person.page.get_by_test_id("message-list").locator(
        '[data-role="agent"] table').last
    expect(table).to_be_visible(timeout=15_000)
    words: list[int] = table.evaluate(
        """t => [...t.querySelectorAll('td')].map(td => {
            const r = document.createRange();
            r.selectNodeContents(td.firstChild);
            const word = td.textContent.split(' ')[0];
            r.setEnd(td.firstChild, word.length);
            return r.getClientRects().length;  // 1: the word is on one line
        })""")
    assert words and all(n == 1 for n in words), words
    width = person.page.evaluate("() => window.innerWidth")
    assert person.page.evaluate("() => document.documentElement.scrollWidth") <= width
    if view == "phone":
        assert table.evaluate("t => t.scrollWidth > t.clientWidth")  # it scrolls inside itself
        assert table.evaluate("t => getComputedStyle(t).overflowX") == "auto"
    shot(person.page, f"table-{view}")


def test_new_controls_fit_both_windows_in_both_themes(
    server: Any, new_context: Any, view: str
) -> None:
    task_id = create_task(server, f"Controls {view}")
    for scheme in ("light", "dark"):
        person = open_person(server, new_context, view, f"/tasks/{task_id}")
        page = person.page
        page.emulate_media(color_scheme=scheme)
        if scheme == "light":
            person.launch_session()
        person.start_turn("/delay 20000")
        expect(page.get_by_test_id("working-indicator")).to_be_visible()
        width = page.evaluate("() => window.innerWidth")
        assert page.evaluate("() => document.documentElement.scrollWidth") <= width
        for testid in ("notify-toggle", "steer-button", "send-button", "cancel-agent-button",
                       "cancel-revert-button"):
            control = page.get_by_test_id(testid)
            if not control.is_visible():
                continue
            b = control.bounding_box()
            assert b is not None and b["height"] >= 40 and b["width"] >= 40, (testid, b)
            assert b["x"] >= 0 and b["x"] + b["width"] <= width + 0.5, (testid, b)
        shot(page, f"controls-{view}-{scheme}")
        person.press(person.cancel_button)
        person.expect_settled(timeout=15_000)


def transcript_top(page: Page) -> float:
    """Where the conversation starts, from the window's top (CSS px)."""
    box = page.get_by_test_id("message-list").bounding_box()
    assert box is not None
    return float(box["y"])


def test_the_conversation_starts_in_the_top_quarter_in_every_state(
    server_factory: Any, new_context: Any, tmp_path: Any
) -> None:
    """Issue 41 item 8: on a phone the strip, the agent row, the session's heading and "Works
    in" are one line with a menu; the conversation starts within the top 25 % of the screen
    idle, running, cancelling, with subagents, failed, and in a project."""
    from .test_attention import BROKEN_TOML, launch_failing
    from .test_projects_changes import _create_task_with_project, _git_project

    root = tmp_path / "projects"
    project = _git_project(root, "demo")
    srv = server_factory(toml=BROKEN_TOML + f'\n[projects]\nroots = ["{root}"]\n')
    person = open_person(srv, new_context, "phone", "/")
    page = person.page
    _create_task_with_project(person, "A phone's quarter", project)
    most = 844 * 0.25

    def check(state: str) -> None:
        person.close_menu()  # folded, as the page shows it until the person opens it
        top = transcript_top(page)
        shot(page, f"phone-quarter-{state}")
        assert top <= most, f"{state}: the conversation starts at {top} px (> {most})"
        width = page.evaluate("() => document.documentElement.scrollWidth")
        assert width <= 390, f"{state}: the page scrolls sideways ({width})"

    person.launch_session("mock-acp2")
    menu = page.get_by_test_id("header-menu-button")
    expect(menu).to_be_visible()
    expect(menu).to_have_attribute("aria-expanded", "false")
    expect(page.get_by_test_id("selected-session-state")).to_be_visible()  # on the one line
    expect(page.get_by_test_id("new-session-button")).to_be_hidden()
    expect(page.get_by_test_id("work-dir")).to_be_hidden()
    check("idle-project")
    # The menu opens the rest: the strip, the agent row and where it works.
    person.press(menu)
    expect(page.get_by_test_id("new-session-button")).to_be_visible()
    expect(page.get_by_test_id("work-dir")).to_contain_text(str(project))
    expect(page.get_by_test_id("session-item")).to_have_count(1)
    shot(page, "phone-menu-open")
    person.press(menu)
    expect(page.get_by_test_id("new-session-button")).to_be_hidden()

    person.start_turn("/subagents 2 3000")
    expect(page.get_by_test_id("subagent-row")).to_have_count(2, timeout=10_000)
    check("running-with-subagents")
    person.expect_settled(timeout=20_000)

    person.start_turn("/hang")
    check("running")
    person.press(person.cancel_button)
    person.expect_cancelling()
    check("cancelling")
    person.expect_settled(timeout=20_000)

    launch_failing(person)
    expect(page.get_by_test_id("retry-start-button")).to_be_visible()
    check("failed")
    for scheme in ("dark", "light"):
        page.emulate_media(color_scheme=scheme)
        shot(page, f"phone-quarter-failed-{scheme}")
