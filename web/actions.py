"""The request actions of DESIGN.md §4, shared by the WebSocket gateway and REST.

Each handler decodes and validates its payload, makes one orchestrator call
and encodes the result.  ``session.subscribe``/``unsubscribe`` need the
connection and live in the gateway.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Awaitable, Callable, Collection
from importlib import metadata
from typing import Any, Literal

from supervisor.bus import Subscriber, envelope
from supervisor.config import Limits
from supervisor.errors import SupervisorError
from supervisor.orchestrator import Caller, CancelOperation
from supervisor.root import Supervisor
from supervisor.storage.db import StoreError
from supervisor.turn.cancel_op import answer_of
from supervisor.turn.turn_outcome import StopWhen

from .contract import requests as rq
from .contract.requests import parse
from .contract.schema import PROTOCOL_VERSION
from .file_actions import FILE_ACTIONS
from .offer_actions import OFFER_ACTIONS
from .project_actions import PROJECT_ACTIONS, checkpoints_of
from .stop_actions import STOP_ACTIONS, agent_profiles
from .validate import BadInput

__all__ = ["ACTIONS", "FEATURES", "ORDERED_ACTIONS", "STORE_ERRORS", "Handler",
           "answer_cancel", "cancel_result", "cancel_target", "join_cancel", "join_known_cancel",
           "server_info", "session_delete", "session_update", "store_failed", "task_delete",
           "task_update"]

#: What the store raises when the database cannot do what a request asked.
STORE_ERRORS = (StoreError, sqlite3.Error)


def store_failed(exc: BaseException) -> str:
    """The ``INTERNAL_ERROR`` message of a request the database could not
    serve: what SQLite said and what to do about it (never "internal error")."""
    why = str(exc) or type(exc).__name__
    if "full" in why:
        return (f"the database could not write: {why}; free space on the data dir's disk "
                "and try again (what was saved before is kept)")
    return f"the database could not complete the request: {why}; try again"

Handler = Callable[[Supervisor, Caller, dict[str, Any]], Awaitable[dict[str, Any]]]

_LIMITS = Limits()
#: What ``server.info`` offers beyond DESIGN.md §4 (a client may test for these).
FEATURES = ("text_appends", "queue", "steer", "schema", "projects", "checkpoints",
            "subagents", "attention", "stop_levels", "session_options", "agent_login")


async def task_create(sup: Supervisor, caller: Caller, p: dict[str, Any]) -> dict[str, Any]:
    req = parse(rq.TaskCreate, p, sup.config.limits)
    task = await sup.orchestrator.create_task(caller, req.title, req.project_dir)
    return sup.notify.task_dto(task)


async def task_list(sup: Supervisor, caller: Caller, p: dict[str, Any]) -> dict[str, Any]:
    return {"tasks": [sup.notify.task_dto(t) for t in await sup.orchestrator.list_tasks(caller)]}


async def task_update(sup: Supervisor, caller: Caller, p: dict[str, Any]) -> dict[str, Any]:
    req = parse(rq.TaskUpdate, p, sup.config.limits)
    task = await sup.catalog.update_task(caller, req.task_id, title=req.title,
                                         archived=req.archived)
    return sup.notify.task_dto(task)


async def task_delete(sup: Supervisor, caller: Caller, p: dict[str, Any]) -> dict[str, Any]:
    task_id = parse(rq.TaskRef, p, sup.config.limits).task_id
    await sup.catalog.delete_task(caller, task_id)
    return {"success": True, "task_id": task_id}


async def session_update(sup: Supervisor, caller: Caller, p: dict[str, Any]) -> dict[str, Any]:
    req = parse(rq.SessionUpdate, p, sup.config.limits)
    session = await sup.catalog.update_session(caller, req.session_id, title=req.title,
                                               archived=req.archived)
    return sup.notify.session_dto(session)


async def session_seen(sup: Supervisor, caller: Caller, p: dict[str, Any]) -> dict[str, Any]:
    """DESIGN.md §15: the session was shown; its attention is cleared everywhere."""
    session_id = parse(rq.SessionRef, p, sup.config.limits).session_id
    return sup.notify.session_dto(await sup.catalog.seen_session(caller, session_id))


async def session_delete(sup: Supervisor, caller: Caller, p: dict[str, Any]) -> dict[str, Any]:
    session_id = parse(rq.SessionRef, p, sup.config.limits).session_id
    await sup.catalog.delete_session(caller, session_id)
    return {"success": True, "session_id": session_id}


async def session_launch(sup: Supervisor, caller: Caller, p: dict[str, Any]) -> dict[str, Any]:
    req = parse(rq.SessionLaunch, p, sup.config.limits)
    return await sup.orchestrator.launch_session(caller, req.task_id, req.agent, req.prompt,
                                                 worktree=req.worktree)


async def session_list(sup: Supervisor, caller: Caller, p: dict[str, Any]) -> dict[str, Any]:
    task_id = parse(rq.TaskRef, p, sup.config.limits).task_id
    return {"sessions": await sup.orchestrator.list_sessions(caller, task_id)}


async def message_add(sup: Supervisor, caller: Caller, p: dict[str, Any]) -> dict[str, Any]:
    """DESIGN.md §9: ``{delivery:"started", ...message}``, ``{delivery:"queued",
    entry}``, ``{delivery:"interrupting", entry}`` or ``{delivery:"steered", ...message}``."""
    req = parse(rq.MessageAdd, p, sup.config.limits)
    return await sup.orchestrator.add_message(caller, req.session_id, req.content,
                                              req.delivery, req.client_message_id,
                                              attachments=req.attachments,
                                              mentions=req.mentions)


# -- the queue (DESIGN.md §9): each answers with the queue as it now is ----------


async def queue_list(sup: Supervisor, caller: Caller, p: dict[str, Any]) -> dict[str, Any]:
    session_id = parse(rq.SessionRef, p, sup.config.limits).session_id
    return (await sup.orchestrator.queue_list(caller, session_id)).payload()


async def queue_update(sup: Supervisor, caller: Caller, p: dict[str, Any]) -> dict[str, Any]:
    req = parse(rq.QueueUpdate, p, sup.config.limits)
    state = await sup.orchestrator.queue_update(caller, req.session_id, req.entry_id,
                                                req.content)
    return state.payload()


async def queue_remove(sup: Supervisor, caller: Caller, p: dict[str, Any]) -> dict[str, Any]:
    req = parse(rq.QueueEntryRef, p, sup.config.limits)
    return (await sup.orchestrator.queue_remove(caller, req.session_id, req.entry_id)).payload()


async def queue_move(sup: Supervisor, caller: Caller, p: dict[str, Any]) -> dict[str, Any]:
    req = parse(rq.QueueMove, p, sup.config.limits)
    state = await sup.orchestrator.queue_move(caller, req.session_id, req.entry_id,
                                              req.position)
    return state.payload()


async def queue_send_now(sup: Supervisor, caller: Caller, p: dict[str, Any]) -> dict[str, Any]:
    """Idle: ``{delivery:"started", ...message}``; a turn running:
    ``{delivery:"interrupting", entry}``."""
    req = parse(rq.QueueEntryRef, p, sup.config.limits)
    return await sup.orchestrator.queue_send_now(caller, req.session_id, req.entry_id)


async def queue_set_auto_run(sup: Supervisor, caller: Caller,
                             p: dict[str, Any]) -> dict[str, Any]:
    req = parse(rq.QueueSetAutoRun, p, sup.config.limits)
    state = await sup.orchestrator.queue_set_auto_run(caller, req.session_id, req.auto_run)
    return state.payload()


async def message_list(sup: Supervisor, caller: Caller, p: dict[str, Any]) -> dict[str, Any]:
    req = parse(rq.MessageListQuery, p, sup.config.limits)
    msgs = await sup.orchestrator.list_messages(caller, req.session_id, limit=req.limit,
                                                before=req.before)
    return {"messages": [m.to_dto() for m in msgs]}


def cancel_result(op: CancelOperation) -> dict[str, Any]:
    """Every cancel's answer (``supervisor.turn.cancel_op.answer_of``): ``outcome``
    says what happened, ``turn_id`` which turn it acted on."""
    _kind, result = answer_of(op)
    return result


def cancel_target(p: dict[str, Any]) -> rq.AgentCancel:
    """``agent.cancel``'s payload (``BadInput`` if invalid).  Its fields have no
    configured bounds: the default limits serve."""
    return parse(rq.AgentCancel, p, _LIMITS)


def answer_cancel(op: CancelOperation, to: Subscriber, request_id: str) -> None:
    """The one way a connection's ``agent.cancel`` is answered: by the settle of
    its operation, as data on it (``CancelOperation.replies``), in the batch of
    what settled it (a turn's close: its notifications, pending=false, then the
    answer); an operation already settled (aimed at a turn that has ended) is
    answered at once.  Either way the answer is ``answer_of``'s."""
    if op.done.is_set():
        kind, result = answer_of(op)
        to.offer(envelope(kind, "agent.cancel", result, request_id or None))
    else:
        to.owed += 1  # a request in flight until its settle answers it
        op.replies.append((to, request_id))


