"""The chat page a person can read and trust (issue 16), on a desktop window and on a phone.

Rendered Markdown (and hostile HTML made inert), tool-call cards with input, output and diffs,
plans as checklists, worded permission outcomes, honest states, the offline banner, phone
widths, the agent picker and the small things. Screenshots go to test-output/browser/.

Transcript content that the mock agent cannot produce (an ACP file edit, a Codex file change, a
plan) is written into the server's SQLite database before the page loads it: setup, not the
thing under test; what is under test is what the page makes of real message shapes.
"""

from __future__ import annotations

import json
import re
import sqlite3
import time
import uuid
from typing import Any

import httpx
import pytest

pytest.importorskip("playwright.sync_api")

from playwright.sync_api import Page, expect

from tests.support.serverproc import BlockingServerProcess as ServerProcess

from .configs import LONG_PENDING_TOML
from .conftest import VIEWS
from .ui import Person, create_task, ensure_mounted, open_page, open_person, shot

pytestmark = pytest.mark.browser


def seed_messages(server: ServerProcess, session_id: str, rows: list[dict[str, Any]]) -> None:
    """Adds transcript rows to the running server's database (WAL: safe beside the server)."""
    conn = sqlite3.connect(server.data_dir / "turnvisor.db", timeout=10)
    try:
        with conn:
            for r in rows:
                conn.execute(
                    "INSERT INTO messages (id, session_id, turn_id, role, kind, content, metadata,"
                    " created_at) VALUES (?, ?, NULL, ?, ?, ?, ?, ?)",
                    (
                        str(uuid.uuid4()), session_id, r["role"], r["kind"], r["content"],
                        json.dumps(r.get("metadata", {})),
                        r.get("created_at", "2026-08-03T10:00:00.000Z"),
                    ),
                )
    finally:
        conn.close()


def agent_texts(page: Page) -> Any:
    return page.get_by_test_id("message-list").locator('[data-role="agent"][data-kind="text"]')


# --- 1. Markdown --------------------------------------------------------------------------------

HOSTILE = (
    "# Release notes\n\n"
    "Some **bold** text and `inline code`.\n\n"
    "```python\ndef hello():\n    return 42\n```\n\n"
    "| name | value |\n|---|---|\n| a | 1 |\n\n"
    "- one\n- two\n\n"
    '<img src=x onerror="window.__pwned=1">\n\n'
    "<script>window.__pwned=2</script>\n\n"
    "[click me](javascript:window.__pwned=3)"
)


def test_markdown_is_rendered_and_hostile_html_is_inert(
    server: ServerProcess, new_context: Any, view: str
) -> None:
    task_id = create_task(server, "Markdown")
    person = open_person(server, new_context, view, f"/tasks/{task_id}")
    person.launch_session()
    person.send(HOSTILE)  # the mock agent echoes it back, as an agent's Markdown answer
    answer = agent_texts(person.page).last
    expect(answer.locator("h1")).to_have_text("Release notes", timeout=15_000)
    expect(answer.locator("strong")).to_have_text("bold")
    expect(answer.locator("pre code")).to_contain_text("return 42")
    expect(answer.locator("pre code .hljs-keyword").first).to_have_text("def")
    font = answer.locator("pre code").evaluate("e => getComputedStyle(e).fontFamily")
    assert "mono" in font, font
    expect(answer.locator("table td").first).to_have_text("a")
    expect(answer.locator("ul li")).to_have_count(2)
    # The hostile parts: no handler, no script element, no javascript: link, nothing ran.
    assert answer.locator("[onerror]").count() == 0
    assert answer.locator("script").count() == 0
    link = answer.get_by_role("link", name="click me")
    if link.count():
        href = link.get_attribute("href") or ""
        assert not href.lower().startswith("javascript:"), href
        assert link.get_attribute("rel") and "noopener" in (link.get_attribute("rel") or "")
    person.page.wait_for_timeout(300)
    assert person.page.evaluate("() => window.__pwned") is None
    # The person's own text stays plain text.
    mine = person.page.get_by_test_id("message-list").locator('[data-role="user"]').last
    assert mine.locator("h1").count() == 0
    shot(person.page, f"markdown-{view}")


