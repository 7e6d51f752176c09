"""The cancel-turn progress spec (spec/cancel-turn-progress-requirements.txt) at
API level: a real Hypercorn server, the mock agent, WebSocket and REST clients."""

from __future__ import annotations

import sqlite3
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from supervisor.session.lifecycle import CancelOutcome
from supervisor.storage.db import now
from tests.support.server import running_server
from tests.support.ws import is_cancellation, is_state, is_turn_completed, ws_client

from .support import (
    SLOW_CANCEL,
    cancellation_changes,
    http,
    is_revision,
    launch,
    new_task,
    raw_request,
    running_session,
    start_turn,
)

CANCELLED_META = {"cancelled": True, "variant": "warning"}


def status_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in messages if m["role"] == "system" and m["kind"] == "status"]


def cancelled_status(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in status_messages(messages) if m["content"] == "Turn cancelled by user"]


def index_of(frames: list[dict[str, Any]], pred: Any) -> int:
    return next(i for i, f in enumerate(frames) if pred(f))


def rows(dtos: list[dict[str, Any]], sid: str) -> dict[str, Any]:
    return next(d for d in dtos if d["id"] == sid)


async def rest_views(h: Any, task_id: str, sid: str) -> list[dict[str, Any]]:
    """The session as REST get, REST list and the task boot state show it."""
    got = await h.get(f"/api/v1/task-sessions/{sid}")
    listed = await h.get(f"/api/v1/tasks/{task_id}/sessions")
    boot = await h.get(f"/api/v1/tasks/{task_id}/boot", params={"session": sid})
    for r in (got, listed, boot):
        assert r.status_code == 200, r.text
    return [got.json(), rows(listed.json()["sessions"], sid), rows(boot.json()["sessions"], sid)]


def progress(dto: dict[str, Any]) -> tuple[str, bool, int]:
    return dto["state"], dto["cancellation_pending"], dto["cancellation_revision"]


async def test_cancel_stages_fall_between_the_clients_send_and_receive(tmp_path: Path) -> None:
    """The diagnostics' ``received_s`` is on the host's monotonic clock (what
    ``time.perf_counter`` reads here, as the bench does in its own process)."""
    with trio.fail_after(30):
        async with running_server(tmp_path / "data") as srv, ws_client(srv) as a, \
                http(srv) as h:
            sid = await running_session(a, await new_task(a), "/delay 5000", "mock")
            pending = await a.send("agent.cancel", {"session_id": sid})
            assert (await pending.wait(10))["type"] == "response"
            r = await h.get("/api/v1/debug/cancel-stages", params={"session_id": sid})
            assert r.status_code == 200, r.text
            op = r.json()["operations"][-1]
            assert op["outcome"] == "acknowledged"
            marks = op["marks_ms"]
            order = ["received", "admitted", "adapter_sent", "agent_answered", "committed",
                     "reconciled", "published"]
            assert [marks[m] for m in order] == sorted(marks[m] for m in order)
            assert pending.sent_at <= op["received_s"]
            assert op["received_s"] + marks["published"] / 1000 <= pending.answered_at


