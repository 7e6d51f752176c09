"""``turnvisor run | cancel | watch | tasks | sessions``: a person's (or a
script's) client for a running server, over the same WebSocket API as the page.

``run`` streams the agent's answer to stdout (tool calls, status and cancel
progress to stderr).  Ctrl-C stops the turn in steps (DESIGN.md §18): while a
tool call runs, the first one stops after that step (the tool call finishes,
the next never starts) and the second stops now; with none running the first
stops now.  The press after the stop now leaves at once.  Once the turn ended
it says how, how long the cancel took, and the stop's receipt.  Its exit
status says how the turn ended (``EXIT``).
"""

from __future__ import annotations

import json
import signal
import time
from dataclasses import dataclass, field
from typing import Any, TextIO

import trio

from .connection import ClientError, Connection, Endpoint, connect
from .stop import AFTER_STEP_WITHIN_S, receipt_line

__all__ = ["EXIT", "cancel_session", "list_sessions", "list_tasks", "run_prompt",
           "watch_session"]

#: ``turnvisor run``'s exit status by how the turn ended (1: the client failed).
EXIT = {"end_turn": 0, "cancelled": 3, "other": 4, "interrupted": 130}
#: How long ``run`` waits for its cancel's answer once the turn has ended.
SETTLE_S = 30.0
#: A tool call's statuses while it runs (contract-notes: "Tool calls").
RUNNING_TOOL = ("pending", "in_progress")


def _utf16(text: str) -> int:
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


@dataclass
class _Turn:
    """What ``run`` follows: its session's notifications, for its own turn."""

    session_id: str
    prompt: str
    out: TextIO
    err: TextIO
    turn_id: str | None = None
    #: Text of each agent message already written to ``out``.
    printed: dict[str, str] = field(default_factory=dict)
    announced: set[str] = field(default_factory=set)
    #: The turn's tool calls as last seen: id -> (status, title), in the order they began.
    tools: dict[str, tuple[str, str]] = field(default_factory=dict)
    #: The receipt in the turn's status message (a stop from elsewhere has one too).
    receipt: dict[str, Any] | None = None

    def running_tool(self) -> str | None:
        """The title of the last tool call still running, else None."""
        running = [title for status, title in self.tools.values() if status in RUNNING_TOOL]
        return running[-1] if running else None

    def _ours(self, turn_id: str | None) -> bool:
        return self.turn_id is not None and turn_id == self.turn_id

    def _text(self, message_id: str, content: str) -> None:
        done = self.printed.get(message_id, "")
        if content.startswith(done) and len(content) > len(done):
            self.out.write(content[len(done):])
            self.out.flush()
            self.printed[message_id] = content

    def _appended(self, message_id: str, offset: int, text: str) -> None:
        done = self.printed.get(message_id, "")
        have = _utf16(done)
        if offset + _utf16(text) <= have:
            return
        # Written from where this client's copy ends (offsets count UTF-16 units).
        skip = have - offset
        new = text if skip <= 0 else text.encode("utf-16-le", "surrogatepass")[
            2 * skip:].decode("utf-16-le", "surrogatepass")
        self.out.write(new)
        self.out.flush()
        self.printed[message_id] = done + new

    def _message(self, msg: dict[str, Any]) -> None:
        if self.turn_id is None and msg.get("role") == "user" and msg.get("content") == \
                self.prompt:
            self.turn_id = msg.get("turn_id")  # a queued prompt's turn began
        if not self._ours(msg.get("turn_id")) or msg.get("role") == "user":
            return
        kind, mid, content = msg.get("kind"), str(msg.get("id")), str(msg.get("content"))
        meta = msg.get("metadata") or {}
        if kind == "tool_call":
            self.tools[str(meta.get("tool_call_id") or mid)] = (str(meta.get("status")),
                                                                content)
        elif kind == "status" and isinstance(meta.get("receipt"), dict):
            self.receipt = meta["receipt"]
        if kind == "text":
            self._text(mid, content)
        elif mid not in self.announced and kind in ("tool_call", "status", "permission"):
            self.announced.add(mid)
            label = {"tool_call": "tool", "status": "status", "permission": "approval asked"}
            self.err.write(f"\n[{label[kind]}] {content}\n")
            self.err.flush()

    def offer(self, frame: dict[str, Any]) -> str | None:
        """The turn's stop reason once it ended, else None."""
        action, p = frame.get("action"), frame.get("payload") or {}
        if p.get("session_id") != self.session_id:
            return None
        if action in ("session.message.added", "session.message.updated"):
            self._message(p.get("message") or {})
        elif action == "session.message.appended" and self._ours(p.get("turn_id")):
            self._appended(str(p.get("message_id")), int(p.get("offset", 0)),
                           str(p.get("text", "")))
        elif action == "session.cancel.progress" and self._ours(p.get("turn_id")):
            waiting = f": waiting for {p['title']} to finish" if p.get("phase") == \
                "after_step" and p.get("title") else ""
            self.err.write(f"\n[cancel] {p.get('phase')}{waiting}\n")
        elif action == "session.turn.completed" and self._ours(p.get("turn_id")):
            return str(p.get("stop_reason"))
        return None


