"""DESIGN.md §20 on the page, desktop and phone: a session whose remote agent's host stops
answering shows "Host unreachable" (never Running), the composer says messages wait, a Stop
pressed then stays pending with "Waiting for the agent's host…" (across a reload too), and
when the host answers again the stop lands and the turn ends cancelled.

The agent runs behind a real ``turnvisor agentctl`` reached through a TCP proxy this test cuts
and restores (tests/support/cut_proxy.py), so agentctl and its agent run on untouched while
the backend cannot reach them."""

from __future__ import annotations

import os
import select
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("playwright.sync_api")

from playwright.sync_api import expect

from protocols.agentctl_wire import TOKEN_ENV
from tests.support.cut_proxy import CutProxy

from .ui import assert_badge_whole, create_task, open_person, shot

pytestmark = pytest.mark.browser

AGENTCTL_TOKEN = "browser-agentctl-token-0123456789"
WAITING = "Waiting for the agent's host…"


@pytest.fixture
def remote(tmp_path: Path) -> Iterator[CutProxy]:
    """A ``turnvisor agentctl`` with the mock agent on a free port, behind a CutProxy."""
    log = (tmp_path / "agentctl.log").open("wb")
    work = tmp_path / "work"  # the agent's cwd, beside (not holding) agentctl's data dir
    work.mkdir()
    # Port 0, the address it bound told on a pipe: a port probed free and then
    # handed over could be taken meanwhile by another test run.
    ready_r, ready_w = os.pipe()
    proc = subprocess.Popen(
        [sys.executable, "-m", "web", "agentctl", "--listen", "127.0.0.1:0",
         "--protocol", "acp", "--cwd", str(work), "--data-dir", str(tmp_path / "ctl"),
         "--ready-fd", str(ready_w), "--", sys.executable, "-m", "protocols.mock_agent"],
        env={**os.environ, TOKEN_ENV: AGENTCTL_TOKEN}, stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL, stderr=log, process_group=0, pass_fds=(ready_w,))
    os.close(ready_w)
    proxy: CutProxy | None = None
    try:
        with os.fdopen(ready_r, "rb") as ready:
            # Its line comes once it listens; EOF (no line) if it exited first.
            ready_fd = ready.fileno()
            if not select.select([ready_fd], [], [], 30)[0]:
                pytest.fail("agentctl did not report its address within 30 s")
            url = ready.readline().decode().strip()
        assert url.startswith("http://127.0.0.1:"), (url, proc.poll())
        port = int(url.rsplit(":", 1)[1])
        assert httpx.get(f"{url}/api/v1/health", timeout=10).is_success
        proxy = CutProxy(("127.0.0.1", port))
        yield proxy
    finally:
        if proxy is not None:
            proxy.close()
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()
        log.close()


def test_a_stop_while_the_host_is_unreachable_waits_for_it(
    remote: CutProxy, server_factory: Callable[..., Any], new_context: Any, view: str
) -> None:
    toml = ('[agents.remote]\nprotocol = "acp"\nexecutor = "agentctl"\n'
            f'agentctl_url = "http://127.0.0.1:{remote.port}"\n'
            f'agentctl_token = "{AGENTCTL_TOKEN}"\n'
            f'command = ["{sys.executable}", "-m", "protocols.mock_agent"]\n')
    server = server_factory(toml=toml)
    task_id = create_task(server, f"Host unreachable {view}")
    person = open_person(server, new_context, view, f"/tasks/{task_id}")
    page = person.page
    person.launch_session("remote")
    # The first session of an agentctl waits for its warm-up (the protocol core's import).
    expect(page.get_by_test_id("send-button")).to_have_text("Send", timeout=60_000)
    person.start_turn("/delay 60000")
    state = page.get_by_test_id("selected-session-state")
    person.open_menu()
    expect(state).to_have_text("Running", timeout=10_000)

    remote.cut()
    assert_badge_whole(page, "Host unreachable", timeout_ms=15_000)
    note = page.get_by_test_id("composer-note")
    expect(note).to_contain_text("messages wait in the queue")

    person.press(person.cancel_button)
    person.expect_cancelling()
    phase = page.get_by_test_id("cancel-phase-note")
    expect(phase).to_have_text(WAITING, timeout=10_000)
    assert_badge_whole(page, "Waiting for the agent's host")
    person.close_menu()
    shot(page, f"badge-link-down-{view}")
    # A reload still says so: the backend owns the held stop.
    page.reload()
    person.open_menu()
    expect(phase).to_have_text(WAITING, timeout=10_000)
    person.expect_cancelling()

    remote.restore()
    person.expect_settled(timeout=30_000)
    expect(person.status_messages().last).to_contain_text("cancelled", ignore_case=True)
    expect(note).to_be_hidden()