def join_known_cancel(sup: Supervisor, caller: Caller, p: dict[str, Any], to: Subscriber,
                      request_id: str) -> bool:
    """A connection's ``agent.cancel`` in the step its frame was read, with no
    task of its own (a storm of 1,000 duplicates is 1,000 answers queued in one
    loop, not 1,000 tasks woken; a first cancel is written to the agent by this
    admission): when it needs no store read and has no revert.  False: the
    request is ``join_cancel``'s, in a task (its error, too, is answered there)."""
    try:
        req = cancel_target(p)
    except BadInput:
        return False
    if req.revert:
        return False
    op = sup.orchestrator.admit_known(caller, req.session_id, req.task_id, req.turn_id,
                                      StopWhen(req.when))
    if op is None:
        return False
    answer_cancel(op, to, request_id)
    return True


async def join_cancel(sup: Supervisor, caller: Caller, p: dict[str, Any], to: Subscriber,
                      request_id: str) -> None:
    """A connection's ``agent.cancel`` that ``join_known_cancel`` left to a task:
    the session's owner read from the store, then answered as every other
    (``answer_cancel``).  With ``revert`` it waits for the settle, since its
    answer carries what the revert, which follows the settle, did."""
    req = cancel_target(p)
    if req.revert:
        result = await agent_cancel(sup, caller, p)
        to.offer(envelope("response", "agent.cancel", result, request_id or None))
        return
    op = await sup.orchestrator.admit_cancel(caller, req.session_id, req.task_id, req.turn_id,
                                             StopWhen(req.when))
    answer_cancel(op, to, request_id)


