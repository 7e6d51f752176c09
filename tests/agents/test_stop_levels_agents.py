"""Stop levels against the real Codex and Claude (DESIGN.md §18, issue 42 item 6), end to end:
WebSocket API → ``turnvisor serve`` → the real agent CLI → the fake provider.

The model (``STEPS``) asks for shell command 1 (``sleep 2; echo one > one.txt``), once its
result is in for command 2 (``echo two > two.txt``), then answers with text.  While command 1
runs (its tool call published as running and its ``sleep`` seen in the agent's process group):

- ``agent.cancel {when: "after_step"}`` lets it finish (one.txt written), then stops the
  turn before command 2 runs (two.txt never written); the receipt lists command 1 as
  finished and, as cancelled, whatever the agent started after it (nothing, when the
  cancel beat the agent's next move);
- ``agent.cancel`` (now) cuts it: the answer comes well before its 2 s, one.txt is never
  written, the receipt lists command 1 as cancelled and no process of it survives.

What each agent did around the step's end (whether the model was asked again, whether
command 2 was started) is printed (``pytest -s``) as ``[agent] ...`` lines.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.fake_provider import FakeProvider

from .cli import AGENTS_DIR, find_cli
from .harness import descendants
from .test_end_to_end import E2E, STEP_S, TEST_S, allow, e2e_session

pytestmark = [pytest.mark.agents, pytest.mark.slow]

per_agent = pytest.mark.parametrize("name", [
    pytest.param(name, marks=pytest.mark.skipif(
        find_cli(name) is None,
        reason=f"{name} CLI is not installed in {AGENTS_DIR} (run scripts/install_agents.sh)",
    ))
    for name in ("codex", "claude")
])

COMMANDS = ("sleep 2; echo one > one.txt", "echo two > two.txt")
#: Command 1's own length (its ``sleep``).
COMMAND_1_S = 2.0
PROMPT = "STEPS: run the two commands"


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    with FakeProvider(step_commands=COMMANDS, wait_s=30.0) as p:
        yield p


def _tool_calls(e: E2E, mark: int, turn_id: str) -> dict[str, list[str]]:
    """Tool call id → every status its messages were published with, in order."""
    seen: dict[str, list[str]] = {}
    for action in ("session.message.added", "session.message.updated"):
        for p in e.since(mark, action):
            msg = p["message"]
            if msg["kind"] == "tool_call" and msg["turn_id"] == turn_id:
                seen.setdefault(str(msg["metadata"]["tool_call_id"]), []).append(
                    str(msg["metadata"].get("status")))
    return seen


def _running(turn_id: str) -> Any:
    def pred(f: dict[str, Any]) -> bool:
        if f["action"] not in ("session.message.added", "session.message.updated"):
            return False
        msg = f["payload"]["message"]
        return bool(msg["kind"] == "tool_call" and msg["turn_id"] == turn_id
                    and msg["metadata"].get("status") in ("pending", "in_progress"))
    return pred


def _sleeps(e: E2E) -> list[int]:
    """The ``sleep 2`` processes of command 1 under the agent (an agent may run a
    command in a process group of its own: its descendants are looked at)."""
    out = []
    for pid in descendants(e.pgid):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")[:-1]
        except OSError:
            continue
        if argv == [b"sleep", b"2"]:
            out.append(pid)
    return out


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")[:120]
    except OSError:
        return "?"


async def _command_1_running(e: E2E, mark: int, turn_id: str) -> tuple[str, float]:
    """Waits until command 1's tool call is published as running and its ``sleep`` runs;
    returns the tool call's id and when the ``sleep`` was first seen."""
    frame = await e.wait(mark, _running(turn_id), "command 1's tool call running")
    tool_call_id = str(frame["payload"]["message"]["metadata"]["tool_call_id"])
    try:
        with trio.fail_after(STEP_S):
            while not _sleeps(e):
                await trio.sleep(0.01)
    except trio.TooSlowError:
        raise AssertionError(
            f"{e.name}: command 1's sleep never ran; tool calls {_tool_calls(e, mark, turn_id)}; "
            f"processes {[_cmdline(p) for p in descendants(e.pgid)]}; "
            f"streams {e.provider.snapshot()}") from None
    return tool_call_id, trio.current_time()


async def _receipt_complete(e: E2E, mark: int, turn_id: str) -> dict[str, Any]:
    """The status message's receipt once its second step is in (strays known)."""
    def done(f: dict[str, Any]) -> bool:
        if f["action"] != "session.message.updated":
            return False
        msg = f["payload"]["message"]
        receipt = msg.get("metadata", {}).get("receipt")
        return bool(msg["turn_id"] == turn_id and receipt is not None
                    and receipt["strays"] is not None)
    frame = await e.wait(mark, done, "the complete receipt in the status message")
    return dict(frame["payload"]["message"]["metadata"]["receipt"])


def _modes(e: E2E) -> list[str]:
    return [r.mode for r in e.provider.main_streams()]


async def _no_strays(e: E2E, strays: list[dict[str, Any]]) -> None:
    """Nothing a command started outlives the stop, and the agent's own helpers (Claude
    Code's engine under claude-agent-acp, for the whole session) are not strays: ending
    the strays ends nothing, and the session goes on."""
    assert strays == [], strays
    ended = await e.ws.call("session.kill_strays", {"session_id": e.sid})
    assert ended["killed"] == [] and ended["remaining"] == [], ended


