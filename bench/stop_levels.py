"""Phase ``stop_levels`` (issue 42, DESIGN.md §18): stop after the step, and stop all.

After the step, per mock dialect, on the dialect's latency session: a ``/steps 2 300``
turn (two tool calls of 300 ms in sequence, a 100 ms "think" between them); once the
first tool call's message says it runs, ``agent.cancel {when: "after_step"}``.  The
figure is the server's own: from the moment its pump saw the step end (the operation's
``step_over`` mark) to the protocol cancel written (``adapter_sent``), read from GET
/api/v1/debug/cancel-stages and paired to its sample by time.  For context, the client's
view: the answer's arrival minus the arrival of the tool call's ``completed`` update.
Each sample checks the next step never started: the receipt's ``tool_calls.finished``
holds exactly the one step, and no second tool call showed up.

Stop all: ``bench.p.stop_all_sessions`` mock sessions each stream a ``/delay 30000``
turn; once all are RUNNING and streaming, one ``workspace.stop_all {}``: the time to its
answer (sent once every stop settled) and to the last ``cancellation_pending:false``,
the CPU that the server, the bench client and the agents spent meanwhile, and each
session's receipt outcome.
"""

from __future__ import annotations

import os
from collections import Counter
from typing import TYPE_CHECKING, Any, Final

import psutil
import trio

from tests.support.ws import Frame, Pending, WsClient, is_cancellation, is_state, now

from .floors import DELAY_PROMPT
from .lean_client import open_lean_client
from .measure import cpu_s, log, ms
from .scale import _cpu_sum
from .stats import summary

if TYPE_CHECKING:
    from .harness import Bench

__all__ = ["STEPS_PROMPT", "TARGETS", "after_step", "pair_step_stages", "stop_all",
           "stop_all_stages", "stop_levels"]

STEPS_PROMPT = "/steps 2 300"
#: Issue 42's targets: the step's end to the cancel written (server, p50), and a
#: stop all over 50 streaming sessions to its answer, on this machine.
TARGETS: Final = {"after_step_step_over_to_adapter_sent_p50_ms": 2.0,
                  "stop_all_50_answer_ms": 200.0}
#: The first after-step stop on a session warms its path: not counted.
WARMUP = 1
#: The stop all's sessions are spread over this many subscribing connections.
STOP_ALL_CONNS = 5
_MESSAGE_ACTIONS = ("session.message.added", "session.message.updated")


def _tool_call(frame: Frame, session_id: str) -> dict[str, Any] | None:
    """The metadata of a tool call message of ``session_id`` that ``frame`` carries."""
    if frame.get("action") not in _MESSAGE_ACTIONS:
        return None
    msg = frame["payload"].get("message") or {}
    if msg.get("session_id") != session_id or msg.get("kind") != "tool_call":
        return None
    meta: dict[str, Any] = msg.get("metadata") or {}
    return meta


def _tool_status(session_id: str, statuses: tuple[str, ...],
                 tool_call_id: str | None = None) -> Any:
    def pred(f: Frame) -> bool:
        meta = _tool_call(f, session_id)
        return (meta is not None and meta.get("status") in statuses
                and (tool_call_id is None or meta.get("tool_call_id") == tool_call_id))
    return pred


async def after_step_sample(conn: WsClient, session_id: str) -> dict[str, Any]:
    """One stop after the first of two steps; ``conn`` keeps its notifications."""
    start = len(conn.notifications)
    running = conn.watch(_tool_status(session_id, ("pending", "in_progress")))
    await conn.call("message.add", {"session_id": session_id, "content": STEPS_PROMPT})
    await running.wait(30)
    assert running.frame is not None
    tool_id = str(_tool_call(running.frame, session_id)["tool_call_id"])  # type: ignore[index]
    completed = conn.watch(_tool_status(session_id, ("completed",), tool_id))
    idle = conn.watch(is_state(session_id, "WAITING_FOR_INPUT"))
    pending = await conn.send("agent.cancel", {"session_id": session_id,
                                               "when": "after_step"})
    frame = await pending.wait(30)
    if frame["type"] != "response":
        raise RuntimeError(f"agent.cancel after_step failed: {frame}")
    with trio.move_on_after(10):
        await completed.wait(10)
    if completed.frame is None:
        raise RuntimeError(f"no completed update of the running step {tool_id} "
                           f"(the stop's answer: {frame['payload']})")
    await idle.wait(30)
    receipt = frame["payload"].get("receipt") or {}
    seen = {str(meta["tool_call_id"]) for f in conn.notifications[start:]
            if (meta := _tool_call(f, session_id)) is not None}
    return {
        "sent_at": pending.sent_at, "answered_at": pending.answered_at,
        "client_step_end_to_answer_ms": ms(pending.answered_at - completed.at),
        "outcome": receipt.get("outcome"), "when": receipt.get("when"),
        "finished": list((receipt.get("tool_calls") or {}).get("finished") or []),
        "running_tool_call_id": tool_id,
        "tool_calls_seen": sorted(seen),
    }


