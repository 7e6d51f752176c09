"""The teardown check of the agent tests catches a process that escaped its group."""

from __future__ import annotations

import os
import signal

import pytest
import trio

from protocols.process import start_agent_process, terminate_group

from .harness import assert_gone, descendants


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None


async def test_assert_gone_catches_an_escaped_child() -> None:
    # The child starts a grandchild in a session (and so a process group) of its own:
    # signalling the agent's group cannot reach it.
    proc = await start_agent_process(["sh", "-c", "setsid sleep 30 & exec sleep 30"])
    escaped: set[int] = set()
    try:
        with trio.fail_after(5):
            while not escaped:
                escaped = {p for p in descendants(proc.pid) if _pgid(p) not in (None, proc.pid)}
                await trio.sleep(0.01)
        seen = descendants(proc.pid) | {proc.pid}
        # A teardown that signals the agent's group alone (terminate_group also
        # follows the tree, so it would not leave this child behind).
        os.killpg(proc.pid, signal.SIGKILL)
        await proc.wait()
        with pytest.raises(AssertionError, match="left behind"):
            await assert_gone(proc.pid, seen, within_s=0.3)
    finally:
        for pid in escaped:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    await assert_gone(proc.pid, seen)


async def test_assert_gone_accepts_a_group_torn_down() -> None:
    proc = await start_agent_process(["sh", "-c", "sleep 30 & sleep 30 & wait"])
    with trio.fail_after(5):
        while len(descendants(proc.pid)) < 2:
            await trio.sleep(0.01)
    seen = descendants(proc.pid) | {proc.pid}
    await terminate_group(proc, grace_s=0.5, eof_grace_s=0)
    await assert_gone(proc.pid, seen)
