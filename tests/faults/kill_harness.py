"""The kill test (issue 32, item 1): a real ``turnvisor serve`` under prompts,
queue edits, cancels and streamed turns from several clients, SIGKILLed at
random moments and restarted on the same data dir, again and again.

Each client owns a session and keeps a ledger of what the server
*acknowledged* (docs/reliability.md, "Acknowledged"): a response frame
received, or a ``session.turn.completed`` notification.  What was sent but not
answered before the kill is *in doubt*: it may or may not have been written.
After each kill the database as the crash left it must pass
``PRAGMA integrity_check`` and hold everything acknowledged; after the restart
no session may be RUNNING (no agent survives a backend's death) or have a
cancel pending.
"""

from __future__ import annotations

import random
import signal
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio
from trio_websocket import ConnectionClosed

from tests.support.serverproc import ServerProcess, server_process
from tests.support.ws import WsClient, open_client

__all__ = ["KillResult", "run_kills"]


@dataclass
class Ledger:
    session_id: str
    user_messages: set[str] = field(default_factory=set)
    #: client_message_id → acknowledged contents (queued, then edited).
    queued: dict[str, set[str]] = field(default_factory=dict)
    entry_ids: dict[str, str] = field(default_factory=dict)
    removed: set[str] = field(default_factory=set)
    removing: set[str] = field(default_factory=set)
    closed_turns: set[str] = field(default_factory=set)
    in_doubt: set[str] = field(default_factory=set)


@dataclass
class KillResult:
    seed: int
    kills: int = 0
    requests: int = 0
    acknowledged: int = 0
    in_doubt: int = 0
    lost: list[str] = field(default_factory=list)
    seconds: float = 0.0
    rss_kib: list[int] = field(default_factory=list)

    def summary(self) -> str:
        return (f"kill harness: seed {self.seed}, kills {self.kills}, requests "
                f"{self.requests} (acknowledged {self.acknowledged}, in doubt at a kill "
                f"{self.in_doubt}), lost {len(self.lost)}, {self.seconds:.0f} s"
                + (f"; server RSS first/last {self.rss_kib[0]}/{self.rss_kib[-1]} KiB"
                   if self.rss_kib else "")
                + "".join(f"\n  LOST: {x}" for x in self.lost[:20]))


class Client:
    def __init__(self, ws: WsClient, ledger: Ledger, rng: random.Random,
                 result: KillResult) -> None:
        self.ws, self.ledger, self.rng, self.result = ws, ledger, rng, result

    async def ask(self, action: str, payload: dict[str, Any]) -> dict[str, Any] | None:
        self.result.requests += 1
        frame = await self.ws.request(action, payload, timeout=60)
        if frame["type"] != "response":
            return None
        self.result.acknowledged += 1
        return dict(frame["payload"])

    async def burst(self) -> None:
        """Until the kill closes the connection."""
        try:
            await self._burst()
        except (ConnectionClosed, trio.BrokenResourceError, trio.ClosedResourceError):
            pass

    async def _burst(self) -> None:
        sid, led, rng = self.ledger.session_id, self.ledger, self.rng
        while True:
            for n in self.ws.notifications:
                if (n.get("action") == "session.turn.completed"
                        and n["payload"].get("session_id") == sid):
                    led.closed_turns.add(n["payload"]["turn_id"])
            self.ws.notifications.clear()
            op = rng.choice(("prompt", "prompt", "queue", "edit", "remove", "cancel"))
            if op == "prompt":
                got = await self.ask("message.add", {"session_id": sid,
                                                     "content": f"/delay {rng.randint(50, 600)}"})
                if got is not None and got.get("delivery") in ("started", "steered"):
                    led.user_messages.add(got["id"])
            elif op == "queue":
                cid = f"c{rng.getrandbits(48):x}"
                content = f"queued {cid}"
                led.in_doubt.add(cid)
                got = await self.ask("message.add", {"session_id": sid, "content": content,
                                                     "delivery": "queue",
                                                     "client_message_id": cid})
                if got is not None:
                    led.queued[cid] = {content}
                    if "entry" in got:
                        led.entry_ids[cid] = got["entry"]["id"]
            elif op == "edit" and led.entry_ids:
                cid = rng.choice(sorted(led.entry_ids))
                content = f"edited {cid} {rng.getrandbits(16)}"
                led.queued[cid].add(content)  # in doubt until answered: either may be stored
                await self.ask("queue.update", {"session_id": sid,
                                                "entry_id": led.entry_ids[cid],
                                                "content": content})
            elif op == "remove" and led.entry_ids:
                cid = rng.choice(sorted(led.entry_ids))
                eid = led.entry_ids.pop(cid)
                led.removing.add(cid)
                got = await self.ask("queue.remove", {"session_id": sid, "entry_id": eid})
                if got is not None and eid not in {e["id"] for e in got["entries"]}:
                    led.removed.add(eid)
            elif op == "cancel":
                got = await self.ask("agent.cancel", {"session_id": sid})
                if (got is not None and got.get("record_written") is not False
                        and got.get("outcome") in ("cancelled", "escalated")
                        and got.get("turn_id")):
                    led.closed_turns.add(got["turn_id"])
            await trio.sleep(rng.uniform(0, 0.05))


