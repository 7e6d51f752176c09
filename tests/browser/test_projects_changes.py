"""The page UI of DESIGN.md §12 (issue 33), on a desktop and a phone: pick a project in the
new-task form, see a turn's changes and open its diff, revert the turn, and "Cancel and undo" a
running turn. The project is a temporary git directory under the server's `[projects] roots`;
the mock agent's `/write` and `/edits N` make real changes there.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("playwright.sync_api")

from playwright.sync_api import Page, expect

from tests.support.serverproc import BlockingServerProcess

from .configs import LONG_PENDING_TOML
from .test_accessibility import check_contrast
from .ui import Person, open_person, shot, wait_until

RESTORED = "Files restored"

pytestmark = pytest.mark.browser


def _git_project(root: Path, name: str) -> Path:
    project = root / name
    project.mkdir(parents=True)
    (project / "README.md").write_text("hello\n")
    who = ["-c", "user.email=t@example.invalid", "-c", "user.name=t"]
    for args in (["init", "-q"], [*who, "add", "."], [*who, "commit", "-qm", "init"]):
        subprocess.run(["git", *args], cwd=project, check=True, capture_output=True)
    return project


@pytest.fixture
def project_server(
    tmp_path: Path, server_factory: Callable[..., BlockingServerProcess]
) -> tuple[BlockingServerProcess, Path]:
    root = tmp_path / "projects"
    project = _git_project(root, "demo")
    (root / "plain").mkdir()
    toml = LONG_PENDING_TOML + f'\n[projects]\nroots = ["{root}"]\n'
    return server_factory(toml=toml), project


def _create_task_with_project(person: Person, title: str, project: Path) -> None:
    page = person.page
    page.get_by_test_id("new-task-title").fill(title)
    person.press(page.get_by_test_id("project-browse-button"))
    demo = page.locator('[data-testid="project-dir"][data-name="demo"]')
    expect(demo.get_by_test_id("git-badge")).to_be_visible()
    expect(page.locator('[data-testid="project-dir"][data-name="plain"]').get_by_test_id("git-badge")).to_have_count(0)
    person.press(demo)
    expect(page.get_by_test_id("project-path")).to_have_attribute("data-path", str(project))
    shot(page, f"project-picker-{person.page.viewport_size and person.page.viewport_size['width']}")
    person.press(page.get_by_test_id("project-use"))
    expect(page.get_by_test_id("project-chosen")).to_have_attribute("data-path", str(project))
    person.press(page.get_by_test_id("create-task-button"))
    expect(page).to_have_url(re.compile(r"/tasks/"))


def _sent_actions(page: Page) -> list[str]:
    """The action of every frame the page's sockets send from now on, in order."""
    actions: list[str] = []

    def on_frame(payload: str | bytes) -> None:
        try:
            actions.append(json.loads(payload).get("action", ""))
        except ValueError:
            pass

    page.on("websocket", lambda ws: ws.on("framesent", on_frame))
    return actions


def _composer_buttons_share_one_row(page: Page) -> None:
    """The composer's turn controls sit on one line (the same top, within a few px), each at
    least 40 px tall, and nothing runs past the window's edge."""
    width = page.evaluate("() => window.innerWidth")
    assert page.evaluate("() => document.documentElement.scrollWidth") <= width
    buttons = page.locator('[data-testid="composer"] .composer-actions button:visible')
    boxes = [b.bounding_box() for b in buttons.all()]
    # Finish (stop after the step), Cancel and undo, Cancel, Steer, Queue (the attach button is
    # beside the input)
    assert len(boxes) == 5, boxes
    tops = [b["y"] for b in boxes if b]
    assert len(tops) == 5 and max(tops) - min(tops) <= 4, (buttons.all_inner_texts(), boxes)
    for b in boxes:
        assert b and b["height"] >= 40 and b["x"] >= 0 and b["x"] + b["width"] <= width + 0.5, b


