"""The agent host: exactly one agent process, its turns, its cancel, its event log.

Nursery tree (``serve_agentctl`` in ``server.py`` owns the root; the process
itself, its sandbox and its teardown are ``hosted.py``)::

    AgentHost.run                 host nursery: owns the agent incarnation
    ├── warm_up                   (worker thread) the protocol core's one-time import
    └── _run_agent                agent nursery, one per agent process (a new one
        │                         only after the previous one has exited)
        ├── agent process         launcher.py → the agent, in their own process group
        ├── connection.run        stdout reader → protocol core → EventLog (seq
        │                         numbers, fan-out), each event in the reader's
        │                         own step (``_on_event``: no task in between)
        ├── _drain_stderr         stderr → log (bounded lines)
        └── _run_turn             the pending prompt; its CancelScope is the turn's
                                  handle (``abandon`` cancels it alone)

Who cancels what: the host nursery is cancelled at agentctl shutdown; an agent
nursery when the agent's stdout ends, when its initialize fails, or when a
session start replaces it; a turn's scope only by ``abandon`` or the turn
timeout.  The agent's group is torn down in ``_run_agent``'s ``finally``
(stdin EOF, SIGTERM to the group, grace, SIGKILL), shielded with its own
deadline; if agentctl itself dies, the launcher's lifeline kills the group.

Turn ends are published exactly once (``_end_turn``): by the reader, in order
with the turn's output, or after ``cancel_cleanup_s`` by the turn task when
the reader cannot see the end (the prompt could not be written, the turn timed
out): ``supervisor.turn.turn_end``, the rule the backend's lifecycle follows too.
The event log is ``eventlog.py``, the configuration and refusals
``hostconfig.py``.

No lock is held across agent I/O: concurrent requests are refused by state
(one turn at a time, one session start at a time), not serialized.
"""

from __future__ import annotations

import logging
import uuid
from functools import partial
from typing import Any

import trio

from protocols.adapters import (
    AcpAdapter,
    AgentClosed,
    AgentRequestError,
    AgentTimeout,
    McpServer,
    McpUnsupported,
    OptionApplied,
    make_adapter,
)
from protocols.agentctl_wire import event_frame
from protocols.events import AgentEvent, AgentNotice, TurnEnded
from protocols.jsonrpc import LocalProtocolError
from protocols.process import drain_stderr
from protocols.prompt_parts import PromptPart, acp_prompt_caps
from protocols.scopes import shielded_for
from protocols.transport import AgentConnection
from supervisor.turn.turn_end import TURN_ERRORS, left_to_us, turn_error

from .eventlog import EventLog, Subscriber
from .hostconfig import AgentctlConfig, HostError, not_running
from .hosted import AgentState, HostedAgent, HostedTurn, spawn_agent, valid_turn_id, warm_up
from .offline import cancel_when_offline

__all__ = [
    "AgentHost",
    "AgentState",
    "AgentctlConfig",
    "EventLog",
    "HostError",
    "Subscriber",
    "valid_turn_id",
    "warm_up",
]

log = logging.getLogger(__name__)



