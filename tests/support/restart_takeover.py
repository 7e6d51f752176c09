"""A backend restarted mid-turn takes the running turn over (DESIGN.md §20):
the shape the remote executors' restart tests share (tests/kube, tests/ssh).

``run_then_stop`` starts a ``turnvisor serve``, launches a session of a
profile, starts a long turn (``/delay 60000``: the mock agent streams chunks
for a minute), lets it stream, calls the test's ``leave`` (what it plants or
records while that backend runs), then stops the backend with a signal.  The
test restarts it on the same data dir (``server_process``) and checks what
its executor left; ``take_over_and_cancel`` then proves the turn was taken
over, not restarted: the same turn streams on past what it had, a cancel lands
and the turn is recorded cancelled.  ``delete_until`` deletes the session and
waits until the executor's remains are gone.

The profile-changed tests (the same shape: a long turn, the backend killed,
restarted with the same profile, then with a changed one) share
``start_long_turn``, ``killed``, ``restarted_saying_nothing`` and
``said_changed``, and the session readers ``session_dto`` and ``notices``.

Also the turn readers those tests and their neighbours use: ``turn_text``,
``chunks_past``, ``turn_row``.
"""

from __future__ import annotations

import re
import signal
import sqlite3
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import trio

from tests.support.serverproc import ServerProcess, server_process
from tests.support.ws import WsClient, is_state, ws_client
from tests.web.support import new_task

__all__ = ["RunningTurn", "chunks_past", "delete_until", "killed", "notices",
           "restarted_saying_nothing", "run_then_stop", "said_changed", "session_dto",
           "start_long_turn", "take_over_and_cancel", "turn_row", "turn_text"]

T = TypeVar("T")

#: A turn long enough to outlive a restart (the mock agent streams chunks meanwhile).
LONG_TURN = "/delay 60000"


@dataclass(frozen=True, slots=True)
class RunningTurn:
    task_id: str
    sid: str
    turn_id: str
    #: The chunk numbers streamed before the backend was stopped.
    before: list[int]


async def turn_text(ws: WsClient, sid: str, turn_id: str) -> str:
    """The agent's text of one turn, as the store has it."""
    listed = await ws.call("message.list", {"session_id": sid})
    return "".join(m["content"] for m in listed["messages"]
                   if m["turn_id"] == turn_id and m["role"] == "agent" and m["kind"] == "text")


async def chunks_past(ws: WsClient, sid: str, turn_id: str, count: int) -> list[int]:
    """The turn's chunk numbers once it has streamed more than ``count`` of them."""
    with trio.fail_after(40):
        while True:
            numbers = [int(n) for n in re.findall(r"chunk(\d+) ",
                                                  await turn_text(ws, sid, turn_id))]
            if len(set(numbers)) > count:
                return numbers
            await trio.sleep(0.05)


def turn_row(db: Path, turn_id: str) -> tuple[Any, ...]:
    """``(state, stop_reason)`` of a turn, read from the store's file (read-only)."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        row = conn.execute("SELECT state, stop_reason FROM turns WHERE id = ?",
                           (turn_id,)).fetchone()
    conn.close()
    return tuple(row)


async def start_long_turn(ws: WsClient, agent: str, title: str, *,
                          launch_timeout: float = 30) -> RunningTurn:
    """A new task's session of ``agent`` running a long turn (``LONG_TURN``)
    that has streamed a few chunks."""
    task_id = await new_task(ws, title)
    session = await ws.call("session.launch", {"task_id": task_id, "agent": agent},
                            timeout=launch_timeout)
    sid = session["id"]
    turn_id = (await ws.call("message.add", {"session_id": sid,
                                             "content": LONG_TURN}))["turn_id"]
    return RunningTurn(task_id, sid, turn_id, await chunks_past(ws, sid, turn_id, 3))


async def stopped(srv: ServerProcess, signum: signal.Signals) -> None:
    """``srv`` stopped with ``signum`` (bounded)."""
    srv.proc.send_signal(signum)
    with trio.fail_after(30):
        await srv.proc.wait()


async def killed(srv: ServerProcess) -> None:
    await stopped(srv, signal.SIGKILL)


async def run_then_stop(data: Path, toml: str, agent: str, signum: signal.Signals,
                        leave: Callable[[RunningTurn], Awaitable[T]], *,
                        launch_timeout: float = 30) -> tuple[RunningTurn, T]:
    """A backend on ``data`` runs a long turn of ``agent``'s session, ``leave``
    runs, and the backend is stopped with ``signum`` (module doc); the turn and
    what ``leave`` returned."""
    async with server_process(data, toml=toml, log_level="INFO") as srv, \
            ws_client(srv) as ws:
        turn = await start_long_turn(ws, agent, f"{agent} restart",
                                     launch_timeout=launch_timeout)
        left = await leave(turn)
        await stopped(srv, signum)
    return turn, left


async def session_dto(ws: WsClient, task_id: str) -> dict[str, Any]:
    """The task's one session, as ``session.list`` has it."""
    (session,) = (await ws.call("session.list", {"task_id": task_id}))["sessions"]
    return dict(session)