def test_pick_a_project_see_the_changes_open_the_diff_and_revert(
    project_server: tuple[BlockingServerProcess, Path], new_context: Any, view: str
) -> None:
    server, project = project_server
    person = open_person(server, new_context, view, "/")
    page = person.page
    _create_task_with_project(person, "Edit the demo", project)
    person.launch_session()
    expect(page.get_by_test_id("work-dir")).to_contain_text(str(project))

    person.send("/write a.txt hello")
    card = page.get_by_test_id("turn-changes")
    expect(card).to_have_count(1, timeout=20_000)
    file_row = card.locator('[data-testid="changed-file"][data-path="a.txt"]')
    expect(file_row).to_contain_text("+1")
    person.press(file_row.locator("summary"))
    expect(file_row.get_by_test_id("diff-view")).to_contain_text("hello")
    shot(page, f"turn-changes-{view}")
    assert (project / "a.txt").read_text().strip() == "hello"

    # A second turn writes markup: its diff shows it as text, never as elements.
    person.send("/write x.html <img src=x onerror=alert(1)>")
    expect(page.get_by_test_id("turn-changes")).to_have_count(2, timeout=20_000)
    markup = page.locator('[data-testid="changed-file"][data-path="x.html"]')
    person.press(markup.locator("summary"))
    expect(markup.get_by_test_id("diff-view")).to_contain_text("<img src=x onerror=alert(1)>")
    expect(markup.locator("img")).to_have_count(0)

    # The session's changes view lists both files.
    person.press(page.get_by_test_id("changes-view-button"))
    changes = page.get_by_test_id("changes-view")
    expect(changes.locator('[data-testid="changed-file"][data-path="a.txt"]')).to_be_visible()
    expect(changes.locator('[data-testid="changed-file"][data-path="x.html"]')).to_be_visible()

    # After a reload the card comes back (turn.diff), and reverting asks first, in the page.
    sent = _sent_actions(page)
    page.reload()
    cards = page.get_by_test_id("turn-changes")
    expect(cards).to_have_count(2, timeout=15_000)
    first_revert = cards.first.get_by_test_id("revert-turn-button")
    dialog = page.get_by_test_id("revert-dialog")

    # While a turn runs: Esc on the dialog closes it, and neither reverts nor cancels the turn.
    person.start_turn("/delay 30000")
    for running_scheme in ("dark", "light"):
        page.emulate_media(color_scheme=running_scheme)
        if view == "phone":
            _composer_buttons_share_one_row(page)
        shot(page, f"composer-running-{view}-{running_scheme}")
    person.press(first_revert)
    expect(dialog).to_be_visible()
    expect(dialog.get_by_test_id("revert-dialog-cancel")).to_be_focused()
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    expect(first_revert).to_be_focused()
    page.wait_for_timeout(300)
    person.expect_cancel_ready()
    assert "agent.cancel" not in sent and "turn.revert" not in sent, sent
    person.press(person.cancel_button)
    person.expect_settled(timeout=15_000)

    # Keep the files: nothing is sent, the focus goes back to the card's button.
    before = len(sent)
    person.press(first_revert)
    expect(dialog).to_be_visible()
    question = dialog.get_by_role("heading")
    expect(question).to_have_text("Put the files back as they were before this turn?")
    expect(dialog.get_by_test_id("revert-later")).to_have_text(
        "The changes of 1 later turn go too.")  # the later turn's changes go too
    files = dialog.get_by_test_id("revert-file")
    # It lists what goes, as text, and what happens to each (both were made by the turns).
    expect(files).to_have_text([re.compile(r"^a\.txt\s+deleted$"),
                                re.compile(r"^x\.html\s+deleted$")])
    expect(dialog.locator("img")).to_have_count(0)
    expect(dialog.get_by_test_id("revert-files").locator("li")).to_have_count(2)  # no more
    expect(dialog.get_by_test_id("revert-confirm-button")).to_have_text("Put files back")
    width = page.evaluate("() => window.innerWidth")
    assert page.evaluate("() => document.documentElement.scrollWidth") <= width
    for testid in ("revert-confirm-button", "revert-dialog-cancel"):
        b = dialog.get_by_test_id(testid).bounding_box()
        assert b and b["height"] >= 40 and b["x"] >= 0 and b["x"] + b["width"] <= width, b
    box = dialog.bounding_box()
    assert box and box["x"] >= 0 and box["x"] + box["width"] <= width, box
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        checked = check_contrast(page, [
            "[data-testid=revert-dialog] h2", "[data-testid=revert-later]",
            ".revert-files-title", "[data-testid=revert-file]",
            "[data-testid=revert-confirm-button]", "[data-testid=revert-dialog-cancel]",
        ], f"revert dialog {scheme}")
        assert len(checked) >= 7, checked
        shot(page, f"revert-dialog-{view}-{scheme}")
    page.emulate_media(color_scheme="light")
    person.press(dialog.get_by_test_id("revert-dialog-cancel"))
    expect(dialog).to_be_hidden()
    expect(first_revert).to_be_focused()
    page.wait_for_timeout(300)
    assert "turn.revert" not in sent[before:], sent[before:]
    expect(first_revert).to_have_text("Revert this turn")
    assert (project / "a.txt").exists()

    # Put files back: this turn's and the later one's.
    person.press(first_revert)
    person.press(dialog.get_by_test_id("revert-confirm-button"))
    expect(dialog).to_be_hidden()
    for i in range(2):  # the later turn's changes went too
        button = cards.nth(i).get_by_test_id("revert-turn-button")
        expect(button).to_have_text("Reverted", timeout=15_000)
    assert sent.count("turn.revert") == 1, sent
    restored = person.status_messages().filter(has_text=RESTORED)
    expect(restored).to_have_count(1, timeout=10_000)
    assert not (project / "a.txt").exists()
    assert not (project / "x.html").exists()


