"""Launching a session in its own git worktree from the task page (issue 33, DESIGN.md §12), on a
desktop and a phone: `worktree-toggle` is offered only on a git project, the session shows its
branch, the mock agent's `/write` lands in the worktree and not in the project, and a failed
`git worktree add` says why.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("playwright.sync_api")

from playwright.sync_api import expect

from tests.support.git import committed_repo, git
from tests.support.serverproc import BlockingServerProcess

from .configs import LONG_PENDING_TOML
from .test_accessibility import check_contrast
from .ui import Person, get_session, open_person, shot, wait_until

pytestmark = pytest.mark.browser


@pytest.fixture
def roots(
    tmp_path: Path, server_factory: Callable[..., BlockingServerProcess]
) -> tuple[BlockingServerProcess, Path]:
    root = (tmp_path / "projects").resolve()
    committed_repo(root / "demo", {"README.md": "hello\n"})
    (root / "plain").mkdir()
    empty = root / "empty"  # a repository without a commit: no worktree can be made of it
    empty.mkdir()
    git(empty, "init", "-q")
    toml = LONG_PENDING_TOML + f'\n[projects]\nroots = ["{root}"]\n'
    return server_factory(toml=toml), root


def _task(server: BlockingServerProcess, project: Path) -> str:
    body = {"title": project.name, "project_dir": str(project)}
    resp = httpx.post(server.url_for("/api/v1/tasks"), json=body,
                      headers={"Authorization": f"Bearer {server.token}"}, timeout=10)
    resp.raise_for_status()
    task_id: str = resp.json()["id"]
    return task_id


def _open(server: BlockingServerProcess, new_context: Any, view: str, task_id: str) -> Person:
    person = open_person(server, new_context, view, f"/tasks/{task_id}")
    expect(person.page.get_by_test_id("new-session-button")).to_be_enabled()
    return person


def test_a_session_in_its_own_worktree_writes_there(
    roots: tuple[BlockingServerProcess, Path], new_context: Any, view: str
) -> None:
    server, root = roots
    project = root / "demo"
    person = _open(server, new_context, view, _task(server, project))
    page = person.page
    toggle = page.get_by_test_id("worktree-toggle")
    person.open_menu()  # a phone's agent row is behind the header's menu
    expect(toggle).to_be_visible()
    box = toggle.locator("xpath=..").bounding_box()  # its label is the target to press
    assert box is not None and (view == "desktop" or box["height"] >= 40), box
    person.press(toggle)
    expect(toggle).to_be_checked()
    sid = person.launch_session()
    branch = get_session(server, sid)["worktree"]["branch"]
    assert branch.startswith("turnvisor/")
    expect(page.get_by_test_id("work-dir")).to_contain_text(branch)
    if view == "desktop":  # the phone's one-line strip leaves it to the header
        expect(person.session_item(sid).get_by_test_id("session-branch")).to_contain_text(branch)
    shot(page, f"worktree-session-{view}")

    person.send("/write f.txt hi")
    expect(page.get_by_test_id("turn-changes")).to_have_count(1, timeout=20_000)
    worktree = Path(get_session(server, sid)["worktree"]["path"])
    wait_until(lambda: (worktree / "f.txt").exists(), page)
    assert (worktree / "f.txt").read_text().strip() == "hi"
    assert not (project / "f.txt").exists()  # the project itself untouched

    # The diff's line numbers move with it (diff2html places them absolutely: without a
    # positioned wrapper they stayed on screen over other messages), in the page's own scheme.
    file_row = page.get_by_test_id("turn-changes").locator('[data-testid="changed-file"]').first
    person.press(file_row.locator("summary"))
    number = file_row.locator(".d2h-code-linenumber").first
    expect(number).to_be_visible()
    assert number.evaluate("n => Boolean(n.offsetParent?.closest('.diff-view'))")
    expect(file_row.locator(".d2h-auto-color-scheme").first).to_be_attached()

    # While a turn runs the composer's buttons (Cancel and undo, Cancel, Steer, Queue) and its
    # input stay inside the window, on the phone too.
    person.start_turn("/delay 20000")
    expect(page.get_by_test_id("cancel-revert-button")).to_be_visible()
    width = page.viewport_size["width"] if page.viewport_size else 0
    for control in [person.chat_input, *page.locator(".composer button:visible").all()]:
        box = control.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width, box
    shot(page, f"worktree-running-{view}")
    person.press(person.cancel_button)
    person.expect_settled(timeout=15_000)


def test_the_toggle_is_offered_only_on_a_git_project(
    roots: tuple[BlockingServerProcess, Path], new_context: Any
) -> None:
    server, root = roots
    person = _open(server, new_context, "desktop", _task(server, root / "plain"))
    expect(person.page.get_by_test_id("worktree-toggle")).to_be_hidden()
    sid = person.launch_session()  # a plain project's session works in the project itself
    expect(person.page.get_by_test_id("work-dir")).to_contain_text(str(root / "plain"))
    expect(person.session_item(sid).get_by_test_id("session-branch")).to_have_count(0)


def test_a_failed_worktree_add_says_why(
    roots: tuple[BlockingServerProcess, Path], new_context: Any, view: str
) -> None:
    server, root = roots
    person = _open(server, new_context, view, _task(server, root / "empty"))
    page = person.page
    person.press(page.get_by_test_id("worktree-toggle"))
    person.press(page.get_by_test_id("new-session-button"))
    error = page.get_by_test_id("page-error")
    expect(error).to_be_visible(timeout=15_000)
    expect(error).to_contain_text("in its own worktree")
    expect(error).to_contain_text("commit")
    expect(page.get_by_test_id("session-item")).to_have_count(0)  # nothing half-made
    expect(page.get_by_test_id("new-session-button")).to_be_enabled()
    shot(page, f"worktree-failed-{view}")


def test_the_worktree_and_changes_text_is_readable_in_both_themes(
    roots: tuple[BlockingServerProcess, Path], new_context: Any
) -> None:
    """Contrast of at least 4.5:1 (issue 29) for this round's new text: the toggle, the branch,
    where the agent works, a turn's changes card, Cancel and undo."""
    server, root = roots
    task_id = _task(server, root / "demo")
    person = _open(server, new_context, "desktop", task_id)
    page = person.page
    person.press(page.get_by_test_id("worktree-toggle"))
    person.launch_session()
    person.send("/write f.txt hi")
    expect(page.get_by_test_id("turn-changes")).to_have_count(1, timeout=20_000)
    person.start_turn("/delay 30000")
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        checked = check_contrast(page, [
            ".worktree-option", ".worktree-hint", ".session-branch", ".session-agent",
            ".session-time", ".work-dir", ".turn-changes-head", ".diff-path", ".file-status",
            "[data-testid=revert-turn-button]", "[data-testid=changes-view-button]",
            "[data-testid=cancel-revert-button]",
        ], scheme)
        assert len(checked) >= 10, checked
    person.press(person.cancel_button)
    person.expect_settled(timeout=15_000)
