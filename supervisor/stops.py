"""Stop levels above one cancel (DESIGN.md §18): stop everything of a workspace,
a stopped turn's receipt, the strays a stop left, and each agent's measured
cancel figures.

Each stop goes through the one single-flight cancel of its session
(``Orchestrator.cancel_operation``): a session already cancelling is joined,
never cancelled twice.  Authorization is the orchestrator's (another
workspace's session is "not found").  The figures are read from the stored
receipts, so they are what real use measured, kept across restarts.
"""

from __future__ import annotations

import logging
import statistics
from collections import defaultdict
from typing import Any, Final

import trio

from protocols.adapters import AgentClosed, AgentTimeout

from .errors import Conflict, NotFound
from .models import SessionState
from .orchestrator import Caller, Orchestrator
from .storage.store import Store
from .subagents import SubagentControl, Subagents
from .turn.execution_state import Agents
from .turn.receipts import Receipts
from .turn.turn_outcome import CancelOutcome

__all__ = ["FIGURES_FROM", "Stops", "figures_of"]

log = logging.getLogger(__name__)

#: How many of the latest receipts the figures are computed from.
FIGURES_FROM: Final = 2000
#: A version's figures are compared with the previous version's once both
#: have this many cancels; "markedly" is a p50 this many times apart.
COMPARE_AFTER: Final = 5
MARKEDLY: Final = 2.0
_ENDED: Final = frozenset({"completed", "cancelled", "failed"})


def _p(values: list[float], q: float) -> float | None:
    if not values:
        return None
    if len(values) == 1:
        return round(values[0], 1)
    return round(statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1], 1)


def figures_of(receipts: list[dict[str, Any]]) -> dict[str, Any]:
    """One version's cancel figures from its receipts (newest first)."""
    latencies = [float(r["confirmed_ms"]) for r in receipts
                 if isinstance(r.get("confirmed_ms"), int | float)]
    return {"count": len(receipts), "p50_ms": _p(latencies, 50), "p95_ms": _p(latencies, 95),
            "escalated": sum(1 for r in receipts if r.get("outcome") == "escalated"),
            "dropped_early": sum(1 for r in receipts if r.get("resent")),
            "version": receipts[0].get("agent_version") if receipts else None}


