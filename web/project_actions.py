"""The actions of DESIGN.md §12: projects, a turn's and a session's changes, and
revert.  Each authorizes its ids through the orchestrator (another workspace's
session is not found) and answers what ``web.contract.frames`` declares."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import trio

from supervisor.errors import Conflict, InvalidRequest
from supervisor.orchestrator import Caller
from supervisor.project_roots import RootRefused, check_root, save_added
from supervisor.root import Supervisor
from supervisor.workspace.projects import browse, recent_projects
from supervisor.workspace.turn_checkpoints import TurnCheckpoints

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
    return {"roots": [str(r) for r in sup.config.projects.roots], "recent": recent,
            "work_dir": str(sup.config.work_dir)}


async def project_browse(sup: Supervisor, caller: Caller, p: dict[str, Any]) -> dict[str, Any]:
    req = parse(rq.ProjectBrowse, p, sup.config.limits)
    return await browse(sup.config, req.path)


async def project_root_add(sup: Supervisor, caller: Caller,
                           p: dict[str, Any]) -> dict[str, Any]:
    """DESIGN.md §15: a project root added now and kept in the data dir (the config
    file's checks: an existing directory clear of the data dir)."""
    req = parse(rq.ProjectRootAdd, p, sup.config.limits)
    projects = sup.config.projects
    try:
        root = await trio.to_thread.run_sync(check_root, sup.config.data_dir, req.path)
    except RootRefused as exc:
        raise InvalidRequest(str(exc)) from None
    if root not in projects.added and root not in projects.roots:
        added = (*projects.added, root)
        await trio.to_thread.run_sync(save_added, sup.config.data_dir, added)
    projects.add_root(root)
    return {"root": str(root), "roots": [str(r) for r in projects.roots]}


async def turn_diff(sup: Supervisor, caller: Caller, p: dict[str, Any]) -> dict[str, Any]:
    req = parse(rq.TurnDiff, p, sup.config.limits)
    await sup.orchestrator.session(caller, req.session_id)
    return await checkpoints_of(sup).turn_diff(req.session_id, req.turn_id, req.path)


async def turn_revert(sup: Supervisor, caller: Caller, p: dict[str, Any]) -> dict[str, Any]:
    req = parse(rq.TurnRevert, p, sup.config.limits)
    await sup.orchestrator.session(caller, req.session_id)
    if req.session_id in sup.orchestrator.operations:
        raise Conflict("a cancel of this session is under way; revert once it settled")
    return await checkpoints_of(sup).revert(req.session_id, req.turn_id, req.overwrite or ())


async def turn_revert_preview(sup: Supervisor, caller: Caller,
                              p: dict[str, Any]) -> dict[str, Any]:
    """DESIGN.md §15: what ``turn.revert`` would change now (the revert dialog's list)."""
    req = parse(rq.TurnRef, p, sup.config.limits)
    await sup.orchestrator.session(caller, req.session_id)
    return await checkpoints_of(sup).preview(req.session_id, req.turn_id)


async def session_diff(sup: Supervisor, caller: Caller, p: dict[str, Any]) -> dict[str, Any]:
    req = parse(rq.SessionRef, p, sup.config.limits)
    await sup.orchestrator.session(caller, req.session_id)
    return await checkpoints_of(sup).session_diff(req.session_id)


PROJECT_ACTIONS: dict[str, Handler] = {
    "project.list": project_list,
    "project.browse": project_browse,
    "turn.diff": turn_diff,
    "turn.revert": turn_revert,
    "turn.revert.preview": turn_revert_preview,
    "project.root.add": project_root_add,
    "session.diff": session_diff,
}