def test_a_long_streamed_answer_renders_each_block_once(
    server: ServerProcess, new_context: Any
) -> None:
    """A 300-paragraph answer streamed word by word: completed blocks are drawn once and kept;
    only the open block is redrawn, so the work per chunk does not grow with the answer. The page
    subscribes with text_appends: the answer grows by appends, not by whole copies."""
    task_id = create_task(server, "Long answer")
    page = open_page(new_context, "desktop")
    received: list[str] = []
    page.on("websocket", lambda ws: ws.on(
        "framereceived", lambda data: received.append(data if isinstance(data, str) else "")))
    person = Person(page, server)
    person.login(f"/tasks/{task_id}")
    person.launch_session()
    person.page.evaluate(
        """() => {
            window.__removedBlocks = 0;
            new MutationObserver((records) => {
                for (const r of records) for (const n of r.removedNodes)
                    if (n.classList && n.classList.contains('md-block')) window.__removedBlocks++;
            }).observe(document.querySelector('[data-testid="message-list"]'),
                       {childList: true, subtree: true});
        }"""
    )
    paragraphs = 300
    prompt = "\n\n".join(f"Paragraph {i} says something useful." for i in range(paragraphs))
    started = time.monotonic()
    person.send(prompt)
    answer = agent_texts(person.page).last
    expect(answer).to_contain_text(f"Paragraph {paragraphs - 1} says", timeout=60_000)
    elapsed = time.monotonic() - started
    person.expect_settled(timeout=30_000)
    blocks = answer.locator(".md-block")
    expect(blocks).to_have_count(paragraphs)
    removed = person.page.evaluate("() => window.__removedBlocks")
    # A full re-render per update would remove every block each time (tens of thousands).
    assert removed < 2 * paragraphs, removed
    assert elapsed < 45, elapsed  # generous: a loaded shared machine
    frames = [json.loads(f) for f in received if f]
    appended = [f for f in frames if f.get("action") == "session.message.appended"]
    # The first words start the message; what follows comes as appends, however
    # many batches a fast machine makes of the echo (one, when it all arrives
    # within one text-writer period).
    assert appended, [f.get("action") for f in frames]
    whole_agent_text = [f for f in frames if f.get("action") == "session.message.updated"
                        and f["payload"]["message"]["role"] == "agent"
                        and f["payload"]["message"]["kind"] == "text"]
    assert whole_agent_text == []


# --- 2. Tool calls, plans, permissions ---------------------------------------------------------

def seeded_cards(sid: str) -> list[dict[str, Any]]:
    return [
        {"role": "agent", "kind": "tool_call", "content": "Edit src/app.py",
         "created_at": "2026-08-03T10:00:00.000Z",
         "metadata": {"tool_call_id": "t-edit", "status": "completed", "kind": "edit",
                      "finished_at": "2026-08-03T10:00:01.200Z",
                      "rawInput": {"file_path": "src/app.py"},
                      "content": [{"type": "diff", "path": "src/app.py",
                                   "oldText": "def f():\n    return 1\n",
                                   "newText": "def f():\n    return 2\n"}],
                      "locations": [{"path": "src/app.py", "line": 2}]}},
        {"role": "agent", "kind": "tool_call", "content": "ls -la",
         "created_at": "2026-08-03T10:00:02.000Z",
         "metadata": {"tool_call_id": "t-cmd", "status": "failed", "kind": "execute",
                      "command": "ls -la", "aggregatedOutput": "ls: cannot access", "exitCode": 2,
                      "durationMs": 35}},
        {"role": "agent", "kind": "tool_call", "content": "fileChange",
         "created_at": "2026-08-03T10:00:03.000Z",
         "metadata": {"tool_call_id": "t-fc", "status": "completed", "kind": "other",
                      "changes": [{"path": "notes.txt", "kind": {"type": "add"},
                                   "diff": "@@ -0,0 +1 @@\n+hello\n"}]}},
        {"role": "agent", "kind": "plan", "content": "a\nb\nc",
         "created_at": "2026-08-03T10:00:04.000Z",
         "metadata": {"entries": [{"content": "Read the code", "status": "completed"},
                                  {"content": "Write the fix", "status": "in_progress"},
                                  {"content": "Run the tests", "status": "pending"}]}},
        {"role": "agent", "kind": "tool_call", "content": "Write config.toml",
         "created_at": "2026-08-03T10:00:05.000Z",
         "metadata": {"tool_call_id": "t-perm", "status": "cancelled", "kind": "edit",
                      "content": [{"type": "diff", "path": "config.toml", "oldText": None,
                                   "newText": "a = 1\n"}]}},
        {"role": "agent", "kind": "permission", "content": "Write config.toml",
         "created_at": "2026-08-03T10:00:06.000Z",
         "metadata": {"request_id": "r1", "tool_call_id": "t-perm", "status": "selected",
                      "option_id": "no",
                      "options": [{"option_id": "yes", "name": "Allow", "kind": "allow_once"},
                                  {"option_id": "no", "name": "Reject", "kind": "reject_once"}]}},
    ]


