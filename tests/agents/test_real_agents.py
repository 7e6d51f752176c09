"""The cancel path against the real agent CLIs, through Turnvisor's adapters.

Each agent (Codex app-server, Auggie, Claude, Gemini) runs as a subprocess in
its own process group, pointed at the fake provider on 127.0.0.1 by a
throw-away home.  For each: a prompt streams; a cancel mid-stream ends the turn
``cancelled`` (Codex: ``interrupted``) and aborts the upstream HTTP stream; the
same session takes the next prompt; a cancel before any output works too; the
permission / approval prompt is answered (and cancelled by a cancel).  Every
wait is bounded; teardown checks that no process of the agent is left.

Cancel latencies are printed (``pytest -s``) as ``[agent] ...`` lines.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from protocols.events import PermissionRequested, PermissionResolved
from tests.fake_provider import FakeProvider

from .cli import AGENTS_DIR, find_cli
from .harness import AgentUnderTest, agent_session
from .homes import AGENT_NAMES

pytestmark = [pytest.mark.agents, pytest.mark.slow]

# Decided at collection (a skip raised inside a trio test loses its reason).
per_agent = pytest.mark.parametrize("name", [
    pytest.param(name, marks=pytest.mark.skipif(
        find_cli(name) is None,
        reason=f"{name} CLI is not installed in {AGENTS_DIR} (run scripts/install_agents.sh)",
    ))
    for name in AGENT_NAMES
])

TOKENS = 40
INTERVAL_S = 0.2
APPROVED_FILE = "turnvisor-approved.txt"


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    with FakeProvider(token_interval_s=INTERVAL_S, n_tokens=TOKENS, wait_s=30.0,
                      tool_command=f"touch {APPROVED_FILE}") as p:
        yield p


def _option(ev: PermissionRequested, *kinds: str) -> str:
    for kind in kinds:
        for o in ev.options:
            if o.kind == kind:
                return o.option_id
    raise AssertionError(f"no option of kind {kinds} in {ev.options}")


def decline(ev: PermissionRequested) -> str:
    """Auggie asks to index a new workspace on the first prompt: say no, for this session."""
    return _option(ev, "reject_once", "reject_always")


def allow(ev: PermissionRequested) -> str:
    return _option(ev, "allow_once", "allow_always")


def _tokens(agent: AgentUnderTest, since: int) -> list[str]:
    return [c for c in agent.chunks(since) if c.startswith("tok")]


async def _quick_turn(agent: AgentUnderTest) -> None:
    """The session still works: a short prompt streams and ends normally."""
    mark = len(agent.events)
    ended = await agent.prompt("QUICK: say three words")
    assert ended.stop_reason == "end_turn", ended
    assert _tokens(agent, mark) == ["tok0 ", "tok1 ", "tok2 "]


@per_agent
async def test_cancel_mid_stream_aborts_upstream_and_session_goes_on(
    name: str, provider: FakeProvider, tmp_path: Path
) -> None:
    async with agent_session(name, provider, tmp_path, on_permission=decline) as agent:
        latencies = []
        for round_ in range(2):
            mark = len(agent.events)
            res = await agent.prompt_and_cancel(
                f"SLOW: round {round_}, stream many tokens",
                ready=lambda mark=mark: len(_tokens(agent, mark)) >= 2,  # type: ignore[misc]
                what="two streamed tokens",
            )
            assert res.ended.stop_reason == "cancelled", res.ended
            assert len(_tokens(agent, mark)) >= 2
            slow = [r for r in res.open_streams if r.mode == "slow"]
            assert slow, f"no model stream was open at the cancel: {provider.snapshot()}"
            final = await agent.wait_aborted(slow)
            for rec in final:
                assert rec.aborted, f"upstream stream not aborted: {rec}"
                assert rec.tokens_sent < TOKENS
            abort_ms = max((r.ended or 0) - res.cancel_at for r in final) * 1000
            latencies.append(res.latency_ms)
            print(f"[{name}] mid-stream cancel -> {res.ended.stop_reason} in "
                  f"{res.latency_ms:.1f} ms; upstream stream aborted {abort_ms:.0f} ms "
                  f"after the cancel ({final[0].tokens_sent} tokens sent)")
            await _quick_turn(agent)
        assert all(ms < 5000 for ms in latencies), latencies


@per_agent
async def test_cancel_before_first_output(
    name: str, provider: FakeProvider, tmp_path: Path
) -> None:
    async with agent_session(name, provider, tmp_path, on_permission=decline) as agent:
        # Auggie's first prompt in a new workspace asks about indexing first; get that
        # out of the way so the cancels below race only the model.
        await _quick_turn(agent)

        # 1. While the model is silent: the agent is waiting on an open stream.
        mark = len(agent.events)
        res = await agent.prompt_and_cancel(
            "WAIT: think before you answer",
            ready=lambda: any(r.mode == "wait" and r.open for r in provider.snapshot()),
            what="the model request",
        )
        assert res.ended.stop_reason == "cancelled", res.ended
        assert _tokens(agent, mark) == []
        final = await agent.wait_aborted([r for r in res.open_streams if r.mode == "wait"])
        assert all(r.aborted for r in final), final
        print(f"[{name}] cancel while the model is silent -> cancelled in "
              f"{res.latency_ms:.1f} ms")
        await _quick_turn(agent)

        # 2. At once, right after the prompt was written.
        mark = len(agent.events)
        res = await agent.prompt_and_cancel("WAIT: another question", ready=None)
        assert res.ended.stop_reason == "cancelled", res.ended
        assert _tokens(agent, mark) == []
        print(f"[{name}] cancel right after the prompt -> cancelled in "
              f"{res.latency_ms:.1f} ms")
        # Whatever request the agent had started upstream is closed, not left hanging.
        await agent.wait_until(
            lambda: not any(r.open for r in provider.main_streams()), 5.0,
            "no model stream left open",
        )
        await _quick_turn(agent)


@per_agent
async def test_permission_prompt_answered(
    name: str, provider: FakeProvider, tmp_path: Path
) -> None:
    answered: list[tuple[PermissionRequested, str]] = []

    def answer(ev: PermissionRequested) -> str:
        # Auggie's only question here is indexing: decline it; the others ask about
        # the scripted shell command: allow it.
        choice = decline(ev) if name == "auggie" else allow(ev)
        answered.append((ev, choice))
        return choice

    async with agent_session(
        name, provider, tmp_path, on_permission=answer,
        # Codex asks before any command that is not known to be safe.
        thread_params={"approvalPolicy": "untrusted"} if name == "codex" else None,
    ) as agent:
        mark = len(agent.events)
        ended = await agent.prompt("TOOL: create the file" if name != "auggie" else "QUICK: hi")
        assert ended.stop_reason == "end_turn", ended
        assert answered, "the agent asked no permission"
        ev, choice = answered[0]
        assert any(o.option_id == choice for o in ev.options)
        resolved = [e for e in agent.events[mark:] if isinstance(e, PermissionResolved)]
        assert [(r.request_id, r.option_id) for r in resolved][:1] == [(ev.request_id, choice)]
        assert _tokens(agent, mark) == ["tok0 ", "tok1 ", "tok2 "]
        if name != "auggie":
            # The command ran once allowed (Codex: inside its workspace-write sandbox),
            # and the model was asked again with its result.
            assert (Path(agent.cwd) / APPROVED_FILE).exists(), f"{name} did not run it"
            modes = [r.mode for r in provider.main_streams()]
            assert "tool" in modes
            assert "quick" in modes[modes.index("tool") + 1:], modes
        print(f"[{name}] permission {ev.title!r} answered {choice!r}")


@per_agent
async def test_cancel_while_permission_pending(
    name: str, provider: FakeProvider, tmp_path: Path
) -> None:
    async with agent_session(
        name, provider, tmp_path, on_permission=lambda ev: ...,  # leave it pending
        thread_params={"approvalPolicy": "untrusted"} if name == "codex" else None,
    ) as agent:
        mark = len(agent.events)
        res = await agent.prompt_and_cancel(
            "TOOL: create the file" if name != "auggie" else "QUICK: hi",
            ready=lambda: bool(agent.permissions(mark)), what="a permission request",
        )
        assert res.ended.stop_reason == "cancelled", res.ended
        asked = agent.permissions(mark)
        resolved = [e for e in agent.events[mark:] if isinstance(e, PermissionResolved)]
        # The client answered the pending request "cancelled" as part of the cancel.
        assert [(r.request_id, r.option_id) for r in resolved] == [(asked[0].request_id, None)]
        assert not (Path(agent.cwd) / APPROVED_FILE).exists()
        # Not asserted, reported: Claude sometimes sends the refused tool result to the
        # model once more before it ends the turn (whichever of the permission's answer
        # and session/cancel it reads first).
        after = [r for r in provider.main_streams() if r.started > res.cancel_at]
        print(f"[{name}] cancel with a pending permission -> cancelled in "
              f"{res.latency_ms:.1f} ms; model requests after the cancel: {len(after)}")
        agent.on_permission = decline
        await _quick_turn(agent)
