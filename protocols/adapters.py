"""Agent adapters: one interface over ACP and the Codex app-server.

An adapter is a sans-IO core plus an ``AgentConnection``.  It owns no task:
the caller runs ``adapter.connection.run`` (the stdout reader) in a nursery it
owns, then calls ``initialize``, ``new_session``, ``prompt``...  Every wait is
bounded by ``AdapterTimeouts``.

``cancel()`` only writes the protocol's cancel (and the answers the protocol
requires to pending permission requests); the turn is over when the pending
``prompt()`` returns, normally with stop reason ``cancelled``.

ACP requests that time out (``initialize``, ``session/new|resume|load``) are withdrawn
with ``$/cancel_request``.  An agent that needs a login first: ``AuthRequired``; ``login``.

``restore_session`` reopens a conversation in a fresh agent process (after a
restart, a crash, an escalation, an idle stop) instead of ``new_session``:
ACP ``session/resume`` when the agent advertises it, else ``session/load``
(its replay is consumed: ``HistoryReplayed``), Codex ``thread/resume``; an
agent that can do neither raises ``RestoreUnsupported``.  ``set_option`` sets one
of the options the agent offered (``OptionsChanged`` on ``events``): ACP at once
(``session/set_config_option``, or ``set_mode``/``set_model`` for the legacy shapes),
Codex from the next ``turn/start`` on; ValueError for an option or value not offered.
``mcp_servers`` (protocols/mcp.py) go with every session opened or restored: ACP
``mcpServers``, Codex ``config`` overrides; one of a kind the agent cannot take fails the
``new_session`` / ``restore_session`` with ``McpUnsupported`` before anything is sent.
``steer`` adds user input to the running turn (Codex ``turn/steer``); where the protocol cannot,
``SteerUnsupported``.  ``revert_thread`` drops a turn and every later one
from the agent's own history (Codex ``thread/revert``, after a revert of the
files: DESIGN.md §12); ``RevertUnsupported`` where the protocol has no such call.

Ids: ``agent_session_id`` is the agent's own conversation id (ACP
``sessionId``, Codex ``threadId``); ``operation_id`` is what a cancel acts on
(ACP: the session, Codex: the running turn's id).  Neither is Turnvisor's
session id.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Literal, Protocol, TypeAlias

import trio

from . import codex_account
from .acp import AcpClient, AcpVersion
from .acp_auth import AUTH_REQUIRED, AuthRequired
from .codex import CodexClient
from .events import AgentEvent, SubagentChanged, TurnEnded
from .framing import DEFAULT_MAX_LINE_BYTES
from .mcp import McpServer, McpUnsupported, codex_config
from .prompt_parts import Line, PromptPart, acp_prompt_caps, acp_refusal, codex_refusal, streamed
from .transport import (
    AgentClosed,
    AgentConnection,
    AgentLink,
    AgentRefused,
    AgentRequestError,
    AgentTimeout,
)

__all__ = [
    "AcpAdapter",
    "AcpVersion",
    "AdapterTimeouts",
    "AgentAdapter",
    "AgentClosed",
    "AgentLink",
    "AgentRefused",
    "AgentRequestError",
    "AgentTimeout",
    "CodexAdapter",
    "McpServer",
    "McpUnsupported",
    "OptionApplied",
    "OptionsUnsupported",
    "ProtocolName",
    "RestoreMethod",
    "RestoreUnsupported",
    "Restored",
    "RevertUnsupported",
    "SteerUnsupported",
    "WireProtocol",
    "make_adapter",
]

ProtocolName = Literal["acp", "codex"]
#: The dialect a connection speaks, as the session DTO's ``protocol`` names it.
WireProtocol: TypeAlias = Literal["acp/1", "acp/2", "codex"]
#: When a set option takes effect: at once, or from the next turn (Codex).
OptionApplied: TypeAlias = Literal["now", "next_turn"]
#: How a conversation was restored: ACP ``session/resume`` / ``session/load``,
#: Codex ``thread/resume``.
RestoreMethod: TypeAlias = Literal["resume", "load", "thread/resume"]


class RestoreUnsupported(Exception):
    """The agent offers no way to reopen a conversation (no advertised
    ``session/resume`` or ``loadSession``): start a fresh session instead."""


class RevertUnsupported(Exception):
    """The agent cannot drop turns from its history: tell it in words instead."""


class SteerUnsupported(Exception):
    """The agent cannot take input into a running turn: queue it instead."""


class OptionsUnsupported(ValueError):
    """The way to the agent cannot set its options (agentctl, for now).  A
    ValueError, as an option not offered is: the set is refused before anything
    is sent, and callers that handle the one handle the other."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Restored:
    """A conversation reopened by ``restore_session``."""

    #: The agent's session / thread id (the one asked for).
    agent_session_id: str
    method: RestoreMethod
    #: ``load``: history notifications the agent replayed (consumed, not surfaced).
    replayed: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class AdapterTimeouts:
    #: initialize (real agents take up to ~2 s to start).
    initialize_s: float = 30.0
    #: session/new, thread/start.
    session_s: float = 30.0
    #: turn/start's answer (Codex), permission answers, the interrupt's answer.
    request_s: float = 10.0
    #: How long one turn may run at all; cancel has its own, shorter bounds.
    turn_s: float = 3600.0
    #: One write to the agent's stdin.
    write_s: float = 5.0
    #: How long withdrawing a request (ACP ``$/cancel_request``) may delay a
    #: caller that was cancelled while waiting for its answer.
    withdraw_s: float = 1.0


