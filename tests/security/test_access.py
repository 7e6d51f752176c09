"""Who gets in (issue 8, item 3), route by route and action by action.

The routes are read from the app itself, so a route added without a case here
fails ``test_every_route_is_covered``.  Each is tried without a token, with
wrong tokens (and wrong ways of presenting the right one), with another
workspace's token and with guessed ids; every WebSocket action likewise.  No
answer to an outsider may carry a byte of the workspace's data.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import httpx
import trio

from supervisor.config import Limits
from tests.support.server import OTHER_TOKEN, TOKEN, Server, running_server
from tests.support.ws import WsClient, ws_client
from web.actions import ACTIONS
from web.app import create_app
from web.auth import Tokens

SECRET = "secret title of workspace A"
BAD_TOKENS = [
    "", "not-the-token-0123456789abcdef-0123456789", TOKEN[:-1], TOKEN + "x", TOKEN.upper(),
    TOKEN[:8], " " + TOKEN + " x", OTHER_TOKEN[::-1], "null", "undefined",
]

#: Every route of the app: (method, rule) → who may use it.
ROUTES: dict[tuple[str, str], str] = {
    ("GET", "/api/v1/health"): "public",
    ("GET", "/api/v1/tasks"): "api-list",
    ("POST", "/api/v1/tasks"): "api-create",
    ("PATCH", "/api/v1/tasks/<task_id>"): "api-task",
    ("DELETE", "/api/v1/tasks/<task_id>"): "api-task",
    ("GET", "/api/v1/tasks/<task_id>/sessions"): "api-task",
    ("GET", "/api/v1/tasks/<task_id>/boot"): "api-task",
    ("GET", "/api/v1/task-sessions/<session_id>"): "api-session",
    ("PATCH", "/api/v1/task-sessions/<session_id>"): "api-session",
    ("DELETE", "/api/v1/task-sessions/<session_id>"): "api-session",
    ("GET", "/api/v1/task-sessions/<session_id>/messages"): "api-session",
    ("POST", "/api/v1/task-sessions/<session_id>/cancel"): "api-session",
    ("GET", "/api/v1/task-sessions/<session_id>/queue"): "api-session",
    ("POST", "/api/v1/task-sessions/<session_id>/queue"): "api-session",
    ("POST", "/api/v1/task-sessions/<session_id>/queue/auto_run"): "api-session",
    ("PATCH", "/api/v1/task-sessions/<session_id>/queue/<entry_id>"): "api-session",
    ("DELETE", "/api/v1/task-sessions/<session_id>/queue/<entry_id>"): "api-session",
    ("POST", "/api/v1/task-sessions/<session_id>/queue/<entry_id>/move"): "api-session",
    ("POST", "/api/v1/task-sessions/<session_id>/queue/<entry_id>/send_now"): "api-session",
    ("GET", "/api/v1/task-sessions/<session_id>/turns/<turn_id>/receipt"): "api-session",
    ("POST", "/api/v1/task-sessions/<session_id>/kill-strays"): "api-session",
    # The caller's own workspace's turns (another's are never touched: the WS check below).
    ("POST", "/api/v1/stop-all"): "api-list",
    # An upload is the caller's workspace's; reading one back, another's id is not found
    # (tests/web/test_attachment_download.py holds a real upload of A read by B).
    ("POST", "/api/v1/attachments"): "api-create",
    ("GET", "/api/v1/attachments/<attachment_id>"): "api-session",
    ("GET", "/api/v1/debug/cancel-stages"): "api-session-query",
    ("GET", "/api/v1/boot"): "api-task-query",
    # The contract: the same for every token (no workspace's data in it).
    ("GET", "/api/v1/schema"): "api-list",
    ("GET", "/api/v1/info"): "api-list",
    # The pages are a shell without data (their script fetches /api/v1/boot).
    ("GET", "/"): "page",
    ("GET", "/tasks/<task_id>"): "page",
    ("GET", "/static/<path:filename>"): "static",
    ("GET", "/ws"): "websocket",
}


def app_routes(srv: Server) -> set[tuple[str, str]]:
    app = create_app(srv.sup, Tokens({"default": TOKEN}))
    out = set()
    for rule in app.url_map.iter_rules():
        for method in rule.methods or ():
            if method not in ("HEAD", "OPTIONS"):
                out.add((method, rule.rule))
    # The WebSocket is no Quart route: web.front serves its upgrades.
    out.add(("GET", app.extensions["turnvisor"]["ws_route"].path))
    return out


def url(rule: str, task_id: str, sid: str) -> str:
    path = rule.replace("<task_id>", task_id).replace("<session_id>", sid)
    # (A turn of that session: the session decides, whatever the turn.)
    path = path.replace("<turn_id>", task_id)
    path = path.replace("<attachment_id>", sid)  # an id that is no upload of anyone's
    path = path.replace("<entry_id>", sid)  # an id that is no entry of anyone's
    path = path.replace("<path:filename>", "app.js")
    if rule == "/api/v1/debug/cancel-stages":
        path += f"?session_id={sid}"
    if rule == "/api/v1/boot":
        path += f"?task={task_id}&session={sid}"
    return path


def leaks(text: str, ids: list[str]) -> list[str]:
    found = [x for x in [SECRET, TOKEN, *ids] if x and x in text]
    if "Traceback" in text or 'File "' in text:
        found.append("traceback")
    return found


async def workspace_a(srv: Server) -> tuple[str, str, WsClient, Any]:
    ctx = ws_client(srv)
    ws = await ctx.__aenter__()
    task_id = (await ws.call("task.create", {"title": SECRET}))["id"]
    sid = (await ws.call("session.launch", {"task_id": task_id}))["id"]
    await ws.call("session.subscribe", {"session_id": sid})
    await ws.call("message.add", {"session_id": sid, "content": "secret words of A"})
    with trio.fail_after(10):
        await ws.wait_for(lambda f: f["action"] == "session.turn.completed")
    return task_id, sid, ws, ctx


async def upgrade_status(srv: Server, headers: list[tuple[str, str]], query: str = "") -> int:
    """Status of a raw WebSocket upgrade (httpx: no socket left half-open)."""
    upgrade = [("Connection", "Upgrade"), ("Upgrade", "websocket"),
               ("Sec-WebSocket-Version", "13"), ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")]
    async with httpx.AsyncClient() as h:
        r = await h.get(srv.url + "/ws" + query, headers=[*upgrade, *headers])
    assert not leaks(r.text, []), r.text
    return r.status_code


async def test_every_route_is_covered(tmp_path: Path) -> None:
    async with running_server(tmp_path / "data") as srv:
        assert app_routes(srv) == set(ROUTES), (
            "a route without a security case", app_routes(srv) ^ set(ROUTES))


async def test_no_token_and_wrong_tokens_open_nothing(tmp_path: Path) -> None:
    with trio.fail_after(60):
        # Hundreds of failures from one peer: the throttle (tests/security/
        # test_web_fences.py) would answer 429 long before the end.
        async with running_server(tmp_path / "data",
                                  limits=Limits(auth_failures_per_peer=10**6)) as srv:
            task_id, sid, ws_a, ctx = await workspace_a(srv)
            try:
                ids = [task_id, sid]
                presentations: list[dict[str, str]] = [{}]
                for bad in BAD_TOKENS:
                    presentations += [{"Authorization": f"Bearer {bad}".strip()},
                                      {"Cookie": f"turnvisor_token={bad}"}]
                # The right token, presented wrongly, is no token.
                presentations += [{"Authorization": TOKEN}, {"Authorization": f"Basic {TOKEN}"},
                                  {"Authorization": f"Token {TOKEN}"},
                                  {"X-Token": TOKEN}, {"Cookie": f"token={TOKEN}"}]
                async with httpx.AsyncClient(base_url=srv.url) as h:
                    for headers in presentations:
                        for (method, rule), kind in ROUTES.items():
                            path = url(rule, task_id, sid)
                            if kind == "page":
                                r = await h.request(method, path, headers=headers)
                                assert r.status_code == 200 and not leaks(r.text, ids), path
                                continue
                            if kind in ("public", "static", "websocket"):
                                continue
                            r = await h.request(method, path, headers=headers,
                                                json={"title": "intruder"})
                            assert r.status_code == 401, (headers, method, path, r.text)
                            assert not leaks(r.text, ids), (headers, path, r.text)
                            assert "set-cookie" not in r.headers
                            assert "access-control-allow-origin" not in r.headers
                        # ?token= is for pages only, once; never for the API.
                        r = await h.get(f"/api/v1/task-sessions/{sid}?token={TOKEN}",
                                        headers=headers)
                        assert r.status_code == 401
                    for bad in BAD_TOKENS:
                        r = await h.get("/", params={"token": bad})
                        assert r.status_code == 200 and "set-cookie" not in r.headers
                        assert not leaks(r.text, ids)
                        assert await upgrade_status(
                            srv, [("Authorization", f"Bearer {bad}".strip())]) \
                            == 401
                        assert await upgrade_status(srv, [], f"?token={bad}") == 401
                        assert await upgrade_status(
                            srv, [("Cookie", f"turnvisor_token={bad}")]) == 401
                    assert await upgrade_status(srv, []) == 401
                    # Public: health, and the static files of the UI (no data in them).
                    assert (await h.get("/api/v1/health")).status_code == 200
                    r = await h.get("/static/app.js")
                    assert r.status_code in (200, 404)
                    assert not leaks(r.text, ids)
                # Nothing the refused requests asked for happened.
                titles = [t["title"] for t in (await ws_a.call("task.list"))["tasks"]]
                assert titles == [SECRET]
                assert srv.sup.orchestrator.operations_started == 0
            finally:
                await ctx.__aexit__(None, None, None)


GUESSES = [str(uuid.UUID(int=0)), str(uuid.uuid4()), "1", "0", "-1", "*", "%", "_", "..",
           "' OR '1'='1", '" OR 1=1 --', "%25", "null", "[]", "{}"]


async def test_another_workspace_and_guessed_ids_find_nothing(tmp_path: Path) -> None:
    """Workspace B, with its own valid token: every route and every action on
    A's ids, and on guessed ids, is NOT_FOUND (or a validation error); B's
    lists hold only B's things; no frame of A's sessions reaches B."""
    with trio.fail_after(90):
        async with running_server(tmp_path / "data", workspaces={"b": OTHER_TOKEN}) as srv:
            task_id, sid, ws_a, ctx = await workspace_a(srv)
            try:
                ids = [task_id, sid]
                variants = [task_id.upper(), task_id[:-1], sid[:8], sid + " ", f" {sid}"]
                async with httpx.AsyncClient(
                        base_url=srv.url, headers={"Authorization": f"Bearer {OTHER_TOKEN}"}
                ) as hb, ws_client(srv, token=OTHER_TOKEN) as b:
                    for (method, rule), kind in ROUTES.items():
                        if kind in ("public", "static", "websocket", "api-list",
                                    "api-create", "page"):
                            continue
                        # A's real ids answer exactly like ids that exist nowhere:
                        # no oracle telling B which ids are real.
                        nowhere = str(uuid.uuid4())
                        r_real = await hb.request(method, url(rule, task_id, sid))
                        r_none = await hb.request(method, url(rule, nowhere, nowhere))
                        assert r_real.status_code == r_none.status_code == 404, (
                            rule, r_real.text)
                        assert (r_real.text.replace(task_id, "ID").replace(sid, "ID")
                                == r_none.text.replace(nowhere, "ID")), (rule, r_real.text)
                        assert SECRET not in r_real.text and "Traceback" not in r_real.text
                        for task, session in [*((g, g) for g in GUESSES),
                                              *((v, v) for v in variants)]:
                            path = url(rule, quote_id(task), quote_id(session))
                            r = await hb.request(method, path)
                            assert r.status_code in (404, 422, 405), (method, path, r.text)
                            echoed = r.text.replace(task, "ID").replace(session, "ID")
                            assert not leaks(echoed, ids), (path, r.text)
                    listed = (await hb.get("/api/v1/tasks")).json()["tasks"]
                    assert listed == []
                    page = await hb.get("/")
                    assert page.status_code == 200 and not leaks(page.text, ids)
                    r = await hb.get(f"/api/v1/tasks/{task_id}/boot", params={"session": sid})
                    assert r.status_code == 404

                    own = (await b.call("task.create", {"title": "B's own"}))["id"]
                    for action in [*ACTIONS, "session.subscribe", "session.unsubscribe"]:
                        for task, session in [(task_id, sid), *((g, g) for g in GUESSES)]:
                            payload = {"task_id": task, "session_id": session,
                                       "title": "from B", "content": "from B",
                                       "request_id": "r", "option_id": "allow"}
                            reply = await b.request(action, payload)
                            text = json.dumps(reply).replace(task, "ID").replace(session, "ID")
                            assert not leaks(text, ids), (action, reply)
                            if action in ("task.create", "task.list", "ping",
                                          "session.unsubscribe", "server.info",
                                          "project.list", "project.browse",
                                          "workspace.stop_all"):
                                assert reply["type"] == "response", (action, reply)
                            else:
                                assert reply["type"] == "error", (action, payload, reply)
                                assert reply["payload"]["code"] in (
                                    "NOT_FOUND", "VALIDATION_ERROR"), (action, reply)
                    # B's "from B" tasks are B's; A still has exactly its own.
                    b_titles = {t["title"] for t in (await b.call("task.list"))["tasks"]}
                    assert SECRET not in b_titles and "B's own" in b_titles
                    a_tasks = (await ws_a.call("task.list"))["tasks"]
                    assert [t["title"] for t in a_tasks] == [SECRET]
                    a_msgs = (await ws_a.call("message.list", {"session_id": sid}))["messages"]
                    assert all("from B" not in m["content"] for m in a_msgs)
                    assert srv.sup.orchestrator.operations_started == 0
                    # A's session is busy now; B hears nothing of it.
                    await ws_a.call("message.add", {"session_id": sid, "content": "/delay 500"})
                    await ws_a.call("agent.cancel", {"session_id": sid})
                    await b.call("session.list", {"task_id": own})
                    for frame in b.notifications:
                        assert not leaks(json.dumps(frame), ids), frame
                    assert srv.sup.bus.subscriber_count(sid) == 1
            finally:
                await ctx.__aexit__(None, None, None)


def quote_id(value: str) -> str:
    from urllib.parse import quote

    return quote(value, safe="").replace(".", "%2E")  # or httpx resolves "/tasks/.."


async def test_foreign_origins_cannot_open_the_websocket(tmp_path: Path) -> None:
    """Cross-site WebSocket hijacking: a page elsewhere, with the victim's
    cookie attached by the browser, is refused (403); so are look-alikes."""
    async with running_server(tmp_path / "data") as srv:
        host = srv.url.removeprefix("http://")
        port = host.rsplit(":", 1)[1]
        cookie = ("Cookie", f"turnvisor_token={TOKEN}")
        for origin in ["http://evil.example", f"http://{host}.evil.example",
                       f"http://evil.example/{host}", f"http://{host}@evil.example",
                       f"http://evil.example#{host}", "null", "file://",
                       f"http://localhost:{port}", f"http://127.0.0.2:{port}",
                       f"http://{host.rsplit(':', 1)[0]}:1", "http://[::1]:" + port, "x"]:
            for auth in (cookie, ("Authorization", f"Bearer {TOKEN}")):
                status = await upgrade_status(srv, [auth, ("Origin", origin)])
                assert status == 403, (origin, auth[0], status)
        # The server's own pages: accepted.
        async with ws_client(srv, headers=[("Origin", f"http://{host}")]) as ws:
            assert await ws.call("ping") == {}


APP_SOURCE = (Path(__file__).resolve().parents[2] / "web" / "app.py").read_text()
THIS_FILE = str(Path(__file__).resolve())


async def test_static_files_cannot_leave_their_folder(tmp_path: Path) -> None:
    source = APP_SOURCE
    marker = "def create_app"
    attempts = [
        "/static/../app.py", "/static/..%2fapp.py", "/static/%2e%2e/app.py",
        "/static/%2e%2e%2fapp.py", "/static/%252e%252e%252fapp.py", "/static/....//app.py",
        "/static/..\\app.py", "/static/..%5capp.py", "/static/%2e%2e%5capp.py",
        "/static//work/main/web/app.py", "/static/" + THIS_FILE,
        "/static/%2fetc%2fpasswd", "/static/../../../../etc/passwd",
        "/static/..%2f..%2f..%2f..%2fetc%2fpasswd", "/static/%c0%ae%c0%ae/app.py",
        "/static/app.js%00.py", "/static/./../templates/app.html", "/static/.",
        "/static/..", "/static/%2e%2e", "/static/~root/.bashrc",
    ]
    async with running_server(tmp_path / "data") as srv, \
            httpx.AsyncClient(base_url=srv.url, headers=srv.auth) as h:
        for path in attempts:
            # httpx would normalise "..": send the raw target.
            r = await h.request("GET", httpx.URL(srv.url + "/").copy_with(raw_path=path.encode()))
            if r.status_code in (301, 302, 307, 308):  # "//" merged: still under /static/
                location = r.headers["location"].removeprefix(srv.url)
                assert location.startswith("/static/"), (path, location)
                r = await h.get(location)
            if r.status_code == 200:
                # "/static/.." is resolved as a URL ("/"), as a browser would: the
                # app's own page, never a file from outside web/static.
                assert 'src="/static/app.js"' in r.text, (path, r.text[:200])
            else:
                assert r.status_code in (400, 404), (path, r.status_code, r.text[:200])
            assert marker not in r.text and "root:" not in r.text, path
            assert "__BOOT_STATE__" not in r.text, path
            assert not leaks(r.text, []), (path, r.text[:200])
        assert marker in source  # the marker would be seen if app.py were served