async def agent_cancel(sup: Supervisor, caller: Caller, p: dict[str, Any]) -> dict[str, Any]:
    """``agent.cancel`` answered by waiting for its operation's settle: REST's
    (its answer is an HTTP response of its own, with no connection's batch to
    join) and a revert's."""
    req = cancel_target(p)
    op = await sup.orchestrator.cancel_operation(caller, req.session_id, req.task_id,
                                                 req.turn_id, StopWhen(req.when))
    result = cancel_result(op)
    if req.revert:
        result |= await cancel_revert(sup, op, req.overwrite or ())
    return result


async def agent_stop_now(sup: Supervisor, caller: Caller, p: dict[str, Any]) -> dict[str, Any]:
    """DESIGN.md §15 ``stop-now-button``: the late cancel in flight escalates at once."""
    req = parse(rq.AgentStopNow, p, sup.config.limits)
    await sup.orchestrator.session(caller, req.session_id)  # the caller's, else NotFound
    stopping = sup.orchestrator.cancellations.stop_now(req.session_id, req.turn_id)
    return {"success": True, "session_id": req.session_id, "stopping": stopping}


async def subagent_cancel(sup: Supervisor, caller: Caller, p: dict[str, Any]) -> dict[str, Any]:
    """DESIGN.md §13: one child session stopped through its own protocol cancel;
    the parent's turn goes on.  Unknown child: NOT_FOUND; one the agent does not
    let be cancelled: CONFLICT; one that ended: a no-op answer."""
    req = parse(rq.SubagentCancel, p, sup.config.limits)
    await sup.orchestrator.session(caller, req.session_id)  # the caller's, else NotFound
    outcome, subagent = await sup.subagents.cancel(req.session_id, req.subagent_id)
    return {"success": True, "session_id": req.session_id, "subagent_id": req.subagent_id,
            "outcome": outcome, "subagent": subagent}