@pytest.mark.parametrize("agent", ["mock", "mock-codex"])
async def test_cancel_is_seen_by_every_subscriber_in_order(tmp_path: Path, agent: str) -> None:
    with trio.fail_after(30):
        async with running_server(tmp_path / "data") as srv, ws_client(srv) as a, \
                ws_client(srv) as b, http(srv) as h:
            task_id = await new_task(a)
            sid = await running_session(a, task_id, "/delay 5000", agent)
            await b.call("session.subscribe", {"session_id": sid})
            snap = (await b.wait_for(is_state(sid, "RUNNING")))["payload"]
            assert snap["cancellation_pending"] is False
            n = snap["cancellation_revision"]
            assert n == 0

            result = await a.call("agent.cancel", {"session_id": sid})
            assert (result["success"], result["session_id"]) == (True, sid)
            # The response follows the settled operation: `false` is already here.
            assert cancellation_changes(a, sid) == [(True, n + 1), (False, n + 2)]
            await b.wait_for(is_cancellation(sid, False))
            assert cancellation_changes(b, sid) == [(True, n + 1), (False, n + 2)]

            for client in (a, b):
                frames = client.notifications
                pending_at = index_of(frames, is_cancellation(sid, True))
                idle_at = index_of(frames, is_cancellation(sid, False))
                waiting_at = index_of(frames[pending_at:], is_state(sid, "WAITING_FOR_INPUT"))
                status_at = index_of(frames, lambda f: f["action"] == "session.message.added"
                                     and f["payload"]["message"]["kind"] == "status")
                # `false` only after the session, message and turn were reconciled.
                assert pending_at < pending_at + waiting_at < idle_at
                assert pending_at < status_at < idle_at
                done = [p for p in client.of("session.turn.completed", sid)]
                assert [d["stop_reason"] for d in done] == ["cancelled"]
                assert len(client.of("session.agent.cancelled", sid)) == 1

            messages = (await a.call("message.list", {"session_id": sid}))["messages"]
            statuses = status_messages(messages)
            assert [(m["content"], m["metadata"]) for m in statuses] == [
                ("Turn cancelled by user", CANCELLED_META)]
            assert statuses[0]["turn_id"] == done[0]["turn_id"]
            for dto in await rest_views(h, task_id, sid):
                assert progress(dto) == ("WAITING_FOR_INPUT", False, n + 2)
            assert srv.sup.orchestrator.operations_started == 1
            assert srv.sup.orchestrator.settled[-1].outcome is CancelOutcome.ACKNOWLEDGED

            # Not stuck: the next prompt runs a normal turn.
            mark = len(a.notifications)
            await a.call("message.add", {"session_id": sid, "content": "hello again"})
            ended = await a.wait_for(lambda f: is_turn_completed(sid)(f)
                                     and f["payload"]["turn_id"] != done[0]["turn_id"],
                                     after=mark)
            assert ended["payload"]["stop_reason"] == "end_turn"


async def test_pending_snapshot_rest_agreement_and_requester_disconnect(tmp_path: Path) -> None:
    """A second client subscribing mid-operation gets the pending snapshot; REST
    agrees with the live projection; the requester leaves and the cancel still
    completes."""
    with trio.fail_after(30):
        async with running_server(tmp_path / "data", timeouts=SLOW_CANCEL) as srv, \
                ws_client(srv) as watcher, http(srv) as h:
            task_id = await new_task(watcher)
            async with ws_client(srv) as requester:
                sid = await running_session(requester, task_id, "/slow 3000")
                await requester.send_raw(raw_request("agent.cancel", {"session_id": sid}))
                await requester.wait_for(is_cancellation(sid, True))
            # The requesting page is gone; the operation is not.
            assert sid in srv.sup.orchestrator.operations

            await watcher.call("session.subscribe", {"session_id": sid})
            snap = await watcher.wait_for(lambda f: f["action"] == "session.state_changed")
            assert snap["payload"]["session_id"] == sid
            assert snap["payload"]["new_state"] == "RUNNING"
            assert snap["payload"]["cancellation_pending"] is True
            assert snap["payload"]["cancellation_revision"] == 1
            for dto in await rest_views(h, task_id, sid):
                assert progress(dto) == ("RUNNING", True, 1)

            await watcher.wait_for(is_cancellation(sid, False))
            assert cancellation_changes(watcher, sid) == [(False, 2)]
            await watcher.wait_for(is_state(sid, "WAITING_FOR_INPUT"))
            assert sid not in srv.sup.orchestrator.operations
            for dto in await rest_views(h, task_id, sid):
                assert progress(dto) == ("WAITING_FOR_INPUT", False, 2)
            assert srv.sup.orchestrator.operations_started == 1
            assert srv.sup.orchestrator.settled[-1].outcome is CancelOutcome.ESCALATED
            r = await h.get(f"/api/v1/task-sessions/{sid}/messages")
            assert len(cancelled_status(r.json()["messages"])) == 1


