"""agentctl's Quart-Trio app: thin routes over ``AgentHost``.

Every route but ``GET /api/v1/health`` needs ``Authorization: Bearer <token>``
(or the same in ``X-Turnvisor-Agentctl-Token``, for a relay that takes
``Authorization`` for itself; compared in constant time, never logged: the
access log is off).  Browsers are not clients: a WebSocket upgrade carrying
an ``Origin`` is refused.
Answers are JSON; a refusal is ``{"success": false, "error": ...}`` with the
status ``HostError`` chose, and no traceback ever reaches a client.

    POST /api/v1/session       {cwd?, owner?, replace?, mcp_servers?}
                               → {session_id, attached, turn_id, seq, prompt_capabilities}
    POST /api/v1/session/option {option_id, value, session_id?} → {applied: now|next_turn}
    POST /api/v1/prompt        {text, session_id?, turn_id?, abandon_turn?, parts?}
                                                             → 202 {turn_id, seq}

``mcp_servers`` and ``parts`` are protocols/agentctl_parts.py's JSON (checked here: a bad
one is a 422 naming it).  The prompt's body may be up to ``MAX_PROMPT_BYTES`` (its images,
base64); every other body up to ``MAX_BODY_BYTES``.
    POST /api/v1/acp/cancel    {session_id?, turn_id?, join_s?, resend?} → see AgentHost.cancel
    POST /api/v1/acp/subagent_cancel {subagent_id, session_id?} → {success, sent, state}
    POST /api/v1/permission    {request_id, option_id|null, session_id?} → {success}
    GET  /api/v1/agent/strays                                → see strays.py
    POST /api/v1/agent/strays/kill {grace_s?, only?}         → see strays.py
    GET  /api/v1/status                                      → AgentHost.status()
    GET  /api/v1/health                                      → {status: "ok"}
    WS   /api/v1/events?after=SEQ&owner=O                    → protocols/agentctl_wire.py frames

The event stream is read too: a client's ``Cancel`` frame is the route's
cancel without an HTTP request (``join_s`` 0, written in the reading step when
the agent's pipe takes it at once, else by one task per turn that repeats of
the frame join), answered on the stream in order with the
events (``CancelWritten``/``CancelFailed``; ``FrameRefused`` for a bad frame).
"""

from __future__ import annotations

import hmac
import json
import logging
import math
from typing import Any, Final

import trio
from quart import Response, request, websocket
from quart_trio import QuartTrio
from werkzeug.exceptions import HTTPException

from protocols.agentctl_parts import MAX_PROMPT_BYTES, mcp_from_json, parts_from_json
from protocols.agentctl_wire import (
    CLOSE_FELL_BEHIND,
    CLOSE_GOING_AWAY,
    REQUEST_TYPES,
    TOKEN_HEADER,
    CancelRequest,
    WireError,
    cancel_reply,
    decode_request,
    refusal_frame,
)

from ..listener import close_after_refusals
from .host import AgentHost, HostError, Subscriber, valid_turn_id
from .strays import MAX_GRACE_S, agent_strays, end_agent_strays, parse_only

__all__ = ["create_app"]

log = logging.getLogger(__name__)

#: A subscriber whose socket does not take a frame for this long is dropped.
SEND_TIMEOUT_S: Final = 10.0
#: An idle event stream sends a Heartbeat this often.
HEARTBEAT_S: Final = 5.0
MAX_BODY_BYTES: Final = 4 * 1024 * 1024


def _json(data: Any, status: int = 200) -> Response:
    return Response(json.dumps(data), status=status, content_type="application/json")


def _refuse(status: int, error: str) -> Response:
    return _json({"success": False, "error": error}, status)


def _bearer(value: str | None) -> str | None:
    if value and value[:7].lower() == "bearer ":
        return value[7:].strip()
    return None


