"""A server torn down by an error while a project session's turn runs: the
checkpoints nursery may close before the lifecycle's turns finish unwinding
(both under the root's cancel), and the turn's end must not then raise into
the lifecycle's cleanup ("Nursery is closed to new arrivals"): what escapes is
the error that ended the server, alone."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from supervisor.config import Projects
from tests.support.server import running_server
from tests.support.ws import ws_client


class _Boom(Exception):
    pass


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def _project_root(tmp_path: Path) -> Path:
    (tmp_path / "projects" / "p").mkdir(parents=True)
    return (tmp_path / "projects").resolve()


async def _fail_during_a_turn(tmp_path: Path, root: Path) -> None:
    """Start a long turn in a project session, then fail inside the server."""
    async with running_server(tmp_path / "data", projects=Projects(roots=(root,))) as srv, \
            ws_client(srv) as ws:
        task = await ws.call("task.create", {"title": "t", "project_dir": "p"})
        session = await ws.call("session.launch", {"task_id": task["id"], "agent": "mock"})
        await ws.call("message.add", {"session_id": session["id"], "content": "/delay 20000"})
        while not srv.sup.lifecycle.turn_running(session["id"]):
            await trio.sleep(0.02)
        raise _Boom


async def test_an_error_during_a_project_turn_ends_the_server_with_that_error_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MOCK_AGENT_STATE_DIR", str(tmp_path / "mock-state"))
    root = _project_root(tmp_path)
    with trio.fail_after(30), pytest.raises(BaseExceptionGroup) as raised:
        await _fail_during_a_turn(tmp_path, root)
    leaves = _leaves(raised.value)
    assert leaves and all(isinstance(e, _Boom) for e in leaves), leaves