@pytest.mark.parametrize("agent", ["mock", "mock-codex"])
async def test_duplicate_cancels_join_one_operation_and_sessions_stay_independent(
    tmp_path: Path, agent: str,
) -> None:
    with trio.fail_after(30):
        async with running_server(tmp_path / "data", timeouts=SLOW_CANCEL) as srv, \
                ws_client(srv) as a, ws_client(srv) as b, http(srv) as h:
            task_id = await new_task(a)
            other = await running_session(a, task_id, "/delay 10000", agent)
            sid = await running_session(a, task_id, "/slow 3000", agent)
            await b.call("session.subscribe", {"session_id": sid})
            await b.call("session.subscribe", {"session_id": other})
            await b.wait_for(is_state(sid, "RUNNING"))

            results: list[dict[str, Any]] = []

            async def ws_cancel(client: Any) -> None:
                results.append(await client.request("agent.cancel", {"session_id": sid}))

            async def rest_cancel() -> None:
                r = await h.post(f"/api/v1/task-sessions/{sid}/cancel", json={})
                results.append({"type": "response" if r.status_code == 200 else "error",
                                "payload": r.json()})

            async with trio.open_nursery() as nursery:
                for i in range(10):
                    if i == 9:
                        nursery.start_soon(rest_cancel)
                    else:
                        nursery.start_soon(ws_cancel, a if i % 2 else b)
                await a.wait_for(is_cancellation(sid, True))
                # While pending: the other session is untouched.
                for dto in await rest_views(h, task_id, other):
                    assert progress(dto) == ("RUNNING", False, 0)
                for dto in await rest_views(h, task_id, sid):
                    assert progress(dto) == ("RUNNING", True, 1)

            assert len(results) == 10
            for r in results:
                assert r["type"] == "response", r
                assert (r["payload"]["success"], r["payload"]["session_id"]) == (True, sid)
            orch = srv.sup.orchestrator
            assert orch.operations_started == 1
            assert orch.settled[-1].joined == 9
            await b.wait_for(is_cancellation(sid, False))
            for client in (a, b):
                assert cancellation_changes(client, sid) == [(True, 1), (False, 2)]
                assert cancellation_changes(client, other) == []
            messages = (await a.call("message.list", {"session_id": sid}))["messages"]
            assert len(cancelled_status(messages)) == 1

            # The other session still runs, with its own untouched progress.
            for dto in await rest_views(h, task_id, other):
                assert progress(dto) == ("RUNNING", False, 0)
            assert srv.sup.lifecycle.executions[other].turn is not None
            # ... and is cancelled on its own, with its own revisions.
            assert (await a.call("agent.cancel", {"session_id": other}))["success"] is True
            assert cancellation_changes(a, other) == [(True, 1), (False, 2)]
            assert cancellation_changes(a, sid) == [(True, 1), (False, 2)]
            assert orch.operations_started == 2


async def test_rest_cancel_survives_its_client_giving_up(tmp_path: Path) -> None:
    """REST has the same semantics: a client that stops waiting (timeout,
    closed tab) abandons only its wait, never the accepted operation."""
    with trio.fail_after(30):
        async with running_server(tmp_path / "data", timeouts=SLOW_CANCEL) as srv, \
                ws_client(srv) as watcher:
            task_id = await new_task(watcher)
            sid = await running_session(watcher, task_id, "/slow 3000")
            async with http(srv, timeout=0.5) as impatient:
                with pytest.raises(httpx.ReadTimeout):
                    await impatient.post(f"/api/v1/task-sessions/{sid}/cancel",
                                         json={"task_id": task_id})
            assert sid in srv.sup.orchestrator.operations
            await watcher.wait_for(is_cancellation(sid, False))
            await watcher.wait_for(is_state(sid, "WAITING_FOR_INPUT"))
            assert cancellation_changes(watcher, sid) == [(True, 1), (False, 2)]
            assert srv.sup.orchestrator.settled[-1].outcome is CancelOutcome.ESCALATED


async def test_timed_out_cancel_clears_pending_and_is_retryable(tmp_path: Path) -> None:
    """AC 001.6: a cancel that times out publishes `false`, answers CONFLICT, the
    session stays RUNNING, and a retry is a new operation that can succeed."""
    with trio.fail_after(60):
        async with running_server(tmp_path / "data",
                                  timeouts={"cancel_operation_s": 6.0}) as srv, \
                ws_client(srv) as a, ws_client(srv) as b, http(srv) as h:
            task_id = await new_task(a)
            # The agent honours a cancel 15 s into the turn: the first cancel (as
            # soon as the turn streams) times out 6 s later, well before; the retry
            # (14 s after the prompt was sent, so before the agent's 15 s) is
            # answered within its 6 s.  Margins of seconds each way: a loaded
            # machine's delays (the turn's start, its first output) do not eat them.
            sent = trio.current_time()
            sid = await running_session(a, task_id, "/slow 15000")
            answers: list[dict[str, Any]] = []

            async def duplicate() -> None:
                await a.wait_for(is_cancellation(sid, True))
                answers.append(await b.request("agent.cancel", {"session_id": sid}))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(duplicate)
                first = await a.request("agent.cancel", {"session_id": sid})
            assert first["type"] == "error", first
            assert first["payload"]["code"] == "CONFLICT"
            # The duplicate joined the operation and shares its failure.
            assert answers[0]["type"] == "error", answers
            assert answers[0]["payload"] == first["payload"]
            timed_out = srv.sup.orchestrator.settled[-1]
            assert cancellation_changes(a, sid) == [(True, 1), (False, 2)]
            for dto in await rest_views(h, task_id, sid):
                assert progress(dto) == ("RUNNING", False, 2)

            await trio.sleep_until(sent + 14)
            r = await h.post(f"/api/v1/task-sessions/{sid}/cancel")
            assert r.status_code == 200, r.text
            assert (r.json()["success"], r.json()["session_id"]) == (True, sid)
            await a.wait_for(is_revision(sid, 4))
            assert cancellation_changes(a, sid) == [(True, 1), (False, 2), (True, 3), (False, 4)]
            assert srv.sup.orchestrator.operations_started == 2
            # The agent's late end of the first turn did not rewrite the timed-out answer.
            assert timed_out.outcome is None and timed_out.error is not None
            for dto in await rest_views(h, task_id, sid):
                assert progress(dto) == ("WAITING_FOR_INPUT", False, 4)
            messages = (await a.call("message.list", {"session_id": sid}))["messages"]
            assert len(cancelled_status(messages)) == 1


