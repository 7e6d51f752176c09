"""The cancel as a frame on agentctl's event stream (DESIGN.md §20, issue 44's
"ssh ≤ local + 1 ms"): a real agentctl with the mock agent, in both dialects.

Raw, on the WebSocket: a ``Cancel`` for the running turn is written and
answered (``CancelWritten``) before the turn's cancelled end; one for another
turn leaves the running turn alone; a bad frame gets ``FrameRefused`` and the
stream goes on.  Through ``AgentctlAdapter``: ``cancel_now`` hands the frame
over without waiting once the prompt is answered (never before), the answer
arrives, the turn ends cancelled; a frame the link's cut swallows is sent
again when the link returns.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio
import trio.lowlevel
from agentctl_support import AgentctlFactory, adapter_session, frame_is, next_frame, raw_turn
from trio_websocket import WebSocketConnection

from protocols.agentctl_wire import CancelAck, cancel_frame
from protocols.events import AgentEvent, MessageChunk, TurnEnded
from supervisor.config import Timeouts
from tests.support.cut_proxy import cut_proxy

DIALECTS = pytest.mark.parametrize("protocol", ["acp", "codex"])
TIMEOUTS = Timeouts(agent_request_s=2.0)


async def _first_chunk(ws: WebSocketConnection, turn: str) -> None:
    await next_frame(ws, frame_is("MessageChunk", turn), timeout=15)


@DIALECTS
async def test_a_cancel_frame_is_answered_before_the_cancelled_end(
        agentctl: AgentctlFactory, protocol: str) -> None:
    with trio.fail_after(60):
        async with agentctl(protocol) as ctl, ctl.events(owner="raw-client") as ws:
            hello = json.loads(await ws.get_message())
            assert hello["type"] == "Hello" and "Cancel" in hello["accepts"]
            session_id, turn = await raw_turn(ctl, "/delay 20000")
            await _first_chunk(ws, turn)
            # Another turn's cancel: nothing written, the running turn goes on.
            await ws.send_message(cancel_frame("not-this-turn", session_id))
            other = await next_frame(ws, frame_is("CancelWritten", "not-this-turn"))
            assert other["running"] is False
            assert (await ctl.status())["turn"] == {"id": turn, "cancel_requested": False}

            await ws.send_message(cancel_frame(turn, session_id))
            seen: list[dict[str, Any]] = []
            ended = await next_frame(ws, frame_is("TurnEnded", turn), timeout=15, seen=seen)
            assert ended["stop_reason"] == "cancelled"
            kinds = [f["type"] for f in seen]
            assert "CancelWritten" in kinds, kinds
            # In order with the events: the answer before the end it led to.
            assert kinds.index("CancelWritten") < kinds.index("TurnEnded")
            ack = seen[kinds.index("CancelWritten")]
            assert ack == {"type": "CancelWritten", "turn_id": turn, "running": True}
            assert "seq" not in ack  # never in the log


@DIALECTS
async def test_a_bad_frame_is_refused_and_the_stream_lives_on(
        agentctl: AgentctlFactory, protocol: str) -> None:
    with trio.fail_after(60):
        async with agentctl(protocol) as ctl, ctl.events(owner="raw-client") as ws:
            await next_frame(ws, frame_is("Hello"))
            session_id, turn = await raw_turn(ctl, "/delay 20000")
            await _first_chunk(ws, turn)
            await ws.send_message("{not json")
            refused = await next_frame(ws, frame_is("FrameRefused"))
            assert refused["error"].startswith("not JSON")
            await ws.send_message('{"type": "Cancel"}')
            refused = await next_frame(ws, frame_is("FrameRefused"))
            assert refused["error"] == "Cancel.turn_id must be a non-empty string"
            await ws.send_message(json.dumps({"type": "Prompt", "text": "x"}))
            refused = await next_frame(ws, frame_is("FrameRefused"))
            assert "not a client frame: 'Prompt'" in refused["error"]
            # A cancel agentctl cannot act on is answered with the reason.
            await ws.send_message(cancel_frame(turn, "another-session"))
            failed = await next_frame(ws, frame_is("CancelFailed", turn))
            assert failed["error"] == "session not found"
            # The stream goes on: the turn streams, and a good cancel still works.
            await _first_chunk(ws, turn)
            await ws.send_message(cancel_frame(turn, session_id))
            await next_frame(ws, frame_is("CancelWritten", turn))
            ended = await next_frame(ws, frame_is("TurnEnded", turn), timeout=15)
            assert ended["stop_reason"] == "cancelled"


async def _until(pred: Any, within: float = 15) -> None:
    with trio.fail_after(within):
        while not pred():
            await trio.sleep(0.02)


def _chunks(seen: list[AgentEvent]) -> int:
    return sum(isinstance(e, MessageChunk) for e in seen)


@DIALECTS
async def test_cancel_now_sends_the_frame_and_the_turn_ends_cancelled(
        agentctl: AgentctlFactory, protocol: str) -> None:
    with trio.fail_after(60):
        async with agentctl(protocol) as ctl, \
                adapter_session(ctl.url, ctl.token, TIMEOUTS) as (adapter, seen):
            ended: list[TurnEnded] = []
            async with trio.open_nursery() as nursery:
                async def turn() -> None:
                    ended.append(await adapter.prompt("/delay 20000"))
                nursery.start_soon(turn)
                await _until(lambda: _chunks(seen) > 0)
                turn_id = adapter.operation_id
                assert turn_id is not None
                # Handed over without a request once the prompt's answer is in
                # (the first chunk may come before it: polled).
                await _until(adapter.cancel_now)
                frame = adapter.cancel_frame
                assert frame is not None and frame.unanswered
                with trio.fail_after(15):
                    await frame.came.wait()
            assert frame.ack == CancelAck(turn_id=turn_id) and frame.error is None
            assert ended[0].stop_reason == "cancelled"
            assert not adapter.turn_running
            # The link is as it was: the next turn runs to its end.
            assert (await adapter.prompt("after the cancel")).stop_reason == "end_turn"


@DIALECTS
async def test_a_cancel_before_the_prompts_answer_does_not_overtake_it(
        agentctl: AgentctlFactory, protocol: str) -> None:
    with trio.fail_after(60):
        async with agentctl(protocol) as ctl, \
                adapter_session(ctl.url, ctl.token, TIMEOUTS) as (adapter, _seen):
            ended: list[TurnEnded] = []
            async with trio.open_nursery() as nursery:
                async def turn() -> None:
                    ended.append(await adapter.prompt("/delay 20000"))
                nursery.start_soon(turn)
                # The turn is armed before its request goes; its answer needs
                # agentctl's round trip, so it cannot be here yet.
                while not adapter.turn_running:
                    await trio.lowlevel.checkpoint()
                # No frame: it could reach agentctl before the prompt does.
                assert adapter.cancel_now() is False
                await adapter.cancel()  # waits for the answer, then the request
            assert ended[0].stop_reason == "cancelled"
            assert adapter.cancel_frame is None  # the HTTP cancel: no frame was sent


@DIALECTS
async def test_a_frame_the_cut_swallows_is_sent_again_on_the_return(
        agentctl: AgentctlFactory, protocol: str) -> None:
    with trio.fail_after(60):
        async with agentctl(protocol) as ctl, cut_proxy(ctl.url) as proxy, \
                adapter_session(proxy.url, ctl.token, TIMEOUTS, reconnect=True) \
                as (adapter, seen):
            link = adapter.connection
            ended: list[TurnEnded] = []
            async with trio.open_nursery() as nursery:
                async def turn() -> None:
                    ended.append(await adapter.prompt("/delay 30000"))
                nursery.start_soon(turn)
                await _until(lambda: _chunks(seen) > 0)
                await _until(adapter.cancel_now)
                frame = adapter.cancel_frame
                assert frame is not None
                # Cut in the same step (``_until`` returns without a checkpoint
                # after the call): the writer has not sent the frame yet.
                proxy.cut()
                await _until(lambda: not link.reachable)
                # agentctl never got it: its turn runs on, not cancelled.
                await trio.sleep(0.5)
                assert (await ctl.status())["turn"]["cancel_requested"] is False
                assert adapter.turn_running and not ended and frame.unanswered
                proxy.restore()
                await _until(lambda: link.reachable)
            # The return sent it again (over HTTP, before anything else), and
            # its answer stands for the frame's.
            assert ended[0].stop_reason == "cancelled"
            assert frame.ack is not None and frame.ack.error is None
            assert not (await ctl.status()).get("turn")
