"""Live task and session lists; rename, archive and delete (issue 16, items 4 and 6).

Two people in two browser contexts watch the same workspace: what one creates, renames,
archives or deletes shows up in the other's lists without a reload (the workspace-wide
`task.changed` / `task.removed` / `session.changed` / `session.removed` notifications). Desktop
1280x800 and a phone 390x844; screenshots go to test-output/browser/.
"""

from __future__ import annotations

import re
import sqlite3
from typing import Any

import pytest

pytest.importorskip("playwright.sync_api")

from playwright.sync_api import Locator, Page, expect

from tests.support.serverproc import BlockingServerProcess as ServerProcess

from .configs import LONG_PENDING_TOML
from .ui import Person, create_task, open_page, shot

pytestmark = pytest.mark.browser


class Tab(Person):
    """A person in one browser context, with the page's own errors collected."""

    def __init__(self, page: Page, server: ServerProcess, *, touch: bool) -> None:
        super().__init__(page, server, touch=touch)
        self.errors: list[str] = []
        page.on("pageerror", lambda e: self.errors.append(str(e)))

    @property
    def dialog(self) -> Locator:
        return self.page.get_by_test_id("item-dialog")

    def session_actions(self, session_id: str) -> Locator:
        return self.page.locator(
            f'[data-testid="session-actions"][data-session-id="{session_id}"]')

    def task_actions(self, task_id: str) -> Locator:
        return self.page.locator(f'[data-testid="task-actions"][data-task-id="{task_id}"]')

    def open_dialog(self, button: Locator) -> None:
        self.press(button)
        expect(self.dialog).to_be_visible()
        expect(self.page.get_by_test_id("rename-input")).to_be_focused()

    def rename(self, button: Locator, name: str) -> None:
        self.open_dialog(button)
        self.page.get_by_test_id("rename-input").fill(name)
        self.press(self.page.get_by_test_id("rename-button"))
        expect(self.dialog).to_be_hidden()

    def archive(self, button: Locator, label: str = "Archive") -> None:
        self.open_dialog(button)
        archive = self.page.get_by_test_id("archive-button")
        expect(archive).to_have_text(label)
        self.press(archive)
        expect(self.dialog).to_be_hidden()

    def delete(self, button: Locator, warning: str | re.Pattern[str] = "cannot be undone",
               timeout: float = 10_000) -> None:
        self.open_dialog(button)
        self.press(self.page.get_by_test_id("delete-button"))
        expect(self.page.get_by_test_id("confirm-text")).to_contain_text(warning)
        # Asked again, and the safe answer has the focus.
        expect(self.page.get_by_test_id("confirm-keep")).to_be_focused()
        self.press(self.page.get_by_test_id("confirm-delete"))
        expect(self.dialog).to_be_hidden(timeout=timeout)

    def no_sideways_scroll(self) -> None:
        width = self.page.viewport_size["width"] if self.page.viewport_size else 0
        scroll = self.page.evaluate("() => document.documentElement.scrollWidth")
        assert scroll <= width, (width, scroll)


def open_tab(server: ServerProcess, new_context: Any, view: str, path: str) -> Tab:
    tab = Tab(open_page(new_context, view), server, touch=view == "phone")
    tab.login(path)
    wait_live(tab)
    return tab


def wait_live(tab: Tab) -> None:
    """The tab's page is drawn and its socket open (the task page's badge says so; the task
    list enables Create)."""
    expect(tab.page.locator("#app > .page")).to_be_visible(timeout=15_000)
    if tab.page.locator(".page--task").count():
        expect(tab.page.get_by_test_id("connection-status")).to_have_attribute(
            "data-status", "open", timeout=15_000)
    else:
        expect(tab.page.get_by_test_id("create-task-button")).to_be_enabled(timeout=15_000)


