"""``GET /api/v1/attachments/<id>`` (DESIGN.md §19): the file again, with its
mime, for the caller's workspace only; never rendered as a page of the origin
(nosniff; a non-image as a download)."""

from __future__ import annotations

from pathlib import Path

import httpx
import trio

from tests.support.server import OTHER_TOKEN, running_server

from .support import http

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256))
HTML = b"<html><script>alert(1)</script></html>"


async def test_download_is_the_callers_and_safe(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with running_server(tmp_path / "data", workspaces={"b": OTHER_TOKEN}) as srv:
            async with http(srv) as h:
                img = (await h.post("/api/v1/attachments", params={"name": "shot.png"},
                                    content=PNG, headers={"Content-Type": "image/png"})).json()
                page = (await h.post("/api/v1/attachments", params={"name": "x \"y\".html"},
                                     content=HTML, headers={"Content-Type": "text/html"})).json()
                r = await h.get(f"/api/v1/attachments/{img['attachment_id']}")
                assert r.status_code == 200
                assert r.content == PNG
                assert r.headers["content-type"] == "image/png"
                assert r.headers["x-content-type-options"] == "nosniff"
                assert "content-disposition" not in r.headers

                r = await h.get(f"/api/v1/attachments/{page['attachment_id']}")
                assert r.status_code == 200
                assert r.content == HTML
                assert r.headers["content-type"].startswith("text/html")
                assert r.headers["x-content-type-options"] == "nosniff"
                assert r.headers["content-disposition"] == (
                    "attachment; filename*=UTF-8''x%20%22y%22.html")

                r = await h.get("/api/v1/attachments/no-such-id")
                assert r.status_code == 404
                assert r.json()["error"]["code"] == "NOT_FOUND"

            # Another workspace: as if there were none.
            async with http(srv, OTHER_TOKEN) as h:
                r = await h.get(f"/api/v1/attachments/{img['attachment_id']}")
                assert r.status_code == 404
                assert r.json()["error"]["code"] == "NOT_FOUND"
            async with httpx.AsyncClient(base_url=srv.url) as anon:
                r = await anon.get(f"/api/v1/attachments/{img['attachment_id']}")
                assert r.status_code == 401
