"""The actions of DESIGN.md §12: projects, a turn's and a session's changes, and
revert.  Each authorizes its ids through the orchestrator (another workspace's
session is not found) and answers what ``web.contract.frames`` declares."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from supervisor.errors import Conflict
from supervisor.orchestrator import Caller
from supervisor.projects import browse, recent_projects
from supervisor.root import Supervisor
from supervisor.turn_checkpoints import TurnCheckpoints

from .contract import requests as rq
from .contract.requests import parse

__all__ = ["PROJECT_ACTIONS", "checkpoints_of"]

Handler = Callable[[Supervisor, Caller, dict[str, Any]], Awaitable[dict[str, Any]]]


def checkpoints_of(sup: Supervisor) -> TurnCheckpoints:
    if sup.checkpoints is None:
        raise Conflict("checkpoints are off in this server's configuration "
                       "([projects] checkpoints = false)")
    return sup.checkpoints


async def project_list(sup: Supervisor, caller: Caller, p: dict[str, Any]) -> dict[str, Any]:
    parse(rq.NoPayload, p, sup.config.limits)
    recent = await sup.store.call(recent_projects, sup.store.db, caller.workspace_id)
    return {"roots": [str(r) for r in sup.config.projects.roots], "recent": recent}


async def project_browse(sup: Supervisor, caller: Caller, p: dict[str, Any]) -> dict[str, Any]:
    req = parse(rq.ProjectBrowse, p, sup.config.limits)
    return await browse(sup.config, req.path)


async def turn_diff(sup: Supervisor, caller: Caller, p: dict[str, Any]) -> dict[str, Any]:
    req = parse(rq.TurnDiff, p, sup.config.limits)
    await sup.orchestrator.session(caller, req.session_id)
    return await checkpoints_of(sup).turn_diff(req.session_id, req.turn_id, req.path)


async def turn_revert(sup: Supervisor, caller: Caller, p: dict[str, Any]) -> dict[str, Any]:
    req = parse(rq.TurnRef, p, sup.config.limits)
    await sup.orchestrator.session(caller, req.session_id)
    if req.session_id in sup.orchestrator.operations:
        raise Conflict("a cancel of this session is under way; revert once it settled")
    return await checkpoints_of(sup).revert(req.session_id, req.turn_id)


async def session_diff(sup: Supervisor, caller: Caller, p: dict[str, Any]) -> dict[str, Any]:
    req = parse(rq.SessionRef, p, sup.config.limits)
    await sup.orchestrator.session(caller, req.session_id)
    return await checkpoints_of(sup).session_diff(req.session_id)


PROJECT_ACTIONS: dict[str, Handler] = {
    "project.list": project_list,
    "project.browse": project_browse,
    "turn.diff": turn_diff,
    "turn.revert": turn_revert,
    "session.diff": session_diff,
}