class Stops:
    def __init__(self, store: Store, orchestrator: Orchestrator, agents: Agents,
                 receipts: Receipts, subagents: Subagents,
                 subagent_control: SubagentControl) -> None:
        self.store = store
        self.orchestrator = orchestrator
        self.agents = agents
        self.receipts = receipts
        self.subagents = subagents
        self.subagent_control = subagent_control
        #: (profile, version) pairs whose change of figures was noted in the log.
        self._noted: set[tuple[str, str]] = set()

    # -- stop everything -----------------------------------------------------------

    async def stop_all(self, caller: Caller) -> list[dict[str, Any]]:
        """Every running turn of the caller's workspace stopped, each through its
        session's own cancel, and every subagent still running in a session whose
        turn is not (its parent's cancel stops the others).  One entry per
        session with its receipt (null: nothing was running by the time)."""
        running = {s.id for s in await self.store.call(
            self.store.db.sessions_in_states, (SessionState.RUNNING,))
                   if s.workspace_id == caller.workspace_id}
        for sid, ex in list(self.agents.executions.items()):
            if ex.owner[0] == caller.workspace_id and ex.turn is not None:
                running.add(sid)
        children = [(sid, str(c["id"])) for sid, ex in list(self.agents.executions.items())
                    if ex.owner[0] == caller.workspace_id and sid not in running
                    for c in self.subagents.dtos(sid)
                    if c.get("state") not in _ENDED and c.get("cancellable", True)]
        answers: dict[str, dict[str, Any]] = {}

        async def stop(sid: str) -> None:
            try:
                op = await self.orchestrator.cancel_operation(caller, sid, by="stop_all")
                answers[sid] = {"session_id": sid, "turn_id": op.acted_on,
                                "outcome": op.outcome.value if op.outcome else None,
                                "receipt": op.receipt}
            except Exception as exc:  # one session's failure is its own entry
                log.warning("stop all: session %s: %s", sid, exc)
                answers[sid] = {"session_id": sid, "turn_id": None, "receipt": None,
                                "error": str(exc)}

        async def stop_child(sid: str, child: str) -> None:
            try:
                await self.subagent_control.cancel(sid, child)
            except Exception as exc:
                log.warning("stop all: subagent %s of session %s: %s", child, sid, exc)
            answers.setdefault(sid, {"session_id": sid, "turn_id": None, "receipt": None})

        async with trio.open_nursery() as nursery:
            for sid in sorted(running):
                nursery.start_soon(stop, sid)
            for sid, child in children:
                nursery.start_soon(stop_child, sid, child)
        return [answers[sid] for sid in sorted(answers)]

    # -- the receipt and the strays ------------------------------------------------

    async def receipt(self, caller: Caller, session_id: str, turn_id: str) -> dict[str, Any]:
        await self.orchestrator.session(caller, session_id)  # the caller's, else NotFound
        kept = self.receipts.latest.get(session_id)
        if kept is not None and kept[0]["turn_id"] == turn_id:
            return kept[0]
        found = await self.store.get_receipt(turn_id)
        if found is None or found[0] != session_id:
            raise NotFound(f"turn {turn_id} not found in session {session_id}")
        if found[1] is None:
            raise NotFound(f"turn {turn_id} was not stopped: it has no receipt")
        return found[1]

    async def kill_strays(self, caller: Caller, session_id: str) -> dict[str, Any]:
        """End what the agent left running in its process group (never the agent)."""
        await self.orchestrator.session(caller, session_id)
        ex = self.agents.running(session_id)
        control = None if ex is None else ex.agent.strays
        if control is None:
            return {"session_id": session_id, "killed": [], "remaining": []}
        assert ex is not None
        try:
            ended = await self.receipts.end_strays(ex, await self.receipts.strays(ex))
        except (AgentClosed, AgentTimeout) as exc:
            raise Conflict(f"the agent's host did not end its processes: {exc}") from None
        remaining = [{"pid": s.pid, "command": s.command} for s in ended.remaining]
        await self.receipts.strays_ended(session_id, remaining)
        return {"session_id": session_id, "killed": list(ended.killed), "remaining": remaining}

    # -- each agent's figures ------------------------------------------------------

    async def figures(self, profiles: list[str]) -> list[dict[str, Any]]:
        """``server.info``'s ``agent_profiles``: each profile's cancel figures for
        its latest agent version, and a note when they differ markedly from the
        version before (logged once)."""
        by_version: dict[str, dict[str, list[dict[str, Any]]]] = defaultdict(dict)
        for profile, receipt in await self.store.recent_receipts(FIGURES_FROM):
            if receipt.get("by") == "interrupt" or receipt.get("outcome") in (
                    CancelOutcome.IDLE.value, "nothing_running", "turn_ended"):
                continue  # a send now's interruption, or nothing was stopped
            version = str(receipt.get("agent_version") or "")
            by_version[profile].setdefault(version, []).append(receipt)
        out: list[dict[str, Any]] = []
        for profile in profiles:
            versions = list(by_version.get(profile, {}).items())  # newest version first
            latest = figures_of(versions[0][1]) if versions else figures_of([])
            note = self._compare(profile, versions)
            out.append({"name": profile, "cancel": latest, "note": note})
        return out

    def _compare(self, profile: str,
                 versions: list[tuple[str, list[dict[str, Any]]]]) -> str | None:
        if len(versions) < 2:
            return None
        (new, new_r), (old, old_r) = versions[0], versions[1]
        a, b = figures_of(new_r), figures_of(old_r)
        if (a["count"] < COMPARE_AFTER or b["count"] < COMPARE_AFTER
                or not a["p50_ms"] or not b["p50_ms"]):
            return None
        ratio = a["p50_ms"] / b["p50_ms"]
        if 1 / MARKEDLY < ratio < MARKEDLY:
            return None
        note = (f"{new or 'this version'} confirms a cancel in {a['p50_ms']:g} ms (p50) where "
                f"{old or 'the version before'} took {b['p50_ms']:g} ms")
        if (profile, new) not in self._noted:
            self._noted.add((profile, new))
            log.warning("agent %s: %s", profile, note)
        return note
