"""The request actions of DESIGN.md §4, shared by the WebSocket gateway and REST.

Each handler decodes and validates its payload, makes one orchestrator call
and encodes the result.  ``session.subscribe``/``unsubscribe`` need the
connection and live in the gateway.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable
from typing import Any

from supervisor.db import StoreError
from supervisor.orchestrator import Caller
from supervisor.queue import DELIVERIES, Delivery
from supervisor.root import Supervisor

from .validate import (
    BadInput,
    opt_bool,
    opt_flag,
    opt_int,
    opt_str,
    opt_text,
    req_bool,
    req_int,
    req_str,
)

__all__ = ["ACTIONS", "ORDERED_ACTIONS", "STORE_ERRORS", "Handler", "cancel_result",
           "cancel_target", "session_delete", "session_update", "store_failed", "task_delete",
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

_ID = 64


async def task_create(sup: Supervisor, caller: Caller, p: dict[str, Any]) -> dict[str, Any]:
    task = await sup.orchestrator.create_task(caller, req_str(p, "title", max_len=500))
    return task.to_dto()


async def task_list(sup: Supervisor, caller: Caller, p: dict[str, Any]) -> dict[str, Any]:
    return {"tasks": [t.to_dto() for t in await sup.orchestrator.list_tasks(caller)]}


def _changes(p: dict[str, Any], max_title: int) -> tuple[str | None, bool | None]:
    return opt_text(p, "title", max_len=max_title), opt_flag(p, "archived")


async def task_update(sup: Supervisor, caller: Caller, p: dict[str, Any]) -> dict[str, Any]:
    title, archived = _changes(p, 500)
    task = await sup.catalog.update_task(caller, req_str(p, "task_id", max_len=_ID),
                                         title=title, archived=archived)
    return task.to_dto()


async def task_delete(sup: Supervisor, caller: Caller, p: dict[str, Any]) -> dict[str, Any]:
    task_id = req_str(p, "task_id", max_len=_ID)
    await sup.catalog.delete_task(caller, task_id)
    return {"success": True, "task_id": task_id}


async def session_update(sup: Supervisor, caller: Caller, p: dict[str, Any]) -> dict[str, Any]:
    title, archived = _changes(p, 200)
    session = await sup.catalog.update_session(caller, req_str(p, "session_id", max_len=_ID),
                                               title=title, archived=archived)
    return sup.notify.session_dto(session)


async def session_delete(sup: Supervisor, caller: Caller, p: dict[str, Any]) -> dict[str, Any]:
    session_id = req_str(p, "session_id", max_len=_ID)
    await sup.catalog.delete_session(caller, session_id)
    return {"success": True, "session_id": session_id}


async def session_launch(sup: Supervisor, caller: Caller, p: dict[str, Any]) -> dict[str, Any]:
    limit = sup.config.limits.max_prompt_chars
    return await sup.orchestrator.launch_session(
        caller, req_str(p, "task_id", max_len=_ID), opt_str(p, "agent", max_len=100),
        opt_str(p, "prompt", max_len=limit),
    )


async def session_list(sup: Supervisor, caller: Caller, p: dict[str, Any]) -> dict[str, Any]:
    sessions = await sup.orchestrator.list_sessions(caller, req_str(p, "task_id", max_len=_ID))
    return {"sessions": sessions}


def _delivery(p: dict[str, Any]) -> Delivery:
    value = p.get("delivery")
    if value is None:
        return "auto"
    for delivery in DELIVERIES:
        if value == delivery:
            return delivery
    raise BadInput("VALIDATION_ERROR", f"delivery must be one of {', '.join(DELIVERIES)}")


async def message_add(sup: Supervisor, caller: Caller, p: dict[str, Any]) -> dict[str, Any]:
    """DESIGN.md §9: ``{delivery:"started", ...message}``, ``{delivery:"queued",
    entry}``, ``{delivery:"interrupting", entry}`` or ``{delivery:"steered", ...message}``."""
    return await sup.orchestrator.add_message(
        caller, req_str(p, "session_id", max_len=_ID),
        req_str(p, "content", max_len=sup.config.limits.max_prompt_chars), _delivery(p),
    )


# -- the queue (DESIGN.md §9): each answers with the queue as it now is ----------


async def queue_list(sup: Supervisor, caller: Caller, p: dict[str, Any]) -> dict[str, Any]:
    state = await sup.orchestrator.queue_list(caller, req_str(p, "session_id", max_len=_ID))
    return state.payload()


async def queue_update(sup: Supervisor, caller: Caller, p: dict[str, Any]) -> dict[str, Any]:
    state = await sup.orchestrator.queue_update(
        caller, req_str(p, "session_id", max_len=_ID), req_str(p, "entry_id", max_len=_ID),
        req_str(p, "content", max_len=sup.config.limits.max_prompt_chars))
    return state.payload()


async def queue_remove(sup: Supervisor, caller: Caller, p: dict[str, Any]) -> dict[str, Any]:
    state = await sup.orchestrator.queue_remove(
        caller, req_str(p, "session_id", max_len=_ID), req_str(p, "entry_id", max_len=_ID))
    return state.payload()


async def queue_move(sup: Supervisor, caller: Caller, p: dict[str, Any]) -> dict[str, Any]:
    state = await sup.orchestrator.queue_move(
        caller, req_str(p, "session_id", max_len=_ID), req_str(p, "entry_id", max_len=_ID),
        req_int(p, "position", lo=0, hi=sup.config.limits.max_queue))
    return state.payload()


async def queue_send_now(sup: Supervisor, caller: Caller, p: dict[str, Any]) -> dict[str, Any]:
    """Idle: ``{delivery:"started", ...message}``; a turn running:
    ``{delivery:"interrupting", entry}``."""
    return await sup.orchestrator.queue_send_now(
        caller, req_str(p, "session_id", max_len=_ID), req_str(p, "entry_id", max_len=_ID))


async def queue_set_auto_run(sup: Supervisor, caller: Caller,
                             p: dict[str, Any]) -> dict[str, Any]:
    state = await sup.orchestrator.queue_set_auto_run(
        caller, req_str(p, "session_id", max_len=_ID), req_bool(p, "auto_run"))
    return state.payload()


async def message_list(sup: Supervisor, caller: Caller, p: dict[str, Any]) -> dict[str, Any]:
    msgs = await sup.orchestrator.list_messages(
        caller, req_str(p, "session_id", max_len=_ID),
        limit=opt_int(p, "limit", lo=1, hi=1000) or 200,
        before=opt_str(p, "before", max_len=_ID),
    )
    return {"messages": [m.to_dto() for m in msgs]}


def cancel_result(session_id: str, record_error: str | None = None) -> dict[str, Any]:
    """``agent.cancel``'s answer (DESIGN.md §4); when the store refused the
    record of the stop, it says so (added fields: the agent stopped all the
    same, and the record is written once the store can again)."""
    result: dict[str, Any] = {"success": True, "session_id": session_id}
    if record_error is not None:
        result |= {"agent_stopped": True, "record_written": False,
                   "record_error": f"the agent stopped, but its record could not be written "
                                   f"({record_error}); it is written when the store can again"}
    return result


def cancel_target(p: dict[str, Any]) -> tuple[str, str | None]:
    """``agent.cancel``'s session and optional task (``BadInput`` if invalid)."""
    return req_str(p, "session_id", max_len=_ID), opt_str(p, "task_id", max_len=_ID)


async def agent_cancel(sup: Supervisor, caller: Caller, p: dict[str, Any]) -> dict[str, Any]:
    session_id, task_id = cancel_target(p)
    op = await sup.orchestrator.cancel_operation(caller, session_id, task_id)
    return cancel_result(session_id, op.record_error)


async def permission_respond(sup: Supervisor, caller: Caller,
                             p: dict[str, Any]) -> dict[str, Any]:
    session_id = req_str(p, "session_id", max_len=_ID)
    request_id = req_str(p, "request_id", max_len=200)
    option_id = None if opt_bool(p, "cancelled") else req_str(p, "option_id", max_len=200)
    await sup.orchestrator.respond_permission(caller, session_id, request_id, option_id)
    return {"success": True}


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
    "permission.respond": permission_respond,
    "ping": ping,
}

#: Actions one connection's requests apply in the order it sent them (a burst
#: of messages is queued in the order typed).
ORDERED_ACTIONS = frozenset({"message.add"})