class AgentAdapter(Protocol):
    @property
    def connection(self) -> AgentLink: ...
    @property
    def events(self) -> trio.MemoryReceiveChannel[AgentEvent]: ...
    @property
    def operation_id(self) -> str | None: ...
    @property
    def agent_session_id(self) -> str | None: ...
    @property
    def agent_turn_id(self) -> str | None: ...
    @property
    def turn_running(self) -> bool: ...
    @property
    def wire_protocol(self) -> WireProtocol: ...
    #: The agent's name and version as it said them at ``initialize`` (None: it did not).
    agent_version: str | None
    #: The MCP servers every session it opens or restores gets (set before ``new_session``).
    mcp_servers: tuple[McpServer, ...]
    async def initialize(self) -> None: ...
    async def new_session(self, cwd: str) -> str: ...
    async def restore_session(self, agent_session_id: str, cwd: str) -> Restored: ...
    async def prompt(self, text: str, parts: tuple[PromptPart, ...] = ()) -> TurnEnded: ...
    async def steer(self, text: str, parts: tuple[PromptPart, ...] = ()) -> None: ...
    def parts_refusal(self, parts: tuple[PromptPart, ...]) -> str | None: ...
    async def revert_thread(self, before_turn_id: str) -> None: ...
    def cancel_now(self) -> bool: ...
    async def cancel(self) -> None: ...
    async def resend_cancel(self) -> None: ...
    async def respond_permission(self, request_id: str, option_id: str | None) -> None: ...
    def abandon_turn(self) -> bool: ...
    def subagent(self, subagent_id: str) -> SubagentChanged | None: ...
    async def cancel_subagent(self, subagent_id: str) -> bool: ...
    async def set_option(self, option_id: str, value: str) -> OptionApplied: ...
    async def login(self, method_id: str, key: str | None = None) -> None: ...


