"""What the mock agent's parts share: a turn as its behaviour script sees it, what a
script may wait for, the effects, the dialect interface (``Wire``) and what scripts and
dialects may use of the machine (``Agent``).

A behaviour script is a generator: it writes through its ``Turn`` (chunks, tool calls,
raw bytes, the end of the turn) and yields a ``Wait`` whenever the real agent would wait.
The machine (protocols/mock/machine.py) resumes it when the wait is over: its time is up,
or the cancel or the permission answer it waits for has come.  Nothing here blocks or
reads a clock, so the same script runs on a real clock in ``python -m protocols.mock_agent``
and on Trio's MockClock in the tests' in-process twin.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ..jsonrpc import RpcConnection
from ..mock_edits import Edit

__all__ = ["SESSION_NOT_FOUND", "Agent", "Child", "CloseOut", "Effect", "Err", "Exit", "Out",
           "Script", "Spawn", "Turn", "Wait", "Wire", "prompt_text"]

#: ACP "resource not found": the session asked for is not in the state directory.
SESSION_NOT_FOUND = -32002


@dataclass(frozen=True, slots=True)
class Out:
    """Bytes for stdout."""

    data: bytes


@dataclass(frozen=True, slots=True)
class Err:
    """Bytes for stderr."""

    data: bytes


@dataclass(frozen=True, slots=True)
class Exit:
    """The process ends now with ``status`` (``/crash``)."""

    status: int


@dataclass(frozen=True, slots=True)
class CloseOut:
    """stdout is closed; the process goes on reading (``/closeout``)."""


Effect = Out | Err | Exit | CloseOut


@dataclass(frozen=True, slots=True)
class Wait:
    """Resume after ``seconds`` (None: no timer), or sooner when a cancel comes (``cancel``)
    or the permission request is answered (``answer``).  ``Wait(0)`` lets input in."""

    seconds: float | None = None
    cancel: bool = False
    answer: bool = False


class Turn:
    """One running prompt: its cancel, its permission request, its steers, its reply."""

    def __init__(self, agent: Agent, rpc_id: int | str | None, turn_id: str) -> None:
        self.agent = agent
        self.rpc_id = rpc_id
        self.turn_id = turn_id
        self.cancelled = False
        #: Cancels still to be ignored (``/dropcancel``).
        self.drop_cancels = 0
        self.permission_rpc_id: int | None = None
        #: The client's answer to the permission request (``{"error": code}`` for an error).
        self.answer: dict[str, Any] | None = None
        #: The session's user prompts before this turn's (``/recall``).
        self.earlier: tuple[str, ...] = ()
        #: The agent text this turn streamed, for the session's history.
        self.reply: list[str] = []
        #: Steered input not streamed yet; ``steer_closed``: the turn streams no
        #: more, so it takes no more.
        self.steers: list[str] = []
        self.steer_closed = False
        #: The machine's bookkeeping: the script, what it waits for and until when.
        self.script: Iterator[Wait] | None = None
        self.wait: Wait | None = None
        self.wake_at: float | None = None

    @property
    def now(self) -> float:
        return self.agent.now

    @property
    def wire(self) -> Wire:
        return self.agent.wire

    @property
    def answered(self) -> bool:
        return self.answer is not None

    def write(self, data: bytes) -> None:
        self.agent.send(data)

    def notify(self, method: str, params: Any) -> None:
        self.agent.notify(method, params)

    def chunk(self, text: str) -> None:
        self.reply.append(text)
        self.agent.send(self.wire.chunk(self, text))

    def end(self, stop: str) -> None:
        """End the turn as the protocol says (``end_turn``, ``cancelled``, ...)."""
        self.agent.end_turn(self, stop)

    def cancel(self) -> None:
        if self.drop_cancels > 0:
            self.drop_cancels -= 1
            return
        self.cancelled = True

    def add_steer(self, text: str) -> bool:
        if self.steer_closed:
            return False
        self.steers.append(text)
        return True

    def take_steers(self, *, last: bool = False) -> list[str]:
        taken, self.steers = self.steers, []
        self.steer_closed = self.steer_closed or last
        return taken


@dataclass(slots=True)
class Child:
    """A child session (``/subagents``): its id, its title, the turn whose script
    runs it, whether its cancel came and whether it has ended."""

    id: str
    title: str
    turn: Turn
    cancelled: bool = False
    done: bool = False


#: A behaviour: given its turn and the prompt's text, the generator that plays it.
Script = Callable[[Turn, str], Iterator[Wait]]

#: Starts a command in the agent's own process group and returns its pid at once,
#: never waiting for it (``/stray``).  The one effect that cannot wait for the caller:
#: the script says the pid.  None where the agent has no process of its own (the
#: tests' in-process twin).
Spawn = Callable[[Sequence[str]], int]


class Agent(Protocol):
    """What scripts and dialects use of the machine (protocols/mock/machine.py)."""

    rpc: RpcConnection
    wire: Wire
    now: float
    cwd: str
    session_id: str | None
    turn: Turn | None
    restore: frozenset[str]
    steering: bool
    children: dict[str, Child]
    spawn: Spawn | None
    legacy_options: bool
    #: ACP: it offers its options and commands (``--no-offers``: neither).
    offers: bool
    options: dict[str, str]
    turn_settings: dict[str, object]
    #: The MCP servers the session was given (protocols/mock/mcp.py).
    mcp_servers: list[dict[str, Any]]
    #: ACP: it takes image blocks (protocols/mock/attachments.py).
    images: bool
    #: What the last prompt carried beside its text (``/attachments``).
    prompt_parts: list[str]
    #: It needs a login before a session (protocols/mock/login.py).
    login: bool

    def new_id(self) -> str: ...
    def emit(self, effect: Effect) -> None: ...
    def send(self, data: bytes) -> None: ...
    def notify(self, method: str, params: Any) -> None: ...
    def respond(self, rid: int | str, result: Any) -> None: ...
    def error(self, rid: int | str, code: int, message: str) -> None: ...
    def open_session(self, session_id: str, cwd: object) -> None: ...
    def remember(self, role: str, text: str, turn_id: str | None = None) -> list[str]: ...
    def rewind(self, before_turn: object) -> bool: ...
    def restore_asked(self, session_id: object) -> bool: ...
    def reopen(self, session_id: object) -> dict[str, Any] | None: ...
    def set_option(self, option_id: str, value: str) -> None: ...
    def start_turn(self, rid: int | str, text: str) -> None: ...
    def end_turn(self, turn: Turn, stop: str) -> None: ...
    def close_turn(self, turn: Turn) -> None: ...
    def cancel_turn(self) -> None: ...
    def cancel_child(self, child: Child) -> None: ...


def prompt_text(blocks: object) -> str:
    """The text of a prompt's content blocks (``prompt`` in ACP, ``input`` in Codex)."""
    if not isinstance(blocks, list):
        return ""
    return "".join(str(b.get("text", "")) for b in blocks if isinstance(b, dict))