def test_tool_cards_show_input_output_diffs_and_plans(
    server: ServerProcess, new_context: Any, view: str
) -> None:
    task_id = create_task(server, "Tool cards")
    person = open_person(server, new_context, view, f"/tasks/{task_id}")
    sid = person.launch_session()
    # A live tool call from the agent: title, kind, status and duration.
    person.send("/tool 600")
    live = person.page.get_by_test_id("tool-call-card").last
    expect(live).to_have_attribute("data-status", "completed", timeout=15_000)
    expect(live).to_contain_text("sleep 600 ms")
    expect(live).to_contain_text("Command")
    expect(live).to_contain_text("Done")
    expect(live.get_by_test_id("tool-duration")).to_have_text(re.compile(r"\d+(\.\d)? (ms|s)"))
    person.expect_settled(timeout=15_000)

    seed_messages(server, sid, seeded_cards(sid))
    person.page.reload()
    ensure_mounted(person.page)
    cards = person.page.get_by_test_id("tool-call-card")
    expect(cards).to_have_count(5)  # the live one and four seeded
    edit = cards.filter(has_text="Edit src/app.py")
    expect(edit.get_by_test_id("tool-input")).to_be_hidden()  # collapsed until asked
    person.press(edit.locator("summary"))
    expect(edit.get_by_test_id("tool-input")).to_contain_text("src/app.py")
    diff = edit.get_by_test_id("tool-diff")
    expect(diff.locator(".diff-line--del")).to_have_text("-     return 1")
    expect(diff.locator(".diff-line--add")).to_have_text("+     return 2")
    expect(edit.get_by_test_id("tool-locations")).to_contain_text("src/app.py:2")
    expect(edit.get_by_test_id("tool-duration")).to_have_text("1.2 s")

    failed = cards.filter(has_text="ls -la")
    expect(failed).to_have_attribute("data-status", "failed")
    person.press(failed.locator("summary"))
    expect(failed.get_by_test_id("tool-output")).to_contain_text("ls: cannot access")
    expect(failed.get_by_test_id("tool-output")).to_contain_text("exit code 2")

    codex = cards.filter(has_text="Edit notes.txt")
    person.press(codex.locator("summary"))
    expect(codex.get_by_test_id("tool-diff").locator(".diff-line--add")).to_have_text("+ hello")

    plan = person.page.get_by_test_id("plan").last
    expect(plan).to_contain_text("1/3 done")
    entries = plan.get_by_test_id("plan-entry")
    assert [entries.nth(i).get_attribute("data-status") for i in range(3)] == [
        "completed", "in_progress", "pending"]

    # The settled permission says what was asked (its tool call's diff) and what was answered.
    card = person.page.get_by_test_id("permission-card").last
    expect(card.get_by_test_id("permission-outcome")).to_have_text("Rejected")
    expect(card.get_by_test_id("tool-diff")).to_contain_text("config.toml")
    edit.scroll_into_view_if_needed()
    shot(person.page, f"tool-cards-{view}")


def test_permission_cards_word_their_outcome_and_the_state_says_needs_approval(
    server: ServerProcess, new_context: Any, view: str
) -> None:
    task_id = create_task(server, "Permissions")
    person = open_person(server, new_context, view, f"/tasks/{task_id}")
    sid = person.launch_session()
    header = person.page.get_by_test_id("selected-session-state")
    cards = person.page.get_by_test_id("permission-card")

    person.send("/permission")
    expect(cards.last).to_have_attribute("data-status", "pending", timeout=15_000)
    expect(header).to_have_text("Needs approval")
    expect(person.session_item(sid).get_by_test_id("session-state")).to_have_text("Needs approval")
    expect(person.page).to_have_title(re.compile(r"^\(!\) Permissions"))
    shot(person.page, f"needs-approval-{view}")
    person.press(cards.last.get_by_role("button", name="Allow"))
    expect(cards.last.get_by_test_id("permission-outcome")).to_have_text("Allowed", timeout=10_000)
    person.expect_settled(timeout=15_000)
    expect(header).to_have_text("Waiting for input")

    person.send("/permission")
    expect(cards).to_have_count(2, timeout=15_000)
    person.press(cards.last.get_by_role("button", name="Reject"))
    expect(cards.last.get_by_test_id("permission-outcome")).to_have_text("Rejected", timeout=10_000)
    person.expect_settled(timeout=15_000)

    person.send("/permission")
    expect(cards).to_have_count(3, timeout=15_000)
    person.press(person.cancel_button)
    expect(cards.last.get_by_test_id("permission-outcome")).to_have_text(
        "Cancelled with the turn", timeout=10_000)
    person.expect_settled(timeout=15_000)
    shot(person.page, f"permission-outcomes-{view}")


