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
import secrets
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import trio
import trio.lowlevel
from trio_websocket import ConnectionClosed, WebSocketConnection, open_websocket_url

from supervisor.config import Config
from supervisor.models import SessionState
from supervisor.root import Supervisor
from web.server import serve

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


# -- what this process holds ------------------------------------------------------


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _stat(pid: str) -> tuple[str, int, int] | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            data = f.read()
    except OSError:
        return None
    rest = data[data.rindex(")") + 2:].split()
    return rest[0], int(rest[1]), int(rest[2])


def _children() -> set[int]:
    me = os.getpid()
    return {int(p) for p in os.listdir("/proc") if p.isdigit()
            and (st := _stat(p)) is not None and st[1] == me}


def _in_dir(directory: Path) -> set[int]:
    root = str(directory.resolve())
    out = set()
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            cwd = os.readlink(f"/proc/{p}/cwd")
        except OSError:
            continue
        st = _stat(p)
        if (cwd == root or cwd.startswith(root + "/")) and st is not None and st[0] != "Z":
            out.add(int(p))
    return out


def _tasks() -> Counter[str]:
    names: Counter[str] = Counter()
    root = trio.lowlevel.current_root_task()
    stack = [root] if root is not None else []
    while stack:
        task = stack.pop()
        names[task.name] += 1
        for nursery in task.child_nurseries:
            stack.extend(nursery.child_tasks)
    return names


# -- a minimal client ------------------------------------------------------------------


class Client:
    """One WebSocket connection: responses by id, per-session turn ends."""

    def __init__(self, conn: WebSocketConnection, result: Result) -> None:
        self.conn = conn
        self.result = result
        self.waiters: dict[str, trio.MemorySendChannel[dict[str, Any]]] = {}
        self.turn_end: dict[str, tuple[trio.Event, list[str]]] = {}
        self.states: dict[str, dict[str, Any]] = {}
        self.closed = False

    async def reader(self) -> None:
        try:
            while True:
                message = await self.conn.get_message()
                text = message if isinstance(message, str) else message.decode(errors="replace")
                if "Traceback" in text or 'File "' in text or "INTERNAL_ERROR" in text:
                    self.result.failures.append(f"bad frame: {text[:300]}")
                frame = json.loads(text)
                kind, payload = frame["type"], frame["payload"]
                if kind in ("response", "error") and frame["id"] in self.waiters:
                    self.waiters.pop(frame["id"]).send_nowait(frame)
                elif frame["action"] == "session.turn.completed":
                    waiting = self.turn_end.get(payload["session_id"])
                    if waiting is not None:
                        waiting[1].append(payload["stop_reason"])
                        waiting[0].set()
                elif frame["action"] == "session.state_changed":
                    self.states[payload["session_id"]] = payload
        except (ConnectionClosed, trio.ClosedResourceError, trio.BrokenResourceError):
            pass
        finally:
            self.closed = True

    async def request(self, action: str, payload: dict[str, Any],
                      within: float = OP_TIMEOUT_S) -> dict[str, Any]:
        rid = uuid.uuid4().hex
        send, receive = trio.open_memory_channel[dict[str, Any]](1)
        self.waiters[rid] = send
        try:
            await self.conn.send_message(json.dumps(
                {"id": rid, "type": "request", "action": action, "payload": payload}))
            with trio.fail_after(within):
                return await receive.receive()
        finally:
            self.waiters.pop(rid, None)

    async def call(self, action: str, payload: dict[str, Any]) -> dict[str, Any]:
        frame = await self.request(action, payload)
        if frame["type"] != "response":
            raise OpFailed(f"{action} → {frame['payload']}")
        return frame["payload"]  # type: ignore[no-any-return]

    def expect_turn_end(self, sid: str) -> tuple[trio.Event, list[str]]:
        waiting: tuple[trio.Event, list[str]] = (trio.Event(), [])
        self.turn_end[sid] = waiting
        return waiting


class OpFailed(Exception):
    pass


class _Connected:
    """A client in its own nursery, closed by ``aclose``."""

    def __init__(self, url: str, token: str, result: Result) -> None:
        self.url, self.token, self.result = url, token, result
        self.client: Client | None = None
        self._cancel: trio.CancelScope | None = None
        self._done = trio.Event()

    async def start(self, nursery: trio.Nursery) -> Client:
        ready = trio.Event()
        nursery.start_soon(self._run, ready)
        await ready.wait()
        assert self.client is not None
        return self.client

    async def _run(self, ready: trio.Event) -> None:
        try:
            with trio.CancelScope() as scope:
                self._cancel = scope
                async with open_websocket_url(
                    self.url, extra_headers=[(b"Authorization", f"Bearer {self.token}".encode())],
                    max_message_size=64 * 1024 * 1024,
                ) as conn, trio.open_nursery() as nursery:
                    self.client = Client(conn, self.result)
                    nursery.start_soon(self.client.reader)
                    ready.set()
                    await trio.sleep_forever()
        finally:
            ready.set()
            self._done.set()

    @property
    def closed(self) -> bool:
        return self._done.is_set()

    async def aclose(self) -> None:
        if self._cancel is not None:
            self._cancel.cancel()
        await self._done.wait()


