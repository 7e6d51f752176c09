"""A walk through the page's screens for a person to look at (issue 29 item 8), not a test.

Usage: .venv/bin/python scripts/ui_walk.py [OUT_DIR]   (default /tmp/shots29)

For each window (desktop 1280x800, phone 390x844) and colour scheme (light, dark) it starts a
`turnvisor serve` on a git project, and screenshots: the project picker, the worktree toggle,
a turn's changes card with its diff open, the session's changes-view, the revert's question
(`revert-dialog`, kept: nothing reverted), the working-indicator with "Cancel and undo", the late
cancel's escalation countdown, a turn's subagent rows (one stopped), attention badges (a
session asking approval while another is looked at) on the task page and the task list, and
both pages with the server stopped under them (connection banner). Each screen is checked for
sideways overflow and, on the phone, for visible controls under 40 px; what is found is printed
beside the file name.
"""

from __future__ import annotations

import sys
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import httpx
from playwright.sync_api import Page, expect, sync_playwright

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.browser.conftest import VIEWS  # noqa: E402
from tests.browser.ui import Person, ensure_mounted  # noqa: E402
from tests.support.git import committed_repo  # noqa: E402
from tests.support.serverproc import BlockingServerProcess, start_blocking_server  # noqa: E402

TOKEN = "ui-walk-token-0123456789-0123456789"
TOML = """\
[timeouts]
cancel_join_s = 0.5
cancel_escalate_s = 30.0
cancel_operation_s = 60.0
"""

#: Visible controls smaller than 40 px on a side, and whether the page scrolls sideways.
CHECK = """
() => {
  const out = [];
  const doc = document.scrollingElement;
  if (doc.scrollWidth > innerWidth + 1) {
    out.push(`page overflows sideways: ${doc.scrollWidth} > ${innerWidth}`);
  }
  const sel = "button, a.btn, input:not([type=hidden]), select, textarea, summary, "
    + "label:has(> input[type=checkbox])";
  for (const el of document.querySelectorAll(sel)) {
    const r = el.getBoundingClientRect();
    if (!r.width || !r.height || el.closest("[hidden]")) continue;
    // A checkbox inside its label: the label is the target.
    if (el.matches("input[type=checkbox]") && el.closest("label")) continue;
    if (r.height >= 40) continue;
    const what = (el.textContent || el.value || "").trim().slice(0, 30);
    const id = el.dataset.testid ?? el.className;
    const size = `${Math.round(r.width)}x${Math.round(r.height)}`;
    out.push(`${el.tagName.toLowerCase()}[${id}] ${size}: ${what}`);
  }
  return out;
}
"""


class Walk:
    def __init__(self, out: Path, view: str, scheme: str, page: Page) -> None:
        self.out, self.view, self.scheme, self.page = out, view, scheme, page

    def shot(self, name: str) -> None:
        path = self.out / f"{name}-{self.view}-{self.scheme}.png"
        self.page.wait_for_timeout(250)
        self.page.screenshot(path=str(path))
        found = self.page.evaluate(CHECK) if self.view == "phone" else [
            x for x in self.page.evaluate(CHECK) if x.startswith("page overflows")]
        print(path.name, "OK" if not found else "")
        for line in found:
            print("   ", line)


def _task(server: BlockingServerProcess, title: str, project: Path) -> str:
    body = {"title": title, "project_dir": str(project)}
    resp = httpx.post(server.url_for("/api/v1/tasks"), json=body,
                      headers={"Authorization": f"Bearer {server.token}"}, timeout=10)
    resp.raise_for_status()
    return str(resp.json()["id"])


