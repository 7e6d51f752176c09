"""Uploads nobody sent are deleted a day after they were made (DESIGN.md §19,
supervisor/workspace/attachment_sweep.py), by the sweep a server runs when it starts: through a
real server, its SQLite database and its data dir.  Uploads are made and one is sent; the
server stops; some are then made a day and more old (their rows' time and their files'); the
next start removes the old unsent ones (rows: their GET is 404; files: gone once no upload has
that content) and the leftovers of a cut-off upload, and keeps what a message or a queued entry
names, what is younger than a day, and a file another upload still has."""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

import trio

from supervisor.workspace.attachments import attachments_dir
from tests.support.server import Server, running_server
from tests.support.ws import ws_client

from .support import http, launch, new_task, start_turn
from .test_attachments_ws import _turn_text

OLD = "2020-01-01T00:00:00.000Z"
TWO_DAYS = 2 * 24 * 3600


async def _upload(srv: Server, data: bytes, name: str) -> dict[str, str]:
    async with http(srv) as h:
        r = await h.post("/api/v1/attachments", params={"name": name}, content=data,
                         headers={"Content-Type": "image/png"})
        assert r.status_code == 201, r.text
        return dict(r.json())


async def _status(srv: Server, attachment_id: str) -> int:
    async with http(srv) as h:
        return (await h.get(f"/api/v1/attachments/{attachment_id}")).status_code


def _age(path: Path) -> None:
    old = time.time() - TWO_DAYS
    os.utime(path, (old, old), follow_symlinks=False)


async def test_unsent_uploads_older_than_a_day_are_swept_at_start(tmp_path: Path) -> None:
    data = tmp_path / "data"
    folder = attachments_dir(data)
    png = b"\x89PNG\r\n\x1a\n"
    sent_bytes, unsent_bytes, fresh_bytes, queued_bytes = (png + bytes([i]) * 100
                                                           for i in range(4))
    with trio.fail_after(60):
        async with running_server(data) as srv, ws_client(srv) as ws:
            sent = await _upload(srv, sent_bytes, "sent.png")
            twin = await _upload(srv, sent_bytes, "twin.png")  # same content, never sent
            unsent = await _upload(srv, unsent_bytes, "unsent.png")
            fresh = await _upload(srv, fresh_bytes, "fresh.png")
            sid = await launch(ws, await new_task(ws))
            await ws.call("session.subscribe", {"session_id": sid})
            answer = await ws.call("message.add", {"session_id": sid, "content": "/attachments",
                                                   "attachments": [sent["attachment_id"]]})
            await _turn_text(ws, sid, answer["turn_id"])
            # Queued behind a running turn when the server stops: its entry names it.
            queued = await _upload(srv, queued_bytes, "queued.png")
            await start_turn(ws, sid, "/delay 30000")
            entry = await ws.call("message.add", {"session_id": sid, "content": "/attachments",
                                                  "attachments": [queued["attachment_id"]]})
            assert entry["delivery"] == "queued", entry
        files = {p.name for p in folder.iterdir()}
        assert len(files) == 4, files  # one file per content

    # A day and more: every upload but the fresh one, and their files.
    aged = [sent, twin, unsent, queued]
    with sqlite3.connect(data / "turnvisor.db") as db:
        db.executemany("UPDATE attachments SET created_at = ? WHERE id = ?",
                       [(OLD, a["attachment_id"]) for a in aged])
    fresh_file = None
    for path in folder.iterdir():
        if path.read_bytes() == fresh_bytes:
            fresh_file = path
        else:
            _age(path)
    assert fresh_file is not None
    # A file no upload got (a server that died between the file and its row), and what a
    # cut-off upload left; both old.  And a young file of no upload: it may be an upload's,
    # whose row is about to be written.
    orphan = folder / ("ab" * 32)
    orphan.write_bytes(b"orphan")
    leftover = folder / ".upload-0123456789abcdef"
    leftover.write_bytes(b"half")
    young = folder / ("cd" * 32)
    young.write_bytes(b"young")
    for path in (orphan, leftover):
        _age(path)
    unsent_file = next(p for p in folder.iterdir() if p.read_bytes() == unsent_bytes)

    with trio.fail_after(60):
        async with running_server(data) as srv:
            with trio.fail_after(30):  # swept right after the start, on its own task
                while unsent_file.exists() or orphan.exists() or leftover.exists():
                    await trio.sleep(0.05)
            assert await _status(srv, unsent["attachment_id"]) == 404
            assert await _status(srv, twin["attachment_id"]) == 404
            # Named by a message: kept, and so its content (the twin's too).
            assert await _status(srv, sent["attachment_id"]) == 200
            assert await _status(srv, fresh["attachment_id"]) == 200
            assert await _status(srv, queued["attachment_id"]) == 200  # a queued entry's
            assert fresh_file.exists() and young.exists()
            assert {p.name for p in folder.iterdir()} == (files - {unsent_file.name}) | {
                young.name}
