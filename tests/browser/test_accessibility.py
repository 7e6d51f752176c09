"""Accessibility of the page (issue 29): text contrast of at least 4.5:1 in both themes,
computed from the rendered styles; who speaks, for screen readers; focus kept after the
controls that act and vanish; a keyboard-only walk through the main flow; the `?` sheet."""

from __future__ import annotations

import re
from typing import Any

import pytest

pytest.importorskip("playwright.sync_api")

from playwright.sync_api import Page, expect

from .test_attention import BROKEN_TOML, launch_failing
from .ui import create_task, open_person, shot

pytestmark = pytest.mark.browser

#: WCAG 2 contrast of an element's text over what is drawn under it (its ancestors'
#: backgrounds, blended while they are translucent; its and their opacity), from
#: getComputedStyle.
CONTRAST = """el => {
  const parse = (c) => {
    const p = c.match(/[\\d.]+/g).map(Number);
    return { r: p[0], g: p[1], b: p[2], a: p.length > 3 ? p[3] : 1 };
  };
  const over = (top, under) => ({
    r: top.r * top.a + under.r * (1 - top.a), g: top.g * top.a + under.g * (1 - top.a),
    b: top.b * top.a + under.b * (1 - top.a), a: 1 });
  const layers = [];
  for (let n = el; n; n = n.parentElement) {
    const c = parse(getComputedStyle(n).backgroundColor);
    if (c.a > 0) layers.push(c);
    if (c.a >= 1) break;
  }
  let bg = { r: 255, g: 255, b: 255, a: 1 };
  const root = parse(getComputedStyle(document.documentElement).backgroundColor);
  if (root.a > 0) bg = root;
  for (const layer of layers.reverse()) bg = over(layer, bg);
  // An element (or an ancestor) drawn with opacity fades its text into the background.
  let opacity = 1;
  for (let n = el; n; n = n.parentElement) opacity *= Number(getComputedStyle(n).opacity);
  const color = parse(getComputedStyle(el).color);
  const fg = over({ ...color, a: color.a * opacity }, bg);
  const lum = (c) => {
    const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
    return 0.2126 * f(c.r) + 0.7152 * f(c.g) + 0.0722 * f(c.b);
  };
  const [hi, lo] = [lum(fg), lum(bg)].sort((a, b) => b - a);
  return (hi + 0.05) / (lo + 0.05);
}"""


#: Every visible, enabled element of a selector with its text and its contrast, measured
#: in one evaluation: the page cannot redraw between finding an element and measuring it.
MEASURE = """([selector, contrast]) => {
  const ratio = eval(contrast);
  return [...document.querySelectorAll(selector)]
    .filter((el) => el.checkVisibility() && !el.disabled)  // WCAG exempts inactive controls
    .map((el) => [el.innerText.slice(0, 30), ratio(el)]);
}"""


def measure(page: Page, selectors: list[str], where: str) -> dict[str, float]:
    found: dict[str, float] = {}
    for selector in selectors:
        for i, (text, r) in enumerate(page.evaluate(MEASURE, [selector, CONTRAST])):
            found[f"{where} {selector} #{i} {text!r}"] = r
    return found


def check_contrast(page: Page, selectors: list[str], where: str) -> list[str]:
    found = measure(page, selectors, where)
    if any(r < 4.5 for r in found.values()):
        # A control caught in the middle of a state change (a badge redrawn as the
        # session's state moves on) is not what anyone reads: measure again once the
        # page has settled; a real shortfall is still there.
        page.wait_for_timeout(600)
        found = measure(page, selectors, where)
    low = {label: f"{r:.2f}:1" for label, r in found.items() if r < 4.5}
    assert not low, low
    return list(found)


def test_text_contrast_is_at_least_4_5_in_both_themes(
    server_factory: Any, new_context: Any
) -> None:
    srv = server_factory(toml=BROKEN_TOML)
    task_id = create_task(srv, "Contrast")
    for scheme in ("light", "dark"):
        person = open_person(srv, new_context, "desktop", f"/tasks/{task_id}")
        page = person.page
        page.emulate_media(color_scheme=scheme)
        if scheme == "light":
            launch_failing(person)
            asking = person.launch_session()
            person.send("/permission")
            expect(page.get_by_test_id("permission-card")).to_be_visible(timeout=15_000)
            idle = person.launch_session()
            person.launch_session()
            person.start_turn("/delay 60000")
            assert asking and idle
        else:
            person.select_session(person.session_ids()[-1])
            person.expect_cancel_ready(timeout=10_000)
        person.chat_input.fill("typed, so that Send is active")
        states = page.get_by_test_id("session-state")
        expect(states).to_have_text(
            [re.compile("Failed"), "Needs approval", "Waiting for input", "Running"])
        checked = check_contrast(page, [
            "[data-testid=session-state]", "[data-testid=selected-session-state]",
            "[data-testid=send-button]", "[data-testid=new-session-button]",
            "[data-testid=cancel-agent-button]", "[data-testid=steer-button]",
            "[data-testid=notify-toggle]", "[data-testid=connection-status]",
            ".msg-text", ".markdown p", ".composer-hint", ".sidebar-title", ".session-name",
            ".msg-time", ".working-text", ".back-link", ".topbar-title",
        ], scheme)
        assert len(checked) >= 15, checked
        shot(page, f"contrast-{scheme}")
        lister = open_person(srv, new_context, "desktop", "/")
        lister.page.emulate_media(color_scheme=scheme)
        lister.page.get_by_test_id("new-task-title").fill("x")
        check_contrast(lister.page, ["[data-testid=task-status]", "[data-testid=task-title]",
                                     "[data-testid=create-task-button]", ".task-time"],
                       f"{scheme} list")
        if scheme == "dark":
            person.press(person.cancel_button)
            person.expect_settled(timeout=15_000)