# --- 3. States ----------------------------------------------------------------------------------

def test_header_and_list_say_running_cancelling_and_failed(
    server: ServerProcess, new_context: Any, view: str
) -> None:
    task_id = create_task(server, "Honest states")
    person = open_person(server, new_context, view, f"/tasks/{task_id}")
    sid = person.launch_session()
    header = person.page.get_by_test_id("selected-session-state")
    item_state = person.session_item(sid).get_by_test_id("session-state")

    person.start_turn("/hang")
    expect(header).to_have_text("Running")
    expect(item_state).to_have_text("Running")
    expect(person.page).to_have_title(re.compile(r"^● Honest states"))
    person.press(person.cancel_button)
    person.expect_cancelling()
    expect(header).to_have_text("Cancelling")
    expect(item_state).to_have_text("Cancelling")
    shot(person.page, f"cancelling-{view}")
    person.expect_settled(timeout=30_000)  # escalation (10 s) settles it
    expect(header).not_to_have_text("Cancelling")

    # A crash is an error, in words, in red: not a neutral pill under "Waiting for input".
    person.send("/crash")
    status = person.status_messages().last
    expect(status).to_have_attribute("data-variant", "error", timeout=15_000)
    expect(status).to_contain_text("The agent stopped unexpectedly")
    expect(header).to_have_attribute("data-status", "turn-failed")
    expect(header).to_have_text("Last turn failed")
    expect(person.page.get_by_test_id("session-status-reason")).to_have_text(
        re.compile(r"^The agent stopped unexpectedly \(exit status -?\d+\)\.$"))
    color = header.evaluate("e => getComputedStyle(e).color")
    r, g, b = (int(x) for x in re.findall(r"\d+", color)[:3])
    assert r > g and r > b, color  # red, not grey
    expect(person.page).to_have_title(re.compile(r"^Honest states"))
    shot(person.page, f"crashed-{view}")


# --- 4. Offline ---------------------------------------------------------------------------------

def test_server_stopped_and_restarted_under_the_page(
    server_factory: Any, new_context: Any, tmp_path: Any, view: str
) -> None:
    data_dir = tmp_path / "offline-data"
    srv = server_factory(toml=LONG_PENDING_TOML, data_dir=data_dir)
    task_id = create_task(srv, "Offline")
    person = open_person(srv, new_context, view, f"/tasks/{task_id}")
    sid = person.launch_session()
    person.start_turn("/hang")
    banner = person.page.get_by_test_id("connection-banner")
    expect(banner).to_be_hidden()

    srv.stop()
    expect(banner).to_be_visible(timeout=10_000)
    expect(banner).to_have_attribute("role", "alert")
    expect(banner).to_contain_text(re.compile(r"Reconnecting( in \d+ s)?"))
    # Nothing that needs the server can be started, and no cancel spins offline.
    expect(person.cancel_button).to_be_disabled()
    expect(person.page.get_by_role("status")).to_have_count(0)
    header = person.page.get_by_test_id("selected-session-state")
    expect(header).to_have_text("Running (last known)")
    expect(person.page.get_by_test_id("new-session-button")).to_be_disabled()
    person.chat_input.fill("typed while offline")
    expect(person.page.get_by_test_id("send-button")).to_be_disabled()
    shot(person.page, f"offline-{view}")

    restarted = server_factory(toml=LONG_PENDING_TOML, data_dir=data_dir, port=srv.port)
    expect(banner).to_be_hidden(timeout=20_000)
    expect(person.page.get_by_test_id("connection-status")).to_have_attribute("data-status", "open")
    # Re-hydrated from the new backend: the restart interrupted the turn, and the page says so.
    # (SIGTERM: "Turn interrupted: Turnvisor shut down"; a crash: "... restarted".)
    expect(person.status_messages().filter(has_text="Turn interrupted")).to_have_count(
        1, timeout=10_000)
    expect(person.page.get_by_test_id("selected-session-state")).not_to_have_text("Running")
    expect(person.cancel_button).to_be_hidden()
    expect(person.page.get_by_test_id("page-error")).to_be_hidden()
    expect(person.page.get_by_test_id("composer-error")).to_be_hidden()
    # And the draft is still there and goes out now.
    expect(person.chat_input).to_have_value("typed while offline")
    person.press(person.page.get_by_test_id("send-button"))
    expect(agent_texts(person.page).last).to_contain_text("typed while offline", timeout=20_000)
    assert restarted.port == srv.port and sid