class _Base:
    """What both dialects share: the connection, the prompt's write, the turn wait."""

    #: Unset from the moment the core starts a turn until its prompt has been
    #: written.  A cancel waits for it: written first, ``session/cancel`` would
    #: reach the agent before the prompt it cancels and cancel nothing (seen
    #: with Auggie, Claude and Gemini when a cancel follows the prompt at once).
    _prompt_written: trio.Event | None = None

    #: A cancel ``cancel_now`` built but could not write: ``cancel`` sends it
    #: (the core's cancel moves its turn on; it is built once).
    _unsent_cancel: bytes | None = None
    #: The agent's name and version as it said them at ``initialize``.
    agent_version: str | None = None
    mcp_servers: tuple[McpServer, ...] = ()

    core: AcpClient | CodexClient

    def __init__(self, core: AcpClient | CodexClient, send_stream: trio.abc.SendStream,
                 receive_stream: trio.abc.ReceiveStream,
                 timeouts: AdapterTimeouts | None) -> None:
        self.core = core
        self.timeouts = timeouts or AdapterTimeouts()
        self.connection = AgentConnection(
            core, send_stream, receive_stream, write_timeout_s=self.timeouts.write_s,
            withdraw_timeout_s=self.timeouts.withdraw_s,
        )
        #: Set while ``prompt`` runs: a flag, not a lock, so nothing is held
        #: across the turn (guarding our own misuse, two prompts at once).
        self._prompting = False

    @property
    def events(self) -> trio.MemoryReceiveChannel[AgentEvent]:
        return self.connection.events

    @property
    def turn_running(self) -> bool:
        return self.core.turn.running

    @property
    def agent_turn_id(self) -> str | None:
        """The agent's own id of the turn running or last run, where its protocol
        names turns (Codex); None for ACP, whose turns have no id."""
        return None

    def _start_turn(self, text: str, parts: tuple[PromptPart, ...]) -> bytes:
        """The core starts a turn: the prompt's bytes (``PartRefused``: no turn)."""
        raise NotImplementedError

    def parts_refusal(self, parts: tuple[PromptPart, ...]) -> str | None:
        """Why the agent cannot take ``parts`` (protocols/prompt_parts.py), or None."""
        raise NotImplementedError

    async def prompt(self, text: str, parts: tuple[PromptPart, ...] = ()) -> TurnEnded:
        self._check_open()
        # Refused before the core starts a turn, so a misused adapter is left
        # as it was (no turn the agent never hears of).  The supervisor's one
        # turn per execution is what users see.
        if self._prompting:
            raise RuntimeError("a prompt is already running on this adapter")
        return await self._run_turn(streamed(lambda p: self._start_turn(text, p), parts))

    def cancel_now(self) -> bool:
        """The protocol cancel written in the caller's step, without yielding,
        if it can be: the turn's prompt is on the agent's stdin (a cancel
        never overtakes it) and the pipe takes the cancel whole at once.
        False: not written (``cancel`` writes it)."""
        if not self._cancel_may_go() or not self.connection.can_send_now():
            return False
        data = self._take_cancel()
        if data and not self.connection.send_now(data):
            self._unsent_cancel = data
            return False
        return True

    def _cancel_may_go(self) -> bool:
        return True

    def _take_cancel(self) -> bytes:
        data, self._unsent_cancel = self._unsent_cancel, None
        return self.core.cancel() if data is None else data

    async def resend_cancel(self) -> None:
        """Send the protocol cancel again (the agent keeps streaming a turn it
        was told to stop); nothing if no cancel is outstanding."""
        await self.connection.send(self.core.resend_cancel())

    async def respond_permission(self, request_id: str, option_id: str | None) -> None:
        await self.connection.send(self.core.respond_permission(request_id, option_id))

    def abandon_turn(self) -> bool:
        """Forget the running turn (after an escalation); the caller cancels
        the task blocked in ``prompt``."""
        return self.core.abandon_turn()

    def subagent(self, subagent_id: str) -> SubagentChanged | None:
        """A child the agent announced (an ACP child session, a Codex child
        thread), as it is now (None: unknown)."""
        return self.core.children.get(subagent_id)

    async def cancel_subagent(self, subagent_id: str) -> bool:
        """Stop one child through its own protocol cancel (ACP ``session/cancel``
        on the child's session, Codex ``turn/interrupt`` of the child thread's
        turn); False when it cannot be (unknown, finished, or not cancellable):
        nothing written."""
        data = self.core.cancel_subagent(subagent_id)
        if not data:
            return False
        await self.connection.send(data)
        return True

    def _check_open(self) -> None:
        # Before the core sees the prompt: a dead agent is AgentClosed for the
        # caller, not a LocalProtocolError from a core in state CLOSED.
        if self.connection.closed.is_set():
            raise AgentClosed(self.connection.close_reason)

    async def _run_turn(self, data: Line) -> TurnEnded:
        # Set before the first checkpoint after the core started the turn.
        self._prompt_written = written = trio.Event()
        self._prompting = True
        try:
            self.connection.expect_turn()
            try:
                await self.connection.send(data)
            finally:
                written.set()
            return await self.connection.wait_turn(timeout_s=self.timeouts.turn_s)
        finally:
            self._prompting = False

    async def _wait_prompt_written(self) -> None:
        """Bounded: the prompt's write is itself bounded by ``write_s``."""
        written = self._prompt_written
        if written is not None and not written.is_set():
            with trio.move_on_after(self.timeouts.write_s):
                await written.wait()


