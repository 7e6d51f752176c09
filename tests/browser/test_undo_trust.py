"""Undo you can trust (issue 41 items 1-4, DESIGN.md §15), on a desktop and a phone, as a person
uses it: an edit made by hand after the agent's turn survives "Revert this turn" unless the
person chooses to put the turn's start back; every revert is undone with `undo-revert-button`,
also after a reload; a task with no project has checkpoints; "Cancel and undo" asks first, and
dismissing it leaves the turn and its files alone; `project-root-add` adds a root the picker then
browses, which survives a restart, and a root that holds the data dir is refused with its reason.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("playwright.sync_api")

from playwright.sync_api import expect

from tests.support.serverproc import BlockingServerProcess

from .configs import LONG_PENDING_TOML
from .test_projects_changes import _create_task_with_project, _git_project
from .ui import Person, open_person, shot, wait_until

pytestmark = pytest.mark.browser

RESTORED = "Files restored"
MINE = "my own line\n"


@pytest.fixture
def project_server(
    tmp_path: Path, server_factory: Callable[..., BlockingServerProcess]
) -> tuple[BlockingServerProcess, Path]:
    root = tmp_path / "projects"
    project = _git_project(root, "demo")
    (root / "plain").mkdir()
    return server_factory(toml=LONG_PENDING_TOML + f'\n[projects]\nroots = ["{root}"]\n'), project


def _revert_dialog(person: Person) -> Any:
    dialog = person.page.get_by_test_id("revert-dialog")
    expect(dialog).to_be_visible(timeout=10_000)
    return dialog


def _row(dialog: Any, path: str) -> Any:
    return dialog.locator(f'[data-testid="revert-file"][data-path="{path}"]')


def test_a_hand_edit_survives_a_revert_unless_chosen_and_every_revert_is_undone(
    project_server: tuple[BlockingServerProcess, Path], new_context: Any, view: str
) -> None:
    server, project = project_server
    person = open_person(server, new_context, view, "/")
    page = person.page
    a = project / "a.txt"
    _create_task_with_project(person, "Keep my edit", project)
    person.launch_session()
    person.send("/write a.txt from the agent")
    card = page.get_by_test_id("turn-changes")
    expect(card).to_have_count(1, timeout=20_000)
    a.write_text(a.read_text() + MINE)  # the person's own line, after the turn

    # Revert: the dialog says a.txt changed since, and "Keep mine" is chosen.
    person.press(card.get_by_test_id("revert-turn-button"))
    dialog = _revert_dialog(person)
    row = _row(dialog, "a.txt")
    expect(row).to_have_attribute("data-edited", "true")
    expect(row.get_by_test_id("revert-edited")).to_be_visible()
    expect(row.get_by_test_id("revert-keep-mine")).to_be_checked()
    expect(row.get_by_test_id("revert-overwrite")).not_to_be_checked()
    expect(dialog.get_by_test_id("revert-edited-note")).to_contain_text("kept")
    # What the dialog says it does follows the choice: nothing put back while "Keep mine".
    expect(dialog.locator(".revert-files-title")).to_have_text(
        "Nothing put back: 1 file kept as you left it.")
    expect(row.locator(".revert-action")).to_have_text("kept")
    person.press(row.get_by_test_id("revert-overwrite"))
    expect(dialog.locator(".revert-files-title")).to_have_text("Files put back (1):")
    expect(row.locator(".revert-action")).not_to_have_text("kept")
    person.press(row.get_by_test_id("revert-keep-mine"))
    expect(dialog.locator(".revert-files-title")).to_have_text(
        "Nothing put back: 1 file kept as you left it.")
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        shot(page, f"revert-dialog-edited-{view}-{scheme}")
    page.emulate_media(color_scheme="light")
    person.press(dialog.get_by_test_id("revert-confirm-button"))
    expect(dialog).to_be_hidden()
    expect(person.status_messages().filter(has_text=RESTORED)).to_have_count(1, timeout=15_000)
    expect(page.get_by_test_id("revert-kept")).to_contain_text("a.txt")
    assert a.read_text().endswith(MINE)

    # Choosing "Put back" puts the turn's start back: a.txt did not exist then.
    undo = page.get_by_test_id("undo-revert-button")
    expect(undo).to_have_count(1)
    expect(card.get_by_test_id("revert-turn-button")).to_have_text("Reverted")
    page.reload()
    card = page.get_by_test_id("turn-changes")
    expect(card).to_have_count(1, timeout=15_000)
    # (After a reload the card offers the revert again: the undo below is the revert's.)
    person.press(card.get_by_test_id("revert-turn-button"))
    dialog = _revert_dialog(person)
    person.press(_row(dialog, "a.txt").get_by_test_id("revert-overwrite"))
    person.press(dialog.get_by_test_id("revert-confirm-button"))
    expect(person.status_messages().filter(has_text=RESTORED)).to_have_count(2, timeout=15_000)
    wait_until(lambda: not a.exists(), page)

    # The undo is there after a reload (from the transcript), and brings the edit back.
    page.reload()
    undos = page.get_by_test_id("undo-revert-button")
    expect(undos).to_have_count(2, timeout=15_000)
    person.press(undos.last)
    dialog = _revert_dialog(person)
    expect(dialog.get_by_role("heading")).to_contain_text("Undo the revert")
    expect(_row(dialog, "a.txt")).to_have_attribute("data-action", "re-created")
    shot(page, f"undo-revert-dialog-{view}")
    person.press(dialog.get_by_test_id("revert-confirm-button"))
    expect(person.status_messages().filter(has_text=RESTORED)).to_have_count(3, timeout=15_000)
    wait_until(lambda: a.exists() and a.read_text().endswith(MINE), page)
    expect(page.locator('[data-testid="revert-undo"][data-undone="true"]')).to_have_count(1)
    expect(undos.nth(1)).to_have_text("Revert undone")
    shot(page, f"undo-revert-{view}")


def test_a_default_task_has_checkpoints_and_its_turn_can_be_undone(
    server_factory: Callable[..., BlockingServerProcess], new_context: Any, view: str
) -> None:
    # The product's own configuration: no [projects] table at all (checkpoints on by default).
    server = server_factory(toml=LONG_PENDING_TOML, checkpoints=True)
    person = open_person(server, new_context, view, "/")
    page = person.page
    title = f"No project picked {view}"
    page.get_by_test_id("new-task-title").fill(title)
    person.press(page.get_by_test_id("create-task-button"))
    expect(page).to_have_url(re.compile(r"/tasks/"))
    sid = person.launch_session()
    work = page.get_by_test_id("work-dir")
    expect(work).to_contain_text(f"Default work folder · {title}")
    expect(work.locator(".work-path")).to_have_attribute("title", re.compile(rf"/work/.+/{sid}$"))
    folder = Path(work.locator(".work-path").get_attribute("title") or "")
    shot(page, f"work-dir-default-{view}")
    person.send("/write a.txt hello")
    card = page.get_by_test_id("turn-changes")
    expect(card).to_have_count(1, timeout=20_000)
    assert (folder / "a.txt").read_text() == "hello\n"
    person.press(card.get_by_test_id("revert-turn-button"))
    dialog = _revert_dialog(person)
    expect(_row(dialog, "a.txt")).to_have_attribute("data-action", "deleted")
    person.press(dialog.get_by_test_id("revert-confirm-button"))
    expect(person.status_messages().filter(has_text=RESTORED)).to_have_count(1, timeout=15_000)
    assert not (folder / "a.txt").exists()


def test_cancel_and_undo_asks_first_and_a_dismissal_cancels_nothing(
    project_server: tuple[BlockingServerProcess, Path], new_context: Any, view: str
) -> None:
    server, project = project_server
    person = open_person(server, new_context, view, "/")
    page = person.page
    _create_task_with_project(person, "Ask before undoing", project)
    person.launch_session()
    person.start_turn("/edits 60")
    wait_until(lambda: len(list(project.glob("edit-*.txt"))) >= 2, page)
    undo = page.get_by_test_id("cancel-revert-button")
    person.press(undo)
    dialog = _revert_dialog(person)
    expect(dialog.get_by_role("heading")).to_have_text("Cancel the turn and put its files back?")
    expect(dialog.get_by_test_id("revert-file").first).to_have_attribute("data-action", "deleted")
    shot(page, f"cancel-and-undo-dialog-{view}")
    person.press(dialog.get_by_test_id("revert-dialog-cancel"))
    expect(dialog).to_be_hidden()
    # Nothing was cancelled: the turn goes on writing, its files stay.
    person.expect_cancel_ready()
    made = len(list(project.glob("edit-*.txt")))
    wait_until(lambda: len(list(project.glob("edit-*.txt"))) > made, page)

    person.press(undo)
    dialog = _revert_dialog(person)
    person.press(dialog.get_by_test_id("revert-confirm-button"))
    person.expect_settled(timeout=20_000)
    expect(person.status_messages().filter(has_text=RESTORED)).to_have_count(1, timeout=15_000)
    assert not list(project.glob("edit-*.txt"))
    expect(page.get_by_test_id("undo-revert-button")).to_have_count(1)


def test_a_project_root_added_in_the_picker_is_browsed_and_kept(
    tmp_path: Path, server_factory: Callable[..., BlockingServerProcess], new_context: Any,
    view: str,
) -> None:
    first = _git_project(tmp_path / "configured", "one")
    extra = (tmp_path / "elsewhere").resolve()
    (extra / "found-it").mkdir(parents=True)
    data = tmp_path / "data"
    toml = f'[projects]\nroots = ["{first.parent}"]\n'
    server = server_factory(toml=toml, data_dir=data)
    person = open_person(server, new_context, view, "/")
    page = person.page
    person.press(page.get_by_test_id("project-browse-button"))
    expect(page.locator('[data-testid="project-dir"][data-name="one"]')).to_be_visible()
    expect(page.get_by_test_id("project-dir").first).not_to_contain_text("null")

    # A root that holds the data dir is refused, with its reason.
    page.get_by_test_id("project-root-input").fill(str(tmp_path))
    person.press(page.get_by_test_id("project-root-add"))
    error = page.get_by_test_id("project-error")
    expect(error).to_contain_text("contains Turnvisor's data dir")
    shot(page, f"project-root-refused-{view}")

    page.get_by_test_id("project-root-input").fill(str(extra))
    person.press(page.get_by_test_id("project-root-add"))
    expect(page.get_by_test_id("project-path")).to_have_attribute("data-path", str(extra))
    expect(page.locator('[data-testid="project-dir"][data-name="found-it"]')).to_be_visible()
    expect(error).to_be_hidden()
    shot(page, f"project-root-added-{view}")

    # After a restart the root is still there.
    server.stop()
    server = server_factory(toml=toml, data_dir=data)
    person = open_person(server, new_context, view, "/")
    page = person.page
    person.press(page.get_by_test_id("project-browse-button"))
    root = page.locator(f'[data-testid="project-shortcut"][data-path="{extra}"]')
    expect(root).to_have_text("Root: elsewhere")
    person.press(root)
    expect(page.locator('[data-testid="project-dir"][data-name="found-it"]')).to_be_visible()
    # A plain folder shows no "null" after its name (issue 41 item 10).
    expect(page.get_by_test_id("project-path")).not_to_contain_text("null")
