"""The Quart-Trio app: REST under /api/v1 (DESIGN.md §5), /ws, pages, static files.

Handlers are thin: authenticate, validate, one orchestrator call, encode.
Errors are JSON ``{"error": {"code", "message"}}`` with a matching status; no
traceback ever reaches a client.

Before anything: the Host allow-list (web/guard.py, 421 otherwise).  The
pages are one shell with no private data, served without a token; their
script fetches ``/api/v1/boot`` with its token (web/auth.py).  Every response
carries ``nosniff`` and a CSP (the pages their own, everything else
``default-src 'none'``).  ``/static`` serves a snapshot of web/static taken
when the app is made: a file written there later does not exist for it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import mimetypes
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import trio
from quart import Response, request
from quart_trio import QuartTrio
from werkzeug.exceptions import HTTPException, NotFound

from supervisor.errors import SupervisorError
from supervisor.orchestrator import Caller, CancelOperation
from supervisor.root import Supervisor
from supervisor.storage.db import StoreError
from supervisor.turn.tracing import Traced

from .actions import (
    agent_cancel,
    message_list,
    session_delete,
    session_update,
    store_failed,
    task_create,
    task_delete,
    task_list,
    task_update,
)
from .attachment_routes import (
    ATTACHMENTS_PATH,
    add_attachment_routes,
    request_class_for,
    too_large,
)
from .auth import SUBPROTOCOL, Tokens, cross_site_refusal, origin_allowed
from .boot import task_boot, tasks_boot
from .contract_routes import add_contract_routes
from .front import Admitted, Handshake, WsRefusal, WsRoute, ws_max_message
from .gateway import Gateway
from .guard import FailureThrottle, HostCheck
from .listener import close_after_refusals
from .pages import NOT_FOUND_BODY, agent_availability, html_error_page
from .queue_routes import add_queue_routes
from .stop_actions import add_stop_routes
from .validate import BadInput

__all__ = ["create_app"]

log = logging.getLogger(__name__)

WEB_DIR: Final = Path(__file__).parent
STATUS: Final = {
    "BAD_REQUEST": 400, "VALIDATION_ERROR": 422, "UNAUTHORIZED": 401, "FORBIDDEN": 403,
    "NOT_FOUND": 404, "CONFLICT": 409, "UNKNOWN_ACTION": 404, "INTERNAL_ERROR": 500,
}
#: The CSP of the app's page: its own scripts and styles, nothing else.
PAGE_CSP: Final = (
    "default-src 'self'; connect-src 'self'; img-src 'self' data:; style-src 'self'; "
    "script-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'")
#: Everything else (API answers, static files, errors): nothing may run or load.
DEFAULT_CSP: Final = "default-src 'none'; frame-ancestors 'none'"


@dataclass(frozen=True)
class StaticFile:
    body: bytes
    content_type: str
    etag: str


def static_snapshot(root: Path) -> dict[str, StaticFile]:
    """Every file under ``root`` by its path relative to it ("vendor/x.js")."""
    files: dict[str, StaticFile] = {}
    for path in sorted(root.rglob("*")):
        if not path.is_file() or path.name.startswith("."):
            continue
        body = path.read_bytes()
        kind = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        if kind.startswith("text/") or kind in ("application/javascript", "image/svg+xml"):
            kind += "; charset=utf-8"
        etag = hashlib.sha256(body).hexdigest()[:32]
        files[path.relative_to(root).as_posix()] = StaticFile(body, kind, etag)
    return files


def _error(code: str, message: str, status: int | None = None) -> Response:
    body = json.dumps({"error": {"code": code, "message": message}})
    return Response(body, status=status or STATUS.get(code, 500),
                    content_type="application/json")


def _json(data: Any, status: int = 200) -> Response:
    return Response(json.dumps(data), status=status, content_type="application/json")


def cancel_stages(traced: Traced[CancelOperation], clock_offset_s: float) -> dict[str, Any]:
    """One settled cancel operation for the diagnostics endpoint: its marks as
    milliseconds after ``received``, and ``received`` itself on the host's
    monotonic clock (``clock_offset_s``: that clock minus Trio's), which a
    client on this machine reads too: its own send and receive times then
    bound the time outside the server on either side."""
    op, marks = traced.op, traced.marks
    start = marks.get("received", 0.0)
    return {
        "received_s": round(start + clock_offset_s, 6),
        "marks_ms": {name: round((t - start) * 1000, 3) for name, t in marks.items()},
        "joined": op.joined,
        "outcome": op.outcome.value if op.outcome is not None else None,
        "error": op.error.code if op.error is not None else None,
    }


def create_app(sup: Supervisor, tokens: Tokens, *, bound_host: str = "127.0.0.1",
               throttle: FailureThrottle | None = None) -> QuartTrio:
    """``bound_host``: the address the server listens on (for the Host check)."""
    app = QuartTrio("turnvisor", static_folder=None)
    app.config["MAX_CONTENT_LENGTH"] = sup.config.limits.max_body_bytes
    app.request_class = request_class_for(sup.config.limits)
    close_after_refusals(app)
    gateway = Gateway(sup)
    app.extensions["turnvisor"] = {"supervisor": sup, "gateway": gateway}
    workspaces: dict[str, Caller] = {}
    shell = (WEB_DIR / "templates" / "app.html").read_text()
    static_files = static_snapshot(WEB_DIR / "static")
    hosts = HostCheck(bound_host, sup.config.allowed_hosts)
    failures = throttle if throttle is not None else FailureThrottle(
        limit=sup.config.limits.auth_failures_per_peer,
        window_s=sup.config.timeouts.auth_failure_window_s)
    app.extensions["turnvisor"]["throttle"] = failures

    async def caller_for(name: str) -> Caller:
        if name not in workspaces:
            workspaces[name] = await sup.caller(name)
        return workspaces[name]

    async def current_caller() -> Caller | None:
        name = tokens.resolve(request.headers.get("Authorization"))
        return await caller_for(name) if name else None

    def throttled(peer: str) -> float | None:
        return failures.retry_after(peer, trio.current_time())

    def auth_failed(peer: str, path: str) -> None:
        # The peer and the path, never what was offered.
        if failures.failed(peer, trio.current_time()):
            log.warning("authentication failed from %s on %s: too many failures, refusing "
                        "it for %.0f s", peer, path, failures.window_s)
        elif throttled(peer) is None:
            log.warning("authentication failed from %s on %s", peer, path)

    def too_many(retry: float) -> Response:
        resp = _error("TOO_MANY_REQUESTS", "too many failed authentications; try again later",
                      429)
        resp.headers["Retry-After"] = str(max(1, int(retry + 0.999)))
        return resp

    async def body() -> dict[str, Any]:
        # Bytes: a body that is not UTF-8 is bad JSON (UnicodeDecodeError is a
        # ValueError), not a server error; nesting too deep is too.
        raw = await request.get_data()
        if not raw.strip():
            return {}
        try:
            data = json.loads(raw)
        except (ValueError, RecursionError):
            raise BadInput("BAD_REQUEST", "body is not valid JSON") from None
        if not isinstance(data, dict):
            raise BadInput("BAD_REQUEST", "body must be a JSON object")
        return data

    # -- errors ---------------------------------------------------------------

    @app.errorhandler(BadInput)
    async def on_bad_input(exc: BadInput) -> Response:
        return _error(exc.code, exc.message)

    @app.errorhandler(SupervisorError)
    async def on_supervisor_error(exc: SupervisorError) -> Response:
        return _error(exc.code, str(exc))

    @app.errorhandler(StoreError)
    async def on_store_error(exc: StoreError) -> Response:
        log.warning("request %s: %s", request.path, exc)
        return _error("INTERNAL_ERROR", store_failed(exc))

    @app.errorhandler(sqlite3.Error)
    async def on_sqlite_error(exc: sqlite3.Error) -> Response:
        log.warning("request %s: %s", request.path, exc)
        return _error("INTERNAL_ERROR", store_failed(exc))

    @app.errorhandler(HTTPException)
    async def on_http(exc: HTTPException) -> Response:
        if exc.code == 404 and is_page_path(request.path):
            return not_found_page()
        code = {400: "BAD_REQUEST", 401: "UNAUTHORIZED", 403: "FORBIDDEN", 404: "NOT_FOUND",
                413: "BAD_REQUEST"}.get(exc.code or 500, "BAD_REQUEST")
        message = exc.description or exc.name
        if exc.code == 413:
            message = (too_large(sup.config.limits) if request.path == ATTACHMENTS_PATH else
                       f"request body larger than {sup.config.limits.max_body_bytes} bytes "
                       "(the server's [limits] max_body_bytes)")
        resp = _error(code, message, exc.code)
        if exc.code == 413:
            # The body was refused unread: the connection cannot carry another
            # request (Hypercorn closes it), so tell the client not to reuse it.
            resp.headers["Connection"] = "close"
        return resp

    @app.errorhandler(Exception)
    async def on_exception(exc: Exception) -> Response:
        log.exception("request failed")
        return _error("INTERNAL_ERROR", "internal error")

    def is_page_path(path: str) -> bool:
        """A path a person opens in the browser: errors there are HTML pages, not JSON."""
        # "/api" itself counts: a client resolving "/api/v1/.." asks for it.
        return not (path.startswith(("/api/", "/static/", "/ws")) or path in ("/api", "/static"))

    def not_found_page() -> Response:
        return html_error_page(404, "Page not found", NOT_FOUND_BODY)

    # -- REST -----------------------------------------------------------------

    @app.before_request
    async def require_token() -> Response | None:
        refused_host = hosts.refusal(request.headers.get("Host"))
        if refused_host is not None:
            resp = _error("MISDIRECTED", refused_host, 421)
            resp.headers["Connection"] = "close"
            return resp
        path = request.path
        # The right token always passes: the throttle refuses only further
        # wrong ones, so a page on another local port (same peer address)
        # that sends bad tokens cannot lock the user out.
        if (path.startswith("/api/") and path != "/api/v1/health"
                and await current_caller() is None):
            peer = request.remote_addr or "?"
            retry = throttled(peer)
            if retry is not None:
                return too_many(retry)
            auth_failed(peer, path)
            return _error("UNAUTHORIZED",
                          "a valid token is required (Authorization: Bearer)")
        # A cross-site page holding the user's cookie gets nothing done, whichever
        # endpoint it aims at (today's or one added later).
        refusal = cross_site_refusal(
            method=request.method, path=path,
            authorization=request.headers.get("Authorization"),
            origin=request.headers.get("Origin"),
            sec_fetch_site=request.headers.get("Sec-Fetch-Site"),
            content_type=request.headers.get("Content-Type"), host=request.headers.get("Host"))
        if refusal is not None:
            return _error("FORBIDDEN", refusal)
        return None

    @app.after_request
    async def fence(resp: Response) -> Response:
        resp.headers["X-Content-Type-Options"] = "nosniff"
        resp.headers.setdefault("Content-Security-Policy", DEFAULT_CSP)
        return resp

    async def me() -> Caller:
        caller = await current_caller()
        assert caller is not None  # require_token ran
        return caller

    @app.get("/api/v1/health")
    async def health() -> Response:
        return _json({"status": "ok"})

    @app.get("/api/v1/tasks")
    async def tasks() -> Response:
        return _json(await task_list(sup, await me(), {}))

    @app.post("/api/v1/tasks")
    async def create_task() -> Response:
        return _json(await task_create(sup, await me(), await body()), 201)

    @app.patch("/api/v1/tasks/<task_id>")
    async def update_task(task_id: str) -> Response:
        return _json(await task_update(sup, await me(), await body() | {"task_id": task_id}))

    @app.delete("/api/v1/tasks/<task_id>")
    async def delete_task(task_id: str) -> Response:
        return _json(await task_delete(sup, await me(), {"task_id": task_id}))

    @app.get("/api/v1/tasks/<task_id>/sessions")
    async def sessions(task_id: str) -> Response:
        return _json({"sessions": await sup.orchestrator.list_sessions(await me(), task_id)})

    @app.get("/api/v1/tasks/<task_id>/boot")
    async def boot(task_id: str) -> Response:
        return _json(await task_boot(sup, await me(), task_id, request.args.get("session")))

    @app.get("/api/v1/task-sessions/<session_id>")
    async def session(session_id: str) -> Response:
        s = await sup.orchestrator.session(await me(), session_id)
        return _json(sup.notify.session_dto(s))

    @app.patch("/api/v1/task-sessions/<session_id>")
    async def update_session(session_id: str) -> Response:
        payload = await body() | {"session_id": session_id}
        return _json(await session_update(sup, await me(), payload))

    @app.delete("/api/v1/task-sessions/<session_id>")
    async def delete_session(session_id: str) -> Response:
        return _json(await session_delete(sup, await me(), {"session_id": session_id}))

    @app.get("/api/v1/task-sessions/<session_id>/messages")
    async def messages(session_id: str) -> Response:
        payload: dict[str, Any] = {"session_id": session_id}
        if "limit" in request.args:
            try:
                payload["limit"] = int(request.args["limit"])
            except ValueError:
                raise BadInput("VALIDATION_ERROR", "limit must be an integer") from None
        if "before" in request.args:
            payload["before"] = request.args["before"]
        return _json(await message_list(sup, await me(), payload))

    @app.post("/api/v1/task-sessions/<session_id>/cancel")
    async def cancel(session_id: str) -> Response:
        data = await body()
        payload = {"session_id": session_id, "task_id": data.get("task_id"),
                   "turn_id": data.get("turn_id"), "when": data.get("when", "now")}
        return _json(await agent_cancel(sup, await me(), payload))

    add_queue_routes(app, sup, me, body)
    add_attachment_routes(app, sup, me)
    add_stop_routes(app, sup, me)
    add_contract_routes(app, sup, me)

    # -- diagnostics (not in DESIGN §5; read by bench/cancel_latency.py) -------

    @app.get("/api/v1/debug/cancel-stages")
    async def debug_cancel_stages() -> Response:
        """The stage marks of the session's last settled cancel operations."""
        session_id = request.args.get("session_id", "")
        if not session_id:
            raise BadInput("VALIDATION_ERROR", "session_id is required")
        await sup.orchestrator.session(await me(), session_id)  # another workspace: not found
        try:
            limit = min(max(int(request.args.get("limit", "50")), 1), 256)
        except ValueError:
            raise BadInput("VALIDATION_ERROR", "limit must be an integer") from None
        trace = sup.orchestrator.cancellations.settler.trace
        if trace is None:
            raise BadInput("CONFLICT", "cancel tracing is off: set [server] trace_cancels = "
                           "true in turnvisor.toml to record stage marks")
        ops = [t for t in trace.settled if t.op.session_id == session_id]
        # Trio's clock is the monotonic clock plus a per-process offset; on Linux
        # time.perf_counter reads that monotonic clock (CLOCK_MONOTONIC).
        offset = time.perf_counter() - trio.current_time()
        return _json({"session_id": session_id,
                      "operations": [cancel_stages(op, offset) for op in ops[-limit:]]})

    # -- pages ----------------------------------------------------------------

    @app.get("/api/v1/boot")
    async def page_boot() -> Response:
        """What a page hydrates from, in one request: the task list's, or with
        ``task`` (and ``session``) the task page's; which profiles can start
        here, for the picker, in both."""
        caller = await me()
        task_id = request.args.get("task")
        state = (await task_boot(sup, caller, task_id, request.args.get("session"))
                 if task_id else await tasks_boot(sup, caller))
        return _json(state | {"agent_availability": agent_availability(sup.config.profiles)})

    def page() -> Response:
        # The shell: no data, no token; the script asks /api/v1/boot with its own.
        resp = Response(shell, content_type="text/html; charset=utf-8")
        resp.headers["Cache-Control"] = "no-store"
        resp.headers["Content-Security-Policy"] = PAGE_CSP
        return resp

    @app.get("/")
    async def index() -> Response:
        return page()

    @app.get("/tasks/<task_id>")
    async def task_page(task_id: str) -> Response:
        return page()

    @app.get("/static/<path:filename>")
    async def static(filename: str) -> Response:
        found = static_files.get(filename)
        if found is None:
            raise NotFound()
        if request.headers.get("If-None-Match") == f'"{found.etag}"':
            resp = Response(b"", status=304)
        else:
            resp = Response(found.body, content_type=found.content_type)
        resp.headers["ETag"] = f'"{found.etag}"'
        resp.headers["Cache-Control"] = "no-cache"
        return resp

    # -- WebSocket ------------------------------------------------------------

    async def ws_admission(hs: Handshake) -> Admitted | WsRefusal:
        """Who may open /ws: the caller, or the refusal (the upgrade is
        web.front's, on a fresh connection or a reused one)."""
        refused_host = hosts.refusal(hs.host)
        if refused_host is not None:
            return WsRefusal(421, refused_host)
        if not origin_allowed(hs.origin, hs.host):
            return WsRefusal(403, "forbidden origin")
        name = tokens.resolve(hs.authorization, hs.subprotocols)
        if name is None:
            retry = throttled(hs.peer)
            if retry is not None:
                return WsRefusal(429, "too many failed authentications",
                                 (("retry-after", str(max(1, int(retry + 0.999)))),))
            auth_failed(hs.peer, "/ws")
            return WsRefusal(401, "unauthorized")
        # Select the plain subprotocol if offered (a browser requires one of
        # its offers back); the one carrying the token is never echoed.
        chosen = SUBPROTOCOL if SUBPROTOCOL in hs.subprotocols else None
        return Admitted(await caller_for(name), chosen)

    app.extensions["turnvisor"]["ws_route"] = WsRoute(
        path="/ws", admit=ws_admission, gateway=gateway,
        max_message=ws_max_message(sup.config))

    return app
