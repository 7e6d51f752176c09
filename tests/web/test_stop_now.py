"""DESIGN.md §15 ``stop-now-button`` over the API: ``agent.stop_now`` makes the late cancel in
flight escalate at once, through the same operation (its one answer says ``escalated``), and
does nothing where no cancel is late."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio

from tests.support.server import running_server
from tests.support.ws import is_state, ws_client

from .support import launch, new_task

#: A `/hang` turn's cancel is late after 0.5 s and would be escalated only after 60 s.
TIMEOUTS = {"cancel_join_s": 0.5, "cancel_escalate_s": 60.0, "cancel_operation_s": 90.0}


async def test_stop_now_escalates_the_late_cancel_at_once(tmp_path: Path) -> None:
    with trio.fail_after(30):
        async with running_server(tmp_path / "data", timeouts=TIMEOUTS) as srv, \
                ws_client(srv) as ws:
            task_id = await new_task(ws)
            sid = await launch(ws, task_id)
            await ws.call("session.subscribe", {"session_id": sid})
            idle = await ws.call("agent.stop_now", {"session_id": sid})
            assert idle == {"success": True, "session_id": sid, "stopping": False}

            await ws.call("message.add", {"session_id": sid, "content": "/hang"})
            await ws.wait_for(is_state(sid, "RUNNING"))
            answers: list[dict[str, Any]] = []

            async def cancel() -> None:
                answers.append(await ws.call("agent.cancel", {"session_id": sid}, timeout=90))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(cancel)
                await ws.wait_for(lambda f: f["action"] == "session.cancel.progress"
                                  and f["payload"]["phase"] == "late")
                asked = trio.current_time()
                stop = await ws.call("agent.stop_now", {"session_id": sid})
                assert stop == {"success": True, "session_id": sid, "stopping": True}
            assert trio.current_time() - asked < 10  # not the 60 s of cancel_escalate_s
            (answer,) = answers
            assert answer["outcome"] == "escalated", answer
            phases = [p["phase"] for p in ws.of("session.cancel.progress", sid)]
            assert phases == ["sent", "late", "escalated"], phases
            # One operation: pending went true once and false once.
            pairs = [(p["cancellation_pending"], p["cancellation_revision"])
                     for p in ws.of("session.cancellation_changed", sid)]
            assert pairs == [(True, 1), (False, 2)], pairs


async def test_stop_now_of_another_workspace_s_session_is_not_found(tmp_path: Path) -> None:
    with trio.fail_after(30):
        async with running_server(tmp_path / "data", workspaces={"b": "b" * 40}) as srv, \
                ws_client(srv) as ws, ws_client(srv, token="b" * 40) as other:
            sid = await launch(ws, await new_task(ws))
            err = await other.request("agent.stop_now", {"session_id": sid})
            assert err["type"] == "error" and err["payload"]["code"] == "NOT_FOUND", err