def test_task_list_offline_disables_create_with_the_banner(
    server_factory: Any, new_context: Any, tmp_path: Any, view: str
) -> None:
    data_dir = tmp_path / "list-data"
    srv = server_factory(data_dir=data_dir)
    person = open_person(srv, new_context, view, "/")
    create = person.page.get_by_test_id("create-task-button")
    expect(create).to_be_enabled(timeout=15_000)
    srv.stop()
    banner = person.page.get_by_test_id("connection-banner")
    expect(banner).to_be_visible(timeout=10_000)
    expect(create).to_be_disabled()
    server_factory(data_dir=data_dir, port=srv.port)
    expect(banner).to_be_hidden(timeout=20_000)
    expect(create).to_be_enabled()


# --- 5. Phone widths ----------------------------------------------------------------------------

def test_phone_never_scrolls_sideways_and_keeps_the_composer_usable(
    server: ServerProcess, new_context: Any
) -> None:
    task_id = create_task(server, "Five sessions on a phone")
    person = open_person(server, new_context, "phone", f"/tasks/{task_id}")
    person.page.set_viewport_size({"width": 360, "height": 780})
    for _ in range(5):
        person.launch_session()
    person.start_turn("/delay 60000")
    page = person.page
    for width in (360, 390, 430):
        page.set_viewport_size({"width": width, "height": 800})
        page.wait_for_timeout(100)
        scroll = page.evaluate("() => document.documentElement.scrollWidth")
        assert scroll <= width, (width, scroll)
        box = person.chat_input.bounding_box()
        assert box is not None and box["width"] >= 200, (width, box)
        person.open_menu()  # the strip and the agent row are behind the header's menu
        for testid in ("send-button", "cancel-agent-button", "new-session-button", "agent-select",
                       "chat-input"):
            b = page.get_by_test_id(testid).bounding_box()
            assert b is not None and b["height"] >= 44, (width, testid, b)
            assert b["x"] >= 0 and b["x"] + b["width"] <= width + 0.5, (width, testid, b)
        items = page.get_by_test_id("session-item")
        for i in range(items.count()):
            b = items.nth(i).bounding_box()
            assert b is not None and b["height"] >= 44
        back = page.get_by_role("link", name="← Tasks").bounding_box()
        assert back is not None and back["height"] >= 44
        if width == 360:
            shot(page, "phone-360-five-sessions-running")
    # The strip scrolls inside itself to reach the last session.
    last = page.get_by_test_id("session-item").last
    last.scroll_into_view_if_needed()
    expect(last).to_be_in_viewport()
    person.press(person.cancel_button)
    person.expect_settled(timeout=10_000)


# --- 6. Agent picker, new task ------------------------------------------------------------------

GHOST_TOML = LONG_PENDING_TOML + """
[agents.ghost-agent-with-a-long-name]
protocol = "acp"
command = ["no-such-agent-cli-anywhere"]
"""


