"""Agent executions: start, the event pump, idle stop, takeover, shutdown.

Nursery tree (one function each, so the shape reads at a glance)::

    Executions.run                  executions nursery: owns every Execution
    ├── TextWriter.run              streamed text of every session, written together
    ├── take_over                   after a restart, per turn an agentctl ran on:
    │                               starts its execution (below), bounded
    └── _run_execution              per-execution nursery, one per running agent
        ├── connection.run          the agent link's reader → protocol core → events
        ├── _drain_stderr           stderr → log (bounded lines)
        ├── _pump                   events → transcript (store → bus), in order; ends turns
        ├── _stop_when_idle         stops the agent after ``idle_agent_s`` without a turn
        ├── Watchdog.watch          per turn: the stall watchdog
        └── Turns.run_turn          the pending prompt (supervisor.session.turns)

Who cancels what: the executions nursery is cancelled only at supervisor
shutdown (after ``shutdown`` has stopped turns); an execution's nursery is
cancelled when its agent's output ends or it is stopped (idle, replaced, the
store refusing its text); a turn's scope only by escalation.  Every wait on
an agent is bounded by a ``Timeouts`` field.  The agent is torn down by its
executor when ``_run_execution`` leaves the launcher's context (local: SIGTERM
to its group, grace, SIGKILL), shielded with its own deadline.

An agent that outlives the backend (``LaunchedAgent.handover``) keeps its
running turn across a restart: the pump records how far the turn's event
stream is written down, shutdown leaves the turn to agentctl (``_detach``)
instead of stopping it, and the next backend takes it over (``take_over``,
supervisor.turn.takeover).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging

import trio

from protocols.acp_auth import AuthRequired
from protocols.events import (
    AgentNotice,
    CommandsChanged,
    OptionsChanged,
    PermissionResolved,
    SubagentActivity,
    SubagentChanged,
    TitleChanged,
    TurnEnded,
    UsageUpdated,
)
from protocols.process import clean_stderr_line, drain_stderr
from protocols.scopes import shielded_for

from ..config import Config
from ..errors import AgentStartError
from ..executors import LaunchedAgent, Launcher
from ..models import AgentSessionRef, Session
from ..notify import Notifier
from ..profiles import AgentProfile
from ..storage.db import StoreError, StoreUnavailable
from ..storage.retries import contained
from ..storage.store import Store
from ..subagents import Subagents
from ..turn.execution_state import (
    PROGRESS_EVENTS,
    Agents,
    Execution,
    ExecutionStatus,
    StopRequest,
    remember_conversation,
)
from ..turn.recovery import Handover
from ..turn.steps import STEP_EVENTS
from ..turn.subagent_traces import write_ended
from ..turn.takeover import Takeover
from ..turn.text_writer import TextWriter
from ..turn.transcript import Transcript
from ..turn.turn_close import TurnCloser
from ..turn.watchdog import Watchdog
from ..workspace.sandboxing import agent_home, prepare_agent_dirs
from . import states
from .cancellation import Cancellations
from .cancellation_link import take_over_attempts
from .login import AgentLoginRequired, Logins
from .offers import Offers
from .profile_drift import tell_profile_changed
from .reach import watch_reach
from .start_text import leaf as _leaf
from .start_text import stderr_tail as _tail

__all__ = ["Executions"]

log = logging.getLogger(__name__)


class Executions:
    def __init__(self, config: Config, store: Store, notifier: Notifier, agents: Agents,
                 closer: TurnCloser, cancellations: Cancellations, watchdog: Watchdog,
                 takeover: Takeover, texts: TextWriter, launcher: Launcher,
                 subagents: Subagents, offers: Offers) -> None:
        self.offers = offers
        self.logins = Logins(config, store, notifier)  # DESIGN.md §19
        self.config = config
        self.timeouts = config.timeouts
        self.store = store
        self.notify = notifier
        self.agents = agents
        self.closer = closer
        self.cancellations = cancellations
        self.watchdog = watchdog
        self.takeover = takeover
        self.texts = texts
        self._launch = launcher
        self.subagents = subagents
        self._nursery: trio.Nursery | None = None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Own every execution until cancelled (supervisor shutdown)."""
        async with trio.open_nursery() as nursery:
            await nursery.start(self.texts.run)
            self._nursery = nursery
            task_status.started()
            await trio.sleep_forever()

    async def ensure_execution(self, session: Session) -> Execution:
        """The session's running agent, started if needed (bounded by agent_start_s)."""
        existing = self.agents.executions.get(session.id)
        if existing is not None and existing.status is not ExecutionStatus.STOPPED:
            return existing
        starting = self.agents.starting.get(session.id)
        if starting is not None:
            with trio.move_on_after(self.timeouts.agent_start_s):
                await starting.wait()
            existing = self.agents.executions.get(session.id)
            if existing is None:
                raise AgentStartError("the agent failed to start")
            return existing
        profile = self.config.profiles.get(session.agent)
        if profile is None:
            raise AgentStartError(f"unknown agent profile {session.agent!r}")
        self.logins.check(session.id)  # (DESIGN.md §19: not started to be told again)
        assert self._nursery is not None, "LifecycleManager.run is not running"
        self.agents.starting[session.id] = started = trio.Event()
        try:
            await states.starting(self.store, session.id)
            try:
                ex: Execution = await self._nursery.start(
                    self._run_execution, session.id, session.workspace_id, profile)
            except Exception as exc:
                # Unwrapped: nursery.start reports the task's failure in a group,
                # whose own text ("Exceptions from Trio nursery") says nothing.
                leaf = _leaf(exc)
                if isinstance(leaf, AgentLoginRequired):  # waits for a login, not failed
                    raise await self.logins.needed(session, leaf) from None
                message = str(leaf) if isinstance(leaf, AgentStartError) else \
                    f"agent {profile.name!r} failed to start: {leaf}"
                await self._start_failed(session.id, message)
                raise AgentStartError(message) from exc
            if ex.restore_from is None and session.options:
                await self.offers.reapply(ex, session.options)  # (a restore's: after it)
            await states.started(self.store, session.id)
            return ex
        finally:
            del self.agents.starting[session.id]
            started.set()

    async def _start_failed(self, session_id: str, message: str) -> None:
        """The session says why its agent did not start, in a sentence."""
        log.warning("session %s: %s", session_id, message)
        await states.start_failed(self.store, session_id)
        await self.store.add_message(session_id, None, "system", "status", message,
                                     {"variant": "error", "start_failed": True})

    async def _run_execution(
        self, session_id: str, workspace_id: str, profile: AgentProfile,
        takeover: Handover | None = None,
        task_status: trio.TaskStatus[Execution] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        # DESIGN.md §12: the session's project (or worktree) wins over the profile's
        # cwd; a profile without a cwd: the session's own directory, so no two
        # sessions (and no two workspaces) share files.
        session = await self.store.get_session(session_id)
        cwd = ((session.cwd if session else None) or profile.cwd
               or str(self.config.session_work_dir(workspace_id, session_id)))
        task = await self.store.get_task(session.task_id) if session else None
        identity = (task.project_identity if task is not None and task.project_dir == cwd
                    else None)
        profile = dataclasses.replace(
            profile, private_home=str(agent_home(self.config, workspace_id, profile.name)),
            cwd_identity=identity, mcp_servers=self.config.mcp_for(profile.name, cwd, task),
            env=self.logins.env(session_id, profile.env))
        try:
            # Made without following a link an agent planted on the way.
            prepare_agent_dirs(self.config, cwd, profile.private_home)
        except OSError as exc:
            raise AgentStartError(f"agent {profile.name!r} cannot start: {exc}") from None
        owner = (workspace_id, session.task_id if session else "")
        ex: Execution | None = None
        entered = False
        try:
            async with self._launch(profile, cwd, session_id) as agent:
                entered = True
                ex = await self._drive(session_id, owner, profile, cwd, agent, task_status,
                                      takeover)
        except OSError as exc:
            if entered:
                raise
            if isinstance(exc, FileNotFoundError):
                raise AgentStartError(f"agent {profile.name!r} cannot start: its command "
                                      f"{profile.command[0]!r} was not found") from None
            raise AgentStartError(f"agent {profile.name!r} cannot start: {exc}") from None
        # The launcher has torn the agent down (its whole process group, if local).
        if agent.pgid is not None:
            with shielded_for(self.timeouts.cancel_cleanup_s), contextlib.suppress(Exception):
                await self.store.forget_agent_group(agent.pgid)
        log.info("agent %s for session %s exited with %s", profile.name, session_id,
                 agent.returncode)
        if ex is not None:
            ex.stopped.set()
            await self._announce_liveness(session_id)

    async def _announce_liveness(self, session_id: str) -> None:
        """Subscribers learn that the agent stopped (``agent_live`` false) even
        when the session's state did not change (an idle stop)."""
        if session_id in self.agents.executions:
            return  # a successor already runs (and its start was announced)
        with contextlib.suppress(StoreError):
            session = await self.store.get_session(session_id)
            if session is not None:
                self.notify.state_changed(session)

    async def _drive(self, session_id: str, owner: tuple[str, str], profile: AgentProfile,
                     cwd: str,
                     agent: LaunchedAgent, task_status: trio.TaskStatus[Execution],
                     takeover: Handover | None = None) -> Execution | None:
        """The execution's nursery around a launched agent, until its output ends."""
        ex: Execution | None = None
        running = False
        adapter = agent.adapter
        try:
            if agent.pgid is not None:
                await self.store.record_agent_group(agent.pgid, session_id,
                                                    " ".join(profile.command), agent.tag)
            async with trio.open_nursery() as nursery:
                ex = Execution(session_id=session_id, profile=profile, agent=agent,
                               nursery=nursery, cwd=cwd, owner=owner,
                               transcript=Transcript(
                                   self.store, self.notify, session_id,
                                   max_turn_output=self.config.limits.max_turn_output_bytes))
                adopted = await self.takeover.adopt(ex, takeover) if takeover is not None else None
                nursery.start_soon(adapter.connection.run)
                if agent.stderr is not None:
                    nursery.start_soon(self._drain_stderr, ex, agent.stderr)
                nursery.start_soon(self._pump, ex)
                with trio.move_on_after(self.timeouts.agent_start_s) as slow:
                    await adapter.initialize()
                    await self.logins.log_in(session_id, adapter)
                    ex.restore_from = await self._conversation(session_id)
                    if adopted is not None:
                        await self.takeover.settle(ex, adopted)
                    elif ex.restore_from is None:
                        await adapter.new_session(cwd)
                        await remember_conversation(self.store, ex)
                if slow.cancelled_caught:
                    raise AgentStartError(
                        f"agent {profile.name!r} did not start within "
                        f"{self.timeouts.agent_start_s:g}s" + _tail(ex))
                if ex.restore_from is None:
                    # The agent's own processes before any turn (a restore's: after it).
                    await self.closer.receipts.baseline(ex)
                ex.status = ExecutionStatus.READY if ex.turn is None else ExecutionStatus.RUNNING
                ex.idle_since = trio.current_time()
                self.agents.executions[session_id] = ex
                self.agents.status.up(session_id, adapter.wire_protocol,
                                      adapter.connection.closed)
                await tell_profile_changed(self.store, self.agents.status, session_id,
                                           profile.name, agent.profile_changed,
                                           self.timeouts.idle_agent_s)
                nursery.start_soon(self._stop_when_idle, ex)
                nursery.start_soon(watch_reach, self.cancellations, ex)  # a remote host (§20)
                if ex.turn is not None:
                    nursery.start_soon(self.watchdog.watch, ex, ex.turn)  # a turn taken over
                task_status.started(ex)
                running = True
                # The pump ends when the agent's output does; then nothing is left to run.
                await adapter.connection.closed.wait()
                with trio.move_on_after(self.timeouts.cancel_cleanup_s):
                    await _pumped(ex)
                nursery.cancel_scope.cancel()
        except Exception as exc:
            if not running:
                # To ensure_execution: the agent failed to start, said in a sentence.
                raise await self._start_error(profile, agent, ex, exc) from exc
            # A failure inside a running execution (e.g. the store refusing a
            # write) ends this agent, never the executions nursery and with it
            # the supervisor.  A turn the store could not close is reconciled
            # by the next cancel, or at the next start.
            leaf = _leaf(exc)
            if isinstance(leaf, StoreError):
                # An outage (a full disk), not a bug: said in a line, no traceback.
                log.warning("session %s: the store refused a write (%s); stopping its agent",
                            session_id, leaf)
            else:
                log.exception("execution of session %s failed; stopping its agent", session_id)
        finally:
            if ex is not None:
                ex.status = ExecutionStatus.STOPPED
                if self.agents.executions.get(session_id) is ex:
                    del self.agents.executions[session_id]
                self.agents.status.down(session_id, ex.adapter.connection.closed)
        return ex

    # -- a running turn taken over after a restart --------------------------------

    def start_take_over(self, handover: Handover) -> None:
        """``take_over`` in the executions nursery; prompts and cancels of the
        session wait for it from now on."""
        assert self._nursery is not None, "LifecycleManager.run is not running"
        # Registered at once: a prompt or cancel that comes before the task runs waits too.
        self.agents.starting[handover.session_id] = self.agents.taking_over[handover.session_id] = \
            trio.Event()
        self._nursery.start_soon(contained, f"session {handover.session_id}: takeover",
                                 self.take_over, handover)

    async def take_over(self, handover: Handover) -> None:
        """After a restart: re-attach the agent (behind an agentctl at a configured
        URL) that runs ``handover``'s turn, and let the turn stream on into its
        session.  Bounded by ``agentctl_takeover_s``; if agentctl does not answer
        in time, no longer runs the turn, or lost its events since the recorded
        position, the turn is interrupted as recovery interrupts any other
        (``RESTART_STATUS``, the queue parked).  Prompts and cancels of the
        session wait for it (bounded)."""
        sid = handover.session_id
        assert self._nursery is not None, "LifecycleManager.run is not running"
        settled = self.agents.taking_over.get(sid)
        if settled is None:
            settled = trio.Event()
        self.agents.starting[sid] = self.agents.taking_over[sid] = settled
        ex: Execution | None = None
        try:
            session = await self.store.get_session(sid)
            profile = self.config.profiles.get(session.agent) if session is not None else None
            self.cancellations.hold_restored(handover, session)  # §20: a held cancel
            if profile is not None and session is not None:
                ex = await take_over_attempts(functools.partial(
                    self._nursery.start, self._run_execution, sid, session.workspace_id,
                    profile, handover), handover, self.timeouts)
            if ex is None:
                await self.closer.interrupt_restarted(sid, handover.turn_id, None)
            elif ex.turn is not None:
                log.info("session %s: turn %s taken over from the previous backend", sid,
                         handover.turn_id)
        finally:
            del self.agents.starting[sid], self.agents.taking_over[sid]
            settled.set()
            self.closer.gate.takeover_settled(sid)  # a kick meanwhile found it busy

    async def _conversation(self, session_id: str) -> AgentSessionRef | None:
        """The conversation a new agent of this session restores, if any.  (An
        agent behind agentctl cannot restore, but agentctl re-attaches the
        session its owner started: ``new_session`` hands back the same id.)"""
        return await self.store.get_agent_session(session_id)

    async def _stop_when_idle(self, ex: Execution) -> None:
        """Stop the agent once it ran no turn for ``idle_agent_s``, so idle
        sessions hold no processes; the next prompt starts and restores one."""
        idle_s = self.timeouts.idle_agent_s
        while True:
            await trio.sleep_until(ex.idle_since + idle_s)
            turn = ex.turn
            if turn is not None:
                await turn.done.wait()  # its end moves idle_since on
            elif trio.current_time() >= ex.idle_since + idle_s:
                log.info("session %s: agent %s idle for %gs; stopping it", ex.session_id,
                         ex.profile.name, idle_s)
                ex.nursery.cancel_scope.cancel()
                return

    async def stop_execution(self, session_id: str) -> None:
        ex = self.agents.executions.get(session_id)
        if ex is None:
            return
        ex.nursery.cancel_scope.cancel()
        with trio.move_on_after(self.timeouts.stop_s):
            await ex.stopped.wait()

    async def shutdown(self) -> None:
        """Graceful stop: stop running turns (bounded), then every agent."""
        running = [ex for ex in self.agents.executions.values() if ex.turn is not None]
        if running:
            async with trio.open_nursery() as nursery:
                for ex in running:
                    if self._hands_over(ex):
                        nursery.start_soon(self._detach, ex)
                    else:
                        nursery.start_soon(self.cancellations.stop_for_shutdown, ex)
        async with trio.open_nursery() as nursery:
            for session_id in list(self.agents.executions):
                nursery.start_soon(self.stop_execution, session_id)

    @staticmethod
    def _hands_over(ex: Execution) -> bool:
        """Whether shutdown leaves ``ex``'s turn running for the next backend:
        its agent outlives us, the prompt was sent, and a position is recorded.
        A cancel in flight goes with this backend (as with a crash): the agent
        may still honour it; the next backend can cancel the turn again."""
        turn = ex.turn
        return (ex.agent.handover is not None and turn is not None and turn.before_prompt is None
                and turn.recorded is not None)

    async def _detach(self, ex: Execution) -> None:
        """Shutdown: the turn runs on behind agentctl and stays open in the store;
        what the agent sent so far is written down (bounded), the rest is
        replayed to the next backend (``take_over``)."""
        turn, handover = ex.turn, ex.agent.handover
        assert turn is not None and handover is not None
        log.info("session %s: leaving turn %s to the agent's host for the next backend",
                 ex.session_id, turn.id)
        ex.detached = True
        handover.detach()
        with trio.move_on_after(self.timeouts.cancel_cleanup_s):
            await ex.pumped.wait()
        if ex.turn is turn:
            ex.turn = None
        turn.done.set()

    # -- stderr and the event pump -------------------------------------------

    async def _start_error(self, profile: AgentProfile, agent: LaunchedAgent,
                           ex: Execution | None, exc: BaseException) -> AgentStartError:
        leaf = _leaf(exc)
        if isinstance(leaf, AuthRequired):
            return AgentLoginRequired(leaf.methods, str(leaf))
        if isinstance(leaf, AgentStartError):
            return leaf
        code = agent.returncode
        if code is None and agent.process is not None:
            # Its output ends a moment before its exit can be seen.
            with trio.move_on_after(self.timeouts.exit_status_s):
                code = await agent.process.wait()
        if code is None:
            return AgentStartError(f"agent {profile.name!r} failed to start: {leaf}"
                                   + _tail(ex))
        if ex is not None and agent.stderr is not None:
            # It exited: what it said last on stderr (the drain stopped with the
            # execution's nursery) says more than the protocol error.
            with trio.move_on_after(self.timeouts.exit_status_s), \
                    contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                rest = b""
                while chunk := await agent.stderr.receive_some(65536):
                    rest = (rest + chunk)[-8192:]
                ex.stderr_tail.extend(
                    clean for line in rest.split(b"\n")
                    if (clean := clean_stderr_line(line)).strip())
        return AgentStartError(f"agent {profile.name!r} exited with status {code} while "
                               "starting" + _tail(ex))

    async def _drain_stderr(self, ex: Execution, stream: trio.abc.ReceiveStream) -> None:
        def emit(line: str) -> None:
            if line.strip():
                ex.stderr_tail.append(line)
            log.debug("agent %s stderr: %s", ex.profile.name, line)

        await drain_stderr(stream, emit)

    async def _pump(self, ex: Execution) -> None:
        """Agent events → transcript, in order; a turn's end closes the turn.
        Streamed text is buffered and written by ``texts`` with every other
        session's, at most every ``stream_flush_s``."""
        events = ex.adapter.events
        not_written = functools.partial(self._text_not_written, ex)
        try:
            while True:
                try:
                    batch = [await events.receive()]
                except trio.EndOfChannel:
                    return
                while len(batch) < 512:
                    try:
                        batch.append(events.receive_nowait())
                    except (trio.WouldBlock, trio.EndOfChannel):
                        break
                for ev in batch:
                    turn = ex.turn
                    match ev:
                        case TurnEnded() if turn is not None:
                            turn.answered_at = trio.current_time()
                            await self.closer.finish_turn(ex, turn, ev)
                        case PermissionResolved(interrupts_turn=True) if turn is not None:
                            # "Deny and stop": the agent was told; the turn ends as
                            # the user's cancel (whoever ends it first), through the
                            # one cancel operation.
                            turn.stop_request = StopRequest.USER
                            await ex.transcript.record(turn.text, ev)
                            self.cancellations.stop_for_user(ex.session_id, ex.owner)
                        case SubagentActivity():
                            if turn is not None:  # its parent waits on it: not stalled
                                await self.watchdog.progress(turn)
                            if (sub := self.subagents.activity(
                                    ex.session_id, ev.subagent_id, ev.text, ev.tool,
                                    trio.current_time())) is not None:
                                self.notify.subagent_changed(ex.session_id, sub)
                        case SubagentChanged():
                            stopping = (turn is not None and turn.cancel_began_at is not None
                                        and ev.state in ("cancelling", "cancelled"))
                            if stopping and turn is not None:
                                turn.subagents_stopped.add(ev.subagent_id)
                            self.notify.subagent_changed(ex.session_id, self.subagents.record(
                                ex.session_id, turn.id if turn is not None else None, ev,
                                by_user=stopping and turn is not None
                                and turn.stop_request is StopRequest.USER))
                            await write_ended(self.store, self.subagents, ex.session_id)
                        case OptionsChanged() | CommandsChanged() | UsageUpdated() | \
                                TitleChanged():
                            await self.offers.take(ex, ev)
                        case AgentNotice(message=message, level=level):
                            log.log(logging.WARNING if level == "warning" else logging.INFO,
                                    "agent %s (session %s): %s", ex.profile.name,
                                    ex.session_id, message)
                        case _:
                            if turn is not None and turn.cancel_phase is not None:
                                turn.events_after_cancel += 1
                            if turn is not None and isinstance(ev, PROGRESS_EVENTS):
                                await self.watchdog.progress(turn)
                            await ex.transcript.record(turn.text if turn else None, ev)
                            if turn is not None and isinstance(ev, STEP_EVENTS):
                                # The receipt's tool calls, and a stop after the
                                # step written in this step when the step ends.
                                turn.tools.see(ev)
                                if (turn.step_wait is not None
                                        and turn.step_wait.over(ev, turn.tools)):
                                    self.cancellations.step_due(ex, turn)
                text = ex.turn.text if ex.turn is not None else None
                if text is not None and any(text.pending_text.values()):
                    if ex.agent.handover is not None:
                        # Behind an agentctl that outlives us every batch is written
                        # at once: the stream position recorded below must be written.
                        await ex.transcript.flush(text)
                    else:
                        self.texts.mark(ex.transcript, text, not_written)
                if ex.agent.handover is not None:
                    await self.record_position(ex, ex.agent.handover.take(len(batch)))
        finally:
            turn = ex.turn
            if turn is not None and (ex.detached or turn.adopting):
                pass  # left to the agent's host / to take_over's fallback
            elif turn is not None:
                code = ex.agent.returncode
                if code is None and ex.agent.process is not None:
                    # Its stdout ends a moment before its exit can be seen:
                    # a crash should say so, not "closed its output".
                    with shielded_for(self.timeouts.exit_status_s):
                        code = await ex.agent.process.wait()
                # (Shielded, with its own bound: the close of the turn.)
                await self.closer.finish_turn(ex, turn, TurnEnded(
                    stop_reason="error",
                    error=f"agent exited (status {code})" if code is not None
                    else "agent closed its output",
                ))
            ex.status = ExecutionStatus.STOPPED
            for subagent in self.subagents.agent_stopped(ex.session_id):
                self.notify.subagent_changed(ex.session_id, subagent)
            with shielded_for(self.timeouts.exit_status_s), contextlib.suppress(Exception):
                # The children gone with the agent leave their traces (§13).
                await write_ended(self.store, self.subagents, ex.session_id)
            ex.pumped.set()

    @staticmethod
    def _text_not_written(ex: Execution, exc: Exception) -> None:
        """The store refused the turn's streamed text: the agent is stopped (its
        execution's scope cancelled), as when its pump meets a refused write."""
        log.warning("session %s: the store refused a write (%s); stopping its agent",
                    ex.session_id, exc)
        ex.nursery.cancel_scope.cancel()

    async def record_position(self, ex: Execution, position: int | None) -> None:
        """Record how far the running turn's event stream is written down, for
        the backend that takes the turn over after a restart."""
        turn = ex.turn
        if turn is None or not turn.id or position is None or position == turn.recorded:
            return
        try:
            await self.store.set_turn_handover(turn.id, position)
        except StoreUnavailable as exc:
            # Not fatal: a restart would replay a little more (or interrupt the turn).
            log.warning("session %s: could not record turn %s's stream position: %s",
                        ex.session_id, turn.id, exc)
            return
        turn.recorded = position


async def _pumped(ex: Execution) -> None:
    if ex.turn is not None:
        await ex.turn.done.wait()
