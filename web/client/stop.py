"""``turnvisor stop SESSION [--after-step]`` and ``turnvisor stop --all``
(DESIGN.md §18), and the one line a stop receipt is said in (``run`` prints
it too when its Ctrl-C stopped the turn)."""

from __future__ import annotations

import json
import time
from typing import Any, TextIO

from .connection import Endpoint, connect

__all__ = ["AFTER_STEP_WITHIN_S", "STOP_ALL_WITHIN_S", "receipt_line", "stop_all",
           "stop_session"]

#: How long a stop after the step may wait for its answer: the server bounds
#: the wait for the step (``after_step_timeout_s``, 120 s by default), then
#: cancels now and escalates (10 s by default) before it answers.
AFTER_STEP_WITHIN_S = 180.0
#: ``workspace.stop_all`` answers once every turn it stopped has settled, each
#: bounded by the server's escalation deadline.
STOP_ALL_WITHIN_S = 120.0


def _plural(n: int, word: str, many: str | None = None) -> str:
    return f"{n} {word if n == 1 else (many or word + 's')}"


def _count(value: Any) -> int:
    """A list's length or a number; anything else (null: not known yet) is 0."""
    if isinstance(value, list):
        return len(value)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _strays(strays: Any) -> str | None:
    if not isinstance(strays, list) or not strays:
        return None
    shown = ", ".join(f"{s.get('pid')} {str(s.get('command') or '')[:40]}".rstrip()
                      for s in strays[:3] if isinstance(s, dict))
    more = f", +{len(strays) - 3}" if len(strays) > 3 else ""
    return f"{_plural(len(strays), 'process', 'processes')} still running ({shown}{more})"


def receipt_line(receipt: dict[str, Any]) -> str:
    """``stopped in 13 ms · 1 tool call finished · 1 cancelled``: what the stop
    did and what still runs; the parts that are zero are left out."""
    outcome = receipt.get("outcome")
    head = "stopped" if outcome in (None, "cancelled") else f"stopped ({outcome})"
    ms = receipt.get("confirmed_ms")
    if isinstance(ms, (int, float)) and not isinstance(ms, bool):
        head += f" in {ms:.0f} ms"
    parts = [head]
    held = receipt.get("link_down_ms")
    if isinstance(held, (int, float)) and not isinstance(held, bool):
        # DESIGN.md §20: held while the agent's host did not answer, then sent.
        parts.append(f"held {held / 1000:.1f} s for the agent's host")
    calls = receipt.get("tool_calls") or {}
    finished, cancelled = _count(calls.get("finished")), _count(calls.get("cancelled"))
    if finished:
        parts.append(f"{_plural(finished, 'tool call')} finished")
    if cancelled:
        # "1 tool call finished · 1 cancelled": the noun once.
        parts.append(f"{cancelled} cancelled" if finished
                     else f"{_plural(cancelled, 'tool call')} cancelled")
    subagents = receipt.get("subagents") or {}
    if stopped := _count(subagents.get("stopped")):
        parts.append(f"{_plural(stopped, 'subagent')} stopped")
    if running := _count(subagents.get("running")):
        parts.append(f"{_plural(running, 'subagent')} still running")
    if parked := _count(receipt.get("queue_parked")):
        parts.append(f"{_plural(parked, 'queued prompt')} parked")
    if changed := _count(receipt.get("files_changed")):
        undo = " (revertible)" if receipt.get("revertible") else ""
        parts.append(f"{_plural(changed, 'file')} changed{undo}")
    if strays := _strays(receipt.get("strays")):
        parts.append(strays)
    return " · ".join(parts)


async def stop_session(endpoint: Endpoint, session_id: str, turn_id: str | None,
                       after_step: bool, out: TextIO) -> int:
    """The cancel's answer (with its receipt) as one JSON line, like ``cancel``."""
    payload: dict[str, Any] = {"session_id": session_id}
    if turn_id is not None:
        payload["turn_id"] = turn_id
    within = 60.0
    if after_step:
        payload["when"] = "after_step"
        within = AFTER_STEP_WITHIN_S
    async with connect(endpoint) as conn:
        started = time.perf_counter()
        answer = await conn.request("agent.cancel", payload, within=within)
        answer["latency_ms"] = round((time.perf_counter() - started) * 1000, 1)
    out.write(json.dumps(answer) + "\n")
    return 0


def _latency(receipt: dict[str, Any]) -> str:
    ms = receipt.get("confirmed_ms")
    if isinstance(ms, (int, float)) and not isinstance(ms, bool):
        return f"{ms:.0f} ms"
    return "-"


async def stop_all(endpoint: Endpoint, out: TextIO, as_json: bool) -> int:
    """One line per stopped session: session, turn, outcome, latency (or its
    JSON object with the whole receipt)."""
    async with connect(endpoint) as conn:
        answer = await conn.request("workspace.stop_all", {}, within=STOP_ALL_WITHIN_S)
    stopped: list[dict[str, Any]] = answer.get("sessions") or []
    if as_json:
        out.writelines(json.dumps(s) + "\n" for s in stopped)
        return 0
    if not stopped:
        out.write("no turn was running\n")
        return 0
    rows = [["SESSION", "TURN", "OUTCOME", "LATENCY"]]
    for s in stopped:
        receipt = s.get("receipt") or {}
        rows.append([str(s.get("session_id")), str(s.get("turn_id") or "-"),
                     str(receipt.get("outcome") or "-"), _latency(receipt)])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    for r in rows:
        out.write("  ".join([c.ljust(w) for c, w in zip(r[:-1], widths, strict=True)] + [r[-1]])
                  + "\n")
    return 0
