"""A burst of ``Cancel`` frames for one turn makes one write, not one task each
(issue 44): a real agentctl and its mock agent, on the raw event stream.

The agent stops reading its stdin with the pipe full (stopped, the pipe filled
through ``/proc``), so agentctl cannot write the cancel at once and writes it
in a task of its own.  Every repeat of the frame meanwhile joins that write:
agentctl's status counts one cancel being written, and when the write gives
up each frame gets its answer (``CancelFailed``, agentctl's words).
"""

from __future__ import annotations

import trio
from agentctl_support import (
    AgentctlFactory,
    fill_stdin,
    frame_is,
    next_frame,
    raw_turn,
    stopped,
)

from protocols.agentctl_wire import cancel_frame

FRAMES = 50


async def test_repeated_cancel_frames_join_the_one_write_in_flight(
        agentctl: AgentctlFactory) -> None:
    with trio.fail_after(90):
        async with agentctl("acp") as ctl, ctl.events(owner="raw-client") as ws:
            await next_frame(ws, frame_is("Hello"))
            session_id, turn = await raw_turn(ctl, "/delay 60000")
            await next_frame(ws, frame_is("MessageChunk", turn), timeout=15)
            pid = (await ctl.status())["agent"]["pid"]
            with stopped(pid):
                assert fill_stdin(pid) > 0
                for _ in range(FRAMES):
                    await ws.send_message(cancel_frame(turn, session_id))
                # Frames are read in order: once this one is refused, agentctl
                # has read every Cancel before it.
                await ws.send_message("{not json")
                await next_frame(ws, frame_is("FrameRefused"), timeout=15)
                status = await ctl.status()
                assert status["cancel_writes"] == 1, status
                assert status["turn"] == {"id": turn, "cancel_requested": True}
                answers = []
                for _ in range(FRAMES):
                    answers.append(await next_frame(ws, frame_is("CancelFailed", turn), timeout=40))
                assert len({a["error"] for a in answers}) == 1, answers[:2]
                assert "did not read its stdin" in answers[0]["error"], answers[0]
                assert (await ctl.status())["cancel_writes"] == 0