def pair_step_stages(ops: list[dict[str, Any]], samples: list[dict[str, Any]]
                     ) -> list[dict[str, float] | None]:
    """Per sample, the server's stages of its operation (the one whose ``received_s``
    falls between the sample's send and answer, on the same host clock): the step's
    end (``step_over``) to the cancel written and to the agent's answer, in ms.  None
    where no operation pairs, or its operation never waited for a step."""
    out: list[dict[str, float] | None] = []
    for s in samples:
        op = next((o for o in ops if o.get("received_s") is not None
                   and s["sent_at"] <= o["received_s"] <= s["answered_at"]), None)
        marks = op["marks_ms"] if op is not None else {}
        if "step_over" not in marks or "adapter_sent" not in marks:
            out.append(None)
            continue
        stages = {"received_to_step_over": round(marks["step_over"], 3),
                  "step_over_to_adapter_sent": round(marks["adapter_sent"]
                                                     - marks["step_over"], 3)}
        if "agent_answered" in marks:
            stages["step_over_to_agent_answered"] = round(marks["agent_answered"]
                                                          - marks["step_over"], 3)
        out.append(stages)
    return out


async def after_step(bench: Bench, sessions: dict[str, str]) -> dict[str, Any]:
    """``bench.p.stop_step_samples`` stops after the step per mock dialect."""
    out: dict[str, Any] = {"prompt": STEPS_PROMPT, "samples": bench.p.stop_step_samples,
                           "warmup": WARMUP, "dialects": {}}
    host, port = bench.server.url.removeprefix("http://").rsplit(":", 1)
    for agent in bench.mock_agents():
        sid = sessions[agent]
        # Its own connection, keeping what it receives: each sample lists the tool
        # calls it saw (bench.main keeps nothing).
        conn = await open_lean_client(bench.nursery, host, int(port), bench.server.token)
        try:
            await conn.call("session.subscribe", {"session_id": sid})
            samples = []
            for i in range(WARMUP + bench.p.stop_step_samples):
                sample = await after_step_sample(conn, sid)
                conn.notifications.clear()
                conn.arrivals.clear()
                if i >= WARMUP:
                    samples.append(sample)
        finally:
            await conn.aclose()
        paired = pair_step_stages(await bench.stages(sid), samples)
        server = [p for p in paired if p is not None]
        d: dict[str, Any] = {
            "server_step_over_to_adapter_sent_ms": summary(
                [p["step_over_to_adapter_sent"] for p in server]),
            "server_step_over_to_agent_answered_ms": summary(
                [p["step_over_to_agent_answered"] for p in server
                 if "step_over_to_agent_answered" in p]),
            "server_received_to_step_over_ms": summary(
                [p["received_to_step_over"] for p in server]),
            "client_step_end_to_answer_ms": summary(
                [s["client_step_end_to_answer_ms"] for s in samples]),
            "paired": len(server),
            "outcomes": dict(Counter(str(s["outcome"]) for s in samples)),
            "receipt_when": dict(Counter(str(s["when"]) for s in samples)),
            # The next step never started: the receipt finished the running step only,
            # and no other tool call appeared.
            "next_step_never_started": sum(
                s["finished"] == [s["running_tool_call_id"]]
                and s["tool_calls_seen"] == [s["running_tool_call_id"]] for s in samples),
            "finished_counts": dict(Counter(len(s["finished"]) for s in samples)),
            "samples": [{k: v for k, v in s.items() if k not in ("sent_at", "answered_at")}
                        | {"server": p} for s, p in zip(samples, paired, strict=True)],
        }
        p50 = d["server_step_over_to_adapter_sent_ms"].get("p50")
        d["target_p50_ms"] = TARGETS["after_step_step_over_to_adapter_sent_p50_ms"]
        d["target_met"] = p50 is not None and p50 <= d["target_p50_ms"]
        out["dialects"][agent] = d
        log(f"stop after step {agent}: step end → cancel written p50 {p50} ms "
            f"(p99 {d['server_step_over_to_adapter_sent_ms'].get('p99')} ms, "
            f"{len(server)}/{len(samples)} paired); client step end → answer p50 "
            f"{d['client_step_end_to_answer_ms'].get('p50')} ms; next step never started "
            f"{d['next_step_never_started']}/{len(samples)}")
    return out