def create_app(host: AgentHost, token: str, *, heartbeat_s: float = HEARTBEAT_S) -> QuartTrio:
    app = QuartTrio("turnvisor-agentctl", static_folder=None)
    # The largest body, the prompt's; ``body`` holds every other route to MAX_BODY_BYTES.
    app.config["MAX_CONTENT_LENGTH"] = MAX_PROMPT_BYTES
    close_after_refusals(app)
    known = token.encode()

    def authorized(*headers: str | None) -> bool:
        # Either header may carry it (TOKEN_HEADER: behind a relay that consumes
        # Authorization, or sees its own credential there).
        return any((given := _bearer(h)) is not None
                   and hmac.compare_digest(known, given.encode()) for h in headers)

    async def body(limit: int = MAX_BODY_BYTES) -> dict[str, Any]:
        if (request.content_length or 0) > limit:
            raise HostError(413, f"request body larger than {limit} bytes")
        raw = await request.get_data(as_text=True)
        if len(raw) > limit:
            raise HostError(413, f"request body larger than {limit} bytes")
        if not raw.strip():
            return {}
        try:
            data = json.loads(raw)
        except ValueError:
            raise HostError(400, "body is not valid JSON") from None
        if not isinstance(data, dict):
            raise HostError(400, "body must be a JSON object")
        return data

    def opt_str(data: dict[str, Any], key: str) -> str | None:
        value = data.get(key)
        if value is not None and not isinstance(value, str):
            raise HostError(422, f"{key} must be a string")
        return value

    @app.errorhandler(HostError)
    async def on_host_error(exc: HostError) -> Response:
        return _json(exc.body, exc.status)

    @app.errorhandler(HTTPException)
    async def on_http(exc: HTTPException) -> Response:
        if exc.code == 413:
            return _refuse(413, f"request body larger than {MAX_PROMPT_BYTES} bytes")
        return _refuse(exc.code or 400, exc.description or exc.name)

    @app.errorhandler(Exception)
    async def on_exception(exc: Exception) -> Response:
        log.exception("request failed")
        return _refuse(500, "internal error")

    @app.before_request
    async def require_token() -> Response | None:
        if request.path != "/api/v1/health" and not authorized(
                request.headers.get("Authorization"), request.headers.get(TOKEN_HEADER)):
            return _refuse(401, "a valid token is required (Authorization: Bearer)")
        return None

    @app.get("/api/v1/health")
    async def health() -> Response:
        return _json({"status": "ok"})

    @app.get("/api/v1/status")
    async def status() -> Response:
        return _json(host.status())

    @app.post("/api/v1/session")
    async def session() -> Response:
        data = await body()
        replace = data.get("replace", False)
        if not isinstance(replace, bool):
            raise HostError(422, "replace must be a boolean")
        try:
            servers = mcp_from_json(data.get("mcp_servers"))
        except ValueError as exc:
            raise HostError(422, str(exc)) from None
        return _json(await host.start_session(cwd=opt_str(data, "cwd"),
                                              owner=opt_str(data, "owner"), replace=replace,
                                              mcp_servers=servers))

    @app.post("/api/v1/session/option")
    async def session_option() -> Response:
        data = await body()
        option_id, value = data.get("option_id"), data.get("value")
        if not isinstance(option_id, str) or not option_id:
            raise HostError(422, "option_id is required and must be a string")
        if not isinstance(value, str):
            raise HostError(422, "value is required and must be a string")
        return _json(await host.set_option(option_id, value,
                                           session_id=opt_str(data, "session_id")))

    @app.post("/api/v1/prompt")
    async def prompt() -> Response:
        data = await body(MAX_PROMPT_BYTES)
        text = data.get("text")
        if not isinstance(text, str):
            raise HostError(422, "text is required and must be a string")
        try:
            parts = parts_from_json(data.get("parts"))
        except ValueError as exc:
            raise HostError(422, str(exc)) from None
        turn_id = opt_str(data, "turn_id")
        if turn_id is not None and not valid_turn_id(turn_id):
            raise HostError(422, "turn_id must be 1-128 printable characters")
        return _json(await host.prompt(text, session_id=opt_str(data, "session_id"),
                                       turn_id=turn_id, abandon=opt_str(data, "abandon_turn"),
                                       parts=parts),
                     202)

    @app.post("/api/v1/acp/cancel")
    async def cancel() -> Response:
        data = await body()
        join = data.get("join_s")
        if join is not None and (isinstance(join, bool) or not isinstance(join, int | float)
                                 or not math.isfinite(join) or join < 0):
            raise HostError(422, "join_s must be a number >= 0")
        resend = data.get("resend", False)
        if not isinstance(resend, bool):
            raise HostError(422, "resend must be a boolean")
        result = await host.cancel(session_id=opt_str(data, "session_id"),
                                   join_s=None if join is None else float(join), resend=resend,
                                   turn_id=opt_str(data, "turn_id"))
        return _json(result, 202 if result.get("not_acknowledged") else 200)

    @app.post("/api/v1/acp/subagent_cancel")
    async def subagent_cancel() -> Response:
        data = await body()
        subagent_id = data.get("subagent_id")
        if not isinstance(subagent_id, str) or not subagent_id:
            raise HostError(422, "subagent_id is required and must be a string")
        return _json(await host.cancel_subagent(subagent_id,
                                                session_id=opt_str(data, "session_id")))

    @app.post("/api/v1/permission")
    async def permission() -> Response:
        data = await body()
        request_id = data.get("request_id")
        if not isinstance(request_id, str):
            raise HostError(422, "request_id is required and must be a string")
        return _json(await host.respond_permission(
            request_id, opt_str(data, "option_id"), session_id=opt_str(data, "session_id")))

    @app.get("/api/v1/agent/strays")
    async def strays() -> Response:
        return _json(await agent_strays(host))

    @app.post("/api/v1/agent/strays/kill")
    async def kill_strays() -> Response:
        data = await body()
        try:
            only = parse_only(data.get("only"))
        except ValueError as exc:
            raise HostError(422, str(exc)) from None
        grace = data.get("grace_s")
        if grace is None:
            return _json(await end_agent_strays(host, only=only))
        if (isinstance(grace, bool) or not isinstance(grace, int | float)
                or not math.isfinite(grace) or not 0 <= grace <= MAX_GRACE_S):
            raise HostError(422, f"grace_s must be a number from 0 to {MAX_GRACE_S:g}")
        return _json(await end_agent_strays(host, float(grace), only))

    @app.websocket("/api/v1/events")
    async def events() -> Response | None:
        if websocket.headers.get("Origin") is not None:
            return Response("agentctl does not serve browsers", 403)
        if not authorized(websocket.headers.get("Authorization"),
                          websocket.headers.get(TOKEN_HEADER)):
            return Response("unauthorized", 401)
        after: int | None = None
        if "after" in websocket.args:
            try:
                after = int(websocket.args["after"])
            except ValueError:
                return Response("after must be an integer", 400)
        sub, backlog, gap = host.log.subscribe(after, owner=websocket.args.get("owner"))
        try:
            await websocket.accept()
            await _stream(sub, backlog, gap, host, heartbeat_s)
        finally:
            host.log.drop(sub, "subscriber left")
        return None

    return app