@dataclass
class _Stop:
    """Ctrl-C's effect on ``run``: a stop after the step, a stop now, a hard exit.

    ``level`` is the strongest cancel sent (None, ``after_step``, ``now``);
    ``answers`` each cancel's answer and its latency from its own request,
    by level (a stop now joins a stop after the step: both answer once the
    one operation settled)."""

    level: str | None = None
    outstanding: int = 0
    answered: trio.Event = field(default_factory=trio.Event)
    answers: dict[str, tuple[dict[str, Any], float]] = field(default_factory=dict)

    @property
    def asked(self) -> bool:
        return self.level is not None


async def _send_cancel(conn: Connection, turn: _Turn, stop: _Stop, level: str,
                       when: str | None) -> None:
    """``when`` None: today's request (a cancel now), as a server before
    DESIGN.md §18 takes it too."""
    started = time.perf_counter()
    payload: dict[str, Any] = {"session_id": turn.session_id}
    if turn.turn_id is not None:
        payload["turn_id"] = turn.turn_id
    if when is not None:
        payload["when"] = when
    within = AFTER_STEP_WITHIN_S if when == "after_step" else 60.0
    try:
        answer = await conn.request("agent.cancel", payload, within=within)
    except ClientError as exc:
        turn.err.write(f"cancel failed: {exc}\n")
        turn.err.flush()
    else:
        stop.answers[level] = (answer, (time.perf_counter() - started) * 1000)
    finally:
        stop.outstanding -= 1
        if stop.outstanding == 0:
            stop.answered.set()


def _press(conn: Connection, turn: _Turn, stop: _Stop, nursery: trio.Nursery) -> bool:
    """One Ctrl-C: the next stop level, sent in its own task (so that the next
    press is heard while it waits for its answer).  False: leave now."""
    if stop.level == "now":
        return False
    when: str | None
    if stop.level is None and (title := turn.running_tool()) is not None:
        turn.err.write(f"\nstopping after this step ({title})… Ctrl-C again to stop now\n")
        stop.level = when = "after_step"
    elif stop.level is None:
        turn.err.write("\ncancelling the turn (Ctrl-C again to leave at once)…\n")
        stop.level, when = "now", None
    else:
        # Joins the stop after the step: the same operation, cancelled at once.
        turn.err.write("\nstopping now… (Ctrl-C again to leave at once)\n")
        stop.level = when = "now"
    turn.err.flush()
    stop.outstanding += 1
    nursery.start_soon(_send_cancel, conn, turn, stop, stop.level, when)
    return True


async def _cancel_on_interrupt(conn: Connection, turn: _Turn, stop: _Stop,
                               nursery: trio.Nursery, scope: trio.CancelScope) -> None:
    with trio.open_signal_receiver(signal.SIGINT) as presses:
        async for _ in presses:
            if not _press(conn, turn, stop, nursery):
                turn.err.write("\nleaving without waiting for the cancel\n")
                scope.cancel()
                return


def _report(turn: _Turn, stop: _Stop) -> dict[str, Any] | None:
    """The cancel's line (the strongest level's answer), and its receipt."""
    if not stop.answers:
        return turn.receipt
    level = "now" if "now" in stop.answers else "after_step"
    answer, ms = stop.answers[level]
    outcome = answer.get("outcome", "cancelled")
    if level == "after_step":
        turn.err.write(f"cancel: {outcome} after the step ({ms:.0f} ms after Ctrl-C)\n")
    else:
        turn.err.write(f"cancel: {outcome} in {ms:.0f} ms\n")
    receipts = [a.get("receipt") for a, _ in stop.answers.values()]
    found = next((r for r in receipts if isinstance(r, dict)), None)
    return found or turn.receipt


