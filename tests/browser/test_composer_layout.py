"""The composer reads cleanly at a desktop's 1280x800 and a phone's 390x844: none of its
controls (send, stop, stop after this step, cancel and undo, steer, attach, the agent's option
selects) overlaps another or a line of text, nothing runs past the window's edge, and every
hint or note it shows (the keys, "Stopping after this step…", "Send is off until…", the offline
word) is at least one line tall, not clipped, and never squeezed to a word a line beside the
buttons (on a desktop the keys' hint keeps one line). Checked through the boxes the browser
lays out, in the states that crowd the composer: a running turn with every control, a stop
waiting for its step, a login card, and the server gone."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("playwright.sync_api")

from playwright.sync_api import Page, expect

from .ui import option_select, person_on_new_task, shot

pytestmark = pytest.mark.browser

#: Every box the composer draws that must not cover another: its controls and its words.
CONTROLS = "button, select, textarea, input:not([type=file])"
WORDS = (".composer-hint, .composer-note, .composer-error, .cancel-note, .option-name, "
         ".option-hint, .option-error, .usage-badge")
LAID_OUT = """([form, controlSel, wordSel]) => {
  const shown = (el) =>
    el.getClientRects().length > 0 && getComputedStyle(el).visibility !== 'hidden';
  const name = (el) => el.dataset.optionId || el.dataset.testid || el.className || el.tagName;
  const box = (el) => {
    const r = el.getBoundingClientRect();
    return {x: r.x, y: r.y, w: r.width, h: r.height};
  };
  const controls = [...form.querySelectorAll(controlSel)].filter(shown);
  const words = [...form.querySelectorAll(wordSel)].filter(shown);
  return {
    width: form.getBoundingClientRect().width,
    controls: controls.map((el) => ({name: name(el), ...box(el)})),
    words: words.map((el) => {
      const style = getComputedStyle(el);
      const line = parseFloat(style.lineHeight) || parseFloat(style.fontSize) * 1.2;
      const clipped = el.scrollWidth > el.clientWidth + 1 || el.scrollHeight > el.clientHeight + 1;
      return {name: name(el), text: el.textContent, line, clipped, ...box(el)};
    }),
  };
}"""


def overlap(a: dict[str, Any], b: dict[str, Any]) -> float:
    """The area two boxes share (a pixel's sliver of rounding is no overlap)."""
    dx = min(a["x"] + a["w"], b["x"] + b["w"]) - max(a["x"], b["x"])
    dy = min(a["y"] + a["h"], b["y"] + b["h"]) - max(a["y"], b["y"])
    return dx * dy if dx > 1 and dy > 1 else 0.0


def assert_reads_cleanly(page: Page, view: str, state: str) -> dict[str, Any]:
    """The composer's boxes in ``state``: no two overlap, all on screen, every word readable."""
    composer = page.get_by_test_id("composer")
    laid: dict[str, Any] = page.evaluate(
        LAID_OUT, [composer.element_handle(), CONTROLS, WORDS])
    window = page.evaluate("() => window.innerWidth")
    assert page.evaluate("() => document.documentElement.scrollWidth") <= window, state
    boxes = laid["controls"] + laid["words"]
    for i, a in enumerate(boxes):
        assert a["x"] >= -0.5 and a["x"] + a["w"] <= window + 0.5, (state, a)
        for b in boxes[i + 1:]:
            assert not overlap(a, b), (state, "overlap", a, b)
    for word in laid["words"]:
        if not word["text"].strip():
            continue
        assert word["h"] >= word["line"] - 1, (state, "under a line tall", word)
        assert not word["clipped"], (state, "clipped", word)
        lines = round(word["h"] / word["line"])
        # Never a word a line: a wrapped hint has half the composer's width at least.
        assert lines <= 1 or word["w"] >= laid["width"] / 2, (state, "squeezed", word)
        if view == "desktop" and word["name"] == "composer-hint":
            assert lines == 1, (state, "the keys' hint wraps", word)
    shot(page, f"composer-layout-{view}-{state}")
    return laid


def named(laid: dict[str, Any], *names: str) -> None:
    """Those controls are among the ones laid out (the state really shows them)."""
    shown = {c["name"] for c in laid["controls"]}
    assert set(names) <= shown, (names, shown)


def test_a_running_turn_and_its_stop(server: Any, new_context: Any, view: str) -> None:
    person = person_on_new_task(server, new_context, view, f"Composer layout {view}")
    page = person.page
    person.launch_session("mock-codex")  # options with a "More", and a turn it steers
    expect(page.get_by_test_id("composer-options")).to_be_visible(timeout=15_000)
    named(assert_reads_cleanly(page, view, "idle"),
          "send-button", "attach-button", "model", "reasoning_effort", "options-more")
    person.send("/usage 84000")  # the usage badge joins the options' row
    expect(page.get_by_test_id("usage-badge")).to_be_visible(timeout=15_000)
    person.expect_settled(timeout=15_000)

    person.start_turn("/steps 3 4000")
    after_step = page.get_by_test_id("stop-after-step-button")
    expect(after_step).to_be_visible()
    expect(page.get_by_test_id("steer-button")).to_be_visible()
    # A model picked mid-turn waits for the next one, and the options' row says so.
    option_select(page, "model").select_option("mock-smart")
    expect(page.get_by_test_id("option-hint")).to_have_text("Model: from the next turn")
    laid = assert_reads_cleanly(page, view, "running")
    named(laid, "send-button", "attach-button", "cancel-agent-button", "cancel-revert-button",
          "stop-after-step-button", "steer-button", "model", "reasoning_effort")
    shown = {w["name"] for w in laid["words"]}
    assert {"option-hint", "usage-badge"} <= shown, shown
    if view == "desktop":
        assert "composer-hint" in shown, shown
    # "More" brings the rarer options into the same composer, still clear of the rest.
    person.press(page.get_by_test_id("options-more"))
    expect(option_select(page, "approval_policy")).to_be_visible()
    named(assert_reads_cleanly(page, view, "running-more"), "approval_policy")
    person.press(page.get_by_test_id("options-more"))

    person.press(after_step)
    expect(page.get_by_test_id("cancel-phase-note")).to_contain_text("Stopping after this step")
    words = assert_reads_cleanly(page, view, "stop-after-step")["words"]
    assert any(w["name"] == "cancel-phase-note" for w in words), words
    person.expect_settled(timeout=20_000)
    assert_reads_cleanly(page, view, "stopped")


def test_a_login_card_and_the_server_gone(
    server_factory: Any, new_context: Any, view: str
) -> None:
    server = server_factory()
    person = person_on_new_task(server, new_context, view, f"Composer notes {view}")
    page = person.page
    person.launch_session("mock-login")
    expect(page.get_by_test_id("login-card")).to_be_visible(timeout=15_000)
    person.chat_input.fill("too early")
    note = page.get_by_test_id("composer-note")
    expect(note).to_contain_text("Send is off until the agent is logged in")
    words = assert_reads_cleanly(page, view, "login")["words"]
    assert any(w["name"] == "composer-note" for w in words), words

    person.chat_input.blur()  # a phone folds its header (and its menu) while typing
    person.launch_session("mock")
    expect(page.get_by_test_id("send-button")).to_have_text("Send", timeout=30_000)
    person.chat_input.fill("a draft for later")
    server.stop()
    expect(page.get_by_test_id("connection-status")).to_have_text("Offline", timeout=20_000)
    person.chat_input.press("Enter")  # not sent: the composer says so
    expect(note).to_contain_text("Offline: not sent")
    words = assert_reads_cleanly(page, view, "offline")["words"]
    assert any(w["name"] == "composer-note" for w in words), words
