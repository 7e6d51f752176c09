"""A message queued while the next backend takes over a turn left to agentctl
runs once the takeover settles, even when the turn's end came with the
replay (the session counts as busy while it is taken over, so the kicks of
that moment start nothing; the takeover's end kicks the queue again).

Found under CPU load by test_turn_takeover's restart test (its turn ended in
agentctl while the takeover ran: the queued ``/recall`` never ran).  Here the
turn has ended before the next backend starts, so its takeover always finds
the end in the replay.  Real mock agent, real agentctl, the real supervisor."""

from __future__ import annotations

import sys
from pathlib import Path

import trio
from agentctl_support import TOKEN, AgentctlFactory

from supervisor.config import Config
from supervisor.models import SessionState
from supervisor.root import open_supervisor
from tests.support.sessions import new_session
from tests.support.wait import wait_state


def _config(tmp_path: Path, url: str) -> Config:
    return Config.from_mapping(tmp_path / "data", {"agents": {"remote": {
        "protocol": "acp", "executor": "agentctl", "agentctl_url": url,
        "agentctl_token": TOKEN, "command": [sys.executable, "-m", "protocols.mock_agent"]}}})


async def test_a_message_queued_during_a_takeover_runs_after_the_replayed_end(
    tmp_path: Path, agentctl: AgentctlFactory
) -> None:
    with trio.fail_after(60):
        async with agentctl("acp") as ctl:
            config = _config(tmp_path, ctl.url)
            async with open_supervisor(config) as sup:
                caller, sid = await new_session(sup, "remote")
                msg = await sup.orchestrator.send_message(caller, sid, "/delay 600")
                turn_id = msg.turn_id
                with trio.fail_after(20):
                    while (await ctl.status())["turn"] is None:
                        await trio.sleep(0.02)
            # The backend left its turn to agentctl, which ends it alone.
            with trio.fail_after(20):
                while (await ctl.status())["turn"] is not None:
                    await trio.sleep(0.05)
            async with open_supervisor(config) as sup:
                caller = await sup.caller()
                added = await sup.orchestrator.add_message(caller, sid, "/recall")
                # Queued behind the turn being taken over (a takeover already
                # settled would start it at once: then nothing here is tested).
                assert added["delivery"] == "queued", added
                with trio.fail_after(20):
                    while not [m for m in await sup.orchestrator.list_messages(caller, sid)
                               if m.content.startswith("recall: ")]:
                        await trio.sleep(0.02)
                await wait_state(sup, caller, sid, SessionState.WAITING_FOR_INPUT, timeout=20)
                turn = await sup.store.get_turn(turn_id or "")
                assert turn is not None
                assert (turn.state, turn.stop_reason) == ("completed", "end_turn")
                assert not (await sup.store.queue_state(sid)).entries
