"""``POST /api/v1/attachments`` (DESIGN.md §19): the upload, its cap, its types,
its file (by sha256, 0600 in a 0700 directory), its workspace."""

from __future__ import annotations

import hashlib
import stat
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import trio

from supervisor.config import Limits
from supervisor.errors import NotFound
from tests.support.server import OTHER_TOKEN, Server, running_server
from web.attachment_routes import attachment_store

from .support import http

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def test_upload_stores_by_hash_privately_and_dedups(server: Server) -> None:
    with trio.fail_after(30):
        async with http(server) as h:
            r = await h.post("/api/v1/attachments", params={"name": "shot.png"}, content=PNG,
                             headers={"Content-Type": "image/png"})
            assert r.status_code == 201, r.text
            first = r.json()
            assert set(first) == {"attachment_id", "name", "mime", "size"}
            assert (first["name"], first["mime"], first["size"]) == ("shot.png", "image/png",
                                                                     len(PNG))
            folder = server.data_dir / "attachments"
            sha = hashlib.sha256(PNG).hexdigest()
            assert _mode(folder) == 0o700
            assert _mode(folder / sha) == 0o600
            assert (folder / sha).read_bytes() == PNG

            # The same content again: a row of its own, the one file.
            r = await h.post("/api/v1/attachments", params={"name": "again.png"}, content=PNG,
                             headers={"Content-Type": "image/png"})
            assert r.status_code == 201
            assert r.json()["attachment_id"] != first["attachment_id"]
            assert sorted(p.name for p in folder.iterdir()) == [sha]

            # text/* with its charset (the type is the media type); no name: one is made.
            r = await h.post("/api/v1/attachments", content="héllo\n".encode(),
                             headers={"Content-Type": "text/plain; charset=utf-8"})
            assert r.status_code == 201
            assert r.json()["mime"] == "text/plain"
            assert r.json()["name"] == "attachment.plain"
            # A name cannot be a path.
            r = await h.post("/api/v1/attachments", params={"name": "../../etc/x.pdf"},
                             content=b"%PDF-1.4", headers={"Content-Type": "application/pdf"})
            assert r.status_code == 201
            assert "/" not in r.json()["name"]

            # Refused, each in one line: a type no agent is given, an empty body.
            for ctype, body in (("application/zip", b"PK\x03\x04"), ("image/svg+xml", b"<svg/>"),
                                ("", b"x"), ("image/png", b"")):
                r = await h.post("/api/v1/attachments", content=body,
                                 headers={"Content-Type": ctype} if ctype else {})
                assert r.status_code == 422, (ctype, r.text)
                err = r.json()["error"]
                assert err["code"] == "VALIDATION_ERROR"
                assert "\n" not in err["message"] and err["message"]
            # Nothing left half-written.
            assert not [p for p in folder.iterdir() if p.name.startswith(".")]

        async with httpx.AsyncClient(base_url=server.url) as anon:
            r = await anon.post("/api/v1/attachments", content=PNG,
                                headers={"Content-Type": "image/png"})
            assert r.status_code == 401


async def test_upload_cap_is_its_own_and_streamed(tmp_path: Path) -> None:
    cap = 400_000  # above [limits] max_body_bytes (256 KiB): the upload has its own cap
    with trio.fail_after(60):
        async with running_server(tmp_path / "data",
                                  limits=Limits(max_attachment_bytes=cap)) as srv:
            folder = srv.data_dir / "attachments"
            async with http(srv) as h:
                r = await h.post("/api/v1/attachments", content=b"a" * cap,
                                 headers={"Content-Type": "text/plain"})
                assert r.status_code == 201, r.text
                assert r.json()["size"] == cap

            # Over the cap with a Content-Length: refused before it is read.
            async with http(srv) as h:
                r = await h.post("/api/v1/attachments", content=b"a" * (cap + 1),
                                 headers={"Content-Type": "text/plain"})
                assert r.status_code == 413
                assert r.json()["error"]["message"] == (
                    f"attachment larger than {cap} bytes "
                    "(the server's [limits] max_attachment_bytes)")
                assert r.headers["connection"] == "close"

            # Over the cap without one (chunked): refused while it streams.
            async def chunks() -> AsyncIterator[bytes]:
                for _ in range(10):
                    yield b"b" * 50_000

            async with http(srv) as h:
                r = await h.post("/api/v1/attachments", content=chunks(),
                                 headers={"Content-Type": "text/plain"})
                assert r.status_code == 413
                assert "max_attachment_bytes" in r.json()["error"]["message"]
            assert [p.name for p in folder.iterdir()] == [hashlib.sha256(b"a" * cap).hexdigest()]


async def test_attachment_is_its_workspaces(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with running_server(tmp_path / "data", workspaces={"b": OTHER_TOKEN}) as srv:
            async with http(srv) as h:
                r = await h.post("/api/v1/attachments", content=PNG,
                                 headers={"Content-Type": "image/png"})
                mine = r.json()["attachment_id"]
            async with http(srv, OTHER_TOKEN) as h:
                r = await h.post("/api/v1/attachments", content=PNG,
                                 headers={"Content-Type": "image/png"})
                theirs = r.json()["attachment_id"]
            store = attachment_store(srv.sup)
            a = await srv.sup.caller("default")
            b = await srv.sup.caller("b")
            assert [x.id for x in await store.resolve(a.workspace_id, [mine])] == [mine]
            with pytest.raises(NotFound, match=f"attachment {theirs} not found"):
                await store.resolve(a.workspace_id, [mine, theirs])
            with pytest.raises(NotFound, match=f"attachment {mine} not found"):
                await store.resolve(b.workspace_id, [mine])