def test_a_task_created_renamed_archived_and_deleted_in_one_tab_follows_in_the_other(
    server: ServerProcess, new_context: Any, view: str
) -> None:
    maker = open_tab(server, new_context, view, "/")
    watcher = open_tab(server, new_context, view, "/")
    wait_live(maker)
    wait_live(watcher)

    # Created in one tab: it opens there, and appears in the other's list at once.
    maker.page.get_by_test_id("new-task-title").fill(f"Live list {view}")
    maker.press(maker.page.get_by_test_id("create-task-button"))
    expect(maker.page).to_have_url(re.compile(r"/tasks/[^/?]+$"))
    task_id = maker.page.url.rsplit("/", 1)[1]
    item = watcher.task_link(task_id)
    expect(item).to_be_visible()
    expect(item).to_contain_text(f"Live list {view}")
    status = item.get_by_test_id("task-status")
    expect(status).to_have_text("No sessions")

    # Its live status: Running while a turn runs, then how many sessions it has.
    wait_live(maker)
    maker.launch_session()
    maker.start_turn("/delay 60000")
    expect(status).to_have_text("Running")
    expect(status).to_have_attribute("data-status", "running")
    shot(watcher.page, f"lists-task-running-{view}")
    maker.press(maker.cancel_button)
    maker.expect_settled(timeout=15_000)
    expect(status).to_have_text("1 session")

    # Renamed in the list: the other tab's open task page takes the new name.
    watcher.rename(watcher.task_actions(task_id), f"Renamed {view}")
    expect(item.get_by_test_id("task-title")).to_have_text(f"Renamed {view}")
    expect(maker.page.get_by_role("heading", level=1)).to_have_text(f"Renamed {view}")
    expect(maker.page).to_have_title(re.compile(f"Renamed {view}"))

    # Archived: filed in the collapsed Archived group, and back out again.
    watcher.archive(watcher.task_actions(task_id))
    group = watcher.page.get_by_test_id("archived-tasks")
    expect(group).to_be_visible()
    expect(group.locator("summary")).to_have_text("Archived (1)")
    expect(item).to_be_hidden()
    expect(item).to_have_attribute("data-archived", "true")
    watcher.press(group.locator("summary"))
    expect(item).to_be_visible()
    watcher.no_sideways_scroll()
    shot(watcher.page, f"lists-archived-task-{view}")
    watcher.archive(watcher.task_actions(task_id), "Unarchive")
    expect(item).to_have_attribute("data-archived", "false")
    expect(group).to_be_hidden()

    # Esc closes the dialog, and a delete is asked again before anything is sent.
    watcher.open_dialog(watcher.task_actions(task_id))
    watcher.page.keyboard.press("Escape")
    expect(watcher.dialog).to_be_hidden()
    if view == "desktop":
        expect(watcher.task_actions(task_id)).to_be_focused()
    watcher.open_dialog(watcher.task_actions(task_id))
    watcher.press(watcher.page.get_by_test_id("delete-button"))
    watcher.no_sideways_scroll()
    shot(watcher.page, f"lists-confirm-delete-{view}")
    watcher.press(watcher.page.get_by_test_id("confirm-keep"))
    expect(watcher.page.get_by_test_id("rename-input")).to_be_visible()
    watcher.page.keyboard.press("Escape")
    expect(watcher.dialog).to_be_hidden()
    expect(item).to_be_visible()

    # Deleted: gone from the list; the tab showing it says so, with the way back.
    watcher.delete(watcher.task_actions(task_id), "all its sessions")
    expect(item).to_have_count(0)
    gone = maker.page.get_by_test_id("task-gone")
    expect(gone).to_be_visible()
    expect(gone).to_contain_text("This task was deleted.")
    expect(maker.chat_input).to_be_hidden()
    maker.no_sideways_scroll()
    shot(maker.page, f"lists-task-gone-{view}")
    maker.press(gone.get_by_role("link", name="Back to tasks"))
    expect(maker.page).to_have_url(re.compile(r"/$"))
    expect(maker.task_link(task_id)).to_have_count(0)
    expect(maker.page.get_by_test_id("page-error")).to_be_hidden()
    assert not maker.errors and not watcher.errors, (maker.errors, watcher.errors)