# -- the run -----------------------------------------------------------------------------


@dataclass(eq=False)
class SessionWorker:
    sid: str
    agent: str
    conn: _Connected
    rng: random.Random


class Soak:
    def __init__(self, opts: Options, sup: Supervisor, url: str, token: str,
                 nursery: trio.Nursery, result: Result) -> None:
        self.opts, self.sup, self.url, self.token = opts, sup, url, token
        self.ws_url = url.replace("http://", "ws://") + "/ws"
        self.nursery, self.result = nursery, result
        self.workers: list[SessionWorker] = []
        self.started = trio.current_time()

    async def connect(self) -> _Connected:
        c = _Connected(self.ws_url, self.token, self.result)
        await c.start(self.nursery)
        return c

    async def setup(self, rng: random.Random) -> None:
        admin = await self.connect()
        assert admin.client is not None
        tasks = [(await admin.client.call("task.create", {"title": f"soak {i}"}))["id"]
                 for i in range(max(1, self.opts.sessions // 5))]
        for i in range(self.opts.sessions):
            agent = "mock" if i % 2 == 0 else "mock-codex"
            conn = await self.connect()
            assert conn.client is not None
            sid = (await conn.client.call("session.launch",
                                          {"task_id": tasks[i % len(tasks)], "agent": agent}))["id"]
            await conn.client.call("session.subscribe", {"session_id": sid})
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
            except (OpFailed, trio.TooSlowError, ConnectionClosed) as exc:
                failure = (f"{op} on {w.sid[:8]} ({w.agent}) at "
                           f"{trio.current_time() - self.started:.1f}s: "
                           f"{type(exc).__name__}: {exc}")
                self.result.failures.append(failure)
                if not self.opts.quiet:
                    print(f"  FAILURE {failure}", flush=True)
                await self.recover(w)
            await trio.sleep(w.rng.uniform(0.02, 0.2))

    # -- operations --------------------------------------------------------------------

    def client(self, w: SessionWorker) -> Client:
        assert w.conn.client is not None
        return w.conn.client

    async def prompt(self, w: SessionWorker, text: str) -> tuple[trio.Event, list[str]]:
        c = self.client(w)
        waiting = c.expect_turn_end(w.sid)
        await c.call("message.add", {"session_id": w.sid, "content": text})
        return waiting

    async def turn_ended(self, waiting: tuple[trio.Event, list[str]], *allowed: str) -> str:
        start = trio.current_time()
        with trio.move_on_after(OP_TIMEOUT_S):
            await waiting[0].wait()
        if not waiting[0].is_set():
            # Late or stuck?  Wait a while longer to tell which (still a failure).
            with trio.move_on_after(3 * OP_TIMEOUT_S):
                await waiting[0].wait()
            took = trio.current_time() - start
            if waiting[0].is_set():
                raise OpFailed(f"the turn ended only after {took:.1f} s "
                               f"(bound {OP_TIMEOUT_S:g} s)")
            raise OpFailed(f"the turn did not end within {took:.0f} s")
        reason = waiting[1][0]
        if allowed and reason not in allowed:
            raise OpFailed(f"turn ended {reason}, expected {allowed}")
        return reason

    async def cancel(self, w: SessionWorker, c: Client | None = None) -> None:
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
        assert other.client is not None
        await other.client.conn.send_message(json.dumps({
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
                nursery.start_soon(self.cancel, w, other.client)
        finally:
            await other.aclose()
        await self.turn_ended(waiting, "cancelled", "end_turn")

    async def op_reconnect(self, w: SessionWorker) -> None:
        await self.client(w).call("message.add", {"session_id": w.sid, "content": "/delay 2000"})
        await trio.sleep(w.rng.uniform(0.0, 0.5))
        with trio.move_on_after(10):
            await w.conn.aclose()
        if not w.conn.closed:
            raise OpFailed("closing the client took more than 10 s")
        w.conn = await self.connect()
        c = self.client(w)
        waiting = c.expect_turn_end(w.sid)
        await c.call("session.subscribe", {"session_id": w.sid})
        with trio.move_on_after(10):
            while w.sid not in c.states:
                await trio.sleep(0.01)
        if w.sid not in c.states:
            raise OpFailed("no state snapshot within 10 s of subscribing")
        if c.states[w.sid]["new_state"] == "RUNNING":
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

    def snapshot(self) -> dict[str, Any]:
        live = {ex.agent.pgid for ex in self.sup.lifecycle.executions.values()}
        return {"tasks": _tasks(), "fds": _fds(), "children": _children(),
                "executions": len(live), "rss": _rss()}


async def run_soak(opts: Options) -> Result:
    seed = opts.seed if opts.seed is not None else random.randrange(2**32)
    rng = random.Random(seed)
    result = Result(seconds=opts.seconds, sessions=opts.sessions, seed=seed)
    before = {"tasks": _tasks(), "fds": _fds(), "children": _children()}
    with tempfile.TemporaryDirectory(prefix="turnvisor-soak-") as tmp:
        data_dir = opts.data_dir or Path(tmp)
        config = Config.from_mapping(data_dir, {"timeouts": TIMEOUTS})
        token = secrets.token_urlsafe(24)
        stop = trio.Event()
        ready: list[tuple[str, Supervisor]] = []
        rss_series: list[float] = []

        async with trio.open_nursery() as outer:
            async def server(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
                             ) -> None:
                def on_ready(url: str, sup: Supervisor) -> None:
                    ready.append((url, sup))
                    task_status.started()
                await serve(config, host="127.0.0.1", port=0, token=token,
                            on_ready=on_ready, stop=stop)

            with trio.fail_after(60):
                await outer.start(server)
            url, sup = ready[0]
            try:
                async with trio.open_nursery() as clients:
                    soak = Soak(opts, sup, url, token, clients, result)
                    await soak.setup(rng)
                    await soak.reshape()  # warm-up: one turn each
                    await soak.quiesce()
                    warm = soak.snapshot()
                    rss_series.append(warm["rss"])
                    deadline = trio.current_time() + opts.seconds

                    async def sample() -> None:
                        while trio.current_time() < deadline:
                            await trio.sleep(min(5.0, max(opts.seconds / 12, 0.5)))
                            rss_series.append(_rss())
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
                    end = soak.snapshot()
                    _compare(result, warm, end)
                    result.rss_mb = {"warm": warm["rss"] / 2**20, "end": end["rss"] / 2**20,
                                     "max": max([*rss_series, end["rss"]]) / 2**20}
                    if end["rss"] - warm["rss"] > RSS_BOUND:
                        result.leaks["rss"] = (f"+{(end['rss'] - warm['rss']) / 2**20:.1f} MiB"
                                               f" > {RSS_BOUND / 2**20:.0f} MiB")
                    result.counts.update({
                        "sessions_with_live_agent": end["executions"],
                        "slow_clients_dropped": sup.bus.dropped_subscribers,
                        "cancel_operations": sup.orchestrator.operations_started})
                    for w in soak.workers:
                        await w.conn.aclose()
                    clients.cancel_scope.cancel()
            finally:
                stop.set()
        # The server is gone: so must every agent and every resource it had.
        with trio.move_on_after(10):
            while _in_dir(data_dir / "work"):
                await trio.sleep(0.1)
        left = _in_dir(data_dir / "work")
        if left:
            result.leaks["agent_processes_after_stop"] = sorted(left)
        after = await _settled(before)
        result.leaks.update(after)
    return result


def _compare(result: Result, warm: dict[str, Any], end: dict[str, Any]) -> None:
    extra = end["tasks"] - warm["tasks"]
    if sum(end["tasks"].values()) > sum(warm["tasks"].values()):
        result.leaks["tasks_while_running"] = dict(extra)
    if end["fds"] > warm["fds"]:
        result.leaks["fds_while_running"] = (warm["fds"], end["fds"])
    if len(end["children"]) > len(warm["children"]):
        result.leaks["children_while_running"] = (len(warm["children"]), len(end["children"]))
    result.counts.update({"tasks": (sum(warm["tasks"].values()), sum(end["tasks"].values())),
                          "fds": (warm["fds"], end["fds"]),
                          "children": (len(warm["children"]), len(end["children"]))})


async def _settled(before: dict[str, Any], within: float = 15.0) -> dict[str, Any]:
    leaks: dict[str, Any] = {}
    with trio.move_on_after(within):
        while True:
            leaks = {}
            tasks = _tasks()
            if sum(tasks.values()) > sum(before["tasks"].values()):
                leaks["tasks_after_stop"] = dict(tasks - before["tasks"])
            if _fds() > before["fds"]:
                leaks["fds_after_stop"] = (before["fds"], _fds())
            if _children() - before["children"]:
                leaks["children_after_stop"] = sorted(_children() - before["children"])
            if not leaks:
                return leaks
            await trio.sleep(0.1)
    return leaks


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
