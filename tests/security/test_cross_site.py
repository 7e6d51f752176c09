"""Cross-site requests are refused (issue 17, item 5; issue 27, item 3).

A page on another port of the same host (a dev server an agent started) is
the same *site*: the browser attaches cookies to its requests.  So no cookie
authenticates anything (a request with the right token as a cookie is 401,
from anywhere); the rule that a state-changing request without a bearer token
must come from our own origin with a JSON body stays as a second fence
(``cross_site_refusal``).  A real browser's cross-port requests:
tests/security/test_cross_port.py."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.support.server import TOKEN, running_server
from web.auth import cross_site_refusal

HOST = "127.0.0.1:8080"
SAME = f"http://{HOST}"


def refusal(method: str = "POST", path: str = "/api/v1/tasks", *,
            authorization: str | None = None, origin: str | None = SAME,
            sec_fetch_site: str | None = None,
            content_type: str | None = "application/json") -> str | None:
    return cross_site_refusal(method=method, path=path, authorization=authorization,
                              origin=origin, sec_fetch_site=sec_fetch_site,
                              content_type=content_type, host=HOST)


def test_the_rule() -> None:
    # Our own pages, JSON: through.
    assert refusal() is None
    assert refusal(content_type="application/json; charset=utf-8") is None
    assert refusal(origin=None, sec_fetch_site="same-origin") is None
    assert refusal(sec_fetch_site="same-origin") is None
    # Another origin, however close to ours.
    for origin in ["http://127.0.0.1:3000", "null", "http://localhost:8080",
                   f"http://{HOST}.evil.example", "https://evil.example", "x", ""]:
        assert refusal(origin=origin) is not None, origin
    # No Origin: only Sec-Fetch-Site same-origin vouches for the request.
    assert refusal(origin=None) is not None
    for site in ["same-site", "cross-site", "none"]:
        assert refusal(origin=None, sec_fetch_site=site) is not None, site
        assert refusal(sec_fetch_site=site) is not None, site
    # Bodies a page can send without a CORS preflight.
    for ctype in ["text/plain", "application/x-www-form-urlencoded",
                  "multipart/form-data; boundary=x", None, "application/jsonx"]:
        assert refusal(content_type=ctype) is not None, ctype
    # Reads change nothing; other paths are not the API; bearer clients unaffected.
    for method in ["GET", "HEAD", "OPTIONS"]:
        assert refusal(method, origin="http://127.0.0.1:3000", content_type=None) is None
    assert refusal(path="/static/app.js", origin="null") is None
    assert refusal(authorization=f"Bearer {TOKEN}", origin="http://127.0.0.1:3000",
                   content_type="text/plain") is None
    assert refusal(authorization=f"bearer {TOKEN}", origin=None, content_type=None) is None
    # Any other Authorization scheme authenticates nothing: the rule applies.
    assert refusal(authorization=f"Basic {TOKEN}", origin="null") is not None
    for method in ["PUT", "PATCH", "DELETE", "post"]:
        assert refusal(method, origin="http://127.0.0.1:3000") is not None, method


COOKIE = {"Cookie": f"turnvisor_token={TOKEN}"}


@pytest.mark.parametrize("headers", [
    # The request of issue 17: another local port, the cookie, text/plain.
    {"Origin": "http://127.0.0.1:3000", "Content-Type": "text/plain"},
    {"Origin": "http://127.0.0.1:3000", "Content-Type": "application/json"},
    {"Content-Type": "application/json"},  # no Origin
    {"Origin": "null", "Content-Type": "application/json"},
    {"Sec-Fetch-Site": "same-site", "Content-Type": "application/json"},
    # Even as our own page would send it: a cookie is no credential.
    {"Origin": "SAME", "Content-Type": "application/json"},
    {"Sec-Fetch-Site": "same-origin", "Content-Type": "application/json"},
])
async def test_cookie_requests_are_unauthenticated(tmp_path: Path,
                                                   headers: dict[str, str]) -> None:
    async with running_server(tmp_path / "data") as srv:
        own = srv.url
        sent = {k: (own if v == "SAME" else v) for k, v in headers.items()} | COOKIE
        async with httpx.AsyncClient(base_url=srv.url) as h:
            r = await h.post("/api/v1/tasks", headers=sent, content=b'{"title": "x"}')
            assert r.status_code == 401, r.text
            assert "access-control-allow-origin" not in r.headers
            r = await h.post("/api/v1/task-sessions/nope/cancel", headers=sent, content=b"{}")
            assert r.status_code == 401, r.text
            r = await h.get("/api/v1/tasks", headers=sent)
            assert r.status_code == 401, r.text
            # The routes of the stop levels and the attachments, the same.
            for path in ("/api/v1/stop-all", "/api/v1/task-sessions/nope/kill-strays"):
                r = await h.post(path, headers=sent, content=b"{}")
                assert r.status_code == 401, (path, r.text)
            r = await h.post("/api/v1/attachments?name=x.png", content=b"\x89PNG",
                             headers=sent | {"Content-Type": "image/png"})
            assert r.status_code == 401, r.text
            for path in ("/api/v1/attachments/nope",
                         "/api/v1/task-sessions/nope/turns/nope/receipt"):
                r = await h.get(path, headers=sent)
                assert r.status_code == 401, (path, r.text)
            assert (await h.get("/api/v1/tasks", headers=srv.auth)).json()["tasks"] == []


async def test_bearer_clients_are_unaffected(tmp_path: Path) -> None:
    async with running_server(tmp_path / "data") as srv, \
            httpx.AsyncClient(base_url=srv.url) as h:
        for extra in [{}, {"Origin": "http://127.0.0.1:3000"}, {"Origin": "null"}]:
            r = await h.post("/api/v1/tasks", headers=srv.auth | extra, json={"title": "b"})
            assert r.status_code == 201, r.text
        r = await h.get("/api/v1/tasks", headers=srv.auth | {"Origin": "http://127.0.0.1:3000"})
        assert r.status_code == 200