class AcpAdapter(_Base):
    core: AcpClient

    def _start_turn(self, text: str, parts: tuple[PromptPart, ...]) -> bytes:
        return self.core.prompt(text, parts)[1]

    def parts_refusal(self, parts: tuple[PromptPart, ...]) -> str | None:
        return acp_refusal(parts, acp_prompt_caps(self.core.agent_capabilities))

    def __init__(
        self,
        send_stream: trio.abc.SendStream,
        receive_stream: trio.abc.ReceiveStream,
        *,
        timeouts: AdapterTimeouts | None = None,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        acp_version: AcpVersion = "auto",
    ) -> None:
        super().__init__(AcpClient(max_line_bytes=max_line_bytes, acp_version=acp_version),
                         send_stream, receive_stream, timeouts)

    @property
    def wire_protocol(self) -> WireProtocol:
        """``acp/1`` or ``acp/2``: what ``initialize`` negotiated."""
        return self.core.protocol

    @property
    def operation_id(self) -> str | None:
        # ACP cancels by session; the session id names the operation.
        return self.core.session_id if self.turn_running else None

    @property
    def agent_session_id(self) -> str | None:
        return self.core.session_id

    async def initialize(self) -> None:
        rid, data = self.core.initialize()
        await self.connection.request(rid, data, timeout_s=self.timeouts.initialize_s,
                                      withdraw=self.core.cancel_request)
        # Its name and version from its ``agentInfo`` (v2: ``info``).
        info = self.core.agent_info
        said = " ".join(v for v in (info.get("name"), info.get("version"))
                        if isinstance(v, str) and v)
        self.agent_version = said[:120] or None

    async def new_session(self, cwd: str) -> str:
        self.core.mcp_servers = self.mcp_servers
        rid, data = self.core.new_session(cwd)
        await self._opening(rid, data)
        assert self.core.session_id is not None
        return self.core.session_id

    async def restore_session(self, agent_session_id: str, cwd: str) -> Restored:
        """``session/resume`` if advertised, else ``session/load`` if
        advertised (bounded by ``session_s``, withdrawn on timeout); raises
        ``RestoreUnsupported`` when neither is, ``AgentRequestError`` when the
        agent refuses (an unknown session), ``AgentTimeout``, ``AgentClosed``."""
        self._check_open()
        self.core.mcp_servers = self.mcp_servers
        method: RestoreMethod
        if self.core.can_resume:
            method = "resume"
            rid, data = self.core.resume_session(agent_session_id, cwd)
        elif self.core.can_load:
            method = "load"
            rid, data = self.core.load_session(agent_session_id, cwd)
        else:
            raise RestoreUnsupported(
                "the agent advertises neither session/resume nor session/load"
            )
        await self._opening(rid, data)
        assert self.core.session_id == agent_session_id
        return Restored(agent_session_id=agent_session_id, method=method,
                        replayed=self.core.last_replayed)

    async def _opening(self, rid: int, data: bytes) -> None:
        """A session opened or restored; ``auth_required`` is ``AuthRequired``."""
        try:
            await self.connection.request(rid, data, timeout_s=self.timeouts.session_s,
                                          withdraw=self.core.cancel_request)
        except AgentRequestError as exc:
            if exc.code != AUTH_REQUIRED:
                raise
            raise AuthRequired(self.core.auth_methods, str(exc)) from None

    async def login(self, method_id: str, key: str | None = None) -> None:
        """``authenticate {methodId}`` (ValueError, nothing sent, for a method not
        offered), waiting ``session_s``: the agent may wait on a person's login."""
        rid, data = self.core.authenticate(method_id, key)
        await self.connection.request(rid, data, timeout_s=self.timeouts.session_s)

    async def steer(self, text: str, parts: tuple[PromptPart, ...] = ()) -> None:
        """``_session/steering`` into the running turn where the agent offers
        the extension (``SteerUnsupported`` where it does not, or when it
        answers that no turn was running: nothing was delivered), waiting
        ``request_s`` for its answer.  Not withdrawn on a timeout: the agent
        may have taken it already."""
        if not self.core.can_steer:
            raise SteerUnsupported("the agent offers no steering (_meta.steering)")
        await self._wait_prompt_written()
        rid, data = self.core.steer(text, parts)
        result = await self.connection.request(rid, data, timeout_s=self.timeouts.request_s)
        outcome = result.get("outcome") if isinstance(result, dict) else None
        if outcome == "promptRequired":
            raise SteerUnsupported("the agent had no turn running to steer")

    async def revert_thread(self, before_turn_id: str) -> None:
        raise RevertUnsupported("ACP has no call to drop turns from a session's history")

    def _cancel_may_go(self) -> bool:
        written = self._prompt_written
        return written is None or written.is_set()

    async def set_option(self, option_id: str, value: str) -> OptionApplied:
        """Set an offered option now (the agent answers with the options as they
        are, an ``OptionsChanged``), waiting ``request_s``; ValueError, nothing
        sent, for an option or value not offered; ``AgentRequestError`` when the
        agent refuses it."""
        self._check_open()
        rid, data = self.core.set_option(option_id, value)
        await self.connection.request(rid, data, timeout_s=self.timeouts.request_s)
        return "now"

    async def cancel(self) -> None:
        await self._wait_prompt_written()
        await self.connection.send(self._take_cancel())


