"""DESIGN.md §19 over the wire: the options the session's agent offers, set by the person,
and its login."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from supervisor.orchestrator import Caller
from supervisor.root import Supervisor

from .contract import requests as rq
from .contract.requests import parse

__all__ = ["OFFER_ACTIONS"]


async def session_option_set(sup: Supervisor, caller: Caller,
                             p: dict[str, Any]) -> dict[str, Any]:
    req = parse(rq.SessionOptionSet, p, sup.config.limits)
    session = await sup.orchestrator.session(caller, req.session_id)  # the caller's, else 404
    lifecycle = sup.lifecycle
    applied = await lifecycle.offers.choose(lifecycle.agents.running(session.id), session,
                                            req.option_id, req.value)
    return {"success": True, "session_id": session.id, "option_id": req.option_id,
            "value": req.value, "applied": applied}


async def agent_login(sup: Supervisor, caller: Caller, p: dict[str, Any]) -> dict[str, Any]:
    """DESIGN.md §19: the agent started again with the chosen login; the key
    goes no further than that start (supervisor/session/login.py)."""
    req = parse(rq.AgentLogin, p, sup.config.limits)
    session = await sup.orchestrator.session(caller, req.session_id)  # the caller's, else 404
    lifecycle = sup.lifecycle
    logins = lifecycle.execution.logins
    await logins.login(lifecycle.execution, session, req.method_id, req.key)
    prompt = logins.take_prompt(session.id)
    if prompt is not None:  # the launch's first prompt, kept for after the login
        await sup.orchestrator.send_message(caller, session.id, prompt)
    fresh = await sup.orchestrator.session(caller, req.session_id)
    return {"success": True, "session_id": session.id, "method_id": req.method_id,
            "session": sup.notify.session_dto(fresh)}


OFFER_ACTIONS: dict[str, Callable[[Supervisor, Caller, dict[str, Any]],
                                  Awaitable[dict[str, Any]]]] = {
    "session.option.set": session_option_set,
    "agent.login": agent_login,
}