async def _stream(sub: Subscriber, backlog: list[str], gap: tuple[int, int] | None,
                  host: AgentHost, heartbeat_s: float) -> None:
    """The connection: its writer, and a reader of the client's frames beside it
    (in this handler's nursery; it answers through the writer's queue)."""
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_read_requests, sub, host, nursery)
        await _write(sub, backlog, gap, host, heartbeat_s)
        nursery.cancel_scope.cancel()


def _answer(sub: Subscriber, host: AgentHost, data: str) -> None:
    """An answer queued for the writer, after the log entries already queued
    (so in order with them); one with no room is dropped like a log entry."""
    try:
        sub.send.send_nowait(data)
    except trio.WouldBlock:
        host.log.drop(sub, f"subscriber fell behind: more than {host.log.buffer} frames "
                           f"queued; reconnect with ?after={sub.last_seq}")
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass  # the connection is ending: its client learns it from the close


async def _read_requests(sub: Subscriber, host: AgentHost, nursery: trio.Nursery) -> None:
    """The client's frames until the connection ends.  A ``Cancel`` is written in
    this step when it can be (``AgentHost.cancel_at_once``), else by
    ``AgentHost.cancel`` in a task of its own (so the next frame is read): one
    per turn at a time — a repeat of that frame while it runs joins it and is
    answered with it, so a client repeating frames makes no more tasks."""
    #: Per cancel written later (turn, session): how many frames await its answer.
    later: dict[tuple[str, str | None], int] = {}
    while True:
        message = await websocket.receive()
        try:
            req = decode_request(message)
        except WireError as exc:
            _answer(sub, host, refusal_frame(str(exc)))
            continue
        key = (req.turn_id, req.session_id)
        if key in later:
            later[key] += 1
            continue
        try:
            written = host.cancel_at_once(session_id=req.session_id, turn_id=req.turn_id)
        except HostError as exc:
            _answer(sub, host, cancel_reply(req.turn_id, error=_host_error(exc)))
            continue
        except Exception:
            # As the routes' own handler does: logged, answered, and the
            # stream (the client's link) lives on.
            log.exception("the Cancel frame of turn %s failed", req.turn_id)
            _answer(sub, host, cancel_reply(req.turn_id, error="internal error"))
            continue
        if written is None:
            _answer(sub, host, cancel_reply(req.turn_id, running=False))
        elif written:
            _answer(sub, host, cancel_reply(req.turn_id))
        else:
            later[key] = 1
            nursery.start_soon(_cancel_later, sub, host, req, later)