def test_speakers_are_named_and_focus_comes_back_to_the_composer(
    server: Any, new_context: Any
) -> None:
    task_id = create_task(server, "Speakers")
    person = open_person(server, new_context, "desktop", f"/tasks/{task_id}")
    person.launch_session()
    page = person.page
    person.send("hello")
    expect(page.get_by_test_id("message-list").locator('[data-role="agent"]')).to_have_count(
        1, timeout=15_000)
    speakers = page.get_by_test_id("message-list").get_by_test_id("speaker")
    expect(speakers).to_have_text(["You: ", "Agent: "])
    expect(person.chat_input).to_be_focused()  # after Send

    # Allow: the card's buttons go; the focus goes back to the composer, not the page body.
    person.send("/permission")
    allow = page.get_by_test_id("permission-card").get_by_role("button", name="Allow")
    allow.focus()
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("permission-outcome")).to_have_text("Allowed", timeout=10_000)
    expect(person.chat_input).to_be_focused()

    # Resume and Send now: the same.
    person.start_turn("/delay 60000")
    person.chat_input.fill("queued one")
    person.chat_input.press("Enter")
    person.chat_input.press("Escape")  # a cancel parks the queue
    person.expect_settled(timeout=10_000)
    resume = page.get_by_test_id("auto-run-toggle")
    expect(resume).to_have_text("Resume")
    resume.focus()
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("message-list").locator('[data-role="user"]').filter(
        has_text="queued one")).to_have_count(1, timeout=15_000)
    expect(person.chat_input).to_be_focused()
    person.expect_settled(timeout=15_000)
    person.start_turn("/delay 60000")
    person.chat_input.fill("next one")
    person.chat_input.press("Enter")
    send_now = page.get_by_test_id("send-now-button")
    expect(send_now).to_be_visible(timeout=10_000)
    send_now.focus()
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("queued-message")).to_have_count(0, timeout=15_000)
    expect(person.chat_input).to_be_focused()


def test_keyboard_only_walk_and_the_shortcut_sheet(server: Any, new_context: Any) -> None:
    person = open_person(server, new_context, "desktop", "/")
    page = person.page
    kb = page.keyboard
    expect(page.get_by_test_id("new-task-title")).to_be_focused()
    kb.type("Keyboard only")
    kb.press("Enter")
    expect(page).to_have_url(re.compile(r"/tasks/"))
    expect(person.chat_input).to_be_focused(timeout=10_000)
    kb.type("/permission")
    kb.press("Enter")  # no session yet: one starts with this prompt
    allow = page.get_by_test_id("permission-card").get_by_role("button", name="Allow")
    expect(allow).to_be_visible(timeout=30_000)
    for _ in range(40):  # Shift+Tab back from the composer to the card's Allow
        if allow.evaluate("b => b === document.activeElement"):
            break
        kb.press("Shift+Tab")
    expect(allow).to_be_focused()
    kb.press("Enter")
    expect(page.get_by_test_id("permission-outcome")).to_have_text("Allowed", timeout=10_000)
    expect(person.chat_input).to_be_focused()
    kb.type("/delay 60000")
    kb.press("Enter")
    person.expect_cancel_ready(timeout=15_000)
    kb.press("Escape")
    person.expect_settled(timeout=10_000)
    expect(person.chat_input).to_be_focused()

    # `?` in the input is a character; on a control it opens the sheet, and Esc closes it.
    kb.type("?")
    expect(person.chat_input).to_have_value("?")
    expect(page.get_by_test_id("shortcut-help")).to_be_hidden()
    kb.press("Tab")
    kb.press("?")
    sheet = page.get_by_test_id("shortcut-help")
    expect(sheet).to_be_visible()
    expect(sheet).to_contain_text("Alt+Enter")
    expect(page.get_by_test_id("shortcut-help-close")).to_be_focused()
    shot(page, "shortcut-help")
    kb.press("Escape")
    expect(sheet).to_be_hidden()
    expect(person.chat_input).not_to_be_focused()  # back on the control it came from
