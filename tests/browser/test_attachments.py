"""Images, files and `@` mentions on the page (DESIGN.md §19), on a desktop window and on a
phone, against the real server and the mock agent: an image attached by the picker and one
pasted show as chips with thumbnails; a refused upload says its line and blocks the send until
removed; `@` lists the session's files by keyboard and records the pick; a send refused (the
mentioned file went away) keeps the text and the chips; sent, the mock's `/attachments` lists
both images and the mentioned file, and the transcript shows them as chips and an `@path` tag."""

from __future__ import annotations

import base64
import re
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("playwright.sync_api")

from playwright.sync_api import FilePayload, Page, expect

from .ui import Person, create_task, open_person, shot

pytestmark = pytest.mark.browser

# A real 2x2 PNG, so the thumbnail has something to draw.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAFklEQVR4nGP4z8DAwMDAxMDAwMDAAAANHQEDasKb6QAAAABJRU5ErkJggg==")
SOURCE = "print('hello')\n"


def session_cwd(server: Any, sid: str) -> Path:
    """The mock's cwd: its own directory under the data dir's work dir (no project)."""
    [cwd] = list((Path(server.data_dir) / "work").glob(f"*/{sid}"))
    return cwd


def paste_image(page: Page, name: str) -> None:
    """A paste of an image file into the input, as the clipboard hands one over."""
    page.get_by_test_id("chat-input").evaluate(
        """(input, [name, b64]) => {
            const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
            const data = new DataTransfer();
            data.items.add(new File([bytes], name, { type: "image/png" }));
            input.focus();
            const init = { clipboardData: data, bubbles: true, cancelable: true };
            input.dispatchEvent(new ClipboardEvent("paste", init));
        }""",
        [name, base64.b64encode(PNG).decode()],
    )


def pick_files(person: Person, files: list[FilePayload]) -> None:
    with person.page.expect_file_chooser() as chooser:
        person.press(person.page.get_by_test_id("attach-button"))
    chooser.value.set_files(files)