def test_cancel_and_undo_a_running_turn(
    project_server: tuple[BlockingServerProcess, Path], new_context: Any, view: str
) -> None:
    server, project = project_server
    person = open_person(server, new_context, view, "/")
    page = person.page
    _create_task_with_project(person, "Undo the edits", project)
    person.launch_session()
    person.start_turn("/edits 50")
    undo = page.get_by_test_id("cancel-revert-button")
    expect(undo).to_be_visible()
    expect(page.get_by_test_id("cancel-agent-button")).to_be_visible()
    # Let a few edits land, then cancel and undo.
    wait_until(lambda: len(list(project.glob("edit-*.txt"))) >= 2, page)
    shot(page, f"cancel-and-undo-{view}")
    person.press(undo)
    # It asks first, with the revert's dialog (DESIGN.md §15).
    person.press(page.get_by_test_id("revert-dialog").get_by_test_id("revert-confirm-button"))
    person.expect_settled(timeout=20_000)
    restored = person.status_messages().filter(has_text=RESTORED)
    expect(restored).to_have_count(1, timeout=15_000)
    assert not list(project.glob("edit-*.txt"))


def test_esc_stays_a_plain_cancel(
    project_server: tuple[BlockingServerProcess, Path], new_context: Any
) -> None:
    """Esc cancels the turn and keeps its files: only the button undoes."""
    server, project = project_server
    person = open_person(server, new_context, "desktop", "/")
    _create_task_with_project(person, "Esc keeps the edits", project)
    person.launch_session()
    person.start_turn("/edits 50")
    wait_until(lambda: len(list(project.glob("edit-*.txt"))) >= 2, person.page)
    person.chat_input.press("Escape")
    person.expect_settled(timeout=20_000)
    expect(person.status_messages().filter(has_text=RESTORED)).to_have_count(0)
    assert list(project.glob("edit-*.txt"))


def test_the_revert_dialog_names_ten_files_and_counts_the_rest(
    project_server: tuple[BlockingServerProcess, Path], new_context: Any
) -> None:
    server, project = project_server
    person = open_person(server, new_context, "desktop", "/")
    page = person.page
    _create_task_with_project(person, "Twelve files", project)
    person.launch_session()
    person.send("/edits 12")
    card = page.get_by_test_id("turn-changes")
    expect(card.get_by_test_id("changed-file")).to_have_count(12, timeout=20_000)
    person.press(card.get_by_test_id("revert-turn-button"))
    dialog = page.get_by_test_id("revert-dialog")
    expect(dialog).to_be_visible()
    expect(dialog.get_by_test_id("revert-later")).to_be_hidden()  # no later turn
    expect(dialog.locator(".revert-files-title")).to_have_text("Files put back (12):")
    expect(dialog.get_by_test_id("revert-file")).to_have_count(10)
    expect(dialog.get_by_test_id("revert-more")).to_have_text("… and 2 more")
    person.press(dialog.get_by_test_id("revert-confirm-button"))
    expect(card.get_by_test_id("revert-turn-button")).to_have_text("Reverted", timeout=15_000)
    assert not list(project.glob("edit-*.txt"))


def test_the_picker_offers_recent_projects(
    project_server: tuple[BlockingServerProcess, Path], new_context: Any
) -> None:
    server, project = project_server
    person = open_person(server, new_context, "desktop", "/")
    _create_task_with_project(person, "First on demo", project)
    person.login("/")
    person.press(person.page.get_by_test_id("project-browse-button"))
    recent = person.page.locator(f'[data-testid="project-shortcut"][data-path="{project}"]')
    expect(recent).to_have_text("Recent: demo")
    person.press(recent)
    expect(person.page.get_by_test_id("project-path")).to_have_attribute("data-path", str(project))