@per_agent
async def test_stop_after_the_step_lets_command_1_finish_and_command_2_never_runs(
    name: str, provider: FakeProvider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with trio.fail_after(TEST_S):
        async with e2e_session(name, provider, tmp_path, monkeypatch, policy=allow) as e:
            one, two = Path(e.cwd) / "one.txt", Path(e.cwd) / "two.txt"
            mark, turn_id = await e.prompt(PROMPT)
            tool_call_id, started = await _command_1_running(e, mark, turn_id)
            assert not one.exists() and not _tool_calls(e, mark, turn_id).keys() - {
                tool_call_id}
            asked = trio.current_time()
            answer = await e.ws.call("agent.cancel", {
                "session_id": e.sid, "turn_id": turn_id, "when": "after_step"},
                timeout=STEP_S)
            answered = trio.current_time()
            assert answer["outcome"] == "cancelled", answer
            progress = [p for p in e.since(mark, "session.cancel.progress")
                        if p["phase"] == "after_step"]
            assert [p["tool_call_ids"] for p in progress] == [[tool_call_id]], progress
            # Command 1 ran to its end: the answer came after its 2 s, its file is there.
            assert answered - started > COMMAND_1_S - 0.3, answered - started
            assert one.read_text() == "one\n"
            assert await e.turn_end(mark, turn_id) == "cancelled"

            # Give a command 2 the agent might have started the time to show itself.
            await trio.sleep(1.5)
            assert not two.exists(), "command 2 ran"
            calls = _tool_calls(e, mark, turn_id)
            started_after = [t for t in calls if t != tool_call_id]
            assert calls[tool_call_id][-1] == "completed", calls
            receipt = answer["receipt"]
            assert (receipt["turn_id"], receipt["when"], receipt["by"]) == (
                turn_id, "after_step", "user"), receipt
            assert receipt["tool_calls"] == {"finished": [tool_call_id],
                                             "cancelled": started_after}, (receipt, calls)
            shown = await _receipt_complete(e, mark, turn_id)
            assert shown["tool_calls"] == receipt["tool_calls"]
            await _no_strays(e, shown["strays"])
            stored = await e.ws.call("turn.receipt", {"session_id": e.sid, "turn_id": turn_id})
            assert stored["receipt"] == shown
            # The model was never asked past command 2 (its answer would be the text).
            modes = _modes(e)
            assert modes in (["step1"], ["step1", "step2"]), modes
            # What the agent did after command 1: asked the model again (the request
            # that follows the result), or not; started command 2, or not.
            next_request = [(r.completed, r.aborted) for r in e.provider.main_streams()
                            if r.mode == "step2"]
            print(f"[{name}] after_step: answered {(answered - asked) * 1000:.0f} ms after the "
                  f"cancel, {(answered - started) * 1000:.0f} ms after command 1's sleep began; "
                  f"model requests {modes}; the request after command 1 (completed, aborted): "
                  f"{next_request or 'never made'}; tool calls {calls}; "
                  f"receipt tool_calls {receipt['tool_calls']}")

            await e.quick_turn()


@per_agent
async def test_stop_now_cuts_command_1(
    name: str, provider: FakeProvider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with trio.fail_after(TEST_S):
        async with e2e_session(name, provider, tmp_path, monkeypatch, policy=allow) as e:
            one, two = Path(e.cwd) / "one.txt", Path(e.cwd) / "two.txt"
            mark, turn_id = await e.prompt(PROMPT)
            tool_call_id, started = await _command_1_running(e, mark, turn_id)
            sleeps = _sleeps(e)
            asked = trio.current_time()
            answer = await e.ws.call("agent.cancel", {"session_id": e.sid, "turn_id": turn_id},
                                     timeout=STEP_S)
            answered = trio.current_time()
            assert answer["outcome"] == "cancelled", answer
            # Well before command 1 would have ended on its own.
            assert answered - started < COMMAND_1_S / 2, answered - started
            assert await e.turn_end(mark, turn_id) == "cancelled"
            receipt = answer["receipt"]
            assert (receipt["turn_id"], receipt["when"], receipt["by"]) == (
                turn_id, "now", "user"), receipt
            calls = _tool_calls(e, mark, turn_id)
            assert receipt["tool_calls"] == {"finished": [], "cancelled": [tool_call_id]}, (
                receipt, calls)
            shown = await _receipt_complete(e, mark, turn_id)
            assert shown["tool_calls"] == receipt["tool_calls"]
            await _no_strays(e, shown["strays"])

            # Past the moment command 1 would have written its file: it was cut, not
            # left running.
            await trio.sleep(max(0.0, started + COMMAND_1_S + 1.0 - trio.current_time()))
            assert not one.exists(), "command 1 was not cut: one.txt was written"
            assert not two.exists()
            assert not [p for p in sleeps if p in _sleeps(e)], "command 1's sleep survived"
            modes = _modes(e)
            assert modes == ["step1"], modes
            print(f"[{name}] now: answered {(answered - asked) * 1000:.0f} ms after the cancel, "
                  f"{(answered - started) * 1000:.0f} ms after command 1's sleep began; "
                  f"tool calls {calls}; receipt tool_calls {receipt['tool_calls']}")

            await e.quick_turn()
