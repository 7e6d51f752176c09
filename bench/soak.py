"""Soak: N sessions in prompt/cancel cycles with random faults, then prove
nothing is stuck or leaked and memory stayed flat (issue 8, item 4).

    python -m bench.soak [--sessions 20] [--seconds 60] [--long] [--seed N] [--json PATH]

``--long`` is the 30-minute run (``--seconds 1800``).  CI runs the 60 s one as
a test (tests/faults/test_soak.py).

The server runs in this process (``web.server.serve`` on loopback with real
mock-agent processes, both dialects), so its Trio tasks can be counted.  Each
session has a worker that loops until the time is up, drawing one operation:

    turn        a prompt answered to the end
    cancel      a streaming turn cancelled after a random delay
    crash       the agent exits mid-turn                    (fault)
    hang        the agent never answers, ignores cancel     (fault: escalation)
    slow        the agent ignores cancel for a while        (fault: late)
    garbage     a non-JSON line in the agent's output       (fault)
    drop        a second client sends the cancel and leaves at once (fault)
    duplicate   two cancels at once: one operation, both succeed (fault)
    reconnect   the session's own client goes away mid-turn, a new one
                resubscribes from the snapshot              (fault)

Every operation is bounded; a failure is any unexpected answer, an
INTERNAL_ERROR or traceback in any frame, a turn or cancel that does not end
in time, or a session not WAITING_FOR_INPUT with pending false afterwards.

At the end: quiesce, give every session one last turn (so each has a live
agent again, the shape of the warm-up baseline), then compare Trio tasks,
file descriptors, child processes and RSS with that baseline; stop the server
and check the process is back to where it was before it started, with no
agent process left.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import trio
from trio_websocket import ConnectionClosed

from supervisor.config import Limits
from supervisor.models import SessionState
from tests.support.leaks import Snapshot, processes_in, rss_bytes
from tests.support.server import Server, running_server
from tests.support.ws import RequestFailed, Watch, WsClient, is_turn_completed, open_client

__all__ = ["Options", "Result", "main", "run_soak"]

OPS: dict[str, int] = {  # weights
    "turn": 3, "cancel": 5, "crash": 1, "hang": 1, "slow": 1, "garbage": 1,
    "drop": 2, "duplicate": 1, "reconnect": 1,
}
FAULTS = {"crash", "hang", "slow", "garbage", "drop", "duplicate", "reconnect"}
TIMEOUTS = {"cancel_join_s": 0.5, "cancel_escalate_s": 1.5, "cancel_cleanup_s": 1.0,
            "term_grace_s": 0.5, "agent_start_s": 30.0, "shutdown_s": 10.0}
OP_TIMEOUT_S = 30.0
#: RSS may grow this much from the warm baseline to the end (allocator slack,
#: SQLite page cache); a leak per operation blows through it in the long run.
RSS_BOUND = 48 * 1024 * 1024


@dataclass
class Options:
    sessions: int = 20
    seconds: float = 60.0
    seed: int | None = None
    data_dir: Path | None = None
    quiet: bool = False
    ops: dict[str, int] = field(default_factory=lambda: dict(OPS))


@dataclass
class Result:
    seconds: float = 0.0
    sessions: int = 0
    seed: int = 0
    operations: Counter[str] = field(default_factory=Counter)
    faults: Counter[str] = field(default_factory=Counter)
    outcomes: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    leaks: dict[str, Any] = field(default_factory=dict)
    rss_mb: dict[str, float] = field(default_factory=dict)
    counts: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.failures and not self.leaks

    def summary(self) -> str:
        ops = sum(self.operations.values())
        lines = [
            f"soak: {self.sessions} sessions, {self.seconds:.0f} s, seed {self.seed}",
            f"operations: {ops}  " + "  ".join(f"{k}={v}" for k, v in
                                                sorted(self.operations.items())),
            f"faults injected: {sum(self.faults.values())}  " + "  ".join(
                f"{k}={v}" for k, v in sorted(self.faults.items())),
            "cancel outcomes: " + "  ".join(f"{k}={v}" for k, v in
                                             sorted(self.outcomes.items())),
            "rss MiB: " + "  ".join(f"{k}={v:.1f}" for k, v in self.rss_mb.items()),
            "counts: " + "  ".join(f"{k}={v}" for k, v in self.counts.items()),
            f"leaks: {self.leaks or 'none'}",
            f"failures: {len(self.failures)}",
        ]
        lines += [f"  - {f}" for f in self.failures[:20]]
        return "\n".join(lines)


class OpFailed(Exception):
    pass


# -- the run -----------------------------------------------------------------------------


@dataclass(eq=False)
class SessionWorker:
    sid: str
    agent: str
    conn: WsClient
    rng: random.Random


class Soak:
    def __init__(self, opts: Options, server: Server, nursery: trio.Nursery,
                 result: Result) -> None:
        self.opts, self.server, self.sup = opts, server, server.sup
        self.nursery, self.result = nursery, result
        self.workers: list[SessionWorker] = []
        self.started = trio.current_time()

    async def connect(self) -> WsClient:
        # Nothing is kept (this process's memory is measured); every frame is inspected.
        return await open_client(self.nursery, self.server, keep=False, inspect=self.inspect,
                                 request_timeout=OP_TIMEOUT_S)

    def inspect(self, text: str) -> None:
        if "Traceback" in text or 'File "' in text or "INTERNAL_ERROR" in text:
            self.result.failures.append(f"bad frame: {text[:300]}")

    async def setup(self, rng: random.Random) -> None:
        admin = await self.connect()
        tasks = [(await admin.call("task.create", {"title": f"soak {i}"}))["id"]
                 for i in range(max(1, self.opts.sessions // 5))]
        for i in range(self.opts.sessions):
            agent = "mock" if i % 2 == 0 else "mock-codex"
            conn = await self.connect()
            sid = (await conn.call("session.launch",
                                   {"task_id": tasks[i % len(tasks)], "agent": agent}))["id"]
            await conn.call("session.subscribe", {"session_id": sid})
            self.workers.append(SessionWorker(sid, agent, conn,
                                              random.Random(rng.random())))
        await admin.aclose()

    async def run_worker(self, w: SessionWorker, deadline: float) -> None:
        ops, weights = zip(*self.opts.ops.items(), strict=True)
        while trio.current_time() < deadline:
            op = w.rng.choices(ops, weights)[0]
            self.result.operations[op] += 1
            if op in FAULTS:
                self.result.faults[op] += 1
            try:
                with trio.fail_after(OP_TIMEOUT_S * 5):
                    await getattr(self, f"op_{op}")(w)
                    await self.check_settled(w)
            except (OpFailed, RequestFailed, trio.TooSlowError, ConnectionClosed) as exc:
                failure = (f"{op} on {w.sid[:8]} ({w.agent}) at "
                           f"{trio.current_time() - self.started:.1f}s: "
                           f"{type(exc).__name__}: {exc}")
                self.result.failures.append(failure)
                if not self.opts.quiet:
                    print(f"  FAILURE {failure}", flush=True)
                await self.recover(w)
            await trio.sleep(w.rng.uniform(0.02, 0.2))

    # -- operations --------------------------------------------------------------------

    def client(self, w: SessionWorker) -> WsClient:
        return w.conn

    async def prompt(self, w: SessionWorker, text: str) -> Watch:
        c = self.client(w)
        waiting = c.watch(is_turn_completed(w.sid))
        await c.call("message.add", {"session_id": w.sid, "content": text})
        return waiting

    async def turn_ended(self, waiting: Watch, *allowed: str) -> str:
        start = trio.current_time()
        with trio.move_on_after(OP_TIMEOUT_S):
            await waiting.done.wait()
        if not waiting.done.is_set():
            # Late or stuck?  Wait a while longer to tell which (still a failure).
            with trio.move_on_after(3 * OP_TIMEOUT_S):
                await waiting.done.wait()
            took = trio.current_time() - start
            if waiting.done.is_set():
                raise OpFailed(f"the turn ended only after {took:.1f} s "
                               f"(bound {OP_TIMEOUT_S:g} s)")
            raise OpFailed(f"the turn did not end within {took:.0f} s")
        assert waiting.frame is not None
        reason = str(waiting.frame["payload"]["stop_reason"])
        if allowed and reason not in allowed:
            raise OpFailed(f"turn ended {reason}, expected {allowed}")
        return reason

    async def cancel(self, w: SessionWorker, c: WsClient | None = None) -> None:
        await (c or self.client(w)).call("agent.cancel", {"session_id": w.sid})
        # The operation settled (and was recorded) before the answer was sent.
        for op in reversed(self.sup.orchestrator.settled):
            if op.session_id == w.sid:
                if op.outcome is not None:
                    self.result.outcomes[op.outcome.value] += 1
                break

    async def op_turn(self, w: SessionWorker) -> None:
        waiting = await self.prompt(w, f"soak words {w.rng.randrange(10**6)}")
        await self.turn_ended(waiting, "end_turn")

    async def op_cancel(self, w: SessionWorker) -> None:
        waiting = await self.prompt(w, f"/delay {w.rng.randrange(1500, 6000)}")
        await trio.sleep(w.rng.uniform(0.0, 0.8))
        await self.cancel(w)
        await self.turn_ended(waiting, "cancelled", "end_turn")

    async def op_crash(self, w: SessionWorker) -> None:
        await self.turn_ended(await self.prompt(w, "/crash"), "error")

    async def op_hang(self, w: SessionWorker) -> None:
        waiting = await self.prompt(w, "/hang")
        await trio.sleep(w.rng.uniform(0.0, 0.3))
        await self.cancel(w)
        await self.turn_ended(waiting, "cancelled")

    async def op_slow(self, w: SessionWorker) -> None:
        waiting = await self.prompt(w, f"/slow {w.rng.randrange(300, 1200)}")
        await trio.sleep(w.rng.uniform(0.0, 0.3))
        await self.cancel(w)
        await self.turn_ended(waiting, "cancelled", "end_turn")

    async def op_garbage(self, w: SessionWorker) -> None:
        await self.turn_ended(await self.prompt(w, "/garbage"), "end_turn")

    async def op_drop(self, w: SessionWorker) -> None:
        waiting = await self.prompt(w, f"/delay {w.rng.randrange(2000, 6000)}")
        await trio.sleep(w.rng.uniform(0.0, 0.5))
        other = await self.connect()
        await other.send_raw(json.dumps({
            "id": "drop", "type": "request", "action": "agent.cancel",
            "payload": {"session_id": w.sid}}))
        await trio.sleep(w.rng.uniform(0.0, 0.05))
        await other.aclose()
        await self.turn_ended(waiting, "cancelled", "end_turn")

    async def op_duplicate(self, w: SessionWorker) -> None:
        waiting = await self.prompt(w, "/delay 5000")
        await trio.sleep(w.rng.uniform(0.0, 0.4))
        other = await self.connect()
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self.cancel, w)
                nursery.start_soon(self.cancel, w, other)
        finally:
            await other.aclose()
        await self.turn_ended(waiting, "cancelled", "end_turn")

    async def op_reconnect(self, w: SessionWorker) -> None:
        await self.client(w).call("message.add", {"session_id": w.sid, "content": "/delay 2000"})
        await trio.sleep(w.rng.uniform(0.0, 0.5))
        with trio.move_on_after(10) as closing:
            await w.conn.aclose()
        if closing.cancelled_caught:
            raise OpFailed("closing the client took more than 10 s")
        w.conn = await self.connect()
        c = self.client(w)
        waiting = c.watch(is_turn_completed(w.sid))
        snapshot = c.watch(lambda f: f.get("action") == "session.state_changed"
                           and f["payload"].get("session_id") == w.sid)
        await c.call("session.subscribe", {"session_id": w.sid})
        with trio.move_on_after(10):
            await snapshot.done.wait()
        if snapshot.frame is None:
            raise OpFailed("no state snapshot within 10 s of subscribing")
        if snapshot.frame["payload"]["new_state"] == "RUNNING":
            await self.turn_ended(waiting, "end_turn", "cancelled")

    # -- checks --------------------------------------------------------------------------

    async def check_settled(self, w: SessionWorker) -> None:
        """After an operation: WAITING_FOR_INPUT, nothing pending (within bounds)."""
        with trio.move_on_after(OP_TIMEOUT_S):
            while True:
                session = await self.sup.store.call(self.sup.store.db.get_session, w.sid)
                progress = self.sup.notify.projection.get(w.sid)
                if (session is not None and session.state is SessionState.WAITING_FOR_INPUT
                        and not progress.pending):
                    return
                await trio.sleep(0.05)
        raise OpFailed(f"not settled: {session.state if session else None}, "
                       f"pending {progress.pending}")

    async def recover(self, w: SessionWorker) -> None:
        """After a failure: a fresh client, and a cancel, so the run goes on."""
        try:
            await w.conn.aclose()
            w.conn = await self.connect()
            await self.client(w).call("session.subscribe", {"session_id": w.sid})
            await self.client(w).request("agent.cancel", {"session_id": w.sid})
        except Exception as exc:
            self.result.failures.append(f"recover {w.sid[:8]}: {exc!r}")

    async def quiesce(self) -> list[str]:
        problems: list[str] = []
        with trio.move_on_after(OP_TIMEOUT_S):
            while True:
                problems = []
                stuck = await self.sup.store.call(
                    self.sup.store.db.sessions_in_states,
                    (SessionState.RUNNING, SessionState.STARTING))
                if stuck:
                    problems.append(f"{len(stuck)} sessions RUNNING/STARTING")
                if self.sup.orchestrator.operations:
                    problems.append(f"{len(self.sup.orchestrator.operations)} cancel operations")
                pending = [w.sid for w in self.workers
                           if self.sup.notify.projection.get(w.sid).pending]
                if pending:
                    problems.append(f"{len(pending)} sessions cancellation_pending")
                if any(ex.turn is not None for ex in self.sup.lifecycle.executions.values()):
                    problems.append("executions with a turn")
                if not problems:
                    return []
                await trio.sleep(0.1)
        return problems

    async def reshape(self) -> None:
        """Every session: one plain turn (so it has a live agent again)."""
        async with trio.open_nursery() as nursery:
            for w in self.workers:
                nursery.start_soon(self.op_turn, w)

    def live_agents(self) -> int:
        return len({ex.agent.pgid for ex in self.sup.lifecycle.executions.values()})


async def run_soak(opts: Options) -> Result:
    seed = opts.seed if opts.seed is not None else random.randrange(2**32)
    rng = random.Random(seed)
    result = Result(seconds=opts.seconds, sessions=opts.sessions, seed=seed)
    before = Snapshot.take()
    with tempfile.TemporaryDirectory(prefix="turnvisor-soak-") as tmp:
        data_dir = opts.data_dir or Path(tmp)
        rss_series: list[float] = []

        # (Every client here comes from one address: no per-peer cap.)
        async with running_server(data_dir, timeouts=TIMEOUTS, start_timeout=60,
                                  limits=Limits(max_connections_per_peer=100_000)) as server, \
                trio.open_nursery() as clients:
            sup = server.sup
            soak = Soak(opts, server, clients, result)
            await soak.setup(rng)
            await soak.reshape()  # warm-up: one turn each
            await soak.quiesce()
            warm = Snapshot.take()
            rss_series.append(warm.rss)
            deadline = trio.current_time() + opts.seconds

            async def sample() -> None:
                while trio.current_time() < deadline:
                    await trio.sleep(min(5.0, max(opts.seconds / 12, 0.5)))
                    rss_series.append(rss_bytes())
                    if not opts.quiet:
                        ops = sum(result.operations.values())
                        print(f"  t={opts.seconds - (deadline - trio.current_time()):5.0f}s"
                              f" ops={ops} faults={sum(result.faults.values())}"
                              f" failures={len(result.failures)}"
                              f" rss={rss_series[-1] / 2**20:.0f}MiB", flush=True)

            async with trio.open_nursery() as workers:
                workers.start_soon(sample)
                for w in soak.workers:
                    workers.start_soon(soak.run_worker, w, deadline)
            problems = await soak.quiesce()
            result.failures += [f"stuck at the end: {p}" for p in problems]
            await soak.reshape()
            problems = await soak.quiesce()
            result.failures += [f"stuck after the last turns: {p}" for p in problems]
            end = Snapshot.take()
            # Agents were restarted meanwhile: only the number of children counts.
            for name, leak in warm.leaks(end, respawned=True).items():
                result.leaks[f"{name}_while_running"] = leak
            result.counts.update({
                "tasks": (sum(warm.tasks.values()), sum(end.tasks.values())),
                "fds": (warm.fds, end.fds),
                "children": (len(warm.children), len(end.children))})
            result.rss_mb = {"warm": warm.rss / 2**20, "end": end.rss / 2**20,
                             "max": max([*rss_series, end.rss]) / 2**20}
            if end.rss - warm.rss > RSS_BOUND:
                result.leaks["rss"] = (f"+{(end.rss - warm.rss) / 2**20:.1f} MiB"
                                       f" > {RSS_BOUND / 2**20:.0f} MiB")
            result.counts.update({
                "sessions_with_live_agent": soak.live_agents(),
                "slow_clients_dropped": sup.bus.dropped_subscribers,
                "cancel_operations": sup.orchestrator.operations_started})
            for w in soak.workers:
                await w.conn.aclose()
            clients.cancel_scope.cancel()
        # The server is gone: so must every agent and every resource it had.
        with trio.move_on_after(10):
            while processes_in(data_dir / "work"):
                await trio.sleep(0.1)
        left = processes_in(data_dir / "work")
        if left:
            result.leaks["agent_processes_after_stop"] = sorted(left)
        for name, leak in (await before.settled(timeout=15)).items():
            result.leaks[f"{name}_after_stop"] = leak
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--long", action="store_true", help="30 minutes (--seconds 1800)")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--json", type=Path, default=None, help="write the result here")
    parser.add_argument("--ops", default=None,
                        help="operation weights, e.g. cancel=5,hang=1 (default: all)")
    parser.add_argument("--log-level", default=os.environ.get("TURNVISOR_LOG", "ERROR"),
                        help="the server's log level (its warnings are expected here)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    seconds = 1800.0 if args.long else args.seconds
    started = time.monotonic()
    ops = dict(OPS)
    if args.ops:
        ops = {name: int(weight) for name, weight in
               (item.split("=") for item in args.ops.split(","))}
        unknown = set(ops) - set(OPS)
        if unknown:
            parser.error(f"unknown operations: {', '.join(sorted(unknown))}")
    result = trio.run(run_soak, Options(sessions=args.sessions, seconds=seconds,
                                        seed=args.seed, ops=ops))
    print(result.summary())
    print(f"wall time {time.monotonic() - started:.0f} s; "
          f"command: python -m bench.soak --sessions {args.sessions} --seconds {seconds:g} "
          f"--seed {result.seed}")
    if args.json is not None:
        data = asdict(result)
        # asdict rebuilds a Counter from (key, value) pairs, counting the pairs.
        for name in ("operations", "faults", "outcomes"):
            data[name] = dict(getattr(result, name))
        data["ok"] = result.ok
        args.json.write_text(json.dumps(data, indent=2, default=str))
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