async def cancel_revert(sup: Supervisor, op: CancelOperation,
                        overwrite: Collection[str] | Literal["all"] = ()) -> dict[str, Any]:
    """DESIGN.md §12 "Cancel and undo": the settled cancel's turn reverted (a file
    changed since by something else kept unless ``overwrite`` names it, §15)."""
    if op.acted_on is None:
        return {"revert_error": "no turn was running: nothing to revert"}
    try:
        return {"reverted": await checkpoints_of(sup).revert(op.session_id, op.acted_on,
                                                             overwrite)}
    except SupervisorError as exc:
        return {"revert_error": str(exc)}


async def permission_respond(sup: Supervisor, caller: Caller,
                             p: dict[str, Any]) -> dict[str, Any]:
    req = parse(rq.PermissionRespond, p, sup.config.limits)
    option_id = None if req.cancelled else req.option_id
    await sup.orchestrator.respond_permission(caller, req.session_id, req.request_id,
                                              option_id)
    return {"success": True}


@functools.cache
def _version() -> str:
    try:
        return metadata.version("turnvisor")
    except metadata.PackageNotFoundError:  # run from a checkout never installed
        return "0+unknown"


async def server_info(sup: Supervisor) -> dict[str, Any]:
    """DESIGN.md §14: ``server.info`` and ``GET /api/v1/info``.  ``agents`` stays
    the profiles' names (clients read it so); ``agent_profiles`` adds, per
    profile, its measured cancel figures (DESIGN.md §18)."""
    return {"version": _version(), "protocol_version": PROTOCOL_VERSION,
            "features": list(FEATURES), "agents": sorted(sup.config.profiles),
            "agent_profiles": await agent_profiles(sup)}


async def server_info_action(sup: Supervisor, caller: Caller,
                             p: dict[str, Any]) -> dict[str, Any]:
    return await server_info(sup)


async def ping(sup: Supervisor, caller: Caller, p: dict[str, Any]) -> dict[str, Any]:
    """Not in DESIGN §4: a no-op round trip (the benchmark's WebSocket floor)."""
    return {}


ACTIONS: dict[str, Handler] = {
    "task.create": task_create,
    "task.list": task_list,
    "task.update": task_update,
    "task.delete": task_delete,
    "session.update": session_update,
    "session.delete": session_delete,
    "session.seen": session_seen,
    "session.launch": session_launch,
    "session.list": session_list,
    "message.add": message_add,
    "message.list": message_list,
    "queue.list": queue_list,
    "queue.update": queue_update,
    "queue.remove": queue_remove,
    "queue.move": queue_move,
    "queue.send_now": queue_send_now,
    "queue.set_auto_run": queue_set_auto_run,
    "agent.cancel": agent_cancel,
    "agent.stop_now": agent_stop_now,
    "subagent.cancel": subagent_cancel,
    "permission.respond": permission_respond,
    "server.info": server_info_action,
    "ping": ping,
    **PROJECT_ACTIONS,
    **STOP_ACTIONS,
    **OFFER_ACTIONS,
    **FILE_ACTIONS,
}

#: Actions one connection's requests apply in the order it sent them (a burst
#: of messages is queued in the order typed).
ORDERED_ACTIONS = frozenset({"message.add"})