async def _cancel_later(sub: Subscriber, host: AgentHost, req: CancelRequest,
                        later: dict[tuple[str, str | None], int]) -> None:
    """The cancel ``cancel_at_once`` could not write; its answer goes to every
    frame that waits on it (``later``)."""
    try:
        result = await host.cancel(session_id=req.session_id, join_s=0, turn_id=req.turn_id)
        reply = cancel_reply(req.turn_id, running=bool(result.get("turn_running")))
    except HostError as exc:
        reply = cancel_reply(req.turn_id, error=_host_error(exc))
    except Exception:
        log.exception("the Cancel frame of turn %s failed", req.turn_id)
        reply = cancel_reply(req.turn_id, error="internal error")
    for _ in range(later.pop((req.turn_id, req.session_id), 1)):
        _answer(sub, host, reply)


def _host_error(exc: HostError) -> str:
    detail = exc.body.get("detail")
    return str(exc) + (f": {detail}" if detail else "")


async def _write(sub: Subscriber, backlog: list[str], gap: tuple[int, int] | None,
                 host: AgentHost, heartbeat_s: float) -> None:
    """The subscriber's only writer: Hello, Gap, backlog, then live frames and
    answers; a Heartbeat after ``heartbeat_s`` of silence; the close reason at the end."""

    async def send(data: str) -> bool:
        with trio.move_on_after(SEND_TIMEOUT_S):
            await websocket.send(data)
            return True
        host.log.drop(sub, f"subscriber did not take a frame for {SEND_TIMEOUT_S:g}s")
        return False

    hello = {"type": "Hello", "last_seq": host.log.last_seq, "oldest_seq": host.log.oldest_seq,
             "status": host.status(), "accepts": list(REQUEST_TYPES)}
    if not await send(json.dumps(hello)):
        return
    if gap is not None and not await send(json.dumps(
            {"type": "Gap", "from": gap[0], "to": gap[1]})):
        return
    for data in backlog:
        if not await send(data):
            return
    while True:
        with trio.move_on_after(heartbeat_s) as idle:
            try:
                data = await sub.receive.receive()
            except trio.EndOfChannel:
                break
        if idle.cancelled_caught:
            data = json.dumps({"type": "Heartbeat", "last_seq": host.log.last_seq})
        if not await send(data):
            break
    reason = sub.dropped or "closed"
    code = CLOSE_FELL_BEHIND if reason.startswith("subscriber") else CLOSE_GOING_AWAY
    with trio.move_on_after(SEND_TIMEOUT_S):
        await websocket.close(code, reason[:120])
