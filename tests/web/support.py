"""Shared pieces of the web tests: an httpx client on a running server, and
helpers that drive a session into a running turn and read its notifications."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import httpx
import trio
from wsproto.events import TextMessage

from supervisor.orchestrator import Caller
from tests.support.server import Server
from tests.support.serverproc import ServerProcess
from tests.support.ws import WsClient, is_agent_output, is_state
from web.gateway import Gateway

from .test_wsconn import Client, socket_pair

#: Short cancel bounds: a `/slow` turn keeps its cancel operation pending for
#: about ``cancel_escalate_s`` (long enough to observe), then it is escalated.
SLOW_CANCEL = {"cancel_join_s": 0.3, "cancel_escalate_s": 1.5, "cancel_cleanup_s": 1.0}


@asynccontextmanager
async def http(server: Server | ServerProcess, token: str | None = None,
               **kwargs: Any) -> AsyncIterator[httpx.AsyncClient]:
    headers = {"Authorization": f"Bearer {token or server.token}"}
    kwargs.setdefault("timeout", 15)
    async with httpx.AsyncClient(base_url=server.url, headers=headers, **kwargs) as client:
        yield client


def frame_ok(frame: dict[str, Any]) -> dict[str, Any]:
    assert frame["type"] == "response", frame
    return frame["payload"]


async def new_task(ws: WsClient, title: str = "web test") -> str:
    task = await ws.call("task.create", {"title": title})
    return str(task["id"])


async def launch(ws: WsClient, task_id: str, agent: str = "mock") -> str:
    session = await ws.call("session.launch", {"task_id": task_id, "agent": agent})
    assert session["state"] == "WAITING_FOR_INPUT", session
    return str(session["id"])


async def start_turn(ws: WsClient, session_id: str, prompt: str) -> None:
    """Send a prompt on a session ``ws`` is subscribed to and wait until the
    agent is streaming its answer (so the turn is really running).  Only frames
    after the prompt count: an earlier turn's, still kept, would match at once."""
    mark = len(ws.notifications)
    await ws.call("message.add", {"session_id": session_id, "content": prompt})
    await ws.wait_for(is_state(session_id, "RUNNING"), after=mark)
    await ws.wait_for(is_agent_output(session_id), after=mark)


async def running_session(ws: WsClient, task_id: str, prompt: str = "/delay 5000",
                          agent: str = "mock") -> str:
    sid = await launch(ws, task_id, agent)
    await ws.call("session.subscribe", {"session_id": sid})
    await start_turn(ws, sid, prompt)
    return sid


def cancellation_changes(ws: WsClient, session_id: str) -> list[tuple[bool, int]]:
    return [(p["cancellation_pending"], p["cancellation_revision"])
            for p in ws.of("session.cancellation_changed", session_id)]


def raw_request(action: str, payload: Any, rid: str = "raw-1") -> str:
    return json.dumps({"id": rid, "type": "request", "action": action, "payload": payload,
                       "timestamp": "2026-01-01T00:00:00Z"})


def assert_no_traceback(text: str) -> None:
    assert "Traceback" not in text, text[:2000]
    assert 'File "' not in text, text[:2000]


def is_revision(session_id: str, revision: int) -> Any:
    return lambda f: (f["action"] == "session.cancellation_changed"
                      and f["payload"]["session_id"] == session_id
                      and f["payload"]["cancellation_revision"] == revision)


#: What a spied ``ServerWebSocket`` wrote, one list of frames per socket write.
Writes = list[list[str | bytes]]


@asynccontextmanager
async def spied_gateway(srv: Server, caller: Caller) -> AsyncIterator[tuple[Client, Writes]]:
    """A ``Gateway`` serving ``caller`` on one end of a socket pair, and the
    wsproto client on the other; every write the server's end makes is
    recorded (frames in the same list left in one write), so a test can say
    which frames went out together."""
    writes: Writes = []
    async with socket_pair() as (ws, client):
        write_now, send_many = ws.write_now, ws.send_many

        def spied_now(frames: Sequence[str | bytes]) -> bytes | None:
            rest = write_now(frames)
            if rest is not None:  # None: declined, the frames go through send_many
                writes.append(list(frames))
            return rest

        async def spied_many(frames: Sequence[str | bytes]) -> None:
            writes.append(list(frames))
            await send_many(frames)

        ws.write_now = spied_now  # type: ignore[method-assign]
        ws.send_many = spied_many  # type: ignore[method-assign]
        async with trio.open_nursery() as nursery:
            nursery.start_soon(Gateway(srv.sup).serve, ws, caller)
            yield client, writes
            nursery.cancel_scope.cancel()


async def send_request(client: Client, rid: str, action: str, payload: dict[str, Any]) -> None:
    await client.send(TextMessage(raw_request(action, payload, rid)))


async def frames_until(client: Client, until: str) -> list[dict[str, Any]]:
    """Frames read until the answer with id ``until``."""
    out: list[dict[str, Any]] = []
    while not any(f.get("id") == until for f in out):
        for event in await client.events(1):
            assert isinstance(event, TextMessage)
            out.append(json.loads(event.data))
    return out


def write_of(writes: Writes, rid: str) -> list[str | bytes]:
    """The one write that carried the answer with id ``rid``."""
    (one,) = [w for w in writes if any(isinstance(f, str) and f'"id":"{rid}"' in f for f in w)]
    return one


def wrote(write: list[str | bytes], text: str) -> bool:
    """Whether a frame of ``write`` holds ``text``."""
    return any(isinstance(f, str) and text in f for f in write)
