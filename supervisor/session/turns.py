"""Turns: a prompt's turn from its claim to the prompt's write, and steering.

``send_prompt`` claims the execution's turn synchronously (a concurrent
prompt sees it at once), opens it in the store and starts ``run_turn`` in the
execution's nursery; the turn's ``CancelScope`` is its handle (escalation
cancels it alone).  Until the prompt is written the turn's pre-prompt scope
(``TurnHandle.before_prompt``) is armed: the restore of a fresh agent's
conversation and the turn's checkpoint run in it, and a cancel or shutdown
cancels it, so the prompt is never written.  The pump ends the turn in order
with the agent's output (supervisor.session.execution); ``run_turn`` reports only
what the pump cannot see.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio

from protocols.acp_auth import AuthRequired
from protocols.adapters import AgentClosed, AgentRefused, AgentRequestError, AgentTimeout
from protocols.events import TurnEnded
from protocols.jsonrpc import LocalProtocolError
from protocols.prompt_parts import PromptPart

from ..config import Timeouts
from ..errors import Conflict, InvalidRequest, NotFound
from ..models import Message, Session
from ..storage.store import Store
from ..turn.execution_state import (
    Agents,
    Execution,
    ExecutionStatus,
    TurnHandle,
    remember_conversation,
)
from ..turn.restore import RESTORE_FAILED_META, RESTORE_FAILED_STATUS, Reopened, reopen
from ..turn.transcript import TurnText
from ..turn.turn_close import TurnCloser
from ..turn.turn_end import TURN_ERRORS, left_to_us, turn_error
from ..turn.turn_outcome import TurnFacts
from ..turn.watchdog import Watchdog
from ..workspace.attachments import NO_REFS, PromptRefs
from ..workspace.turn_checkpoints import TurnCheckpoints
from .execution import Executions
from .offers import Offers

__all__ = ["Turns"]

log = logging.getLogger(__name__)


class Turns:
    def __init__(self, timeouts: Timeouts, store: Store, agents: Agents, executions: Executions,
                 closer: TurnCloser, watchdog: Watchdog,
                 checkpoints: TurnCheckpoints | None, offers: Offers) -> None:
        self.offers = offers
        self.timeouts = timeouts
        self.store = store
        self.agents = agents
        self.executions = executions
        self.closer = closer
        self.watchdog = watchdog
        self.checkpoints = checkpoints

    async def send_prompt(self, session: Session, text: str, *,
                          guard: Callable[[], bool] | None = None,
                          resume_queue: bool = False,
                          client_message_id: str | None = None,
                          refs: PromptRefs = NO_REFS) -> Message:
        """Open a turn (one at a time per session) and send the prompt.
        Returns the stored user message; the turn runs in the execution nursery.
        ``guard`` is asked at the moment the turn is claimed (no checkpoint
        after it): False refuses the start with ``Conflict``.  ``resume_queue``
        resumes a parked queue in the turn's own transaction.  ``refs``: its
        attachments and mentions (DESIGN.md §19), read and checked against what
        the agent takes before anything is stored or sent (``InvalidRequest``)."""
        ex = await self.executions.ensure_execution(session)
        if ex.abandoned and ex.turn is None:
            log.warning("session %s: replacing an agent that never ended its escalated turn",
                        session.id)
            await self.executions.stop_execution(session.id)
            ex = await self.executions.ensure_execution(session)
        parts = await self._parts(ex, refs)
        if ex.turn is not None:
            raise Conflict("a turn is already running in this session")
        if ex.adapter.turn_running:
            raise Conflict("the agent is still finishing its previous turn")
        if guard is not None and not guard():
            raise Conflict("the turn may no longer start")
        # Claimed before the first checkpoint: a concurrent prompt sees it at once.
        # Its pre-prompt scope is armed now: a cancel from here on (while the
        # store opens the turn, too) withholds the prompt instead of writing a
        # protocol cancel to an agent that runs no turn yet.
        handle = ex.turn = TurnHandle(id="", session_id=session.id,
                                      before_prompt=trio.CancelScope())
        # DESIGN.md §12, §15: every session has checkpoints, the default work dir's
        # too (a revert keeps what another session changed since: turn_checkpoints).
        handle.checkpointed = self.checkpoints is not None
        try:
            turn, msg = await self.store.open_turn(session.id, text, resume_queue=resume_queue,
                                                   client_message_id=client_message_id,
                                                   metadata=refs.metadata())
        except BaseException:
            if ex.turn is handle:
                ex.turn = None
            handle.done.set()  # (a cancel waiting for it has nothing left to stop)
            raise
        handle.id = turn.id
        if handle.done.is_set():
            # Escalated while the store opened it (a cancel that outwaited the
            # store): the turn the store just opened is closed as that cancel.
            await self.closer.close_turn(
                session.id, turn.id, TurnFacts(request=handle.stop_request, prompt_withheld=True),
                TurnEnded(stop_reason="cancelled", turn_id=turn.id))
            return msg
        handle.text = TurnText(session_id=session.id, turn_id=turn.id)
        ex.status = ExecutionStatus.RUNNING
        handle.last_event_at = trio.current_time()
        await ex.nursery.start(self.run_turn, ex, handle, text, parts)
        ex.nursery.start_soon(self.watchdog.watch, ex, handle)
        return msg

    async def check_parts(self, session_id: str, refs: PromptRefs) -> None:
        """A message to be queued: its parts checked now against the session's
        running agent, as its turn's start will check them (``InvalidRequest``, the
        same line), so it is refused at ``message.add`` rather than when its turn
        comes.  No agent runs: its start checks them."""
        ex = self.agents.executions.get(session_id)
        if refs and ex is not None and not ex.stopped.is_set():
            await self._parts(ex, refs)

    async def _parts(self, ex: Execution, refs: PromptRefs) -> tuple[PromptPart, ...]:
        """``refs`` read for the agent (from its cwd); ``InvalidRequest`` when one
        is not there or the agent cannot take one (protocols/prompt_parts.py)."""
        if not refs:
            return ()
        config = self.executions.config
        parts = await refs.load(config.data_dir, ex.cwd, config.limits.max_attachment_bytes)
        refusal = ex.adapter.parts_refusal(parts)
        if refusal is not None:
            raise InvalidRequest(refusal)
        return parts

    async def steer(self, session_id: str, text: str,
                    client_message_id: str | None = None,
                    refs: PromptRefs = NO_REFS) -> Message:
        """Deliver ``text`` into the running turn (Codex ``turn/steer``, ACP
        ``_session/steering`` where offered) and
        store it as a user message with ``metadata.delivery: "steer"``.

        Raises ``SteerUnsupported`` (the agent cannot), ``Conflict`` (no turn
        to steer, or the agent refused it: certainly not delivered).  A steer
        whose delivery is uncertain (no answer in time, the agent went away)
        is never sent again: it is stored with ``delivery_uncertain``."""
        ex = self.agents.executions.get(session_id)
        turn = ex.turn if ex is not None else None
        if ex is None or turn is None or not turn.id or turn.cancel_phase is not None:
            raise Conflict("no running turn to steer")
        parts = await self._parts(ex, refs)
        meta: dict[str, Any] = {"delivery": "steer", **refs.metadata()}
        if client_message_id is not None:
            meta["client_message_id"] = client_message_id
        try:
            await ex.adapter.steer(text, parts)
        except (LocalProtocolError, AgentRefused, AgentRequestError) as exc:
            # (An error answer, its details in its text: the turn it names is over.)
            raise Conflict(f"the agent did not take the steer: {exc}") from None
        except (AgentTimeout, AgentClosed) as exc:
            log.warning("session %s: steer delivery uncertain (%s); not sent again",
                        session_id, exc)
            meta["delivery_uncertain"] = True
        if turn.text is not None:
            # The reply so far is written and closed: the steer sits where the agent took it,
            # and what the agent says after it is a new message (not the whole reply before it).
            await ex.transcript.flush(turn.text, close=True)
        return await self.store.add_message(session_id, turn.id, "user", "text", text, meta)

    async def run_turn(self, ex: Execution, turn: TurnHandle, text: str,
                       parts: tuple[PromptPart, ...] = (),
                       task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The pending prompt.  The pump ends the turn in order with its
        output; this task only reports what the pump cannot see."""
        ended: TurnEnded | None = None
        with turn.scope:
            task_status.started()
            try:
                prompt = await self._before_prompt(ex, turn, text)
                if prompt is None:
                    return  # cancelled before the prompt: the turn is closed
                text = prompt
                handover = ex.agent.handover
                if handover is not None:
                    # The agent's host runs it under our id, from this position.
                    handover.bind_turn(turn.id)
                    await self.executions.record_position(ex, handover.take(0))
                if await self._withheld(ex, turn):
                    return
                # Disarmed in the same step as the prompt's write (no checkpoint
                # between): from here on a cancel is the protocol's.
                ended = await ex.adapter.prompt(text, parts)
            except TURN_ERRORS as exc:
                ended = turn_error(exc)
            except AuthRequired as exc:  # DESIGN.md §19: at the restore, logged out since
                ended = await self.executions.logins.asked_at_restore(ex.session_id, exc)
            except AgentClosed:
                return  # the pump ends the turn when the agent's output ends
        if turn.scope.cancelled_caught or ended is None or ex.detached:
            return  # escalated (the escalation closed the turn), or left to agentctl
        if await left_to_us(ended, turn.done, self.timeouts.cancel_cleanup_s):
            await self.closer.finish_turn(ex, turn, ended)

    async def _before_prompt(self, ex: Execution, turn: TurnHandle, text: str) -> str | None:
        """What comes before the prompt, in the turn's pre-prompt scope: the
        conversation restored in a fresh agent (supervisor.turn.restore), the turn's
        checkpoint (supervisor.workspace.turn_checkpoints).  Returns the prompt to write,
        or None: a cancel or shutdown came first (even before this ran, while
        the store opened the turn), the turn is closed and the prompt never
        written.  A restore cut short leaves its agent in an unknown state: it
        is replaced before the next prompt."""
        scope = turn.before_prompt
        assert scope is not None
        ref = ex.restore_from
        reopened = None
        try:
            with scope:
                if ref is not None:
                    try:
                        reopened = await reopen(ex.adapter, ref, profile=ex.profile.name,
                                                cwd=ex.cwd, restore_s=self.timeouts.restore_s)
                    except BaseException:
                        ex.abandoned = True  # died, cut short, or gave no fresh session
                        raise
                if turn.checkpointed:
                    assert self.checkpoints is not None
                    text = await self.checkpoints.before_prompt(ex.session_id, turn.id,
                                                                Path(ex.cwd), text, ex.adapter)
        except BaseException:
            turn.before_prompt = None
            raise
        # The scope stays armed (a cancel from here on only marks it) until the
        # prompt's write: what comes between (these store writes, a handover's
        # position) yields, and a cancel then would otherwise find no prompt
        # to withhold and write a protocol cancel the idle agent ignores.
        if reopened is not None:
            ex.restore_from = None
            # The agent's own processes, the restored conversation's included.
            await self.closer.receipts.baseline(ex)
            # The person's choices (model, mode, ...) to the restored agent too.
            session = await self.store.get_session(ex.session_id)
            if session is not None and session.options:
                await self.offers.reapply(ex, session.options)
            await remember_conversation(self.store, ex)
            self._log_restore(ex, reopened)
            if reopened.restored is None and not reopened.reattached:
                # Why is in the log (supervisor.turn.restore); the metadata is DESIGN.md §10's.
                await self.store.add_message(ex.session_id, None, "system", "status",
                                             RESTORE_FAILED_STATUS, dict(RESTORE_FAILED_META))
        if scope.cancel_called and await self._withheld(ex, turn):
            return None
        return text

    async def _withheld(self, ex: Execution, turn: TurnHandle) -> bool:
        """Disarm the pre-prompt scope; True (the turn closed as cancelled) if
        a cancel or shutdown marked it: the prompt is never written."""
        scope, turn.before_prompt = turn.before_prompt, None
        if scope is None or not scope.cancel_called:
            return False
        await self.closer.finish_turn(ex, turn, TurnEnded(stop_reason="cancelled",
                                                          turn_id=turn.id))
        return True

    @staticmethod
    def _log_restore(ex: Execution, reopened: Reopened) -> None:
        if reopened.restored is not None:
            log.info("session %s: conversation restored (%s, %d replayed) in %.2fs",
                     ex.session_id, reopened.restored.method, reopened.restored.replayed,
                     reopened.took_s)
        elif reopened.reattached:
            log.info("session %s: the agent re-attached its conversation", ex.session_id)
        else:
            log.warning("session %s: the agent could not restore its conversation (%s); it "
                        "starts fresh", ex.session_id, reopened.reason)

    async def respond_permission(self, session_id: str, request_id: str,
                                 option_id: str | None) -> None:
        ex = self.agents.executions.get(session_id)
        if ex is None:
            raise NotFound("no running agent for this session")
        try:
            await ex.adapter.respond_permission(request_id, option_id)
        except (LocalProtocolError, AgentRefused) as exc:
            raise NotFound(str(exc)) from None
        except (AgentClosed, AgentTimeout) as exc:
            raise Conflict(str(exc)) from None