def test_agent_picker_marks_missing_agents_and_remembers_the_choice(
    server_factory: Any, new_context: Any, view: str
) -> None:
    srv = server_factory(toml=GHOST_TOML)
    person = open_person(srv, new_context, view, "/")
    # Creating a task opens it, with the composer focused (on a desktop: a phone keeps its
    # keyboard down).
    person.page.get_by_test_id("new-task-title").fill("Picker task")
    person.press(person.page.get_by_test_id("create-task-button"))
    expect(person.page).to_have_url(re.compile(r"/tasks/[^/?]+"))
    ensure_mounted(person.page)
    expect(person.page.get_by_role("heading", name="Picker task")).to_be_visible()
    if view == "desktop":
        expect(person.chat_input).to_be_focused()

    select = person.page.get_by_test_id("agent-select")
    ghost = select.locator('option[value="ghost-agent-with-a-long-name"]')
    expect(ghost).to_be_disabled()
    expect(ghost).to_have_text("ghost-agent-with-a-long-name (not installed)")
    expect(ghost).to_have_attribute("title", re.compile("no-such-agent-cli-anywhere"))
    if view == "desktop":  # a phone has no room for the note: the option label says it
        note = person.page.get_by_test_id("agent-unavailable")
        person.press(note.locator("summary"))
        expect(note).to_contain_text("no-such-agent-cli-anywhere")
    # Any launchable agent's full name fits in the closed select (no "mock-c").
    person.open_menu()  # on a phone the agent row is behind the header's menu
    fits = select.evaluate(
        """s => { const c = document.createElement('canvas').getContext('2d');
                  c.font = getComputedStyle(s).font;
                  const names = [...s.options].filter(o => !o.disabled).map(o => o.text);
                  const w = Math.max(...names.map(t => c.measureText(t).width));
                  return [s.clientWidth, w]; }"""
    )
    assert fits[0] >= fits[1] + 24, fits  # + the arrow

    select.select_option("mock-codex")
    person.page.reload()
    ensure_mounted(person.page)
    expect(person.page.get_by_test_id("agent-select")).to_have_value("mock-codex")
    person.launch_session("mock-codex")
    expect(person.page.get_by_test_id("selected-session-state")).to_be_visible()
    # A Codex command item: the backend keeps its command and exit code for the card.
    person.send("/tool 300")
    card = person.page.get_by_test_id("tool-call-card").last
    expect(card).to_have_attribute("data-status", "completed", timeout=15_000)
    person.press(card.locator("summary"))
    expect(card.get_by_test_id("tool-input")).to_contain_text("sleep 0.3")
    shot(person.page, f"agent-picker-{view}")


# --- 7. Small things ----------------------------------------------------------------------------

def test_pages_for_people_404_401_favicon_and_times(
    server: ServerProcess, new_context: Any, view: str
) -> None:
    person = open_person(server, new_context, view, "/")
    icon = person.page.locator('link[rel="icon"]')
    expect(icon).to_have_attribute("href", "/static/favicon.svg")
    r = httpx.get(server.url_for("/static/favicon.svg"), timeout=10)
    assert r.status_code == 200 and "<svg" in r.text

    # The shell answers 200; its script finds no such task and says so.
    person.page.goto(server.url_for("/tasks/unknown"))
    expect(person.page.get_by_role("heading", name="Page not found")).to_be_visible()
    person.press(person.page.get_by_role("link", name="Go to the task list"))
    expect(person.page.get_by_test_id("task-list")).to_be_visible()

    stranger = new_context(**VIEWS[view]).new_page()
    stranger.goto(server.url_for("/"))  # no token stored in this browser: the page says how
    expect(stranger.get_by_role("heading")).to_have_text("Open Turnvisor with its link")
    expect(stranger.locator("body")).to_contain_text("?token=")
    shot(stranger, f"unauthorized-{view}")

    task_id = create_task(server, "Times")
    person.open_task(task_id)
    person.launch_session()
    person.send("hello")
    stamp = person.page.get_by_test_id("message-list").locator("time").last
    expect(stamp).to_have_attribute("title", re.compile(r"20\d\d"), timeout=15_000)


def test_jump_to_latest_focus_after_cancel_and_esc_anywhere(
    server: ServerProcess, new_context: Any, view: str
) -> None:
    task_id = create_task(server, "Scrolling")
    person = open_person(server, new_context, view, f"/tasks/{task_id}")
    sid = person.launch_session()
    long_answer = "\n\n".join(f"Line {i}" for i in range(80))
    person.send(long_answer)
    expect(agent_texts(person.page).last).to_contain_text("Line 79", timeout=20_000)
    person.expect_settled(timeout=20_000)
    messages = person.page.get_by_test_id("message-list")
    jump = person.page.get_by_test_id("jump-to-latest")
    expect(jump).to_be_hidden()
    messages.evaluate("e => { e.scrollTop = 0; e.dispatchEvent(new Event('scroll')); }")
    expect(jump).to_be_visible()
    shot(person.page, f"jump-to-latest-{view}")
    person.press(jump)
    expect(jump).to_be_hidden()
    at_end = messages.evaluate("e => e.scrollHeight - e.scrollTop - e.clientHeight < 48")
    assert at_end

    person.start_turn("/delay 60000")
    person.press(person.cancel_button)
    person.expect_settled(timeout=5_000)
    if view == "desktop":
        expect(person.chat_input).to_be_focused()
        # Esc from anywhere on the page (focus outside the input) cancels the running turn.
        person.start_turn("/hang")
        person.page.get_by_role("heading", level=1).click()
        expect(person.chat_input).not_to_be_focused()
        person.page.keyboard.press("Escape")
        person.expect_cancelling()
        assert sid