def walk(out: Path, view: str, scheme: str, browser: Any) -> None:
    with TemporaryDirectory() as tmp:
        root = Path(tmp) / "projects"
        project = committed_repo(root / "demo", {"README.md": "# demo\n\nA project to edit.\n"})
        server = start_blocking_server(Path(tmp) / "data", token=TOKEN,
                                       toml=TOML + f'\n[projects]\nroots = ["{root}"]\n')
        ctx = browser.new_context(**VIEWS[view], color_scheme=scheme)
        ctx.set_default_timeout(15_000)
        try:
            page = ctx.new_page()
            w = Walk(out, view, scheme, page)
            person = Person(page, server, touch=view == "phone")
            person.login("/")
            person.press(page.get_by_test_id("project-browse-button"))
            person.press(page.locator('[data-testid="project-dir"][data-name="demo"]'))
            w.shot("01-project-picker")

            task_id = _task(server, "Edit the demo project, then undo a wrong path", project)
            person.open_task(task_id)
            ensure_mounted(page)
            w.shot("02-worktree-toggle")
            person.press(page.get_by_test_id("worktree-toggle"))
            person.launch_session()
            w.shot("03-worktree-session")

            person.send("/write notes/a-file-with-a-rather-long-name.md hello from the agent")
            card = page.get_by_test_id("turn-changes")
            expect(card).to_have_count(1, timeout=20_000)
            person.press(card.locator('[data-testid="changed-file"] summary').first)
            expect(card.get_by_test_id("diff-view").first).to_be_visible()
            w.shot("04-turn-changes-diff")

            person.press(page.get_by_test_id("changes-view-button"))
            expect(page.get_by_test_id("changes-view")).to_be_visible()
            w.shot("05-changes-view")
            person.press(page.get_by_test_id("changes-view-button"))

            person.press(card.get_by_test_id("revert-turn-button"))
            revert = page.get_by_test_id("revert-dialog")
            expect(revert).to_be_visible()
            w.shot("05b-revert-dialog")
            person.press(revert.get_by_test_id("revert-dialog-cancel"))
            expect(revert).to_be_hidden()

            person.send("/delay 20000")
            expect(page.get_by_test_id("working-indicator")).to_be_visible()
            page.wait_for_timeout(1500)
            w.shot("06-working-indicator-cancel-and-undo")
            person.press(page.get_by_test_id("cancel-agent-button"))
            person.expect_settled(timeout=15_000)

            person.start_turn("/hang")
            person.press(person.cancel_button)
            expect(page.get_by_test_id("escalation-countdown")).to_be_visible(timeout=5_000)
            w.shot("07-escalation-countdown")
            person.press(page.get_by_test_id("stop-now-button"))
            person.expect_settled(timeout=15_000)

            person.start_turn("/subagents 2 20000")
            rows = page.get_by_test_id("subagent-row")
            expect(rows).to_have_count(2, timeout=15_000)
            person.press(rows.first.get_by_test_id("subagent-stop-button"))
            expect(rows.first).to_have_attribute("data-state", "cancelled", timeout=10_000)
            w.shot("07b-subagent-rows")
            person.press(person.cancel_button)
            person.expect_settled(timeout=15_000)

            first = person.session_ids()[0]
            second = person.launch_session()
            # The second's turn ends and its queued prompt asks, while the first is looked at.
            person.start_turn("/delay 1500")
            person.chat_input.fill("/permission")
            person.chat_input.press("Enter")
            person.chat_input.blur()
            person.select_session(first)
            expect(page.get_by_test_id("attention-badge")).to_be_visible(timeout=15_000)
            try:
                expect(person.session_item(second).get_by_test_id("session-state")).to_have_text(
                    "Needs approval", timeout=15_000)
            except AssertionError as exc:
                print("   !! the second session's row:", str(exc).splitlines()[:2])
            w.shot("08-attention-badge")
            person.select_session(second)
            expect(page.get_by_test_id("permission-card")).to_be_visible(timeout=15_000)
            w.shot("09-permission-card")
            page.goto(server.url_for("/"))
            ensure_mounted(page)
            w.shot("10-task-list-needs-approval")

            task_page = ctx.new_page()
            task_page.goto(server.url_for(f"/tasks/{task_id}"))
            ensure_mounted(task_page)
            expect(task_page.get_by_test_id("connection-status")).to_have_text("Live")
            server.stop()
            expect(page.get_by_test_id("connection-banner")).to_be_visible(timeout=10_000)
            w.shot("11-task-list-offline")
            w.page = task_page
            expect(task_page.get_by_test_id("connection-banner")).to_be_visible(timeout=10_000)
            w.shot("12-task-page-offline")
        finally:
            ctx.close()
            server.stop()


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/shots29")
    out.mkdir(parents=True, exist_ok=True)
    only = sys.argv[2:]  # e.g. "phone-dark"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium",
                                    args=["--no-sandbox", "--disable-gpu", "--no-first-run"])
        try:
            for view in VIEWS:
                for scheme in ("light", "dark"):
                    if only and f"{view}-{scheme}" not in only:
                        continue
                    walk(out, view, scheme, browser)
        finally:
            browser.close()


if __name__ == "__main__":
    main()
