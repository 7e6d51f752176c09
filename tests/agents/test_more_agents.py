"""End to end with the ACP agents of issue 15: codex-acp, qwen-code, opencode.

Same rig as ``test_end_to_end``: ``web.server.serve`` with a ``turnvisor.toml``
overriding the built-in profile (cached binary, throw-away home pointed at the
fake provider, which speaks the OpenAI Responses API to codex-acp and Chat
Completions to the other two), and a WebSocket client doing what the page does.

For each agent: a cancel mid-stream, a cancel right after ``message.add``, ten
duplicate cancels (one operation, one status message, one true/false pair), a
cancel with a permission pending, and a cancel while the approved tool
(``sleep``) runs, after which no ``sleep`` may outlive the server's stop.

Each test prints its cancel round trips as ``[agent] ...`` lines (``pytest -s``);
docs/agents.md quotes them.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from tests.fake_provider import FakeProvider

from .cli import AGENTS_DIR, find_cli
from .harness import descendants, group_members
from .homes import MORE_AGENT_NAMES
from .test_end_to_end import (
    APPROVED_FILE,
    CANCELLED_STATUS,
    E2E,
    INTERVAL_S,
    STEP_S,
    TOKENS,
    _state,
    _streamed,
    allow,
    e2e_session,
)

pytestmark = [pytest.mark.agents, pytest.mark.slow]

per_agent = pytest.mark.parametrize("name", [
    pytest.param(name, marks=pytest.mark.skipif(
        find_cli(name) is None,
        reason=f"{name} CLI is not installed in {AGENTS_DIR} (run scripts/install_agents.sh)",
    ))
    for name in MORE_AGENT_NAMES
])

SLEEP_S = 30
#: The tool command of the running-tool test; the marker file tells it never finished.
#: (qwen-code refuses a command that starts with a long ``sleep``.)
SLEEP_COMMAND = f"echo started; sleep {SLEEP_S}; touch {APPROVED_FILE}"

#: (agent, how) whose tool process is known to outlive the server, with why.  Empty:
#: codex-acp and opencode run their tools in process groups of their own, which
#: outlived a crashed agent until teardown followed the agent's tag (and the
#: sandbox's pid namespace) instead of its group alone.  The test fails when an
#: entry here stops leaking, so that the entry goes.
TOOL_OUTLIVES_AGENT: dict[tuple[str, str], str] = {}


#: opencode's cancel took from 0.25 s to 8.2 s here under load (the default join
#: window is 3 s, after which the outcome is "late"): a window short of the 10 s
#: escalation, so that these tests check the outcome, not the machine's load.
#: Likewise its start-up took 10-18 s, and over 45 s at a load average of 14.
TIMEOUTS = {"cancel_join_s": 9.5, "agent_start_s": 120.0}
#: Bound on one whole test.
TEST_S = 300.0


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    with FakeProvider(token_interval_s=INTERVAL_S, n_tokens=TOKENS, wait_s=30.0,
                      tool_command=f"touch {APPROVED_FILE}") as p:
        yield p


def _tool_pids(under: set[int]) -> set[int]:
    """The processes among ``under`` that run the tool (``sleep 30`` and the shell
    that runs it), once the ``sleep`` itself has started; else empty."""
    out, sleeping = set(), False
    for pid in under:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if argv[:2] == [b"sleep", str(SLEEP_S).encode()]:
            out.add(pid)
            sleeping = True
        elif any(a.startswith(SLEEP_COMMAND.encode()) for a in argv):
            out.add(pid)
    return out if sleeping else set()


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


async def _cancel_slow_turn(e: E2E, text: str) -> tuple[int, str, int]:
    """A ``SLOW`` turn, two tokens streamed; returns (mark, turn id, revision before)."""
    rev = e.revision()
    mark, turn_id = await e.prompt(text)
    await e.wait(mark, _state("RUNNING"), "RUNNING")
    await e.wait(mark, _streamed(2), "two streamed tokens in session.message.updated")
    assert not e.since(mark, "session.turn.completed")
    return mark, turn_id, rev


@per_agent
async def test_cancel_mid_stream(
    name: str, provider: FakeProvider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with trio.fail_after(TEST_S):
        async with e2e_session(name, provider, tmp_path, monkeypatch, timeouts=TIMEOUTS) as e:
            mark, turn_id, rev = await _cancel_slow_turn(e, "SLOW: stream many tokens")
            slow = {r.id for r in e.provider.main_streams() if r.mode == "slow" and r.open}
            assert slow, f"no model stream open at the cancel: {e.provider.snapshot()}"
            ms = await e.cancel()
            await e.assert_cancelled(mark, turn_id, rev)
            streamed = await e.agent_text(turn_id)
            assert "tok0 tok1 " in streamed, streamed
            assert f"tok{TOKENS - 1} " not in streamed
            final = await e.wait_streams(
                lambda s: all(not r.open for r in s if r.id in slow), "the model stream's end",
                timeout=5.0)
            for rec in (r for r in final if r.id in slow):
                assert rec.aborted and rec.tokens_sent < TOKENS, rec
            print(f"[{name}] e2e mid-stream agent.cancel answered in {ms:.1f} ms")
            await e.quick_turn()


#: Agents whose early-cancelled turn did not end as the user's cancel, with why.
#: Empty: opencode 1.18.33 answers a cancel arriving right after the prompt with
#: ``end_turn`` (8 tries in 12), and Turnvisor now keeps the user's cancel as the
#: outcome whatever the agent answered, so the turn reads "cancelled".
EARLY_CANCEL_ENDS_TURN: dict[str, str] = {}


@per_agent
async def test_early_cancel(
    name: str, provider: FakeProvider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``agent.cancel`` as soon as ``message.add`` answered (the agent has only just
    got ``session/prompt``): the turn ends cancelled, no model stream stays open.
    An agent that answers the cancelled prompt ``end_turn`` anyway must still leave
    the user's outcome: one "Turn cancelled by user", progress true then false."""
    missing: list[str] = []
    with trio.fail_after(TEST_S):
        async with e2e_session(name, provider, tmp_path, monkeypatch,
                               timeouts=TIMEOUTS) as e:
            await e.quick_turn()
            for round_ in range(2):
                rev = e.revision()
                mark, turn_id = await e.prompt(f"WAIT: question {round_}")
                ms = await e.cancel()
                stop = await e.turn_end(mark, turn_id)
                print(f"[{name}] e2e early agent.cancel answered in {ms:.1f} ms; "
                      f"the agent ended the turn {stop!r}")
                if stop == "cancelled":
                    await e.assert_cancelled(mark, turn_id, rev)
                elif name in EARLY_CANCEL_ENDS_TURN:
                    try:
                        await _assert_user_cancel_kept(e, mark, turn_id, rev)
                    except AssertionError as exc:
                        missing.append(str(exc).splitlines()[0])
                else:
                    raise AssertionError(f"{name} ended an early-cancelled turn {stop!r}")
                assert "tok" not in await e.agent_text(turn_id)
                await e.wait_streams(lambda s: not any(r.open for r in s),
                                     "no model stream open", timeout=5.0)
                await e.quick_turn()
    if missing:
        print(f"[{name}] early cancel answered end_turn; missing: {missing}")
        pytest.xfail(f"{EARLY_CANCEL_ENDS_TURN[name]}: {missing}")


