"""Property: whatever a client sends to the HTTP side — any method, path,
query, body and content type — the answer is a 2xx/3xx/4xx, never a 5xx or a
traceback, and under ``/api/`` errors are the JSON ``{"error": {code, message}}``
with the code that matches the status.  One real server serves the whole
property (Hypothesis in a worker thread, as in test_ws_fuzz.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from supervisor.config import Limits
from tests.support.server import running_server
from tests.support.ws import ws_client

from .profiles import PHASES, examples
from .test_ws_fuzz import texts, values

BODY_LIMIT = 16 * 1024
STATUS_CODE = {400: {"BAD_REQUEST"}, 401: {"UNAUTHORIZED"}, 403: {"FORBIDDEN"},
               404: {"NOT_FOUND", "UNKNOWN_ACTION"}, 405: {"BAD_REQUEST"},
               409: {"CONFLICT"}, 413: {"BAD_REQUEST"},
               422: {"VALIDATION_ERROR"}}
ROUTES = [
    ("GET", "/api/v1/health"), ("GET", "/api/v1/tasks"), ("POST", "/api/v1/tasks"),
    ("GET", "/api/v1/tasks/{t}/sessions"), ("GET", "/api/v1/tasks/{t}/boot"),
    ("GET", "/api/v1/task-sessions/{s}"), ("GET", "/api/v1/task-sessions/{s}/messages"),
    ("POST", "/api/v1/task-sessions/{s}/cancel"), ("GET", "/api/v1/debug/cancel-stages"),
    ("GET", "/"), ("GET", "/tasks/{t}"), ("GET", "/static/{f}"), ("GET", "/api/v1/{f}"),
    # Renames only: a fuzzed DELETE would take the session the final check reads.
    ("PATCH", "/api/v1/tasks/{t}"), ("PATCH", "/api/v1/task-sessions/{s}"),
]
CONTENT_TYPES = ["application/json", "text/plain", "application/x-www-form-urlencoded",
                 "multipart/form-data; boundary=zz", "application/json; charset=latin-1", ""]


def requests(task_id: str, session_id: str) -> st.SearchStrategy[dict[str, Any]]:
    segment = (st.sampled_from([task_id, session_id, "..", ".", "%2e%2e", "app.py",
                                "../app.py", "state.js", "x" * 300])
               | texts.map(lambda t: quote(t.encode("utf-8", "surrogatepass"), safe="")))
    query = st.dictionaries(
        st.sampled_from(["limit", "before", "session", "session_id", "token", "x"]) | texts,
        st.integers(-3, 3000).map(str) | texts | st.sampled_from([session_id, task_id]),
        max_size=4)
    body = st.one_of(
        st.none(), st.binary(max_size=300),
        values.map(lambda v: json.dumps(v).encode()),
        st.sampled_from([b"[" * 5000 + b"]" * 5000, b'{"title": "\xff\xfe"}',
                         b'{"title": "x\\ud800"}', b"\xef\xbb\xbf{}", b'{"title": 1e999}']),
        st.fixed_dictionaries({}, optional={"title": texts | values, "task_id": texts | values})
        .map(lambda v: json.dumps(v).encode()),
        st.integers(BODY_LIMIT - 20, BODY_LIMIT * 3).map(
            lambda n: json.dumps({"title": "x" * n}).encode()),
    )
    return st.fixed_dictionaries({
        "route": st.sampled_from(ROUTES),
        "method": st.none() | st.sampled_from(["GET", "POST", "PUT", "DELETE", "PATCH",
                                               "OPTIONS", "HEAD"]),
        "segment": segment, "query": query, "body": body,
        "content_type": st.sampled_from(CONTENT_TYPES)
        | st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1,
                  max_size=40),
    })


def _query_string(query: dict[str, str]) -> str:
    return "&".join(f"{quote(k.encode('utf-8', 'surrogatepass'), safe='')}="
                    f"{quote(v.encode('utf-8', 'surrogatepass'), safe='')}"
                    for k, v in query.items())


class Checker:
    def __init__(self, client: httpx.AsyncClient, token: str) -> None:
        self.client = client
        self.token = token
        self.sent = 0

    async def check(self, req: dict[str, Any]) -> None:
        method, template = req["route"]
        method = req["method"] or method
        path = template.format(t=req["segment"], s=req["segment"], f=req["segment"])
        qs = _query_string(req["query"])
        url = path + (f"?{qs}" if qs else "")
        headers = {"Content-Type": req["content_type"]} if req["content_type"] else {}
        r = await self.client.request(method, url, content=req["body"], headers=headers)
        where = (method, url[:200], (req["body"] or b"")[:100], r.status_code, r.text[:300])
        assert r.status_code < 500, where
        assert "Traceback" not in r.text and 'File "' not in r.text, where
        if r.status_code >= 400 and path.startswith("/api/") and method != "HEAD":
            assert r.headers["content-type"].startswith("application/json"), where
            err = r.json()["error"]
            assert err["code"] in STATUS_CODE.get(r.status_code, set()), where
            assert isinstance(err["message"], str) and err["message"], where
        self.sent += 1


async def test_every_request_gets_a_clean_answer(tmp_path: Path) -> None:
    # The failed-auth throttle (tests/security/test_web_fences.py) kept out of the way: the
    # fuzzer sends many requests without a valid token on purpose.
    limits = Limits(max_body_bytes=BODY_LIMIT, auth_failures_per_peer=10**6)
    async with running_server(tmp_path / "data", limits=limits) as srv:
        async with ws_client(srv) as ws:
            task_id = (await ws.call("task.create", {"title": "fuzzed"}))["id"]
            sid = (await ws.call("session.launch", {"task_id": task_id}))["id"]
        # Half the clients carry the token, half do not (401s must be as clean).
        async with httpx.AsyncClient(base_url=srv.url, headers=srv.auth, timeout=20) as authed, \
                httpx.AsyncClient(base_url=srv.url, timeout=20) as anonymous:
            checkers = [Checker(authed, srv.token), Checker(anonymous, srv.token)]
            token = trio.lowlevel.current_trio_token()

            strategy = requests(task_id, sid)
            strategy.validate()  # here, not lazily in the worker thread

            @settings(max_examples=examples(1.5), suppress_health_check=[HealthCheck.too_slow],
                      phases=PHASES)
            @given(req=strategy, authed=st.booleans())
            def every_request(req: dict[str, Any], authed: bool) -> None:
                checker = checkers[0 if authed else 1]
                trio.from_thread.run(checker.check, req, trio_token=token)

            await trio.to_thread.run_sync(every_request)
            assert sum(c.sent for c in checkers) >= examples(1.5) // 2
            assert (await authed.get("/api/v1/health")).json() == {"status": "ok"}
            dto = (await authed.get(f"/api/v1/task-sessions/{sid}")).json()
            assert dto["state"] == "WAITING_FOR_INPUT" and dto["cancellation_pending"] is False
            assert not srv.sup.orchestrator.operations

