"""The mock agent: a real agent program speaking ACP or the Codex app-server protocol.

    python -m protocols.mock_agent --protocol acp|codex

Used by tests, benchmarks and the default ``turnvisor serve``.  It imports only
the standard library and ``protocols.jsonrpc`` so it starts in a few tens of
milliseconds.  The prompt text selects a behaviour (DESIGN.md §3):

    /delay <ms>      a chunk every 100 ms for <ms>; honours cancel at once
    /slow <ms>       the same stream, but ignores cancel until <ms> has passed
    /hang            never answers the prompt, ignores cancel
    /permission      asks permission (ACP) or approval (Codex) and waits; Codex:
                     ``cancel`` ("Deny and stop") interrupts the turn, and every
                     settled approval is followed by ``serverRequest/resolved``
    /withdraw        asks permission, then takes the request back after ~300 ms
                     (ACP ``$/cancel_request``, Codex ``serverRequest/resolved``)
                     and ends the turn with ``withdrawn: <the client's answer>``
    /dropcancel <ms> streams like /delay, but ignores the first cancel it gets
                     (``session/cancel``; ``turn/interrupt`` is answered ``{}``
                     and ignored) and honours the second, as pi-acp and vibe
                     drop a cancel that follows the prompt at once
    /tool <ms>       a tool call that runs <ms>, then finishes
    /crash           exits with status 1 mid-turn
    /garbage         writes a non-JSON line, then goes on normally
    /recall          answers ``recall: <p1> | <p2> | ...``: the user prompts this
                     agent session saw before this one, oldest first
                     (``recall: (nothing)`` if none)
    /write PATH TEXT writes TEXT (and a newline; ``\\n`` is one) to PATH under the
                     session's cwd: a tool call carrying the diff, as real agents
                     report edits (protocols/mock_edits.py)
    /append PATH TEXT  the same, appended
    /rm PATH         deletes PATH (a tool call with the diff)
    /edits <n>       <n> writes (``edit-1.txt`` ...), one per 100 ms; honours
                     cancel at once: a turn to cancel half-way
    anything else    echoes the text back in a few chunks

Sessions survive the process: each agent session (ACP session, Codex thread)
is one JSON file in the state directory (``$MOCK_AGENT_STATE_DIR``, default
``.mock-agent/`` under the working directory), rewritten atomically at each
prompt and turn end, so a new mock process can restore it.  ACP advertises
``agentCapabilities.loadSession`` and ``sessionCapabilities.resume``:
``session/load`` replays the history (``user_message_chunk`` /
``agent_message_chunk``) before it answers, ``session/resume`` does not;
Codex has ``thread/resume {threadId}``.  An unknown session is an error.
``--restore both|load|resume|none`` (ACP: what is advertised and served; Codex:
``none`` refuses ``thread/resume``) gives tests an agent that restores one
way only, or not at all.

Codex ``turn/steer {threadId, input, expectedTurnId}`` during a turn: a
``/delay`` (``/slow``, ``/dropcancel``) turn then streams ``steered: <text>``
as its next chunk; an ``expectedTurnId`` that is not the running turn is an
error.  Steered input is a user message of the session (``/recall`` lists it).
With ``--steering`` the ACP dialect offers the same through the steering
extension (``_meta.steering.supported``; ``_session/steering {sessionId,
prompt}`` answers ``{outcome: "injected"}``, or ``"promptRequired"`` with no
turn running).

ACP v2: with ``--acp-version 2`` (or ``$MOCK_AGENT_ACP_VERSION=2``; the
default is 1, a v1-only agent) the mock speaks v2 when the client's
``initialize`` offers 2, and v1 otherwise.  In v2 ``session/prompt`` is
answered ``{}`` at once (accepted), followed by a ``user_message`` and a
``running`` ``state_update``; the turn ends with ``state_update {state:
"idle", stopReason}`` (``cancelled`` after ``session/cancel``).  Chunks carry a
``messageId``, tool calls start with ``tool_call_update``, a permission request
has a ``title`` and a ``subject`` (with ``requires_action`` while it waits),
and ``session/resume`` with ``replayFrom: {type: "start"}`` replays the history
(``user_message`` / ``agent_message``) before it answers; ``session/load`` is
not served.

Faults for the reliability suite (not part of the DESIGN table):

    /stderr <n>      writes <n> KiB to stderr, then echoes
    /bigline <mb>    writes one line of <mb> MiB, then echoes
    /partial         writes a message in three pieces with pauses, then echoes
    /badutf8         writes a line of invalid UTF-8, then echoes
    /wrongshape      writes JSON of the wrong shape and a reply to an unknown id
    /closeout        closes stdout but keeps running (until stdin ends)
    /flood <mb>      streams <mb> MiB of text (16 KiB chunks) as fast as its
                     stdout takes it, honouring cancel, then waits for the
                     cancel (30 s at most) and ends the turn
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from . import mock_edits
from .jsonrpc import (
    Dialect,
    ErrorResponse,
    IncomingNotification,
    IncomingRequest,
    NeedData,
    PeerClosed,
    Response,
    RpcConnection,
)

CHUNK_INTERVAL_S = 0.1
#: ``/withdraw``: how long the request stands before the agent takes it back,
#: and how long it then waits for the client's answer to the withdrawal.
WITHDRAW_AFTER_S = 0.3
WITHDRAW_ANSWER_S = 10.0
STATE_DIR_ENV = "MOCK_AGENT_STATE_DIR"
#: ``/flood``: the size of each chunk, and how long it then waits for a cancel.
FLOOD_CHUNK = 16384
FLOOD_WAIT_S = 30.0
#: The highest ACP version the mock speaks, when ``--acp-version`` is not given.
ACP_VERSION_ENV = "MOCK_AGENT_ACP_VERSION"
#: ACP "resource not found": the session asked for is not in the state directory.
SESSION_NOT_FOUND = -32002
#: What a session id must look like to name a file (ours are UUIDs).
_SAFE_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")


class SessionStore:
    """The state directory: one JSON file per agent session,
    ``{"id", "protocol", "cwd", "messages": [{"role": "user"|"agent", "text"}]}``.

    Each write goes to a temporary file that replaces the old one, so a reader
    (a new mock process) sees the previous or the next version, never half of
    one.  A directory we cannot write is reported on stderr and otherwise
    ignored: persistence must not break the agent."""

    @classmethod
    def from_environment(cls) -> SessionStore:
        """``$MOCK_AGENT_STATE_DIR``, else ``.mock-agent/`` under the working directory."""
        return cls(Path(os.environ.get(STATE_DIR_ENV) or os.path.join(os.getcwd(), ".mock-agent")))

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def path(self, session_id: str) -> Path | None:
        if not _SAFE_ID.fullmatch(session_id):
            return None
        return self.directory / f"{session_id}.json"

    def load(self, session_id: str) -> dict[str, Any] | None:
        path = self.path(session_id)
        if path is None:
            return None
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) and isinstance(data.get("messages"), list) else None

    def save(self, session: dict[str, Any]) -> None:
        path = self.path(str(session["id"]))
        if path is None:
            return
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps(session), encoding="utf-8")
            os.replace(tmp, path)
        except OSError as exc:
            sys.stderr.write(f"mock agent: cannot save session {session['id']}: {exc}\n")
            sys.stderr.flush()


class Turn:
    """One running prompt: its cancel flag and, if any, a pending permission."""

    def __init__(self, rpc_id: int | str | None, turn_id: str) -> None:
        self.rpc_id = rpc_id
        self.turn_id = turn_id
        self.cancelled = threading.Event()
        self.permission_answer: dict[str, Any] | None = None
        self.permission_done = threading.Event()
        self.permission_rpc_id: int | None = None
        #: Cancels still to be ignored (``/dropcancel``).
        self.drop_cancels = 0
        #: The session's user prompts before this turn's (``/recall``).
        self.earlier: tuple[str, ...] = ()
        #: The agent text this turn streamed, for the session's history.
        self.reply: list[str] = []
        #: ``turn/steer`` input not streamed yet; ``steer_closed``: the turn
        #: streams no more, so it takes no more (under ``steer_lock``).
        self.steers: list[str] = []
        self.steer_closed = False
        self.steer_lock = threading.Lock()

    def add_steer(self, text: str) -> bool:
        with self.steer_lock:
            if self.steer_closed:
                return False
            self.steers.append(text)
            return True

    def take_steers(self, *, last: bool = False) -> list[str]:
        with self.steer_lock:
            taken, self.steers = self.steers, []
            self.steer_closed = self.steer_closed or last
        return taken

    def cancel(self) -> None:
        if self.drop_cancels > 0:
            self.drop_cancels -= 1
            return
        self.cancelled.set()


class MockAgent:
    def __init__(self, dialect: Dialect, store: SessionStore | None = None,
                 restore: frozenset[str] = frozenset({"load", "resume"}),
                 steering: bool = False, acp_max_version: int = 1) -> None:
        self.dialect = dialect
        #: The highest ACP version offered to clients; ``v2``: this connection
        #: negotiated 2 (set by ``initialize``).
        self.acp_max_version = acp_max_version
        self.v2 = False
        #: ACP: offer the steering extension (``--steering``).
        self.steering = steering
        self.store = store if store is not None else SessionStore.from_environment()
        #: Restore methods offered: ``load`` and/or ``resume`` (Codex: ``resume``
        #: is ``thread/resume``).
        self.restore = restore
        #: The current agent session as persisted (``SessionStore``).
        self.session: dict[str, Any] | None = None
        self.session_lock = threading.Lock()
        self.rpc = RpcConnection(dialect, first_id=0 if dialect is Dialect.JSONRPC2 else 100)
        self.out = sys.stdout.buffer
        self.lock = threading.Lock()
        self.turn: Turn | None = None
        self.session_id: str | None = None
        self.thread_id: str | None = None
        #: The session's working directory: where ``/write`` and friends edit.
        self.cwd = os.getcwd()
        self.stdout_closed = False

    # -- output -------------------------------------------------------------

    def write(self, data: bytes) -> None:
        with self.lock:
            if self.stdout_closed:
                return
            try:
                self.out.write(data)
                self.out.flush()
            except (BrokenPipeError, ValueError):
                self.stdout_closed = True

    def notify(self, method: str, params: Any) -> None:
        self.write(self.rpc.send_notification(method, params))

    def update(self, update: dict[str, Any]) -> None:
        self.notify("session/update", {"sessionId": self.session_id, "update": update})

    def state(self, state: str, stop: str | None = None) -> None:
        """v2 ``state_update``."""
        update: dict[str, Any] = {"sessionUpdate": "state_update", "state": state}
        if stop is not None:
            update["stopReason"] = stop
        self.update(update)

    def chunk(self, turn: Turn, text: str) -> None:
        turn.reply.append(text)
        if self.dialect is Dialect.JSONRPC2:
            self.write(self._chunk_bytes(turn, text))
        else:
            self.notify("item/agentMessage/delta", {
                "threadId": self.thread_id, "turnId": turn.turn_id,
                "itemId": f"msg_{turn.turn_id}", "delta": text,
            })

    def end_turn(self, turn: Turn, stop: str) -> None:
        turn.take_steers(last=True)
        with self.lock:
            if self.turn is turn:
                self.turn = None
        if turn.reply:
            self.remember("agent", "".join(turn.reply))
        if self.v2:
            self.state("idle", stop)
        elif self.dialect is Dialect.JSONRPC2:
            assert turn.rpc_id is not None
            self.write(self.rpc.send_response(turn.rpc_id, {"stopReason": stop}))
        else:
            status = {"end_turn": "completed", "cancelled": "interrupted"}.get(stop, "failed")
            self.notify("item/completed", {
                "threadId": self.thread_id, "turnId": turn.turn_id,
                "item": {"type": "agentMessage", "id": f"msg_{turn.turn_id}", "text": ""},
            })
            self.notify("turn/completed", {
                "threadId": self.thread_id,
                "turn": {"id": turn.turn_id, "items": [], "status": status, "error": None},
            })

    # -- behaviours ---------------------------------------------------------

    def run_turn(self, turn: Turn, text: str) -> None:
        words = text.split()
        command = words[0] if words and words[0].startswith("/") else ""
        arg = _int(words[1]) if len(words) > 1 else None
        match command:
            case "/delay" | "/dropcancel":
                self.stream(turn, arg or 1000, honour_cancel=True)
            case "/slow":
                self.stream(turn, arg or 1000, honour_cancel=False)
            case "/hang":
                return
            case "/permission":
                self.ask_permission(turn)
            case "/withdraw":
                self.ask_then_withdraw(turn)
            case "/tool":
                self.tool(turn, arg or 500)
            case "/crash":
                self.chunk(turn, "about to crash ")
                sys.stderr.write("mock agent: crashing on purpose\n")
                sys.stderr.flush()
                os._exit(1)
            case "/garbage":
                self.write(b"this is not JSON {\n")
                self.echo(turn, text)
            case "/recall":
                self.chunk(turn, "recall: " + (" | ".join(turn.earlier) or "(nothing)"))
                self.end_turn(turn, "end_turn")
            case "/write" | "/append" | "/rm":
                planned = mock_edits.plan_edit(command, self.cwd, text.strip()[len(command):])
                self.chunk(turn, planned if isinstance(planned, str) else self.edit(turn, planned))
                self.end_turn(turn, "end_turn")
            case "/edits":
                self.many_edits(turn, arg or 5)
            case "/stderr":
                block = b"mock agent stderr noise " * 43 + b"\n"
                for _ in range(arg or 1024):
                    os.write(2, block)
                self.echo(turn, text)
            case "/bigline":
                self.write(b'{"junk":"' + b"x" * ((arg or 20) * 1024 * 1024) + b'"}\n')
                self.echo(turn, text)
            case "/partial":
                line = self._chunk_bytes(turn, "pieced together ")
                for piece in (line[:7], line[7:20], line[20:]):
                    self.write(piece)
                    time.sleep(0.05)
                self.echo(turn, text)
            case "/badutf8":
                self.write(b'{"method":"\xff\xfe broken"}\n')
                self.echo(turn, text)
            case "/wrongshape":
                self.write(b'[1, 2, 3]\n{"method": 5}\n{"id": 98765, "result": {}}\n')
                self.notify("session/update" if self.dialect is Dialect.JSONRPC2
                            else "item/agentMessage/delta", {"unexpected": True})
                self.echo(turn, text)
            case "/flood":
                self.flood(turn, arg or 20)
            case "/closeout":
                with self.lock:
                    self.stdout_closed = True
                    self.out.close()
                    os.close(1)
            case _:
                self.echo(turn, text)

    def _chunk_bytes(self, turn: Turn, text: str) -> bytes:
        if self.dialect is Dialect.JSONRPC2:
            update: dict[str, Any] = {"sessionUpdate": "agent_message_chunk",
                                      "content": {"type": "text", "text": text}}
            if self.v2:
                update["messageId"] = f"msg_{turn.turn_id}"
            return self.rpc.send_notification("session/update", {
                "sessionId": self.session_id, "update": update,
            })
        return self.rpc.send_notification("item/agentMessage/delta", {
            "threadId": self.thread_id, "turnId": turn.turn_id,
            "itemId": f"msg_{turn.turn_id}", "delta": text,
        })

    def flood(self, turn: Turn, mib: int) -> None:
        # Not in turn.reply: the session's history would keep all of it.
        block = ("flood " * 2730 + "\n")[:FLOOD_CHUNK]
        for _ in range(mib * 1024 * 1024 // FLOOD_CHUNK):
            if turn.cancelled.is_set():
                break
            self.write(self._chunk_bytes(turn, block))
        turn.cancelled.wait(FLOOD_WAIT_S)
        self.end_turn(turn, "cancelled" if turn.cancelled.is_set() else "end_turn")

    def echo(self, turn: Turn, text: str) -> None:
        words = text.split(" ") or [""]
        for i, word in enumerate(words):
            self.chunk(turn, word + (" " if i < len(words) - 1 else ""))
        self.end_turn(turn, "end_turn")

    def stream(self, turn: Turn, ms: int, *, honour_cancel: bool) -> None:
        deadline = time.monotonic() + ms / 1000
        n = 0
        while True:
            if honour_cancel and turn.cancelled.is_set():
                self.end_turn(turn, "cancelled")
                return
            steers = turn.take_steers()
            for steer in steers:
                self.chunk(turn, f"steered: {steer}")
            if not steers:
                self.chunk(turn, f"chunk{n} ")
            n += 1
            left = deadline - time.monotonic()
            if left <= 0:
                break
            step = min(CHUNK_INTERVAL_S, left)
            if honour_cancel:
                turn.cancelled.wait(step)
            else:
                time.sleep(step)
        for steer in turn.take_steers(last=True):
            self.chunk(turn, f"steered: {steer}")
        self.end_turn(turn, "cancelled" if turn.cancelled.is_set() else "end_turn")

    def tool(self, turn: Turn, ms: int) -> None:
        tool_id = f"tool_{uuid.uuid4().hex[:8]}"
        if self.dialect is Dialect.JSONRPC2:
            # v2 has no tool_call: the first tool_call_update of an id starts it.
            self.update({"sessionUpdate": "tool_call_update" if self.v2 else "tool_call",
                         "toolCallId": tool_id, "title": f"sleep {ms} ms",
                         "kind": "execute", "status": "pending"})
            self.notify("session/update", {"sessionId": self.session_id, "update": {
                "sessionUpdate": "tool_call_update", "toolCallId": tool_id,
                "status": "in_progress"}})
        else:
            self.notify("item/started", {"threadId": self.thread_id, "turnId": turn.turn_id,
                                         "item": {"type": "commandExecution", "id": tool_id,
                                                  "command": f"sleep {ms / 1000}",
                                                  "status": "inProgress"}})
        if turn.cancelled.wait(ms / 1000):
            self.end_turn(turn, "cancelled")
            return
        if self.dialect is Dialect.JSONRPC2:
            self.notify("session/update", {"sessionId": self.session_id, "update": {
                "sessionUpdate": "tool_call_update", "toolCallId": tool_id,
                "status": "completed"}})
        else:
            self.notify("item/completed", {"threadId": self.thread_id, "turnId": turn.turn_id,
                                           "item": {"type": "commandExecution", "id": tool_id,
                                                    "command": f"sleep {ms / 1000}",
                                                    "status": "completed", "exitCode": 0}})
        self.chunk(turn, "tool finished")
        self.end_turn(turn, "end_turn")

    def edit(self, turn: Turn, edit: mock_edits.Edit) -> str:
        """Make one edit as a tool call carrying its diff; what happened, in a line."""
        tool_id = f"edit_{uuid.uuid4().hex[:8]}"
        if self.dialect is Dialect.JSONRPC2:
            self.notify("session/update", {"sessionId": self.session_id,
                                           "update": mock_edits.acp_tool_call(tool_id, edit)})
        else:
            self.notify("item/started", {
                "threadId": self.thread_id, "turnId": turn.turn_id,
                "item": mock_edits.codex_item(tool_id, edit, "inProgress")})
        try:
            edit.apply()
            status, said = "completed", f"{edit.done} {edit.path}"
        except OSError as exc:
            status, said = "failed", f"cannot edit {edit.path}: {exc}"
        if self.dialect is Dialect.JSONRPC2:
            self.notify("session/update", {"sessionId": self.session_id, "update": {
                "sessionUpdate": "tool_call_update", "toolCallId": tool_id, "status": status}})
        else:
            self.notify("item/completed", {
                "threadId": self.thread_id, "turnId": turn.turn_id,
                "item": mock_edits.codex_item(tool_id, edit, status)})
        return said

    def many_edits(self, turn: Turn, n: int) -> None:
        for i in range(1, n + 1):
            if turn.cancelled.is_set():
                self.end_turn(turn, "cancelled")
                return
            planned = mock_edits.plan_edit("/write", self.cwd, f"edit-{i}.txt edit {i}")
            if isinstance(planned, str):
                self.chunk(turn, planned)
                break
            self.edit(turn, planned)
            if i < n and turn.cancelled.wait(mock_edits.EDITS_INTERVAL_S):
                self.end_turn(turn, "cancelled")
                return
        self.chunk(turn, f"{n} edits")
        self.end_turn(turn, "end_turn")

    def ask_then_withdraw(self, turn: Turn) -> None:
        rid = self._send_permission_request(turn)
        if turn.permission_done.wait(WITHDRAW_AFTER_S) or turn.cancelled.is_set():
            # Answered (or cancelled) before we took it back: as /permission.
            self._finish_permission(turn)
            return
        if self.dialect is Dialect.JSONRPC2:
            self.notify("$/cancel_request", {"requestId": rid})
            # The client MUST answer the withdrawn request (error -32800).
            turn.permission_done.wait(WITHDRAW_ANSWER_S)
            answer = turn.permission_answer
            said = "no answer" if answer is None else str(answer.get("error", answer))
        else:
            self.notify("serverRequest/resolved", {"threadId": self.thread_id, "requestId": rid})
            said = "resolved"
        if turn.cancelled.is_set():
            self.end_turn(turn, "cancelled")
            return
        self.chunk(turn, f"withdrawn: {said}")
        self.end_turn(turn, "end_turn")

    def ask_permission(self, turn: Turn) -> None:
        self._send_permission_request(turn)
        self._finish_permission(turn)

    def _send_permission_request(self, turn: Turn) -> int:
        if self.dialect is Dialect.JSONRPC2:
            tool = {"toolCallId": "perm-tool", "title": "Write to disk", "kind": "execute",
                    "status": "pending", "rawInput": {"command": "touch file.txt"}}
            params: dict[str, Any] = {"sessionId": self.session_id, "options": [
                {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
                {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
            ]}
            if self.v2:
                params |= {"title": "Write to disk",
                           "subject": {"type": "tool_call", "toolCall": tool}}
                self.state("requires_action")
            else:
                params["toolCall"] = tool
            rid, data = self.rpc.send_request("session/request_permission", params)
        else:
            rid, data = self.rpc.send_request("item/commandExecution/requestApproval", {
                "threadId": self.thread_id, "turnId": turn.turn_id, "itemId": "perm-item",
                "command": "touch file.txt", "reason": "Write to disk",
            })
        turn.permission_rpc_id = rid
        self.write(data)
        return rid

    def _finish_permission(self, turn: Turn) -> None:
        # Waits for the answer (or the cancel); ACP clients must answer even then.
        while not turn.permission_done.wait(0.05):
            if self.dialect is Dialect.CODEX and turn.cancelled.is_set():
                break
        answer = turn.permission_answer or {}
        if self.dialect is Dialect.CODEX:
            # As Codex does once a request is settled, answered or cleared.
            self.notify("serverRequest/resolved", {
                "threadId": self.thread_id, "requestId": turn.permission_rpc_id,
            })
        if self.v2:
            self.state("running")
        if self.dialect is Dialect.JSONRPC2:
            outcome = answer.get("outcome", {})
            if turn.cancelled.is_set() or outcome.get("outcome") == "cancelled":
                self.end_turn(turn, "cancelled")
                return
            self.chunk(turn, f"permission: {outcome.get('optionId')}")
        else:
            # "cancel" is "deny and stop": Codex interrupts the turn itself.
            if turn.cancelled.is_set() or answer.get("decision") == "cancel":
                self.end_turn(turn, "cancelled")
                return
            self.chunk(turn, f"approval: {answer.get('decision')}")
        self.end_turn(turn, "end_turn")

    # -- sessions -----------------------------------------------------------

    def open_session(self, session_id: str, cwd: object) -> None:
        protocol = "acp" if self.dialect is Dialect.JSONRPC2 else "codex"
        session: dict[str, Any] = {"id": session_id, "protocol": protocol,
                                   "cwd": cwd if isinstance(cwd, str) else None, "messages": []}
        if isinstance(cwd, str) and cwd:
            self.cwd = cwd
        with self.session_lock:
            self.session = session
            self.store.save(session)

    def remember(self, role: str, text: str) -> list[str]:
        """Add a message to the session's history; the user prompts before it."""
        with self.session_lock:
            if self.session is None:
                return []
            messages: list[dict[str, str]] = self.session["messages"]
            earlier = [m["text"] for m in messages if m.get("role") == "user"]
            messages.append({"role": role, "text": text})
            self.store.save(self.session)
        return earlier

    def reopen(self, rid: int | str, method: str, session_id: object) -> dict[str, Any] | None:
        """The stored session ``session_id`` made current; None (and the
        error answered) if this agent does not restore that way or has no such session."""
        kind = "load" if method == "session/load" else "resume"
        if (kind not in self.restore) if not self.v2 else not self.restore:
            self.write(self.rpc.send_error(rid, -32601, f"method not found: {method}"))
            return None
        session = self.store.load(session_id) if isinstance(session_id, str) else None
        if session is None and self.dialect is Dialect.CODEX:
            # As codex 0.169 answers a thread it has no rollout of.
            self.write(self.rpc.send_error(
                rid, -32600, f"no rollout found for thread id {session_id}"))
            return None
        if session is None:
            self.write(self.rpc.send_error(
                rid, SESSION_NOT_FOUND, f"session not found: {session_id!r}"))
            return None
        with self.session_lock:
            self.session = session
        if isinstance(session.get("cwd"), str) and session["cwd"]:
            self.cwd = session["cwd"]
        return session

    def replay(self, session: dict[str, Any]) -> None:
        if self.v2:
            for i, message in enumerate(session["messages"]):
                user = message.get("role") == "user"
                self.notify("session/update", {"sessionId": session["id"], "update": {
                    "sessionUpdate": "user_message" if user else "agent_message",
                    "messageId": f"replay_{i}",
                    "content": [{"type": "text", "text": str(message.get("text", ""))}],
                }})
            return
        for message in session["messages"]:
            kind = "user_message_chunk" if message.get("role") == "user" else (
                "agent_message_chunk")
            self.notify("session/update", {
                "sessionId": session["id"],
                "update": {"sessionUpdate": kind,
                           "content": {"type": "text", "text": str(message.get("text", ""))}},
            })

    def steer_acp(self, rid: int | str, params: dict[str, Any]) -> None:
        turn = self.turn
        blocks = params.get("prompt") or []
        text = "".join(b.get("text", "") for b in blocks if isinstance(b, dict))
        if params.get("sessionId") != self.session_id:
            self.write(self.rpc.send_error(rid, -32602, "no such session"))
        elif turn is None or not turn.add_steer(text):
            self.write(self.rpc.send_response(rid, {"outcome": "promptRequired",
                                                    "reason": "noRunningTurn"}))
        else:
            self.remember("user", text)
            self.write(self.rpc.send_response(rid, {"outcome": "injected"}))

    def steer(self, rid: int | str, params: dict[str, Any]) -> None:
        turn = self.turn
        blocks = params.get("input") or []
        text = "".join(b.get("text", "") for b in blocks if isinstance(b, dict))
        if params.get("threadId") != self.thread_id:
            self.write(self.rpc.send_error(rid, -32600, "no such thread"))
        elif turn is None or params.get("expectedTurnId") != turn.turn_id:
            self.write(self.rpc.send_error(
                rid, -32600, f"expectedTurnId {params.get('expectedTurnId')!r} is not the "
                "active turn"))
        elif not turn.add_steer(text):
            self.write(self.rpc.send_error(rid, -32600, "the turn is ending"))
        else:
            self.remember("user", text)
            self.write(self.rpc.send_response(rid, {"turnId": turn.turn_id}))

    # -- input --------------------------------------------------------------

    def handle(self, ev: object) -> None:
        match ev:
            case IncomingRequest(id=rid, method=method, params=params):
                self.on_request(rid, method, params if isinstance(params, dict) else {})
            case IncomingNotification(method="session/cancel"):
                turn = self.turn
                if turn is not None:
                    turn.cancel()
            case Response(id=rid, result=result):
                self.on_answer(rid, result if isinstance(result, dict) else {})
            case ErrorResponse(id=rid, code=code):
                self.on_answer(rid, {"error": code})
            case _:
                pass

    def on_answer(self, rid: int | str, result: dict[str, Any]) -> None:
        turn = self.turn
        if turn is not None and turn.permission_rpc_id == rid:
            turn.permission_answer = result
            turn.permission_done.set()

    def on_request(self, rid: int | str, method: str, params: dict[str, Any]) -> None:
        acp = self.dialect is Dialect.JSONRPC2
        match method:
            case "initialize" if acp and self._offered(params) >= 2 <= self.acp_max_version:
                self.v2 = True
                v2: dict[str, Any] = {
                    "protocolVersion": 2, "authMethods": [],
                    "info": {"name": "turnvisor-mock", "version": "0.1.0"},
                    # session: the baseline (resume with or without replay).
                    "capabilities": {"session": {}} if self.restore else {},
                }
                if self.steering:
                    v2["_meta"] = {"steering": {"supported": True}}
                self.write(self.rpc.send_response(rid, v2))
            case "initialize":
                if acp:
                    caps: dict[str, Any] = {"loadSession": "load" in self.restore}
                    if "resume" in self.restore:
                        caps["sessionCapabilities"] = {"resume": {}}
                    result: Any = {
                        "protocolVersion": 1, "agentCapabilities": caps,
                        "agentInfo": {"name": "turnvisor-mock", "version": "0.1.0"},
                        "authMethods": [],
                    }
                    if self.steering:
                        result["_meta"] = {"steering": {"supported": True}}
                else:
                    result = {"userAgent": "turnvisor-mock/0.1.0", "platformOs": sys.platform}
                self.write(self.rpc.send_response(rid, result))
            case "session/new" if acp:
                self.session_id = str(uuid.uuid4())
                self.open_session(self.session_id, params.get("cwd"))
                self.write(self.rpc.send_response(rid, {"sessionId": self.session_id}))
            case "session/resume" if acp and self.v2:
                session = self.reopen(rid, method, params.get("sessionId"))
                if session is not None:
                    replay = params.get("replayFrom")
                    if isinstance(replay, dict) and replay.get("type") == "start":
                        self.replay(session)
                    self.session_id = str(session["id"])
                    self.write(self.rpc.send_response(rid, {}))
            case "session/load" | "session/resume" if acp and not self.v2:
                session = self.reopen(rid, method, params.get("sessionId"))
                if session is not None:
                    if method == "session/load":
                        # The history first: the answer says the replay is over.
                        self.replay(session)
                    self.session_id = str(session["id"])
                    self.write(self.rpc.send_response(rid, {}))
            case "thread/start" if not acp:
                self.thread_id = str(uuid.uuid4())
                self.open_session(self.thread_id, params.get("cwd"))
                thread = {"id": self.thread_id, "cwd": params.get("cwd"), "ephemeral": False}
                self.write(self.rpc.send_response(rid, {"thread": thread}))
                self.notify("thread/started", {"thread": thread})
            case "thread/resume" if not acp:
                session = self.reopen(rid, method, params.get("threadId"))
                if session is not None:
                    self.thread_id = str(session["id"])
                    cwd = params.get("cwd") or session.get("cwd")
                    thread = {"id": self.thread_id, "cwd": cwd, "ephemeral": False, "turns": []}
                    self.write(self.rpc.send_response(rid, {
                        "thread": thread, "cwd": cwd, "model": "mock", "modelProvider": "mock",
                        "approvalPolicy": "never", "approvalsReviewer": "user",
                        "sandbox": {"type": "dangerFullAccess"},
                    }))
            case "turn/steer" if not acp:
                self.steer(rid, params)
            case "_session/steering" if acp and self.steering:
                self.steer_acp(rid, params)
            case "session/prompt" | "turn/start":
                self.start_turn(rid, params)
            case "turn/interrupt" if not acp:
                turn = self.turn
                if turn is None or params.get("turnId") != turn.turn_id:
                    self.write(self.rpc.send_error(rid, -32602, "no active turn with that id"))
                    return
                self.write(self.rpc.send_response(rid, {}))
                turn.cancel()
            case _:
                self.write(self.rpc.send_error(rid, -32601, f"method not found: {method}"))

    def start_turn(self, rid: int | str, params: dict[str, Any]) -> None:
        acp = self.dialect is Dialect.JSONRPC2
        blocks = params.get("prompt" if acp else "input") or []
        text = "".join(b.get("text", "") for b in blocks if isinstance(b, dict))
        if self.turn is not None:
            self.write(self.rpc.send_error(rid, -32600, "a turn is already running"))
            return
        turn = Turn(rid if acp else None, str(uuid.uuid4()))
        turn.earlier = tuple(self.remember("user", text))
        if text.split()[:1] == ["/dropcancel"]:
            # Set before the turn's thread starts: a cancel may follow the prompt at once.
            turn.drop_cancels = 1
        self.turn = turn
        if self.v2:
            # Accepted at once; the turn itself ends with the idle state_update.
            self.write(self.rpc.send_response(rid, {}))
            self.update({"sessionUpdate": "user_message", "messageId": f"user_{turn.turn_id}",
                         "content": [{"type": "text", "text": text}]})
            self.state("running")
        if not acp:
            t: dict[str, Any] = {
                "id": turn.turn_id, "items": [], "status": "inProgress", "error": None,
            }
            self.write(self.rpc.send_response(rid, {"turn": t}))
            self.notify("turn/started", {"threadId": self.thread_id, "turn": t})
        threading.Thread(target=self.run_turn, args=(turn, text), daemon=True).start()

    def serve(self) -> int:
        stdin = sys.stdin.fileno()
        while True:
            # os.read returns what is there (b"" at EOF), like BufferedReader.read1.
            data = os.read(stdin, 65536)
            self.rpc.receive_data(data)
            while True:
                ev = self.rpc.next_event()
                if isinstance(ev, NeedData):
                    break
                if isinstance(ev, PeerClosed):
                    return 0
                self.handle(ev)


    @staticmethod
    def _offered(params: dict[str, Any]) -> int:
        version = params.get("protocolVersion")
        return version if type(version) is int else 1


def _int(value: str) -> int | None:
    try:
        return int(value)
    except ValueError:
        return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m protocols.mock_agent")
    parser.add_argument("--protocol", choices=("acp", "codex"), default="acp")
    parser.add_argument(
        "--restore", choices=("both", "load", "resume", "none"), default="both",
        help="how sessions can be restored (ACP: what initialize advertises; "
             "Codex: none refuses thread/resume)",
    )
    parser.add_argument("--steering", action="store_true",
                        help="ACP: offer the steering extension (_session/steering)")
    parser.add_argument("--acp-version", type=int, choices=(1, 2),
                        default=int(os.environ.get(ACP_VERSION_ENV) or 1),
                        help="ACP: the highest protocol version spoken (2: v2 when offered)")
    args = parser.parse_args(argv)
    dialect = Dialect.JSONRPC2 if args.protocol == "acp" else Dialect.CODEX
    restore = {"both": {"load", "resume"}, "none": set()}.get(args.restore, {args.restore})
    return MockAgent(dialect, SessionStore.from_environment(), frozenset(restore),
                     steering=args.steering, acp_max_version=args.acp_version).serve()


if __name__ == "__main__":
    sys.exit(main())