def test_sessions_renamed_archived_and_deleted_follow_in_both_tabs(
    server: ServerProcess, new_context: Any, view: str
) -> None:
    task_id = create_task(server, f"Sessions {view}")
    one = open_tab(server, new_context, view, f"/tasks/{task_id}")
    wait_live(one)
    first = one.launch_session()
    second = one.launch_session()
    other = open_tab(server, new_context, view, f"/tasks/{task_id}?session={second}")
    wait_live(other)

    # A session started in one tab shows up in the other.
    third = one.launch_session()
    expect(other.session_item(third)).to_be_visible()
    expect(other.session_item(second)).to_have_attribute("aria-current", "page")

    # Renamed: its title replaces "Session N" in both tabs and in the chat header.
    one.select_session(first)
    one.rename(one.session_actions(first), "Planning")
    for tab in (one, other):
        expect(tab.session_item(first).get_by_test_id("session-name")).to_have_text("Planning")
    expect(one.page.locator(".chat-title")).to_have_text("Planning")
    expect(other.session_item(second).get_by_test_id("session-name")).to_have_text("Session 2")
    # An empty name gives the number back.
    one.rename(one.session_actions(first), "")
    expect(other.session_item(first).get_by_test_id("session-name")).to_have_text("Session 1")
    expect(one.page.locator(".chat-title")).to_have_text("Session 1 · mock")

    # Archived: into the collapsed Archived group of both tabs; unarchived from there.
    one.archive(one.session_actions(third))
    for tab in (one, other):
        group = tab.page.get_by_test_id("archived-sessions")
        expect(group).to_be_visible()
        expect(group.locator("summary")).to_have_text("Archived (1)")
        expect(tab.session_item(third)).to_be_hidden()
    group = other.page.get_by_test_id("archived-sessions")
    other.press(group.locator("summary"))
    expect(other.session_item(third)).to_be_visible()
    other.no_sideways_scroll()
    shot(other.page, f"lists-archived-session-{view}")
    other.archive(other.session_actions(third), "Unarchive")
    for tab in (one, other):
        expect(tab.page.get_by_test_id("archived-sessions")).to_be_hidden()
        expect(tab.session_item(third)).to_be_visible()

    # Deleting the session shown in the other tab: that tab moves on to another session.
    one.delete(one.session_actions(second))
    for tab in (one, other):
        expect(tab.session_item(second)).to_have_count(0)
    expect(other.page.locator('[data-testid="session-item"][aria-current="page"]')).to_have_count(1)
    expect(other.page).not_to_have_url(re.compile(re.escape(second)))

    # Deleting the one shown here moves here too; the last one leaves the empty state.
    one.select_session(third)
    one.delete(one.session_actions(third))
    expect(one.session_item(first)).to_have_attribute("aria-current", "page")
    expect(one.page).to_have_url(re.compile(rf"session={re.escape(first)}"))
    one.delete(one.session_actions(first))
    for tab in (one, other):
        expect(tab.page.get_by_test_id("session-item")).to_have_count(0)
        expect(tab.page.get_by_test_id("session-list")).to_contain_text("No sessions yet.")
        expect(tab.page.locator(".chat-title")).to_have_text("No session selected")
        expect(tab.page.get_by_test_id("page-error")).to_be_hidden()
    expect(one.page).not_to_have_url(re.compile(r"session="))
    # And a new one can be started from the empty state.
    one.launch_session()
    expect(other.page.get_by_test_id("session-item")).to_have_count(1)
    assert not one.errors and not other.errors, (one.errors, other.errors)


def test_deleting_a_running_session_cancels_it_and_leaves_no_error(
    server: ServerProcess, new_context: Any, view: str
) -> None:
    task_id = create_task(server, f"Delete while running {view}")
    tab = open_tab(server, new_context, view, f"/tasks/{task_id}")
    wait_live(tab)
    sid = tab.launch_session()
    tab.start_turn("/delay 60000")

    # Esc in the dialog closes the dialog; it does not cancel the turn under it.
    tab.open_dialog(tab.session_actions(sid))
    tab.page.keyboard.press("Escape")
    expect(tab.dialog).to_be_hidden()
    tab.expect_cancel_ready()

    tab.delete(tab.session_actions(sid), "cancelled first", timeout=30_000)
    expect(tab.session_item(sid)).to_have_count(0)
    expect(tab.page.get_by_test_id("session-list")).to_contain_text("No sessions yet.")
    expect(tab.cancel_button).to_be_hidden()
    expect(tab.page.get_by_test_id("page-error")).to_be_hidden()
    expect(tab.page.get_by_test_id("dialog-error")).to_be_hidden()
    expect(tab.page.get_by_test_id("composer-error")).to_be_hidden()
    expect(tab.page.get_by_role("status")).to_have_count(0)
    tab.no_sideways_scroll()
    shot(tab.page, f"lists-deleted-running-{view}")
    assert not tab.errors, tab.errors


