"""Cross-site requests are refused (issue 17, item 5).

A page on another port of the same host (a dev server an agent started) is
the same *site*: the browser attaches the ``SameSite=Strict`` cookie to its
requests.  A state-changing REST request authenticated by that cookie must
come from Turnvisor's own origin, with a JSON body; bearer clients are not
concerned."""

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
    # Any other Authorization scheme does not authenticate: the cookie does.
    assert refusal(authorization=f"Basic {TOKEN}", origin="null") is not None
    for method in ["PUT", "PATCH", "DELETE", "post"]:
        assert refusal(method, origin="http://127.0.0.1:3000") is not None, method


COOKIE = {"Cookie": f"turnvisor_token={TOKEN}"}


@pytest.mark.parametrize(("headers", "body", "expected"), [
    # The request of the issue: another local port, the cookie, text/plain.
    ({"Origin": "http://127.0.0.1:3000", "Content-Type": "text/plain"},
     b'{"title": "x"}', 403),
    ({"Origin": "http://127.0.0.1:3000", "Content-Type": "application/json"},
     b'{"title": "x"}', 403),
    ({"Content-Type": "application/json"}, b'{"title": "x"}', 403),  # no Origin
    ({"Origin": "null", "Content-Type": "application/json"}, b'{"title": "x"}', 403),
    ({"Origin": "SAME", "Content-Type": "application/x-www-form-urlencoded"},
     b"title=x", 403),
    ({"Origin": "SAME", "Content-Type": "text/plain"}, b'{"title": "x"}', 403),
    ({"Sec-Fetch-Site": "same-site", "Content-Type": "application/json"},
     b'{"title": "x"}', 403),
    # Our own page: through.
    ({"Origin": "SAME", "Content-Type": "application/json"}, b'{"title": "x"}', 201),
    ({"Sec-Fetch-Site": "same-origin", "Content-Type": "application/json"},
     b'{"title": "x"}', 201),
])
async def test_cookie_requests(tmp_path: Path, headers: dict[str, str], body: bytes,
                               expected: int) -> None:
    async with running_server(tmp_path / "data") as srv:
        own = srv.url
        sent = {k: (own if v == "SAME" else v) for k, v in headers.items()} | COOKIE
        async with httpx.AsyncClient(base_url=srv.url) as h:
            before = len((await h.get("/api/v1/tasks", headers=srv.auth)).json()["tasks"])
            r = await h.post("/api/v1/tasks", headers=sent, content=body)
            assert r.status_code == expected, r.text
            after = len((await h.get("/api/v1/tasks", headers=srv.auth)).json()["tasks"])
            assert after == before + (1 if expected == 201 else 0)
            if expected == 403:
                assert r.json()["error"]["code"] == "FORBIDDEN"
                assert "access-control-allow-origin" not in r.headers
            # The cancel endpoint (and any later one) is under the same rule.
            r = await h.post("/api/v1/task-sessions/nope/cancel", headers=sent, content=body)
            assert r.status_code == (403 if expected == 403 else 404), r.text


async def test_bearer_clients_are_unaffected(tmp_path: Path) -> None:
    async with running_server(tmp_path / "data") as srv, \
            httpx.AsyncClient(base_url=srv.url) as h:
        for extra in [{}, {"Origin": "http://127.0.0.1:3000"}, {"Origin": "null"}]:
            r = await h.post("/api/v1/tasks", headers=srv.auth | extra, json={"title": "b"})
            assert r.status_code == 201, r.text
        # Reads with the cookie from anywhere are still reads (no state change).
        r = await h.get("/api/v1/tasks", headers=COOKIE | {"Origin": "http://127.0.0.1:3000"})
        assert r.status_code == 200