def test_attach_mention_and_send(server: Any, new_context: Any, view: str) -> None:
    task_id = create_task(server, f"Attachments {view}")
    person = open_person(server, new_context, view, f"/tasks/{task_id}")
    page = person.page
    expect(page.get_by_test_id("attach-button")).to_be_disabled()  # no session: no files yet
    sid = person.launch_session("mock")
    cwd = session_cwd(server, sid)
    (cwd / "src").mkdir(parents=True, exist_ok=True)
    (cwd / "src" / "hello.py").write_text(SOURCE)
    (cwd / "notes.md").write_text("# notes\n")
    (cwd / "escape").symlink_to("/etc")

    composer = page.get_by_test_id("composer")
    chips = composer.get_by_test_id("attachment-chip")
    send = page.get_by_test_id("send-button")
    expect(page.get_by_test_id("attach-button")).to_be_enabled()
    pick_files(person, [FilePayload(name="shot.png", mimeType="image/png", buffer=PNG)])
    paste_image(page, "pasted.png")
    expect(chips).to_have_count(2)
    for chip, name in zip((chips.nth(0), chips.nth(1)), ("shot.png", "pasted.png"), strict=True):
        expect(chip).to_have_attribute("data-state", "ready", timeout=10_000)
        expect(chip).to_contain_text(name)
        expect(chip).to_contain_text(f"{len(PNG)} B")
        expect(chip.get_by_test_id("attachment-thumb")).to_have_attribute(
            "src", re.compile(r"^data:image/png;base64,"))

    # A type no agent is given: refused with the server's line; Send waits until it is removed.
    zipped = FilePayload(name="bundle.zip", mimeType="application/zip", buffer=b"PK\x03\x04")
    pick_files(person, [zipped])
    refused = chips.filter(has_text="bundle.zip")
    expect(refused).to_have_attribute("data-state", "failed", timeout=10_000)
    expect(refused.get_by_test_id("attachment-error")).to_contain_text("is not accepted")
    person.chat_input.fill("/attachments ")
    expect(send).to_be_disabled()
    person.press(refused.get_by_test_id("attachment-remove"))
    expect(chips).to_have_count(2)
    expect(send).to_be_enabled()

    # `@` lists the session's files (no link followed), filtered as typed, picked by keyboard.
    person.chat_input.click()
    person.chat_input.press("End")
    person.chat_input.press_sequentially("@")
    menu = page.get_by_test_id("mention-menu")
    items = menu.get_by_test_id("mention-item")
    expect(menu).to_be_visible(timeout=10_000)
    expect(items).to_have_count(2)
    paths = [items.nth(i).get_attribute("data-path") or "" for i in range(2)]
    assert sorted(paths) == ["notes.md", "src/hello.py"], paths
    person.chat_input.press_sequentially("hel")
    expect(items).to_have_count(1)
    expect(items.first).to_have_attribute("data-path", "src/hello.py")
    shot(page, f"attachments-menu-{view}")
    person.chat_input.press("Enter")  # picks; does not send
    expect(menu).to_be_hidden()
    expect(person.chat_input).to_have_value("/attachments @src/hello.py ")
    expect(page.locator('[data-role="user"]')).to_have_count(0)

    # Refused at send (the file went away): said inline, the text and the chips are kept.
    (cwd / "src" / "hello.py").unlink()
    person.press(send)
    error = page.get_by_test_id("composer-error")
    expect(error).to_be_visible(timeout=10_000)
    expect(error).to_contain_text("src/hello.py")
    expect(person.chat_input).to_have_value("/attachments @src/hello.py ")
    expect(chips).to_have_count(2)

    (cwd / "src" / "hello.py").write_text(SOURCE)
    person.press(send)
    answer = page.locator('[data-role="agent"]').last
    expect(answer).to_contain_text(f"image image/png {len(PNG)}", timeout=15_000)
    expect(answer).to_contain_text(f"file://{cwd}/src/hello.py")
    said = answer.inner_text()
    assert said.count("image image/png") == 2, said
    expect(chips).to_have_count(0)
    expect(person.chat_input).to_have_value("")
    expect(error).to_be_hidden()

    # The transcript: the user message's files as chips with thumbnails, the mention as a tag.
    mine = page.locator('[data-role="user"]').last
    sent = mine.get_by_test_id("attachment-chip")
    expect(sent).to_have_count(2)
    expect(sent.nth(0)).to_contain_text("shot.png")
    expect(sent.nth(1)).to_contain_text("pasted.png")
    for i in range(2):
        expect(sent.nth(i).get_by_test_id("attachment-thumb")).to_have_attribute(
            "src", re.compile(r"^data:image/png;base64,"), timeout=10_000)
    expect(mine.get_by_test_id("mention-tag")).to_have_text("@src/hello.py")
    expect(mine.get_by_test_id("attachment-remove")).to_have_count(0)
    width = page.evaluate("() => window.innerWidth")
    assert page.evaluate("() => document.documentElement.scrollWidth") <= width
    shot(page, f"attachments-sent-{view}")


def test_drop_files_on_the_composer(server: Any, new_context: Any) -> None:
    task_id = create_task(server, "Attachments drop")
    person = open_person(server, new_context, "desktop", f"/tasks/{task_id}")
    page = person.page
    person.launch_session("mock")
    page.get_by_test_id("composer").evaluate(
        """(form, b64) => {
            const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
            const data = new DataTransfer();
            data.items.add(new File([bytes], "dropped.png", { type: "image/png" }));
            data.items.add(new File(["some notes\\n"], "notes.txt", { type: "text/plain" }));
            for (const type of ["dragover", "drop"]) {
                const init = { dataTransfer: data, bubbles: true, cancelable: true };
                form.dispatchEvent(new DragEvent(type, init));
            }
        }""",
        base64.b64encode(PNG).decode(),
    )
    chips = page.get_by_test_id("composer").get_by_test_id("attachment-chip")
    expect(chips).to_have_count(2)
    expect(chips.nth(1)).to_have_attribute("data-state", "ready", timeout=10_000)
    expect(chips.nth(1)).to_contain_text("notes.txt")
    expect(chips.nth(1)).to_contain_text("TXT")
    person.send("/attachments")
    answer = page.locator('[data-role="agent"]').last
    expect(answer).to_contain_text(f"image image/png {len(PNG)}", timeout=15_000)
    expect(answer).to_contain_text("resource text/plain 11 attachment:notes.txt")
    shot(page, "attachments-drop-desktop")
