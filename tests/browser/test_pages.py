"""The task list and the task chat (issue 5, Deliver 1), in a real browser against a real server."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("playwright.sync_api")

from playwright.sync_api import expect

from tests.support.serverproc import BlockingServerProcess

from .ui import Person, create_task

pytestmark = pytest.mark.browser


def test_task_list_creates_a_task_and_opens_it(
    server: BlockingServerProcess, new_context: Any
) -> None:
    person = Person(new_context().new_page(), server)
    person.login("/")
    expect(person.page.get_by_test_id("task-list")).to_be_visible()
    # The token left the address bar; the page keeps it in this origin's localStorage.
    assert "token=" not in person.page.url
    person.page.get_by_test_id("new-task-title").fill("Write the release notes")
    person.press(person.page.get_by_test_id("create-task-button"))
    # Creating a task opens it, ready to type in.
    expect(person.page).to_have_url(__import__("re").compile(r"/tasks/[^/?]+$"))
    expect(person.page.get_by_role("heading", name="Write the release notes")).to_be_visible()
    expect(person.page.get_by_test_id("session-list")).to_be_visible()
    expect(person.page.get_by_test_id("chat-input")).to_be_focused()
    # And the list has it, a link to its page.
    person.press(person.page.get_by_role("link", name="← Tasks"))
    item = person.page.get_by_test_id("task-list").get_by_role(
        "link", name="Write the release notes"
    )
    expect(item).to_be_visible()


def test_chat_streams_tools_permissions_and_echo(
    server: BlockingServerProcess, new_context: Any
) -> None:
    task_id = create_task(server, "Chat task")
    person = Person(new_context().new_page(), server)
    person.login(f"/tasks/{task_id}")
    person.launch_session()
    messages = person.page.get_by_test_id("message-list")

    # Anything else is echoed back in chunks; the turn ends and the input is ready again.
    person.send("hello there")
    expect(messages.locator('[data-role="user"]').last).to_contain_text("hello there")
    expect(messages.locator('[data-role="agent"][data-kind="text"]').last).to_contain_text(
        "hello", timeout=15_000
    )
    person.expect_settled(timeout=15_000)

    # A tool call shows up with its status, which follows the agent.
    person.send("/tool 800")
    tool = messages.get_by_test_id("tool-call").last
    expect(tool).to_be_visible(timeout=15_000)
    expect(tool).to_have_attribute("data-status", "completed", timeout=15_000)
    person.expect_settled(timeout=15_000)

    # A permission card with allow / reject; answering closes it and the agent goes on.
    person.send("/permission")
    card = messages.get_by_test_id("permission-card").last
    expect(card).to_be_visible(timeout=15_000)
    person.press(card.get_by_role("button", name="Allow"))
    expect(card).to_have_attribute("data-status", "selected", timeout=10_000)
    person.expect_settled(timeout=15_000)


def test_streaming_output_arrives_while_the_turn_runs(
    server: BlockingServerProcess, new_context: Any
) -> None:
    task_id = create_task(server, "Streaming task")
    person = Person(new_context().new_page(), server)
    person.login(f"/tasks/{task_id}")
    person.launch_session()
    person.start_turn("/delay 3000")
    agent_text = (
        person.page.get_by_test_id("message-list")
        .locator('[data-role="agent"][data-kind="text"]')
        .last
    )
    expect(agent_text).to_be_visible(timeout=5_000)
    first = agent_text.inner_text()
    expect(agent_text).not_to_have_text(first, timeout=5_000)  # more chunks came in
    person.expect_settled(timeout=10_000)