class CodexAdapter(_Base):
    core: CodexClient

    def _start_turn(self, text: str, parts: tuple[PromptPart, ...]) -> bytes:
        return self.core.turn_start(text, parts)[1]

    def parts_refusal(self, parts: tuple[PromptPart, ...]) -> str | None:
        return codex_refusal(parts)

    def __init__(
        self,
        send_stream: trio.abc.SendStream,
        receive_stream: trio.abc.ReceiveStream,
        *,
        timeouts: AdapterTimeouts | None = None,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        thread_params: dict[str, object] | None = None,
    ) -> None:
        super().__init__(CodexClient(max_line_bytes=max_line_bytes), send_stream, receive_stream,
                         timeouts)
        self.thread_params = thread_params or {}

    @property
    def wire_protocol(self) -> WireProtocol:
        return "codex"

    @property
    def operation_id(self) -> str | None:
        return self.core.turn_id

    @property
    def agent_turn_id(self) -> str | None:
        return self.core.last_turn_id

    @property
    def agent_session_id(self) -> str | None:
        return self.core.thread_id

    async def initialize(self) -> None:
        rid, data = self.core.initialize()
        result = await self.connection.request(rid, data, timeout_s=self.timeouts.initialize_s)
        # Codex says who it is in ``userAgent`` ("codex_cli_rs/0.171.0 (...)"):
        # its first word is the name and version.
        said = result.get("userAgent") if isinstance(result, dict) else None
        self.agent_version = said.split()[0][:120] if isinstance(said, str) and said else None
        await self.connection.send(self.core.initialized())

    async def _check_account(self) -> None:
        """``account/read``: logged out is ``AuthRequired`` (protocols/codex_account.py)."""
        rid, data = codex_account.account_read(self.core.rpc)
        with contextlib.suppress(AgentRequestError):
            if codex_account.needs_login(await self.connection.request(
                    rid, data, timeout_s=self.timeouts.request_s)):
                raise AuthRequired(codex_account.CODEX_METHODS, "Codex is not logged in")

    async def login(self, method_id: str, key: str | None = None) -> None:
        """``account/login/start`` with a key; ``chatgpt`` is done in a terminal."""
        if method_id == "chatgpt":
            return
        rid, data = codex_account.login_start(self.core.rpc, method_id, key)
        await self.connection.request(rid, data, timeout_s=self.timeouts.request_s)

    async def new_session(self, cwd: str) -> str:
        await self._check_account()
        rid, data = self.core.thread_start(cwd, **self._thread_params())
        await self.connection.request(rid, data, timeout_s=self.timeouts.session_s)
        assert self.core.thread_id is not None
        await self._list_models()
        return self.core.thread_id

    def _thread_params(self) -> dict[str, object]:
        """The profile's thread parameters, its ``config`` overrides joined by the MCP
        servers' (``McpUnsupported`` for one Codex cannot take)."""
        if not self.mcp_servers:
            return dict(self.thread_params)
        given = self.thread_params.get("config")
        config = {**(given if isinstance(given, dict) else {}), **codex_config(self.mcp_servers)}
        return {**self.thread_params, "config": config}

    async def _list_models(self) -> None:
        """``model/list`` once (the options' choices), within ``request_s``; an
        agent that cannot list them leaves its thread's model the only choice."""
        if self.core.options.listed is not None:
            return
        rid, data = self.core.model_list()
        with contextlib.suppress(AgentRequestError, AgentTimeout):
            await self.connection.request(rid, data, timeout_s=self.timeouts.request_s)

    async def set_option(self, option_id: str, value: str) -> OptionApplied:
        """Keep an offered option for every later ``turn/start`` (Codex takes
        model, effort and approval policy per turn): ``next_turn``, with the
        options as they now are on ``events``; ValueError if it is not offered."""
        self._check_open()
        await self.connection.publish(self.core.set_option(option_id, value))
        return "next_turn"

    async def restore_session(self, agent_session_id: str, cwd: str) -> Restored:
        """``thread/resume`` with the profile's thread overrides (bounded by
        ``session_s``); ``AgentRequestError`` when the agent has no such
        thread (no rollout), ``AgentTimeout``, ``AgentClosed``."""
        self._check_open()
        await self._check_account()
        rid, data = self.core.thread_resume(agent_session_id, cwd, **self._thread_params())
        await self.connection.request(rid, data, timeout_s=self.timeouts.session_s)
        assert self.core.thread_id is not None
        await self._list_models()
        return Restored(agent_session_id=self.core.thread_id, method="thread/resume")

    async def steer(self, text: str, parts: tuple[PromptPart, ...] = ()) -> None:
        """``turn/steer`` into the running turn, waiting (``request_s``) for
        the agent to take it.  ``LocalProtocolError`` when no turn is running
        or its id is not known yet; ``AgentRequestError`` when the agent
        refuses (the turn it names is over)."""
        await self._wait_prompt_written()
        rid, data = self.core.steer(text, parts)
        await self.connection.request(rid, data, timeout_s=self.timeouts.request_s)

    async def revert_thread(self, before_turn_id: str) -> None:
        """``thread/revert`` (the agent's own turn id), waiting ``request_s`` for
        its answer: ``AgentRequestError`` when the agent refuses (an unknown
        turn, or a Codex older than 0.171: method not found), ``AgentTimeout``,
        ``AgentClosed``."""
        self._check_open()
        rid, data = self.core.thread_revert(before_turn_id)
        await self.connection.request(rid, data, timeout_s=self.timeouts.request_s)

    async def cancel(self) -> None:
        # turn/interrupt's answer ({}) is not waited for: the turn is over only
        # at turn/completed, which prompt() is already waiting on.
        await self.connection.send(self._take_cancel())


def make_adapter(
    protocol: ProtocolName,
    send_stream: trio.abc.SendStream,
    receive_stream: trio.abc.ReceiveStream,
    *,
    timeouts: AdapterTimeouts | None = None,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    thread_params: dict[str, object] | None = None,
    acp_version: AcpVersion = "auto",
    mcp_servers: tuple[McpServer, ...] = (),
) -> AgentAdapter:
    adapter: AcpAdapter | CodexAdapter
    if protocol == "acp":
        adapter = AcpAdapter(send_stream, receive_stream, timeouts=timeouts,
                             max_line_bytes=max_line_bytes, acp_version=acp_version)
    else:
        adapter = CodexAdapter(send_stream, receive_stream, timeouts=timeouts,
                               max_line_bytes=max_line_bytes, thread_params=thread_params)
    adapter.mcp_servers = mcp_servers
    return adapter