def check_store(db: Path, ledgers: list[Ledger]) -> list[str]:
    """What the database lacks of the ledgers (empty: nothing lost)."""
    conn = sqlite3.connect(db, timeout=30)
    lost: list[str] = []
    try:
        if (ok := conn.execute("PRAGMA integrity_check").fetchall()) != [("ok",)]:
            lost.append(f"integrity_check: {ok}")
        for led in ledgers:
            sid = led.session_id
            if conn.execute("SELECT 1 FROM task_sessions WHERE id = ?", (sid,)).fetchone() is None:
                lost.append(f"session {sid}")
                continue
            users = {r[0] for r in conn.execute(
                "SELECT id FROM messages WHERE session_id = ? AND role = 'user'", (sid,))}
            lost += [f"user message {m}" for m in led.user_messages - users]
            started = {r[0] for r in conn.execute(
                "SELECT json_extract(metadata, '$.client_message_id') FROM messages "
                "WHERE session_id = ? AND role = 'user'", (sid,))}
            rows = {r[0]: (r[1], r[2]) for r in conn.execute(
                "SELECT client_message_id, id, content FROM queue_entries "
                "WHERE session_id = ?", (sid,))}
            for cid, contents in led.queued.items():
                if cid in rows:
                    eid, content = rows[cid]
                    if eid in led.removed:
                        lost.append(f"queue entry {eid} removed, still there")
                    elif content not in contents:
                        lost.append(f"queue entry {cid}: {content!r} not in {contents}")
                elif cid not in started and cid not in led.removing:
                    lost.append(f"queue entry {cid} (neither queued nor started)")
            for turn in led.closed_turns:
                row = conn.execute("SELECT state FROM turns WHERE id = ?", (turn,)).fetchone()
                if row is None or row[0] == "running":
                    lost.append(f"turn {turn} acknowledged closed, stored {row}")
    finally:
        conn.close()
    return lost


async def _open_clients(nursery: trio.Nursery, srv: ServerProcess,
                        clients: int) -> list[WsClient]:
    """``clients`` connections to the (re)started server, opened side by side;
    their readers live in ``nursery``."""
    opened: list[WsClient] = []

    async def one() -> None:
        opened.append(await open_client(nursery, srv, request_timeout=60))
    async with trio.open_nursery() as opening:
        for _ in range(clients):
            opening.start_soon(one)
    return opened


async def _close_clients(conns: list[WsClient]) -> None:
    """Each connection closed, side by side, each bounded: a killed server never
    answers the closing handshake (one after the other, that was up to a second
    per client per kill)."""
    async def one(ws: WsClient) -> None:
        with trio.move_on_after(1):
            await ws.aclose()
    async with trio.open_nursery() as closing:
        for ws in conns:
            closing.start_soon(one, ws)


def _rss_kib(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * 4
    except OSError:
        return 0


async def run_kills(data_dir: Path, *, seed: int | None = None, kills: int = 50,
                    seconds: float | None = None, clients: int = 3,
                    burst: tuple[float, float] = (0.2, 1.0),
                    progress: Callable[[str], None] | None = None) -> KillResult:
    """``kills`` SIGKILLs (or as many as fit in ``seconds``), then one clean start."""
    seed = random.SystemRandom().randrange(2**32) if seed is None else seed
    rng = random.Random(seed)
    result = KillResult(seed)
    start = time.monotonic()
    ledgers: list[Ledger] = []
    task_id = ""
    log = data_dir / "kill-servers.log"
    db = data_dir / "turnvisor.db"
    while True:
        more = (result.kills < kills if seconds is None
                else time.monotonic() - start < seconds)
        conns: list[WsClient] = []
        async with server_process(data_dir, log_path=log) as srv, \
                trio.open_nursery() as nursery:
            try:
                conns += await _open_clients(nursery, srv, clients)
                if not ledgers:
                    task_id = (await conns[0].call("task.create",
                                                   {"title": "kill harness"}))["id"]
                    for i in range(clients):
                        agent = ("mock", "mock-codex")[i % 2]
                        s = await conns[0].call("session.launch",
                                                {"task_id": task_id, "agent": agent})
                        ledgers.append(Ledger(s["id"]))
                async with trio.open_nursery() as subscribing:
                    for ws, led in zip(conns, ledgers, strict=True):
                        subscribing.start_soon(ws.call, "session.subscribe",
                                               {"session_id": led.session_id})
                for ws in conns[:1]:
                    state = (await ws.call("session.list", {"task_id": task_id}))["sessions"]
                    for s in state:
                        if s["state"] == "RUNNING" or s["cancellation_pending"]:
                            result.lost.append(f"after restart {result.kills}: {s['id']} "
                                               f"{s['state']} pending={s['cancellation_pending']}")
                result.rss_kib.append(_rss_kib(srv.pid))
                if more:
                    for ws, led in zip(conns, ledgers, strict=True):
                        nursery.start_soon(Client(ws, led, random.Random(rng.random()),
                                                  result).burst)
                    await trio.sleep(rng.uniform(*burst))
                    srv.proc.send_signal(signal.SIGKILL)
                    await srv.proc.wait()
            finally:
                nursery.cancel_scope.cancel()
                with trio.CancelScope(shield=True):
                    await _close_clients(conns)
        if not more:
            break
        result.kills += 1
        result.in_doubt += sum(len(ws._pending) for ws in conns)
        lost = await trio.to_thread.run_sync(check_store, db, ledgers)
        result.lost += [f"kill {result.kills}: {x}" for x in lost]
        if progress is not None:
            progress(f"kill {result.kills}: {result.requests} requests, lost "
                     f"{len(result.lost)}")
    result.seconds = time.monotonic() - start
    return result

