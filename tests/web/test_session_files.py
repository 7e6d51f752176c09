"""``session.files`` over the WS API (DESIGN.md §19): the files of the session's
cwd the page offers after ``@``, filtered by the query; no link followed, no
``.git``, nothing the sandbox hides; another workspace's session is not found."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import trio

from tests.support.server import OTHER_TOKEN, running_server
from tests.support.ws import RequestFailed, ws_client
from web.file_actions import MAX_FILES, list_files

from .support import launch, new_task


async def test_session_files_lists_the_cwd_without_links(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    (outside / "deep").mkdir(parents=True)
    (outside / "secret.txt").write_text("no\n")
    (outside / "deep" / "secret2.txt").write_text("no\n")
    with trio.fail_after(60):
        async with running_server(tmp_path / "data", workspaces={"b": OTHER_TOKEN}) as srv, \
                ws_client(srv) as ws, ws_client(srv, token=OTHER_TOKEN) as other:
            task_id = await new_task(ws)
            sid = await launch(ws, task_id)
            caller = await srv.sup.caller()
            cwd = srv.sup.config.session_work_dir(caller.workspace_id, sid)
            (cwd / "src" / "pkg").mkdir(parents=True, exist_ok=True)
            (cwd / "src" / "app.py").write_text("x\n")
            (cwd / "src" / "pkg" / "Util.py").write_text("x\n")
            (cwd / "README.md").write_text("x\n")
            (cwd / ".git").mkdir(exist_ok=True)
            (cwd / ".git" / "config").write_text("x\n")
            os.symlink(outside / "secret.txt", cwd / "link.txt")
            os.symlink(outside, cwd / "linkdir")

            files = (await ws.call("session.files", {"session_id": sid}))["files"]
            assert set(files) >= {"README.md", "src/app.py", "src/pkg/Util.py"}
            assert not [f for f in files if "secret" in f or f.startswith((".git", "link"))]
            # The shallow files first.
            assert files.index("README.md") < files.index("src/app.py") \
                < files.index("src/pkg/Util.py")

            # Filtered as typed, case-insensitive; the name's match ranks first.
            got = (await ws.call("session.files", {"session_id": sid, "query": "util"}))
            assert got["files"] == ["src/pkg/Util.py"]
            got = await ws.call("session.files", {"session_id": sid, "query": "src/"})
            assert got["files"] == ["src/app.py", "src/pkg/Util.py"]
            got = await ws.call("session.files", {"session_id": sid, "query": "secret"})
            assert got["files"] == []

            # Another workspace's session: not found, nothing listed.
            with pytest.raises(RequestFailed) as err:
                await other.call("session.files", {"session_id": sid})
            assert err.value.frame["payload"]["code"] == "NOT_FOUND"
            with pytest.raises(RequestFailed) as err:
                await ws.call("session.files", {"session_id": sid, "query": 5})
            assert err.value.frame["payload"]["code"] == "VALIDATION_ERROR"


def test_list_files_is_bounded_and_skips_hidden(tmp_path: Path) -> None:
    for i in range(MAX_FILES + 10):
        (tmp_path / f"f{i:03}.txt").write_text("x")
    hidden = tmp_path / "data"
    hidden.mkdir()
    (hidden / "token.txt").write_text("x")
    st = hidden.stat()
    files = list_files(str(tmp_path), "", [(st.st_dev, st.st_ino)])
    assert len(files) == MAX_FILES
    assert not [f for f in files if f.startswith("data/")]
    assert list_files(str(tmp_path), "token", []) == ["data/token.txt"]
    assert list_files(str(tmp_path), "token", [(st.st_dev, st.st_ino)]) == []
    assert list_files(str(tmp_path / "missing"), "", []) == []
