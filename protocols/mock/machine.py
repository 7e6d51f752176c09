"""The mock agent as a sans-IO state machine: bytes in, effects out, timers asked for.

    machine.receive_data(data, now)   # what came on stdin (b"" at its end)
    machine.advance(now)              # time passed: resume the scripts that are due
    machine.next_wakeup()             # when to call advance next (None: only on input)
    machine.effects()                 # what to do: Out / Err bytes, CloseOut, Exit

It reads no clock and does no stdio: the caller passes the time in, so the same machine
runs as ``python -m protocols.mock_agent`` (protocols/mock/stdio.py, the real clock) and
as the tests' in-process agent (tests/supervisor/fake_agent.py, Trio's MockClock).  What
a real agent does on disk it does too: sessions go to its ``Store``, ``/write`` edits files.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from ..jsonrpc import (
    Dialect,
    ErrorResponse,
    IncomingNotification,
    IncomingRequest,
    NeedData,
    PeerClosed,
    Response,
    RpcConnection,
)
from . import mcp
from .acp1 import Acp1Wire
from .acp2 import Acp2Wire
from .base import Child, CloseOut, Effect, Exit, Out, Script, Spawn, Turn, Wire
from .codex import CodexWire
from .commands import script_for
from .login import intercept as login_intercept
from .options import DEFAULTS
from .sessions import Store

__all__ = ["MockMachine"]

RESTORE_BOTH = frozenset({"load", "resume"})


def _new_uuid() -> str:
    return str(uuid.uuid4())


def _answer_restores() -> bool:
    return True


class MockMachine:
    """One mock agent process's state: its dialect, its session, its turn.

    ``restore``: how sessions can be restored (ACP ``load`` and/or ``resume``; Codex:
    ``resume`` is ``thread/resume``).  ``acp_max_version``: the highest ACP version it
    speaks (2: v2 when the client offers it).  ``new_id`` names new sessions;
    ``answer_restore`` is asked at each restore request (False: it is never answered,
    a fault for timeouts).  ``extra`` adds behaviour scripts by command.  ``spawn``
    starts a process in the agent's group (``/stray``; the program passes the real one,
    protocols/mock/stdio.py); None: there is no process of its own to start one in.
    ``legacy_options``: ACP v1 offers its options as the legacy ``modes``/``models``
    (protocols/mock/options.py).  ``images``: ACP advertises image prompts
    (protocols/mock/attachments.py).  ``offers`` False: ACP offers no options and no
    commands (the bench's baseline for the cancel with them)."""

    def __init__(self, protocol: str, store: Store, *, restore: frozenset[str] = RESTORE_BOTH,
                 steering: bool = False, acp_max_version: int = 1,
                 new_id: Callable[[], str] = _new_uuid,
                 answer_restore: Callable[[], bool] = _answer_restores,
                 extra: Mapping[str, Script] | None = None, cwd: str | None = None,
                 spawn: Spawn | None = None, legacy_options: bool = False,
                 images: bool = True, login: bool = False, offers: bool = True) -> None:
        acp = protocol == "acp"
        self.rpc = RpcConnection(Dialect.JSONRPC2 if acp else Dialect.CODEX,
                                 first_id=0 if acp else 100)
        self.wire: Wire = Acp1Wire(self) if acp else CodexWire(self)
        self.store = store
        self.restore = restore
        self.steering = steering
        self.acp_max_version = acp_max_version
        self.new_id = new_id
        self.answer_restore = answer_restore
        self.extra = extra
        self.spawn = spawn
        self.legacy_options = legacy_options
        self.images = images
        self.login = login
        self.offers = offers
        #: What the last prompt carried beside its text (``/attachments``).
        self.prompt_parts: list[str] = []
        #: The session's option values (mode, model), kept with the session.
        self.options: dict[str, str] = dict(DEFAULTS)
        #: Codex: the ``model``, ``effort`` and ``approvalPolicy`` the last
        #: ``turn/start`` carried (``/options`` says them).
        self.turn_settings: dict[str, object] = {}
        #: The MCP servers the session was given (``/mcp`` lists them).
        self.mcp_servers: list[dict[str, Any]] = []
        #: The working directory: where ``/write`` and friends edit.
        self.cwd = cwd if cwd is not None else os.getcwd()
        self.now = 0.0
        #: The current agent session (ACP session or Codex thread) as persisted.
        self.session: dict[str, Any] | None = None
        self.session_id: str | None = None
        #: The open turn (the protocol's), and every script still running.
        self.turn: Turn | None = None
        self.running: list[Turn] = []
        #: Child sessions (``/subagents``) by id, while their script runs them.
        self.children: dict[str, Child] = {}
        #: stdin ended or the process exited: nothing more comes in or goes out.
        self.closed = False
        self.stdout_closed = False
        self._effects: list[Effect] = []
        #: What it was sent, for tests to look at: prompts, cancels, restores asked for.
        self.prompts: list[str] = []
        self.cancels = 0
        self.resumed: list[str] = []

    # -- the caller's side ----------------------------------------------------

    def receive_data(self, data: bytes, now: float) -> None:
        self.now = now
        if self.closed:
            return
        self.rpc.receive_data(data)
        while not self.closed and not isinstance(ev := self.rpc.next_event(), NeedData):
            match ev:
                case PeerClosed():
                    self.closed = True
                case IncomingRequest(id=rid, method=method, params=params):
                    self.on_request(rid, method, params if isinstance(params, dict) else {})
                case IncomingNotification(method="session/cancel", params=params):
                    sid = params.get("sessionId") if isinstance(params, dict) else None
                    if sid in self.children:
                        self.cancel_child(self.children[sid])
                    elif sid is None or sid == self.session_id or not self.is_child(sid):
                        self.cancel_turn()
                    else:
                        self.cancels += 1  # a child that has ended: nothing to stop
                case Response(id=rid, result=result):
                    self.on_answer(rid, result if isinstance(result, dict) else {})
                case ErrorResponse(id=rid, code=code):
                    self.on_answer(rid, {"error": code})
                case _:
                    pass

    def advance(self, now: float) -> None:
        self.now = now
        for turn in list(self.running):
            if not self.closed and turn.wake_at is not None and turn.wake_at <= now:
                self.step(turn)

    def next_wakeup(self) -> float | None:
        due = [t.wake_at for t in self.running if t.wake_at is not None]
        return min(due) if due else None

    def effects(self) -> list[Effect]:
        taken, self._effects = self._effects, []
        return taken

    # -- what scripts and wires use --------------------------------------------

    def emit(self, effect: Effect) -> None:
        if isinstance(effect, Out) and self.stdout_closed:
            return
        if isinstance(effect, CloseOut):
            self.stdout_closed = True
        if isinstance(effect, Exit):
            self.closed = True
        self._effects.append(effect)

    def send(self, data: bytes) -> None:
        self.emit(Out(data))

    def notify(self, method: str, params: Any) -> None:
        self.send(self.rpc.send_notification(method, params))

    def respond(self, rid: int | str, result: Any) -> None:
        self.send(self.rpc.send_response(rid, result))

    def error(self, rid: int | str, code: int, message: str) -> None:
        self.send(self.rpc.send_error(rid, code, message))

    def open_session(self, session_id: str, cwd: object) -> None:
        self.options = dict(DEFAULTS)
        self.session = {"id": session_id, "protocol": self.wire.protocol,
                        "cwd": cwd if isinstance(cwd, str) else None, "messages": [],
                        "options": self.options}
        if isinstance(cwd, str) and cwd:
            self.cwd = cwd
        self.store.save(self.session)

    def remember(self, role: str, text: str, turn_id: str | None = None) -> list[str]:
        """Add a message to the session's history (with the turn it came in,
        so a Codex ``thread/revert`` can drop it); the user prompts before it."""
        if self.session is None:
            return []
        messages: list[dict[str, str]] = self.session["messages"]
        earlier = [m["text"] for m in messages if m.get("role") == "user"]
        message = {"role": role, "text": text}
        if turn_id is not None:
            message["turn"] = turn_id
        messages.append(message)
        self.store.save(self.session)
        return earlier

    def rewind(self, before_turn: object) -> bool:
        """Drop the history from turn ``before_turn`` on; False if it has no such turn."""
        messages = self.session["messages"] if self.session is not None else []
        cut = next((i for i, m in enumerate(messages) if m.get("turn") == before_turn), None)
        if self.session is None or cut is None:
            return False
        del messages[cut:]
        self.store.save(self.session)
        return True

    def restore_asked(self, session_id: object) -> bool:
        """A restore of ``session_id`` was asked for: answer it?"""
        self.resumed.append(str(session_id))
        return self.answer_restore()

    def reopen(self, session_id: object) -> dict[str, Any] | None:
        """The stored session ``session_id`` made current; None if there is none."""
        session = self.store.load(session_id) if isinstance(session_id, str) else None
        if session is None:
            return None
        self.session = session
        if isinstance(session.get("cwd"), str) and session["cwd"]:
            self.cwd = session["cwd"]
        kept = session.get("options")
        self.options = {**DEFAULTS, **(kept if isinstance(kept, dict) else {})}
        session["options"] = self.options
        return session

    def set_option(self, option_id: str, value: str) -> None:
        """An option's new value, kept with the session."""
        self.options[option_id] = value
        if self.session is not None:
            self.store.save(self.session)

    def start_turn(self, rid: int | str, text: str) -> None:
        if self.turn is not None:
            self.error(rid, -32600, "a turn is already running")
            return
        self.prompts.append(text)
        turn = Turn(self, rid if self.wire.protocol == "acp" else None, _new_uuid())
        turn.earlier = tuple(self.remember("user", text, turn.turn_id))
        if text.split()[:1] == ["/dropcancel"]:
            # Before the script runs: a cancel may follow the prompt at once.
            turn.drop_cancels = 1
        self.turn = turn
        self.wire.accept_turn(rid, turn, text)
        turn.script = script_for(text, self.extra)(turn, text)
        self.running.append(turn)
        self.step(turn)

    def end_turn(self, turn: Turn, stop: str) -> None:
        self.close_turn(turn)
        if turn.reply:
            self.remember("agent", "".join(turn.reply), turn.turn_id)
        self.wire.end_turn(turn, stop)

    def close_turn(self, turn: Turn) -> None:
        """The turn is over (whatever the script says of it on the wire)."""
        turn.take_steers(last=True)
        if self.turn is turn:
            self.turn = None

    def cancel_turn(self) -> None:
        self.cancels += 1
        turn = self.turn
        if turn is None:
            return
        turn.cancel()
        if turn.cancelled and turn.wait is not None and turn.wait.cancel:
            self.step(turn)

    def is_child(self, sid: object) -> bool:
        """A child session id of this agent's, running or ended (``/subagents``)."""
        return isinstance(sid, str) and self.session_id is not None and sid.startswith(
            f"{self.session_id}.sub")

    def cancel_child(self, child: Child) -> None:
        """A child's own cancel: its script sees it at once (the parent goes on)."""
        self.cancels += 1
        if child.done or child.cancelled:
            return
        child.cancelled = True
        if child.turn.wait is not None and child.turn.script is not None:
            self.step(child.turn)

    # -- inside -----------------------------------------------------------------

    def on_request(self, rid: int | str, method: str, params: dict[str, Any]) -> None:
        if (method == "initialize" and isinstance(self.wire, Acp1Wire)
                and _offered(params) >= 2 <= self.acp_max_version):
            self.wire = Acp2Wire(self)
        if method in mcp.METHODS:
            mcp.received(self, method, params)
        if login_intercept(self, rid, method, params):
            return
        if not self.wire.on_request(rid, method, params):
            self.error(rid, -32601, f"method not found: {method}")

    def on_answer(self, rid: int | str, result: dict[str, Any]) -> None:
        turn = self.turn
        if turn is not None and turn.permission_rpc_id == rid:
            turn.answer = result
            if turn.wait is not None and turn.wait.answer:
                self.step(turn)

    def step(self, turn: Turn) -> None:
        """Run ``turn``'s script to its next wait that is not over yet (or its end)."""
        while turn.script is not None and not self.closed:
            try:
                wait = next(turn.script)
            except StopIteration:
                break
            turn.wait = wait
            if (wait.cancel and turn.cancelled) or (wait.answer and turn.answered):
                continue
            turn.wake_at = None if wait.seconds is None else self.now + max(0.0, wait.seconds)
            return
        turn.script = turn.wait = turn.wake_at = None
        if turn in self.running:
            self.running.remove(turn)


def _offered(params: dict[str, Any]) -> int:
    version = params.get("protocolVersion")
    return version if type(version) is int else 1