async def test_idle_cancel_is_a_harmless_success(server: Any) -> None:
    with trio.fail_after(20):
        async with ws_client(server) as ws:
            task_id = await new_task(ws)
            sid = await launch(ws, task_id)
            await ws.call("session.subscribe", {"session_id": sid})
            result = await ws.call("agent.cancel", {"session_id": sid, "task_id": task_id})
            assert (result["success"], result["session_id"]) == (True, sid)
            assert cancellation_changes(ws, sid) == [(True, 1), (False, 2)]
            messages = (await ws.call("message.list", {"session_id": sid}))["messages"]
            assert status_messages(messages) == []
            # A task_id that does not own the session: not found, nothing pending.
            other_task = await new_task(ws, "other")
            err = await ws.request("agent.cancel", {"session_id": sid, "task_id": other_task})
            assert err["type"] == "error"
            assert err["payload"]["code"] == "NOT_FOUND"
            assert server.sup.notify.projection.get(sid).pending is False
            assert server.sup.orchestrator.operations_started == 1


async def test_restart_exposes_nothing_pending_and_running_row_is_cancellable(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    with trio.fail_after(40):
        # First server: a cancel is pending when the server stops.
        async with running_server(data, timeouts=SLOW_CANCEL) as srv, ws_client(srv) as ws:
            task_id = await new_task(ws)
            sid = await running_session(ws, task_id, "/slow 3000")
            await ws.send_raw(raw_request("agent.cancel", {"session_id": sid}))
            await ws.wait_for(is_cancellation(sid, True))
            assert sid in srv.sup.orchestrator.operations

        async with running_server(data) as srv, ws_client(srv) as ws, http(srv) as h:
            assert srv.sup.orchestrator.operations == {}
            for dto in await rest_views(h, task_id, sid):
                assert dto["cancellation_pending"] is False
                assert dto["cancellation_revision"] == 0
                assert dto["state"] == "WAITING_FOR_INPUT"
            await ws.call("session.subscribe", {"session_id": sid})
            snap = await ws.wait_for(lambda f: f["action"] == "session.state_changed")
            assert snap["payload"]["cancellation_pending"] is False
            assert snap["payload"]["cancellation_revision"] == 0

            # A row that reads RUNNING (with an open turn) and no agent behind it.
            turn_id = str(uuid.uuid4())

            def write_running() -> None:
                with sqlite3.connect(data / "turnvisor.db", timeout=10) as db:
                    db.execute("INSERT INTO turns (id, session_id, state, stop_reason, "
                               "started_at, ended_at) VALUES (?, ?, 'running', NULL, ?, NULL)",
                               (turn_id, sid, now()))
                    db.execute("UPDATE task_sessions SET state = 'RUNNING', current_turn_id = ?"
                               " WHERE id = ?", (turn_id, sid))
                db.close()

            await trio.to_thread.run_sync(write_running)
            r = await h.get(f"/api/v1/task-sessions/{sid}")
            assert progress(r.json()) == ("RUNNING", False, 0)

            result = await ws.call("agent.cancel", {"session_id": sid})
            assert (result["success"], result["session_id"]) == (True, sid)
            assert cancellation_changes(ws, sid) == [(True, 1), (False, 2)]
            for dto in await rest_views(h, task_id, sid):
                assert progress(dto) == ("WAITING_FOR_INPUT", False, 2)
            messages = (await ws.call("message.list", {"session_id": sid}))["messages"]
            mine = [m for m in cancelled_status(messages) if m["turn_id"] == turn_id]
            assert [m["metadata"] for m in mine] == [CANCELLED_META]
            assert srv.sup.orchestrator.settled[-1].outcome is CancelOutcome.NO_EXECUTION

            # And the session is usable: a new prompt starts a fresh agent.
            await start_turn(ws, sid, "/delay 3000")
            assert (await ws.call("agent.cancel", {"session_id": sid}))["success"] is True
            assert cancellation_changes(ws, sid)[-1] == (False, 4)


async def test_explicit_false_and_zero_everywhere(server: Any) -> None:
    """Every DTO and the first subscribe snapshot carry explicit false/0."""
    def explicit(dto: dict[str, Any]) -> None:
        assert "cancellation_pending" in dto and dto["cancellation_pending"] is False, dto
        assert "cancellation_revision" in dto, dto
        rev = dto["cancellation_revision"]
        assert type(rev) is int and rev == 0, dto

    with trio.fail_after(20):
        async with ws_client(server) as ws, http(server) as h:
            task_id = await new_task(ws)
            launched = await ws.call("session.launch", {"task_id": task_id})
            sid = launched["id"]
            explicit(launched)
            explicit(rows((await ws.call("session.list", {"task_id": task_id}))["sessions"], sid))
            await ws.call("session.subscribe", {"session_id": sid})
            snap = await ws.wait_for(lambda f: f["action"] == "session.state_changed")
            explicit(snap["payload"])
            for dto in await rest_views(h, task_id, sid):
                explicit(dto)
            for path in (f"/api/v1/tasks/{task_id}/sessions", f"/api/v1/task-sessions/{sid}",
                         f"/api/v1/tasks/{task_id}/boot"):
                text = (await h.get(path)).text
                assert '"cancellation_pending": false' in text, text
                assert '"cancellation_revision": 0' in text, text
            # The page's script boots from the same state.
            page = await h.get("/api/v1/boot", params={"task": task_id, "session": sid})
            assert page.status_code == 200
            assert '"cancellation_pending": false' in page.text
            assert '"cancellation_revision": 0' in page.text


@pytest.mark.parametrize("agent", ["mock", "mock-codex"])
async def test_permission_answered_and_cancelled_over_the_api(server: Any, agent: str) -> None:
    with trio.fail_after(30):
        async with ws_client(server) as ws:
            task_id = await new_task(ws)
            sid = await launch(ws, task_id, agent)
            await ws.call("session.subscribe", {"session_id": sid})

            def asked(f: dict[str, Any]) -> bool:
                return (f["action"] == "session.permission.requested"
                        and f["payload"]["session_id"] == sid)

            # Answered: the turn goes on and ends normally.
            await ws.call("message.add", {"session_id": sid, "content": "/permission"})
            req = (await ws.wait_for(asked))["payload"]
            assert req["session_id"] == sid and req["request_id"] and req["options"]
            option = req["options"][0]["option_id"]
            assert await ws.call("permission.respond", {
                "session_id": sid, "request_id": req["request_id"], "option_id": option,
            }) == {"success": True}
            done = await ws.wait_for(is_turn_completed(sid))
            assert done["payload"]["stop_reason"] == "end_turn"
            err = await ws.request("permission.respond", {
                "session_id": sid, "request_id": req["request_id"], "option_id": option})
            assert err["type"] == "error"
            assert err["payload"]["code"] in ("NOT_FOUND", "CONFLICT")

            # Cancelled: the pending request is answered `cancelled` and announced.
            # (Only frames after this prompt: the first request's are kept.)
            mark = len(ws.notifications)
            await ws.call("message.add", {"session_id": sid, "content": "/permission"})
            req2 = (await ws.wait_for(asked, after=mark))["payload"]
            assert (await ws.call("agent.cancel", {"session_id": sid}))["success"] is True
            gone = await ws.wait_for(lambda f: f["action"] == "session.permission.cancelled",
                                     after=mark)
            assert gone["payload"] == {"session_id": sid, "request_id": req2["request_id"]}
            assert cancellation_changes(ws, sid) == [(True, 1), (False, 2)]
            messages = (await ws.call("message.list", {"session_id": sid}))["messages"]
            cards = [m for m in messages if m["kind"] == "permission"]
            assert [c["metadata"]["status"] for c in cards] == ["selected", "cancelled"]
            assert len(cancelled_status(messages)) == 1
            session = (await ws.call("session.list", {"task_id": task_id}))["sessions"][0]
            assert session["state"] == "WAITING_FOR_INPUT"
