"""docs/clients.md's example clients, run as a reader of the docs would run them
(real processes, a real server): each runs a turn, retries its message safely
and cancels the turn it started."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from tests.support.server import Server

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"
NODE = shutil.which("node")


def commands(server: Server, prompt: str, cancel_after: str | None) -> list[list[str]]:
    py = [sys.executable, str(EXAMPLES / "client.py"), server.url, server.token, prompt]
    js = [NODE or "node", "--experimental-websocket", str(EXAMPLES / "client.mjs"),
          server.url, server.token, prompt]
    if cancel_after is not None:
        py += ["--cancel-after", cancel_after]
        js += [cancel_after]
    return [py, js]


async def run(argv: list[str]) -> subprocess.CompletedProcess[bytes]:
    with trio.fail_after(30):
        return await trio.run_process(argv, capture_stdout=True, capture_stderr=True,
                                      check=False)


@pytest.mark.parametrize("language", [0, 1], ids=["python", "node"])
async def test_an_example_client_runs_a_turn_and_cancels_its_own(
        server: Server, language: int) -> None:
    if language == 1 and NODE is None:
        pytest.skip("node is not installed")
    for line in (EXAMPLES / ("client.py", "client.mjs")[language]).read_text().splitlines():
        assert len(line) <= 100
    assert len((EXAMPLES / ("client.py", "client.mjs")[language]).read_text()
               .splitlines()) < 100
    done = await run(commands(server, "an example prompt", None)[language])
    assert done.returncode == 0, done.stderr
    assert b"an example prompt" in done.stdout
    assert b"[turn ended: end_turn]" in done.stdout
    cancelled = await run(commands(server, "/delay 20000", "1")[language])
    assert cancelled.returncode == 3, cancelled.stderr
    assert b"chunk1" in cancelled.stdout and b"[turn ended: cancelled]" in cancelled.stdout