async def _start(conn: Connection, prompt: str, agent: str | None, task_id: str | None,
                 session_id: str | None) -> str:
    if session_id is not None:
        return session_id
    if task_id is None:
        title = " ".join(prompt.split())[:80] or "turnvisor run"
        task_id = str((await conn.request("task.create", {"title": title}))["id"])
    launch: dict[str, Any] = {"task_id": task_id}
    if agent is not None:
        launch["agent"] = agent
    return str((await conn.request("session.launch", launch))["id"])


async def run_prompt(endpoint: Endpoint, prompt: str, *, agent: str | None,
                     task_id: str | None, session_id: str | None,
                     out: TextIO, err: TextIO) -> int:
    async with connect(endpoint) as conn:
        sid = await _start(conn, prompt, agent, task_id, session_id)
        await conn.request("session.subscribe", {"session_id": sid, "text_appends": True})
        turn = _Turn(sid, prompt, out, err)
        stop = _Stop()
        with trio.CancelScope() as outer:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_cancel_on_interrupt, conn, turn, stop, nursery, outer)
                answer = await conn.request("message.add", {"session_id": sid,
                                                             "content": prompt})
                if answer.get("delivery") == "queued":
                    err.write("[queued behind the running turn]\n")
                turn.turn_id = answer.get("turn_id")
                stop_reason = None
                async for frame in conn.notifications:
                    stop_reason = turn.offer(frame)
                    if stop_reason is not None:
                        break
                if stop_reason is None:
                    raise ClientError("the server closed the connection during the turn")
                if stop.asked:
                    with trio.move_on_after(SETTLE_S):
                        await stop.answered.wait()
                nursery.cancel_scope.cancel()
        if outer.cancelled_caught:
            return EXIT["interrupted"]
        out.write("\n")
        out.flush()
        receipt = _report(turn, stop)
        err.write(f"[turn ended: {stop_reason}]\n")
        if receipt is not None:
            err.write(receipt_line(receipt) + "\n")
        return EXIT.get(stop_reason or "", EXIT["other"])


async def cancel_session(endpoint: Endpoint, session_id: str, turn_id: str | None,
                         out: TextIO) -> int:
    async with connect(endpoint) as conn:
        payload: dict[str, Any] = {"session_id": session_id}
        if turn_id is not None:
            payload["turn_id"] = turn_id
        started = time.perf_counter()
        answer = await conn.request("agent.cancel", payload)
        answer["latency_ms"] = round((time.perf_counter() - started) * 1000, 1)
        out.write(json.dumps(answer) + "\n")
    return 0


async def watch_session(endpoint: Endpoint, session_id: str, out: TextIO) -> int:
    """Every notification of the session as one JSON line, until Ctrl-C (0) or
    the server goes away (1)."""
    async with connect(endpoint) as conn:
        await conn.request("session.subscribe", {"session_id": session_id})
        with trio.open_signal_receiver(signal.SIGINT) as presses:
            async with trio.open_nursery() as nursery:
                async def leave_on_interrupt() -> None:
                    async for _ in presses:
                        nursery.cancel_scope.cancel()
                        return

                nursery.start_soon(leave_on_interrupt)
                async for frame in conn.notifications:
                    out.write(json.dumps(frame) + "\n")
                    out.flush()
                if not nursery.cancel_scope.cancel_called:
                    raise ClientError("the server closed the connection")
    return 0


def _table(rows: list[list[str]], out: TextIO) -> None:
    if not rows:
        return
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    for r in rows:
        out.write("  ".join([c.ljust(w) for c, w in zip(r, widths, strict=False)] + [r[-1]])
                  .rstrip() + "\n")


async def list_tasks(endpoint: Endpoint, out: TextIO, as_json: bool) -> int:
    async with connect(endpoint) as conn:
        tasks = (await conn.request("task.list"))["tasks"]
    if as_json:
        out.writelines(json.dumps(t) + "\n" for t in tasks)
        return 0
    _table([["TASK", "SESSIONS", "RUNNING", "TITLE"]] + [
        [t["id"], str(t["session_count"]), str(t["running_count"]), t["title"]]
        for t in tasks if not t.get("archived")], out)
    return 0


async def list_sessions(endpoint: Endpoint, task_id: str, out: TextIO, as_json: bool) -> int:
    async with connect(endpoint) as conn:
        sessions = (await conn.request("session.list", {"task_id": task_id}))["sessions"]
    if as_json:
        out.writelines(json.dumps(s) + "\n" for s in sessions)
        return 0
    _table([["SESSION", "AGENT", "STATE", "TITLE"]] + [
        [s["id"], s["agent"], s["state"] + (" (cancelling)" if s["cancellation_pending"]
                                            else ""), s.get("title") or ""]
        for s in sessions], out)
    return 0