async def stop_all(bench: Bench) -> dict[str, Any]:
    """``workspace.stop_all`` over ``bench.p.stop_all_sessions`` streaming sessions."""
    n = bench.p.stop_all_sessions
    agent = bench.mock_agents()[0]
    t_launch = now()
    sids = await bench.launch_many(agent, n)
    launched_s = now() - t_launch
    conns = [await bench.conn() for _ in range(min(STOP_ALL_CONNS, n))]
    owner = {sid: conns[i % len(conns)] for i, sid in enumerate(sids)}
    try:
        for sid, c in owner.items():
            await c.call("session.subscribe", {"session_id": sid})
        async with trio.open_nursery() as nursery:
            for sid, c in owner.items():
                nursery.start_soon(bench.start_turn, c, sid, DELAY_PROMPT)
        listed = await bench.main.call("session.list", {"task_id": bench.task_id})
        states = {str(s["id"]): s["state"] for s in listed["sessions"]}
        if not_running := [sid for sid in sids if states.get(sid) != "RUNNING"]:
            raise RuntimeError(f"{len(not_running)} of {n} sessions are not RUNNING")
        # How loaded the machine already is by the N turns streaming.
        c0, t_c = cpu_s(bench.server.ps()), now()
        await trio.sleep(1.0)
        streaming_util = (cpu_s(bench.server.ps()) - c0) / (now() - t_c)
        settled = {sid: c.watch(is_cancellation(sid, False)) for sid, c in owner.items()}
        agents = bench.server.ps().children(recursive=True)
        cpu0 = cpu_s(bench.server.ps()), cpu_s(psutil.Process()), _cpu_sum(agents)
        pending: Pending = await bench.main.send("workspace.stop_all", {})
        frame = await pending.wait(60)
        falses = [await w.wait(30) - pending.sent_at for w in settled.values()]
        cpu1 = cpu_s(bench.server.ps()), cpu_s(psutil.Process()), _cpu_sum(agents)
        if frame["type"] != "response":
            raise RuntimeError(f"workspace.stop_all failed: {frame}")
    finally:
        for c in conns:
            await c.aclose()
    # Where the time went, per session: each operation's marks on the host's clock,
    # from the request's send (read after the measurement).
    ops = [op for sid in sids for op in (await bench.stages(sid, limit=1))[-1:]]
    stages = stop_all_stages(ops, pending.sent_at)
    entries = frame["payload"]["sessions"]
    ours = [e for e in entries if e["session_id"] in owner]
    used_ms = [round((b - a) * 1000, 1) for a, b in zip(cpu0, cpu1, strict=True)]
    answer_ms = round(pending.ms, 3)
    cpu_bound_ms = round(sum(used_ms) / (os.cpu_count() or 1), 1)
    out = {
        "sessions": n, "agent": agent, "prompt": DELAY_PROMPT,
        "launch_s": round(launched_s, 2),
        "server_cpu_util_while_streaming": round(streaming_util, 2),
        "answer_ms": answer_ms,
        "last_pending_false_ms": ms(max(falses)),
        "pending_false_ms": summary([t * 1000 for t in falses]),
        # Per mark, over the sessions' operations: ms from the request's send.
        "server_stages_ms": stages,
        "answered_sessions": len(ours),
        "other_sessions_in_answer": len(entries) - len(ours),
        "outcomes": dict(Counter(str((e.get("receipt") or {}).get("outcome"))
                                 for e in ours)),
        "by": dict(Counter(str((e.get("receipt") or {}).get("by")) for e in ours)),
        "errors": sum("error" in e for e in ours),
        # CPU from the request to the last settle (the kernel counts 10 ms ticks):
        # the server's, the bench client's (it reads every frame), the agents'.
        "server_cpu_ms": used_ms[0], "client_cpu_ms": used_ms[1],
        "agents_cpu_ms": used_ms[2],
        "cores": os.cpu_count(),
        # All three spread over every core: the least wall time the work could take.
        "cpu_bound_ms": cpu_bound_ms,
        "server_cpu_share_of_answer": round(used_ms[0] / answer_ms, 2) if answer_ms else None,
        "target_ms": TARGETS["stop_all_50_answer_ms"],
        "target_met": answer_ms <= TARGETS["stop_all_50_answer_ms"],
    }
    last = {m: v.get("max") for m, v in stages.items()}
    log(f"stop all {n}: answered in {answer_ms} ms, last pending false at "
        f"{out['last_pending_false_ms']} ms; the server's last of each mark {last} ms; "
        f"CPU server {used_ms[0]} ms, client {used_ms[1]} ms, agents {used_ms[2]} ms "
        f"(CPU-bound floor {cpu_bound_ms} ms on {out['cores']} cores); "
        f"outcomes {out['outcomes']}")
    return out


def stop_all_stages(ops: list[dict[str, Any]], sent_at: float) -> dict[str, Any]:
    """Per server mark, its summary over ``ops`` (one operation per session) in ms after
    ``sent_at`` (the host's clock, as ``received_s``): how the stops spread out."""
    per: dict[str, list[float]] = {}
    for op in ops:
        if op.get("received_s") is None:
            continue
        base = (op["received_s"] - sent_at) * 1000
        for mark, at in op["marks_ms"].items():
            per.setdefault(mark, []).append(base + at)
    return {mark: summary(v) for mark, v in per.items()}


async def stop_levels(bench: Bench, sessions: dict[str, str]) -> dict[str, Any]:
    return {"after_step": await after_step(bench, sessions), "stop_all": await stop_all(bench)}