class AgentHost:
    def __init__(self, config: AgentctlConfig) -> None:
        self.config = config
        self.log = EventLog(buffer=config.subscriber_buffer, replay=config.replay_events)
        self.agent: HostedAgent | None = None
        self.started_agents = 0
        #: Cancels being written to the agent now (``cancel``; status says it).
        self.cancel_writes = 0
        self._nursery: trio.Nursery | None = None
        self._session_starting = False
        #: Set once the protocol core's one-time import is done: sessions (and
        #: so turns) wait for it, so the import never runs on the Trio thread.
        self._warmed = trio.Event()

    # -- the host nursery ---------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Own the agent until cancelled (agentctl shutdown).  Starts the agent
        at once, so it is warm for the first session; ``started`` after the spawn."""
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                nursery.start_soon(self._warm_up)
                if self.config.offline_cancel_s is not None:
                    nursery.start_soon(cancel_when_offline, self, self.config.offline_cancel_s)
                try:
                    await nursery.start(self._run_agent)
                except OSError as exc:
                    log.error("cannot start the agent %r: %s", self.config.command[0], exc)
                task_status.started()
                await trio.sleep_forever()
        finally:
            self.log.close("agentctl is shutting down")

    async def _warm_up(self) -> None:
        try:
            await trio.to_thread.run_sync(warm_up, self.config.protocol)
        finally:
            self._warmed.set()

    async def _start_agent(self) -> HostedAgent:
        assert self._nursery is not None, "AgentHost.run is not running"
        agent: HostedAgent = await self._nursery.start(self._run_agent)
        return agent

    async def _run_agent(self, task_status: trio.TaskStatus[HostedAgent] = trio.TASK_STATUS_IGNORED,
                         ) -> None:
        cfg = self.config
        agent: HostedAgent | None = None
        try:
            async with spawn_agent(cfg) as proc:
                assert proc.stdin is not None and proc.stdout is not None
                assert proc.stderr is not None
                adapter = make_adapter(
                    cfg.protocol, proc.stdin, proc.stdout,
                    timeouts=cfg.timeouts.adapter(),
                    max_line_bytes=cfg.max_line_bytes, thread_params=dict(cfg.thread_params),
                )
                async with trio.open_nursery() as nursery:
                    agent = HostedAgent(process=proc, adapter=adapter, nursery=nursery)
                    self.agent = agent
                    self.started_agents += 1
                    # The agent is on agentctl's pipes: the stdio transport, whose
                    # reader appends each event to the log itself.
                    assert isinstance(adapter.connection, AgentConnection)
                    adapter.connection.deliver_to(partial(self._on_event, agent))
                    nursery.start_soon(adapter.connection.run)
                    nursery.start_soon(self._drain_stderr, proc.stderr)
                    self.log.publish({"type": "AgentStarted", "pid": proc.pid}, turn=None)
                    log.info("agent %r started (pid %d)", cfg.command[0], proc.pid)
                    task_status.started(agent)
                    try:
                        with trio.fail_after(cfg.timeouts.agent_start_s):
                            await adapter.initialize()
                    except (AgentClosed, AgentTimeout, AgentRequestError,
                            trio.TooSlowError) as exc:
                        agent.state = AgentState.FAILED
                        agent.error = f"initialize failed: {exc or type(exc).__name__}"
                        agent.settled.set()
                        log.error("agent %r: %s", cfg.command[0], agent.error)
                        nursery.cancel_scope.cancel()
                        return
                    agent.state = AgentState.READY
                    agent.settled.set()
                    # The reader ends when the agent's stdout does (its events are
                    # in the log by then); then nothing is left to run.
                    await adapter.connection.closed.wait()
                    self._output_ended(agent)
                    nursery.cancel_scope.cancel()
        finally:
            # The group is gone (``spawn_agent`` tore it down) before this is said.
            if agent is not None:
                code = agent.process.returncode
                if agent.state is not AgentState.FAILED:
                    agent.state = AgentState.EXITED
                if agent.turn is not None:
                    self._end_turn(agent, agent.turn, TurnEnded(
                        stop_reason="error", error=f"agent exited (status {code})"))
                agent.settled.set()
                self.log.publish({"type": "AgentExited", "returncode": code,
                                  "error": agent.error, "session_id": agent.session_id},
                                 turn=None)
                agent.exited.set()
                log.info("agent %r (pid %d) exited with %s", cfg.command[0],
                         agent.process.pid, code)

    async def _drain_stderr(self, stream: trio.abc.ReceiveStream) -> None:
        await drain_stderr(stream, lambda line: log.info("agent stderr: %s", line))

    def _on_event(self, agent: HostedAgent, ev: AgentEvent) -> None:
        """An agent's event → the log, in the transport reader's step (so in
        order), stamped with its turn.  ``EventLog.publish`` never blocks: a
        slow subscriber is dropped, never the agent slowed."""
        turn = agent.turn
        if isinstance(ev, TurnEnded) and turn is not None:
            self._end_turn(agent, turn, ev)
        else:
            self._publish(ev, turn)

    def _output_ended(self, agent: HostedAgent) -> None:
        """The agent's output ended (its events all in the log): a turn still
        running ends with it."""
        turn = agent.turn
        if turn is not None:
            code = agent.process.returncode
            self._end_turn(agent, turn, TurnEnded(
                stop_reason="error",
                error=f"agent exited (status {code})" if code is not None
                else "agent closed its output"))

    def _publish(self, ev: AgentEvent, turn: HostedTurn | None) -> int:
        return self.log.publish(event_frame(ev), turn=turn.id if turn is not None else None)

    def _end_turn(self, agent: HostedAgent, turn: HostedTurn, ended: TurnEnded) -> None:
        """Publish the turn's end exactly once and free the agent for the next turn."""
        if agent.turn is not turn:
            return
        agent.turn = None
        turn.ended = ended
        self._publish(ended, turn)
        turn.done.set()

    def _abandon(self, agent: HostedAgent, turn: HostedTurn, why: str) -> None:
        """Forget a turn without its end (the client gave up on it): no TurnEnded
        is published for it, a late answer from the agent is only a notice."""
        if agent.turn is not turn:
            return
        agent.adapter.abandon_turn()
        turn.scope.cancel()
        agent.turn = None
        self._publish(AgentNotice(message=f"turn {turn.id} abandoned: {why}", level="info"), None)
        turn.done.set()

    async def _run_turn(self, agent: HostedAgent, turn: HostedTurn, text: str,
                        parts: tuple[PromptPart, ...],
                        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        try:
            await self._turn_body(agent, turn, text, parts, task_status)
        finally:
            turn.finished.set()

    async def _turn_body(self, agent: HostedAgent, turn: HostedTurn, text: str,
                         parts: tuple[PromptPart, ...], task_status: trio.TaskStatus[None],
                         ) -> None:
        ended: TurnEnded
        with turn.scope:
            # ``prompt`` moves the core to PROMPTING before its first checkpoint,
            # so a cancel handled after ``start`` returns always finds the turn.
            task_status.started()
            try:
                ended = await agent.adapter.prompt(text, parts)
            except AgentTimeout as exc:
                agent.adapter.abandon_turn()
                ended = turn_error(exc)
            except AgentClosed as exc:
                ended = TurnEnded(stop_reason="error", error=str(exc) or "agent closed")
            except TURN_ERRORS as exc:
                ended = turn_error(exc)
        if turn.scope.cancelled_caught:
            return
        # The reader publishes the end in order with the turn's output; only if it
        # cannot (nothing came back from the agent) is the end published here.
        if await left_to_us(ended, turn.done, self.config.timeouts.cancel_cleanup_s):
            self._end_turn(agent, turn, ended)

    # -- requests -----------------------------------------------------------------

    def _live(self) -> HostedAgent:
        agent = self.agent
        if agent is None or not agent.alive or agent.adapter.connection.closed.is_set():
            raise not_running(agent.error if agent is not None else None)
        return agent

    def _check_session(self, agent: HostedAgent, session_id: str | None) -> None:
        if session_id is not None and session_id != agent.session_id:
            raise HostError(404, "session not found", session_id=session_id)

    async def start_session(self, *, cwd: str | None, owner: str | None, replace: bool,
                            mcp_servers: tuple[McpServer, ...] = ()) -> dict[str, Any]:
        """``initialize`` (a fresh agent if none is running) + ``session/new``.

        Re-attachment: if the agent already has a session started by the same
        ``owner``, that session is returned (``attached: true``) with its
        running turn, if any.  A session of another owner is a 409 while that
        owner is connected to the event stream, or when either has no owner;
        otherwise (its backend went away) the new owner takes the agent over.
        ``replace`` always restarts the agent with a fresh session.
        ``mcp_servers`` go to the new session as the local executor passes them (a
        kind the agent does not take: 422, nothing sent); a re-attached one keeps its own.
        """
        if self._session_starting:
            raise HostError(409, "a session start is already in progress")
        self._session_starting = True
        try:
            agent = self.agent
            if agent is not None and agent.alive and agent.session_id is not None:
                if owner is not None and owner == agent.owner and not replace:
                    return self._session_info(agent, attached=True)
                if not replace and not self._abandoned_by_owner(agent, owner):
                    raise HostError(409, "the agent already has a session",
                                    session_id=agent.session_id, owner=agent.owner)
                if not replace:
                    log.warning("owner %r takes the agent over from disconnected owner %r",
                                owner, agent.owner)
                await self._stop_agent(agent)
                agent = None
            if agent is None or not agent.alive:
                try:
                    agent = await self._start_agent()
                except OSError as exc:
                    raise not_running(f"cannot start the agent: {exc}") from None
            with trio.move_on_after(self.config.timeouts.agent_start_s):
                await agent.settled.wait()
                await self._warmed.wait()
            if agent.state is not AgentState.READY:
                raise not_running(agent.error or f"the agent did not initialize within "
                                   f"{self.config.timeouts.agent_start_s}s")
            agent.adapter.mcp_servers = mcp_servers
            try:
                session_id = await agent.adapter.new_session(cwd or self.config.cwd)
            except McpUnsupported as exc:
                raise HostError(422, str(exc)) from None
            except AgentRequestError as exc:
                # The agent's own words (``data.details``) with it: often all
                # that says why (an unknown model, a missing login).
                raise HostError(502, f"session/new failed: {exc}",
                                **({"details": exc.details} if exc.details else {})) from None
            except (AgentTimeout, LocalProtocolError) as exc:
                raise HostError(502, f"session/new failed: {exc}") from None
            except AgentClosed as exc:
                raise not_running(str(exc)) from None
            agent.session_id = session_id
            agent.owner = owner
            self.log.publish({"type": "SessionStarted", "session_id": session_id,
                              "owner": owner}, turn=None)
            return self._session_info(agent, attached=False)
        finally:
            self._session_starting = False

    def _abandoned_by_owner(self, agent: HostedAgent, owner: str | None) -> bool:
        """Whether another owner may take ``agent`` over: both have owners, and
        the current one has no event stream open (its backend is gone)."""
        if owner is None or agent.owner is None:
            return False
        return not any(sub.owner == agent.owner for sub in self.log.subscribers)

    def _session_info(self, agent: HostedAgent, *, attached: bool) -> dict[str, Any]:
        return {"success": True, "session_id": agent.session_id, "attached": attached,
                "protocol": self.config.protocol,
                "wire_protocol": agent.adapter.wire_protocol,
                # What the agent's prompts take (ACP), so the backend refuses a part
                # before it stores a turn; None: Codex (its input takes images).
                "prompt_capabilities": (dict(acp_prompt_caps(agent.adapter.core.agent_capabilities))
                                        if isinstance(agent.adapter, AcpAdapter) else None),
                "turn_id": agent.turn.id if agent.turn is not None else None,
                "seq": self.log.last_seq}

    async def _stop_agent(self, agent: HostedAgent) -> None:
        agent.nursery.cancel_scope.cancel()
        with trio.move_on_after(self.config.timeouts.stop_s):
            await agent.exited.wait()

    async def prompt(self, text: str, *, session_id: str | None, turn_id: str | None,
                     abandon: str | None, parts: tuple[PromptPart, ...] = ()) -> dict[str, Any]:
        """Start a turn; its output and its ``TurnEnded`` come on the event stream,
        stamped with the returned ``turn_id``, at seq > the returned ``seq``.  A part
        the agent does not take: 422, no turn."""
        agent = self._live()
        if agent.session_id is None:
            raise HostError(409, "no session: POST /api/v1/session first")
        self._check_session(agent, session_id)
        refusal = agent.adapter.parts_refusal(parts)
        if refusal is not None:
            raise HostError(422, refusal)
        if abandon is not None and agent.turn is not None and agent.turn.id == abandon:
            old = agent.turn
            self._abandon(agent, old, "the client started a new turn")
            with trio.move_on_after(self.config.timeouts.cancel_cleanup_s):
                await old.finished.wait()
        if agent.turn is not None:
            raise HostError(409, "a turn is already running", turn_id=agent.turn.id)
        if agent.adapter.turn_running:
            raise HostError(409, "the agent is still finishing its previous turn")
        turn = HostedTurn(id=turn_id or uuid.uuid4().hex)
        agent.turn = turn
        seq = self.log.last_seq
        self.log.publish({"type": "TurnStarted"}, turn=turn.id)
        try:
            # Shielded: a client that hangs up mid-request (a backend that dies)
            # must not leave a turn that is claimed but never run.  Bounded: the
            # turn task reports started before its first checkpoint.
            with trio.CancelScope(shield=True, deadline=trio.current_time()
                                  + self.config.timeouts.agent_request_s) as starting:
                await agent.nursery.start(self._run_turn, agent, turn, text, parts)
            if starting.cancelled_caught:
                self._end_turn(agent, turn, TurnEnded(stop_reason="error",
                                                      error="the turn did not start"))
                raise HostError(504, "the turn did not start in time", turn_id=turn.id)
        except RuntimeError:  # the agent's nursery is closing: it is exiting
            self._end_turn(agent, turn, TurnEnded(stop_reason="error", error="agent exiting"))
            raise not_running("the agent is exiting") from None
        return {"success": True, "turn_id": turn.id, "seq": seq}

    def cancel_at_once(self, *, session_id: str | None, turn_id: str) -> bool | None:
        """The event stream's ``Cancel``: the protocol cancel of turn ``turn_id``
        written in the caller's step, as the backend writes a local agent's
        (the adapter's ``cancel_now``: the prompt is on the agent's stdin and the
        pipe takes the cancel whole).  True: written; None: that turn is not
        running; False: nothing written yet, ``cancel`` writes it (one writer:
        a cancel ``cancel_now`` built but could not write is what it sends).
        Idempotent for one turn (its core builds the cancel once)."""
        agent = self._live()
        self._check_session(agent, session_id)
        turn = agent.turn
        if turn is None or turn.id != turn_id:
            return None
        try:
            if not agent.adapter.cancel_now():
                return False
        except LocalProtocolError:
            return None  # the turn ended (or was abandoned) under the cancel
        turn.cancel_requested = True
        return True

    async def cancel(self, *, session_id: str | None, join_s: float | None,
                     resend: bool = False, turn_id: str | None = None) -> dict[str, Any]:
        """Write the protocol cancel, then wait up to ``join_s`` for the turn to end.

        ``resend``: the turn's cancel was already sent and the agent keeps going
        (some drop a cancel that comes right after the prompt): send it again.
        ``turn_id``: only that turn's (another one running is left alone).

        - no running turn: success (nothing to cancel);
        - ``join_s == 0``: success once the cancel is written (``acknowledged:
          false``): the caller watches the event stream for the turn's end;
        - the turn ended within ``join_s``: success, ``acknowledged: true`` and
          the turn's stop reason (``cancelled``, or whatever won the race);
        - it did not: ``not_acknowledged: true``; the cancel stays in flight and
          the turn's end, whenever it comes, is on the event stream.
        """
        agent = self._live()
        self._check_session(agent, session_id)
        join = self.config.timeouts.cancel_join_s if join_s is None else join_s
        join = min(max(join, 0.0), self.config.timeouts.cancel_operation_s)
        turn = agent.turn
        if turn is None or (turn_id is not None and turn.id != turn_id):
            return {"success": True, "turn_running": False}
        again = resend and turn.cancel_requested
        turn.cancel_requested = True
        started = trio.current_time()
        # ACP's cancel waits for the prompt's write, then writes: two writes' bounds.
        bound = 2 * self.config.timeouts.agent_request_s
        try:
            # Shielded: a client that hangs up must not lose a cancel it asked
            # for (a write is whole or not at all: the transport sees to that).
            self.cancel_writes += 1
            try:
                with shielded_for(bound) as writing:
                    if again:
                        await agent.adapter.resend_cancel()
                    else:
                        await agent.adapter.cancel()
            finally:
                self.cancel_writes -= 1
            if writing.cancelled_caught:
                raise AgentTimeout(f"the cancel was not written within {bound:g}s")
        except AgentClosed as exc:
            raise not_running(str(exc)) from None
        except AgentTimeout as exc:
            raise HostError(504, f"could not write the cancel to the agent: {exc}",
                            turn_id=turn.id) from None
        except LocalProtocolError:
            pass  # the turn ended (or was abandoned) while the cancel was being sent
        result: dict[str, Any] = {"turn_id": turn.id, "turn_running": True}
        if join > 0:
            with trio.move_on_after(join):
                await turn.done.wait()
        elapsed_ms = round((trio.current_time() - started) * 1000, 1)
        if turn.done.is_set():
            stop = turn.ended.stop_reason if turn.ended is not None else "cancelled"
            return {**result, "success": True, "acknowledged": True, "stop_reason": stop,
                    "elapsed_ms": elapsed_ms}
        if join == 0:
            return {**result, "success": True, "acknowledged": False}
        return {**result, "success": False, "not_acknowledged": True,
                "error": f"the agent did not end the turn within {join:g}s of the cancel; "
                         "the cancel is still in flight and the turn's end will be on the "
                         "event stream", "elapsed_ms": elapsed_ms}

    async def set_option(self, option_id: str, value: str, *,
                         session_id: str | None) -> dict[str, Any]:
        """The agent's ``set_option`` (DESIGN.md §19): ``applied`` says whether it
        took it now or takes it with its next turn.  Refused (422) when the agent
        does not offer it; 502 when the agent answers an error."""
        agent = self._live()
        if agent.session_id is None:
            raise HostError(409, "no session: POST /api/v1/session first")
        self._check_session(agent, session_id)
        applied: OptionApplied
        try:
            with trio.fail_after(self.config.timeouts.agent_request_s):
                applied = await agent.adapter.set_option(option_id, value)
        except ValueError as exc:
            raise HostError(422, str(exc)) from None
        except AgentRequestError as exc:
            raise HostError(502, f"the agent refused {option_id} = {value}: {exc}") from None
        except (AgentTimeout, trio.TooSlowError) as exc:
            raise HostError(504, f"the agent did not take {option_id} = {value}: "
                                 f"{exc or 'no answer in time'}") from None
        except AgentClosed as exc:
            raise not_running(str(exc)) from None
        return {"success": True, "option_id": option_id, "value": value, "applied": applied}

    async def respond_permission(self, request_id: str, option_id: str | None, *,
                                 session_id: str | None) -> dict[str, Any]:
        agent = self._live()
        self._check_session(agent, session_id)
        bound = self.config.timeouts.agent_request_s
        try:
            # Shielded like the cancel: the agent waits on this answer.
            with shielded_for(bound) as writing:
                await agent.adapter.respond_permission(request_id, option_id)
            if writing.cancelled_caught:
                raise AgentTimeout(f"the answer was not written within {bound:g}s")
        except LocalProtocolError as exc:
            raise HostError(404, str(exc)) from None
        except AgentClosed as exc:
            raise not_running(str(exc)) from None
        except AgentTimeout as exc:
            raise HostError(504, str(exc)) from None
        return {"success": True}

    async def cancel_subagent(self, subagent_id: str, *,
                              session_id: str | None) -> dict[str, Any]:
        """One child session stopped through its own protocol cancel (DESIGN.md
        §13); the parent's turn goes on.  ``sent``: the cancel was written
        (False: the child is unknown, ended or not cancellable; ``state`` says
        which)."""
        agent = self._live()
        self._check_session(agent, session_id)
        bound = self.config.timeouts.agent_request_s
        try:
            with shielded_for(bound) as writing:  # shielded like the parent's cancel
                sent = await agent.adapter.cancel_subagent(subagent_id)
            if writing.cancelled_caught:
                raise AgentTimeout(f"the cancel was not written within {bound:g}s")
        except AgentClosed as exc:
            raise not_running(str(exc)) from None
        except AgentTimeout as exc:
            raise HostError(504, str(exc)) from None
        known = agent.adapter.subagent(subagent_id)
        return {"success": True, "sent": sent, "state": known.state if known else None}

    def status(self) -> dict[str, Any]:
        agent = self.agent
        info: dict[str, Any] = {
            "protocol": self.config.protocol,
            "command": list(self.config.command),
            "seq": self.log.last_seq,
            "oldest_seq": self.log.oldest_seq,
            "subscribers": len(self.log.subscribers),
            "agents_started": self.started_agents,
            "cancel_writes": self.cancel_writes,
        }
        if agent is None:
            return {**info, "agent": {"state": "not_started"}, "session_id": None,
                    "turn": None, "turn_running": False, "operation_id": None}
        turn = agent.turn
        return {
            **info,
            "agent": {"state": agent.state.value, "pid": agent.process.pid,
                      "returncode": agent.process.returncode, "error": agent.error},
            "session_id": agent.session_id,
            "owner": agent.owner,
            "turn": None if turn is None else {"id": turn.id,
                                               "cancel_requested": turn.cancel_requested},
            "turn_running": agent.adapter.turn_running if agent.alive else False,
            "operation_id": agent.adapter.operation_id if agent.alive else None,
        }