async def notices(ws: WsClient, sid: str) -> list[dict[str, Any]]:
    """The session's profile-changed notices."""
    listed = await ws.call("message.list", {"session_id": sid})
    return [m for m in listed["messages"] if "profile_changed" in m["metadata"]]


async def restarted_saying_nothing(data: Path, toml: str, turn: RunningTurn) -> RunningTurn:
    """A backend restarted on ``data`` with the profile the agent was started
    from re-attaches it: the turn streams on past what it had, and nothing is
    said of a profile change; then it is killed.  The turn with what it streamed."""
    async with server_process(data, toml=toml) as srv, ws_client(srv) as ws:
        seen = await chunks_past(ws, turn.sid, turn.turn_id, max(turn.before) + 2)
        assert (await session_dto(ws, turn.task_id))["profile_changed"] == []
        assert await notices(ws, turn.sid) == []
        await killed(srv)
    return RunningTurn(turn.task_id, turn.sid, turn.turn_id, seen)


async def said_changed(ws: WsClient, turn: RunningTurn, settings: list[str]) -> dict[str, Any]:
    """On a backend restarted with a changed profile: the same turn streams on,
    the session names ``settings`` as what differs (once the re-attach has
    compared them: polled) and still runs that turn, and its transcript holds
    one notice saying so; that notice."""
    await chunks_past(ws, turn.sid, turn.turn_id, max(turn.before) + 2)
    with trio.fail_after(30):
        while not (dto := await session_dto(ws, turn.task_id))["profile_changed"]:
            await trio.sleep(0.05)
    assert dto["profile_changed"] == settings, dto
    assert dto["state"] == "RUNNING" and dto["current_turn_id"] == turn.turn_id, dto
    (notice,) = await notices(ws, turn.sid)
    assert notice["metadata"]["profile_changed"] == settings
    return dict(notice)


async def take_over_and_cancel(srv: ServerProcess, ws: WsClient, turn: RunningTurn) -> None:
    """On the restarted backend: the session is running the same turn, which
    streams on past what it had; a cancel lands and the turn is recorded
    cancelled."""
    sid, turn_id = turn.sid, turn.turn_id
    await ws.call("session.subscribe", {"session_id": sid})
    listed = await ws.call("session.list", {"task_id": turn.task_id})
    assert listed["sessions"][0]["state"] == "RUNNING", listed
    after = await chunks_past(ws, sid, turn_id, max(turn.before) + 5)
    assert sorted(set(after))[: len(set(turn.before))] == sorted(set(turn.before))
    result = await ws.call("agent.cancel", {"session_id": sid}, timeout=30)
    assert (result["success"], result["session_id"]) == (True, sid), result
    await ws.wait_for(is_state(sid, "WAITING_FOR_INPUT"), timeout=30)
    state, stop_reason = await trio.to_thread.run_sync(
        turn_row, srv.data_dir / "turnvisor.db", turn_id)
    assert stop_reason == "cancelled", (state, stop_reason, srv.log_tail(60))


async def delete_until(ws: WsClient, sid: str, gone: Callable[[], bool]) -> None:
    """Delete the session, then wait (bounded) until ``gone()`` says its
    executor's remains are."""
    await ws.call("session.delete", {"session_id": sid}, timeout=30)
    with trio.fail_after(30):
        while not gone():
            await trio.sleep(0.05)