def test_a_reconnect_re_lists_what_changed_while_the_server_was_away(
    server_factory: Any, new_context: Any, tmp_path: Any, view: str
) -> None:
    data_dir = tmp_path / "relist-data"
    srv = server_factory(toml=LONG_PENDING_TOML, data_dir=data_dir)
    keep = create_task(srv, "Keep")
    doomed = create_task(srv, "Deleted while away")
    renamed = create_task(srv, "Renamed while away")
    page_tab = open_tab(srv, new_context, view, f"/tasks/{keep}")
    first = page_tab.launch_session()
    second = page_tab.launch_session()
    list_tab = open_tab(srv, new_context, view, "/")
    for task_id in (keep, doomed, renamed):
        expect(list_tab.task_link(task_id)).to_be_visible()

    srv.stop()
    for tab in (page_tab, list_tab):
        expect(tab.page.get_by_test_id("connection-banner")).to_be_visible(timeout=10_000)
    # Changes no notification could carry: written into the database while no server runs.
    conn = sqlite3.connect(data_dir / "turnvisor.db", timeout=10)
    try:
        with conn:
            conn.execute("UPDATE tasks SET title = 'Keep, renamed' WHERE id = ?", (keep,))
            conn.execute("UPDATE tasks SET title = 'Now named anew' WHERE id = ?", (renamed,))
            conn.execute("DELETE FROM tasks WHERE id = ?", (doomed,))
            for table, column in (("messages", "session_id"), ("turns", "session_id"),
                                  ("agent_groups", "session_id"), ("task_sessions", "id")):
                conn.execute(f"DELETE FROM {table} WHERE {column} = ?", (second,))
    finally:
        conn.close()

    server_factory(toml=LONG_PENDING_TOML, data_dir=data_dir, port=srv.port)
    for tab in (page_tab, list_tab):
        expect(tab.page.get_by_test_id("connection-banner")).to_be_hidden(timeout=20_000)
    expect(list_tab.task_link(doomed)).to_have_count(0)
    expect(list_tab.task_link(renamed)).to_contain_text("Now named anew")
    expect(list_tab.task_link(keep)).to_contain_text("Keep, renamed")
    expect(page_tab.page.get_by_role("heading", level=1)).to_have_text("Keep, renamed")
    expect(page_tab.session_item(second)).to_have_count(0)
    expect(page_tab.session_item(first)).to_have_attribute("aria-current", "page")
    expect(page_tab.page).to_have_url(re.compile(rf"session={re.escape(first)}"))
    expect(page_tab.page.get_by_test_id("page-error")).to_be_hidden()
    assert not page_tab.errors and not list_tab.errors, (page_tab.errors, list_tab.errors)


def test_a_renamed_task_keeps_its_place(server: ServerProcess, new_context: Any, view: str) -> None:
    """Issue 29: renaming (or archiving and unarchiving) a task does not move it to the top, in
    the tab that renamed it, in another tab, nor after a reload; a new task still goes first."""
    ids = [create_task(server, f"Place {view} {n}") for n in range(3)]
    renamer = open_tab(server, new_context, view, "/")
    watcher = open_tab(server, new_context, view, "/")

    def order(tab: Tab) -> list[str]:
        shown = tab.page.locator('[data-testid="task-item"]').evaluate_all(
            "els => els.map(e => e.dataset.taskId)")
        return [i for i in shown if i in ids]

    newest_first = ids[::-1]
    expect(renamer.task_link(ids[0])).to_be_visible()
    assert order(renamer) == newest_first
    renamer.rename(renamer.task_actions(ids[0]), f"Renamed {view}")
    expect(watcher.task_link(ids[0]).get_by_test_id("task-title")).to_have_text(f"Renamed {view}")
    renamer.archive(renamer.task_actions(ids[1]))
    renamer.press(renamer.page.get_by_test_id("archived-tasks").locator("summary"))
    renamer.archive(renamer.task_actions(ids[1]), "Unarchive")
    expect(watcher.task_link(ids[1])).to_have_attribute("data-archived", "false")
    for tab in (renamer, watcher):
        assert order(tab) == newest_first, tab
    renamer.page.reload()
    wait_live(renamer)
    expect(renamer.task_link(ids[0])).to_contain_text(f"Renamed {view}")
    assert order(renamer) == newest_first
    newer = create_task(server, f"Place {view} new")
    expect(watcher.task_link(newer)).to_be_visible()
    first = watcher.page.locator('[data-testid="task-item"]').first
    expect(first).to_have_attribute("data-task-id", newer)