class Wire:
    """One dialect.  ``agent`` is the machine it speaks for."""

    #: The session's ``protocol`` in the state directory.
    protocol = "acp"
    #: Where /wrongshape sends a notification of the wrong shape.
    update_method = "session/update"
    #: Does a cancel end the wait for a permission answer?  (ACP clients must answer
    #: the request even then; Codex clears it itself.)
    cancel_ends_permission = False
    #: May child sessions be shown to the client (ACP: v2, or v1's opt-in)?
    subagents = False

    def __init__(self, agent: Agent) -> None:
        self.agent = agent

    def on_request(self, rid: int | str, method: str, params: dict[str, Any]) -> bool:
        """Answer a request; False: not a method of this dialect."""
        raise NotImplementedError

    def accept_turn(self, rid: int | str, turn: Turn, text: str) -> None:
        """What the agent says as a prompt starts its turn."""

    def chunk(self, turn: Turn, text: str) -> bytes:
        raise NotImplementedError

    def end_turn(self, turn: Turn, stop: str) -> None:
        raise NotImplementedError

    def tool_started(self, turn: Turn, tool_id: str, ms: int) -> None:
        raise NotImplementedError

    def tool_finished(self, turn: Turn, tool_id: str, ms: int) -> None:
        raise NotImplementedError

    def command_started(self, turn: Turn, tool_id: str, title: str) -> None:
        """A shell-like command starts, running (``/steps``, ``/stray``): ``title`` is
        what the client shows (Codex: the item's ``command``)."""
        raise NotImplementedError

    def command_finished(self, turn: Turn, tool_id: str, title: str, status: str) -> None:
        """It ended (``completed`` or ``failed``).  A cancelled one is not reported:
        the client marks it (ACP), and Codex leaves an interrupted command open."""
        raise NotImplementedError

    def edit_started(self, turn: Turn, tool_id: str, edit: Edit) -> None:
        raise NotImplementedError

    def edit_finished(self, turn: Turn, tool_id: str, edit: Edit, status: str) -> None:
        raise NotImplementedError

    def ask_permission(self, turn: Turn) -> int:
        """Send the permission request; its id."""
        raise NotImplementedError

    def subagent_announced(self, child: Child) -> None:
        """A child session starts (only where ``subagents``)."""
        raise NotImplementedError

    def subagent_chunk(self, child: Child, text: str) -> None:
        raise NotImplementedError

    def subagent_tool(self, child: Child, title: str) -> None:
        """The child runs a tool (done at once): its trace names it."""
        raise NotImplementedError

    def subagent_state(self, child: Child, state: str, stop: str | None = None) -> None:
        raise NotImplementedError

    def permission_settled(self, turn: Turn) -> tuple[bool, str]:
        """After the answer (or the cancel): did it stop the turn, and what to say if not."""
        raise NotImplementedError

    def withdraw(self, turn: Turn, rid: int) -> bool:
        """Take the permission request back; True: the client must answer the withdrawal."""
        raise NotImplementedError

    def usage(self, turn: Turn, used: int) -> None:
        """Report tokens used (``/usage``): ``used`` of the context."""
        raise NotImplementedError

    def title(self, turn: Turn, name: str) -> str:
        """Name the session (``/title``); what to say of it."""
        raise NotImplementedError

    def options_text(self, turn: Turn) -> str:
        """The option values in effect, as ``/options`` says them."""
        raise NotImplementedError

    def agent_sets(self, turn: Turn, option_id: str, value: str) -> str:
        """The agent changes an option itself (``/agentset``); what to say of it."""
        raise NotImplementedError