async def _assert_user_cancel_kept(e: E2E, mark: int, turn_id: str, rev: int) -> None:
    """The outcome issue 15 item 2 asks for when the agent ignored the cancel."""
    await e.wait(mark, lambda f: f["action"] == "session.cancellation_changed"
                 and f["payload"]["cancellation_pending"] is False, "the cancel's end")
    changes = [(c["cancellation_pending"], c["cancellation_revision"])
               for c in e.since(mark, "session.cancellation_changed")]
    assert changes == [(True, rev + 1), (False, rev + 2)], changes
    statuses = [(m["content"], m["metadata"].get("cancelled")) for m in await e.messages()
                if m["turn_id"] == turn_id and m["kind"] == "status"]
    assert statuses == [(CANCELLED_STATUS[0], True)], (
        f"status messages {statuses}, not one {CANCELLED_STATUS[0]!r}")
    s = await e.session()
    assert (s["state"], s["cancellation_pending"]) == ("WAITING_FOR_INPUT", False), s


@per_agent
async def test_duplicate_cancels(
    name: str, provider: FakeProvider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ten ``agent.cancel`` while one is pending: every one succeeds, one cancel
    operation (nine joined), one true/false pair, one status message.

    The agent's process group is stopped (SIGSTOP) until all ten are in: a fast
    agent (codex-acp) can otherwise settle the first before the client has
    written the rest, and a cancel after the settle is a new operation."""
    with trio.fail_after(TEST_S):
        async with e2e_session(name, provider, tmp_path, monkeypatch, timeouts=TIMEOUTS) as e:
            orch = e.srv.sup.orchestrator
            started = orch.operations_started
            mark, turn_id, rev = await _cancel_slow_turn(e, "SLOW: stream for the duplicates")
            times: list[float] = []

            async def one() -> None:
                times.append(await e.cancel())

            os.killpg(e.pgid, signal.SIGSTOP)
            try:
                async with trio.open_nursery() as nursery:
                    for _ in range(10):
                        nursery.start_soon(one)
                    with trio.fail_after(STEP_S):
                        while (op := orch.operations.get(e.sid)) is None or op.joined < 9:
                            await trio.sleep(0.005)
                    assert not times, "a cancel was answered while the agent was stopped"
                    resumed = trio.current_time()
                    os.killpg(e.pgid, signal.SIGCONT)
            finally:
                os.killpg(e.pgid, signal.SIGCONT)
            ms = (trio.current_time() - resumed) * 1000
            assert len(times) == 10
            await e.assert_cancelled(mark, turn_id, rev)
            assert orch.operations_started == started + 1
            assert orch.settled[-1].joined == 9
            print(f"[{name}] e2e 10 duplicate agent.cancel all answered {ms:.1f} ms "
                  "after the agent resumed")
            await e.quick_turn()


@per_agent
async def test_cancel_with_permission_pending(
    name: str, provider: FakeProvider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The shell tool asks first (qwen: its default mode; opencode and codex-acp: the
    test home's config, see homes.launch); a cancel finds the card pending."""
    with trio.fail_after(TEST_S):
        async with e2e_session(name, provider, tmp_path, monkeypatch, policy=allow,
                               timeouts=TIMEOUTS) as e:
            mark, turn_id = await e.prompt("TOOL: create the file")
            assert await e.turn_end(mark, turn_id) == "end_turn"
            assert e.answered, f"{name} asked no permission"
            assert (Path(e.cwd) / APPROVED_FILE).exists(), f"{name} did not run the command"
            (Path(e.cwd) / APPROVED_FILE).unlink()

            e.policy = lambda p: ...
            rev = e.revision()
            mark, turn_id = await e.prompt("TOOL: create the file again")
            asked = await e.wait(mark, lambda f: f["action"] == "session.permission.requested",
                                 "a permission request")
            ms = await e.cancel()
            await e.assert_cancelled(mark, turn_id, rev)
            assert [p["request_id"] for p in e.since(mark, "session.permission.cancelled")] == [
                asked["payload"]["request_id"]]
            perm = [m for m in await e.messages()
                    if m["turn_id"] == turn_id and m["kind"] == "permission"]
            assert [m["metadata"]["status"] for m in perm] == ["cancelled"], perm
            assert not (Path(e.cwd) / APPROVED_FILE).exists()
            print(f"[{name}] e2e agent.cancel with a permission pending answered in {ms:.1f} ms")
            e.policy = allow
            await e.quick_turn()


@per_agent
@pytest.mark.parametrize("how", ["cancel", "stop", "crash"])
async def test_tool_process_gone_after_stop(
    name: str, how: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The approved tool is ``sleep 30``.  ``cancel``: a cancel while it runs ends the
    turn cancelled and the command never finishes; ``stop``: the server stops while
    it runs; ``crash``: the agent process is SIGKILLed while it runs (its turn ends in
    an error).  Each way, once the server has stopped no process of the tool is alive."""
    tool: set[int] = set()
    with FakeProvider(token_interval_s=INTERVAL_S, n_tokens=TOKENS, wait_s=30.0,
                      tool_command=SLEEP_COMMAND) as provider:
        try:
            with trio.fail_after(TEST_S):
                async with e2e_session(name, provider, tmp_path, monkeypatch, policy=allow,
                                       unchecked=tool, timeouts=TIMEOUTS,
                                       agent_may_exit=how == "crash") as e:
                    rev = e.revision()
                    mark, turn_id = await e.prompt("TOOL: run the long command")
                    with trio.fail_after(STEP_S):
                        while not (found := _tool_pids(descendants(e.pgid))):
                            await trio.sleep(0.05)
                    tool |= found
                    if how == "cancel":
                        ms = await e.cancel()
                        await e.assert_cancelled(mark, turn_id, rev)
                        t0 = time.monotonic()
                        while any(_alive(p) for p in tool) and time.monotonic() - t0 < 2.0:
                            await trio.sleep(0.05)
                        left = any(_alive(p) for p in tool)
                        print(f"[{name}] e2e agent.cancel during a running tool answered in "
                              f"{ms:.1f} ms; the tool "
                              f"{'still ran 2 s after it' if left else 'stopped with the turn'}")
                        await e.quick_turn()
                    elif how == "crash":
                        # Every process of the agent dies at once (for qwen-code, its
                        # launcher and the CLI it runs), the tool's aside.
                        for pid in set(group_members(e.pgid)) - tool:
                            # A short-lived helper of the agent may have exited
                            # between the listing and the kill.
                            with contextlib.suppress(ProcessLookupError):
                                os.kill(pid, signal.SIGKILL)
                        assert await e.turn_end(mark, turn_id) == "error"
            # The server has stopped (the agent's group signalled): give the signals
            # a moment to land.
            t0 = time.monotonic()
            while any(_alive(p) for p in tool) and time.monotonic() - t0 < 5.0:
                await trio.sleep(0.05)
            survivors = {p for p in tool if _alive(p)}
            assert not (tmp_path / f"{name}-work" / APPROVED_FILE).exists()
        finally:
            for pid in tool:
                if _alive(pid):
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, 9)
    known = TOOL_OUTLIVES_AGENT.get((name, how))
    if known is not None:
        assert survivors, (f"{name}: the tool no longer outlives the server ({how}): drop "
                           "the entry from TOOL_OUTLIVES_AGENT")
        # Strict by the assert above: the test fails once the leak is fixed.
        pytest.xfail(known)
    assert not survivors, f"{name}: the tool's processes outlived the server: {survivors}"
