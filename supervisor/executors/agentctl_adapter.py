"""``AgentctlAdapter``: an ``AgentAdapter`` whose agent runs behind agentctl.

The lifecycle drives it exactly like a local adapter::

    nursery.start_soon(adapter.connection.run)   # the event stream reader
    await adapter.initialize()                   # the stream is up, agentctl answers
    await adapter.new_session(cwd)               # POST /api/v1/session
    await adapter.prompt(text)                   # POST /api/v1/prompt, then the
                                                 # TurnEnded from the event stream
    adapter.cancel_now()                         # a Cancel frame on the event stream
    await adapter.cancel()                       # else POST /api/v1/acp/cancel (join_s=0)

``cancel_now`` hands a ``Cancel`` frame to the open event stream without
waiting (agentctl writes the protocol cancel as it reads it, and answers on
the stream); ``cancel`` writes it through an HTTP request, like a local
adapter's ``cancel`` when ``cancel_now`` could not.  Either way the join
window and escalation stay the lifecycle's, which sees the turn end on
``events``.  agentctl's answer to the frame is data on the turn
(``PendingTurn.frame``, supervisor/executors/agentctl_turn.py), which the
cancel operation reads (``cancel_frame``); a frame not answered when the link
is cut is owed: the link's return sends it again (agentctl's cancel of one
turn is idempotent).

A turn outlives the backend that started it (``TurnHandover``, with
``agentctl_url``): agentctl runs it under our turn id (``bind_turn``) and
awaits the agent's end of it itself, so a backend that comes back calls
``adopt`` (our turn id, the stream position the previous backend recorded)
before the link runs, ``new_session`` (re-attaches by owner and keeps that
turn instead of cancelling it), then ``settle_adoption``: the turn's events
since that position, its end included, arrive on ``events`` in order.
"""

from __future__ import annotations

import json
import logging
import uuid
from typing import Any, get_args

import trio

from protocols.adapters import (
    McpServer,
    McpUnsupported,
    OptionApplied,
    OptionsUnsupported,
    Restored,
    RestoreUnsupported,
    RevertUnsupported,
    SteerUnsupported,
    WireProtocol,
)
from protocols.agentctl_parts import MAX_PROMPT_BYTES, mcp_json, parts_json, prompt_bytes
from protocols.agentctl_wire import cancel_frame
from protocols.events import (
    SUBAGENT_LIVE,
    AgentEvent,
    SubagentChanged,
    SubagentState,
    TurnEnded,
)
from protocols.prompt_parts import (
    PartRefused,
    PromptPart,
    acp_refusal,
    codex_refusal,
    streamed,
)
from protocols.transport import AgentClosed, AgentRefused, AgentTimeout

from ..config import Timeouts
from .agentctl_http import Route, first_set
from .agentctl_link import AgentctlLink
from .agentctl_turn import FrameAnswer, PendingTurn
from .link_hold import LinkDown, LinkHold

__all__ = ["AgentctlAdapter"]

log = logging.getLogger(__name__)


class AgentctlAdapter:
    """An ``AgentAdapter`` over agentctl's HTTP API and event stream.

    ``owner`` names who the agent's session belongs to (the backend's session
    id): agentctl hands the same owner its live session back (re-attachment)
    and refuses another owner's.  ``session_cwd`` is sent as the session's cwd;
    None lets agentctl use its agent's directory (paths are the agent machine's).
    """

    def __init__(self, url: str, token: str, *, owner: str | None = None,
                 session_cwd: str | None = None, protocol: str | None = None,
                 timeouts: Timeouts | None = None, route: Route | None = None,
                 uds: str | None = None, reconnect: bool = False) -> None:
        self.timeouts = timeouts or Timeouts()
        self.connection = AgentctlLink(url, token, self.timeouts, owner=owner,
                                       on_subagent=self._subagent_changed, route=route,
                                       uds=uds, reconnect=reconnect)
        self.owner = owner
        self.session_cwd = session_cwd
        self.protocol = protocol
        #: What agentctl's agent negotiated (its session answer says; older
        #: agentctls do not: then the profile's protocol, ACP read as v1).
        self._wire: WireProtocol | None = None
        #: What the agent's prompts take, as agentctl's session answer said (ACP).
        self._prompt_caps: dict[str, Any] = {}
        #: True when ``new_session`` re-attached to a live session.
        self.attached = False
        #: Set when the backend stops and leaves this agent's running turn to
        #: the next one (``detach``): an executor that would tear the agent
        #: down keeps it (a Pod).
        self.left = False
        self._session_id: str | None = None
        self._turn: PendingTurn | None = None
        self._abandoned: str | None = None
        #: The id agentctl runs the next prompt under (``bind_turn``).
        self._next_turn_id: str | None = None
        #: A previous backend's turn this one takes over (``adopt``), and the
        #: seq agentctl's log had reached when it answered the session start.
        self._adopting: PendingTurn | None = None
        self._session_seq: int | None = None
        #: Children as agentctl last answered a cancel of them (their state), kept
        #: as supervisor/subagents.py keeps its own: one that ended is forgotten
        #: when the stream says so and at the next turn, all of them with the session.
        self._subagents: dict[str, SubagentChanged] = {}

    # -- AgentAdapter -----------------------------------------------------------------

    @property
    def events(self) -> trio.MemoryReceiveChannel[AgentEvent]:
        return self.connection.events

    @property
    def operation_id(self) -> str | None:
        """agentctl's id of the running turn (what a cancel acts on)."""
        return self._turn.id if self.turn_running and self._turn is not None else None

    @property
    def agent_turn_id(self) -> str | None:
        """Not through agentctl: its events carry agentctl's turn ids, not the
        agent's own (nothing here rewinds the agent's history)."""
        return None

    @property
    def agent_session_id(self) -> str | None:
        """The agent's session, as agentctl started it."""
        return self._session_id

    @property
    def link_hold(self) -> LinkHold | None:
        """The link, when it survives a cut (DESIGN.md §20); else None."""
        return self.connection if self.connection.reconnect else None

    @property
    def turn_running(self) -> bool:
        return self._turn is not None and not self._turn.done.is_set()

    #: Not carried by agentctl's wire yet: the cancel figures of an agent
    #: behind agentctl are kept under its profile alone.
    agent_version: str | None = None
    #: Handed to agentctl with the session start, which passes them to its agent's
    #: session/new as the local executor does (a kind it does not take: McpUnsupported).
    mcp_servers: tuple[McpServer, ...] = ()

    @property
    def wire_protocol(self) -> WireProtocol:
        if self._wire is not None:
            return self._wire
        return "codex" if self.protocol == "codex" else "acp/1"

    async def initialize(self) -> None:
        """Wait for the event stream (bounded), then check agentctl's answer."""
        link = self.connection
        with trio.move_on_after(self.timeouts.agentctl_connect_s):
            while not (link.connected.is_set() or link.closed.is_set()):
                await first_set(link.connected, link.closed)
        if link.closed.is_set():
            raise AgentClosed(link.close_reason)
        if not link.connected.is_set():
            raise AgentTimeout(f"agentctl's event stream did not open within "
                               f"{self.timeouts.agentctl_connect_s:g}s")
        status = await self._call("GET", "/api/v1/status", None,
                                  timeout_s=self.timeouts.agentctl_connect_s)
        if self.protocol is not None and status.get("protocol") != self.protocol:
            self.connection.close(f"agentctl runs a {status.get('protocol')} agent, the profile "
                                  f"says {self.protocol}")
            raise AgentClosed(self.connection.close_reason)

    async def new_session(self, cwd: str) -> str:
        """Start the agent's session, or re-attach to the one this ``owner`` started.

        A re-attached session may still run a turn of a previous backend (which
        has closed that turn on its side): it is cancelled, and if the agent does
        not end it within ``agentctl_attach_join_s`` the agent is replaced by a fresh one,
        as the lifecycle replaces a local agent that never ended an escalated turn.
        """
        data = await self._start_session(replace=False)
        running = data.get("turn_id")
        adopting = self._adopting
        if adopting is not None and data.get("attached") and running == adopting.id \
                and self.connection.resume_lost is None:
            log.info("agentctl %s: re-attached to session %s; taking over its turn %s",
                     self.connection.url, data["session_id"], running)
            self._turn = adopting
            return str(data["session_id"])
        if adopting is not None and running == adopting.id:
            # Its events since the recorded position are gone: the turn cannot
            # be handed over, and is cancelled like any leftover (its end is
            # then only a notice; settle_adoption reports it lost).
            self.connection.expect_turn(None)
        if data.get("attached") and isinstance(running, str):
            log.info("agentctl %s: re-attached to session %s; cancelling its turn %s",
                     self.connection.url, data["session_id"], running)
            joined = await self.cancel_and_join(self.timeouts.agentctl_attach_join_s)
            if not joined.get("success"):
                log.warning("agentctl %s: turn %s ignored the cancel; replacing the agent",
                            self.connection.url, running)
                data = await self._start_session(replace=True)
        return str(data["session_id"])

    async def _start_session(self, *, replace: bool) -> dict[str, Any]:
        if replace:
            self.connection.session_id = None
        body: dict[str, Any] = {"owner": self.owner, "replace": replace}
        if self.session_cwd is not None:
            body["cwd"] = self.session_cwd
        if self.mcp_servers:
            body["mcp_servers"] = mcp_json(self.mcp_servers)
        status, data = await self._call_status("POST", "/api/v1/session", body,
                                               timeout_s=self.timeouts.agent_start_s,
                                               expect=(200, 422))
        if status == 422:  # a server of a kind its agent does not take (or malformed)
            raise McpUnsupported(f"agentctl: {data.get('error')}")
        session_id = data.get("session_id")
        if not isinstance(session_id, str):
            raise AgentClosed(f"agentctl did not start a session: {data.get('error')}")
        if session_id != self._session_id:
            self._subagents.clear()  # another session: its children are not these
        self._session_id = session_id
        self.connection.session_id = session_id
        self.attached = bool(data.get("attached"))
        wire = data.get("wire_protocol")
        if wire in ("acp/1", "acp/2", "codex"):
            self._wire = wire
        seq = data.get("seq")
        self._session_seq = seq if isinstance(seq, int) else None
        caps = data.get("prompt_capabilities")
        self._prompt_caps = caps if isinstance(caps, dict) else {}
        return data

    # -- TurnHandover -----------------------------------------------------------------

    def bind_turn(self, turn_id: str) -> None:
        """agentctl runs the next prompt under ``turn_id`` (ours), so a later
        backend finds it by the id it has."""
        self._next_turn_id = turn_id

    def take(self, count: int) -> int | None:
        return self.connection.take(count)

    def adopt(self, turn_id: str, after: int) -> None:
        """Before the link runs: take over turn ``turn_id`` of a previous backend,
        whose events were written down up to seq ``after``."""
        turn = PendingTurn(id=turn_id)
        turn.answered.set()  # its prompt was answered long ago: a cancel may go at once
        self._adopting = turn
        self.connection.resume(after)
        self.connection.expect_turn(turn)

    def detach(self) -> None:
        """Leave the running turn to agentctl (the backend stops): the link
        closes, agentctl runs the turn on and keeps its events for the next
        backend (its replay ring)."""
        self.left = True
        self.connection.close("the backend left its turn to agentctl", quiet=True)

    async def settle_adoption(self) -> bool:
        """After ``new_session``: whether the adopted turn is this adapter's now —
        still running behind agentctl, or ended while no backend was connected
        with its end among the replayed events (then on ``events``).  Bounded
        by ``agentctl_connect_s`` (the replay up to the session start's seq)."""
        turn, self._adopting = self._adopting, None
        if turn is None:
            return False
        link = self.connection
        if self._turn is turn and not link.closed.is_set():
            return True
        if link.resume_lost is None and self._session_seq is not None:
            with trio.move_on_after(self.timeouts.agentctl_connect_s):
                await link.reached(self._session_seq)
        if turn.done.is_set() and turn.ended is not None and not link.closed.is_set() \
                and link.resume_lost is None:
            self._turn = turn
            return True
        if self._turn is turn:
            self._turn = None
        link.expect_turn(self._turn)
        return False

    async def restore_session(self, agent_session_id: str, cwd: str) -> Restored:
        """Not through agentctl yet: its API has no resume/load of an agent session."""
        raise RestoreUnsupported("agentctl cannot restore an agent session yet")

    async def steer(self, text: str, parts: tuple[PromptPart, ...] = ()) -> None:
        """Not through agentctl yet: its API has no steer."""
        raise SteerUnsupported("agentctl cannot steer a running turn yet")

    async def revert_thread(self, before_turn_id: str) -> None:
        """Not through agentctl yet: its API has no history rewind (the agent is
        told of a revert in words instead)."""
        raise RevertUnsupported("agentctl cannot rewind an agent's history yet")

    async def set_option(self, option_id: str, value: str) -> OptionApplied:
        """``POST /api/v1/session/option``: agentctl's agent applies it as a local
        one does (``now``, or with its next turn); the options it then offers
        arrive on the event stream.  One it does not offer: ``OptionsUnsupported``."""
        status, data = await self._call_status(
            "POST", "/api/v1/session/option",
            {"option_id": option_id, "value": value, "session_id": self._session_id},
            timeout_s=self.timeouts.agent_request_s, expect=(200, 422, 502, 504))
        error = str(data.get("error"))
        if status == 422:
            raise OptionsUnsupported(error)
        if status != 200:
            raise AgentTimeout(error)
        applied = data.get("applied")
        return "now" if applied == "now" else "next_turn"

    async def login(self, method_id: str, key: str | None = None) -> None:
        """Not through agentctl yet: its API has no login call (DESIGN.md §19)."""
        raise ValueError("agentctl cannot log an agent in yet")

    def parts_refusal(self, parts: tuple[PromptPart, ...]) -> str | None:
        """What the local adapter would refuse, from what agentctl's session answer
        said its agent takes (an older agentctl says nothing: then no image or
        file), and a prompt larger than agentctl's body cap."""
        if not parts:
            return None
        if self.wire_protocol == "codex":
            refusal = codex_refusal(parts)
        else:
            refusal = acp_refusal(parts, self._prompt_caps)
        if refusal is None and prompt_bytes("", parts) > MAX_PROMPT_BYTES:
            refusal = (f"the images and files are more than agentctl takes in one prompt "
                       f"({MAX_PROMPT_BYTES // (1024 * 1024)} MiB, base64)")
        return refusal

    async def prompt(self, text: str, parts: tuple[PromptPart, ...] = ()) -> TurnEnded:
        refusal = self.parts_refusal(parts)
        if refusal is not None:
            raise PartRefused(refusal)
        if self.turn_running:
            raise RuntimeError("a prompt is already running on this adapter")
        turn = PendingTurn(id=self._next_turn_id or uuid.uuid4().hex)
        self._next_turn_id = None
        self._prune_subagents()
        # Armed before the request: the turn's end may beat the response.
        self._turn = turn
        self.connection.expect_turn(turn)
        body: dict[str, Any] = {"text": text, "session_id": self._session_id,
                                "turn_id": turn.id}
        if self._abandoned is not None:
            body["abandon_turn"] = self._abandoned
        try:
            status, data = await self.connection.request(
                "POST", "/api/v1/prompt",
                # With parts: the JSON built here, a large image's base64 streamed.
                streamed(lambda p: json.dumps({**body, "parts": parts_json(p)}).encode(),
                         parts) if parts else body,
                timeout_s=self.timeouts.agent_request_s, expect=(202, 422))
            if status == 422:  # checked at agentctl's edge: no turn was started
                raise PartRefused(f"agentctl: {data.get('error')}")
        except AgentTimeout:
            # agentctl may have started it: the next prompt tells it to forget it.
            self._abandoned = turn.id
            self._forget(turn)
            raise
        except AgentClosed:
            self._forget(turn)
            # agentctl died before its answer arrived: the link's close already
            # ended the turn, as a death after the answer would have.
            if turn.ended is not None:
                return turn.ended
            raise
        except BaseException:
            self._forget(turn)
            raise
        finally:
            turn.answered.set()
        self._abandoned = None
        with trio.move_on_after(self.timeouts.turn_s):
            await turn.done.wait()
        if turn.ended is None:
            self.abandon_turn()
            raise AgentTimeout(f"turn did not end within {self.timeouts.turn_s:g}s")
        return turn.ended

    async def cancel(self) -> None:
        """Have agentctl write the protocol cancel; the turn's end comes on ``events``."""
        turn = self._turn
        if turn is None or turn.done.is_set():
            return
        if not turn.answered.is_set():
            # Never overtake the prompt (bounded: the prompt's own request bound).
            with trio.move_on_after(self.timeouts.agent_request_s):
                await turn.answered.wait()
            if self._turn is not turn or turn.done.is_set():
                return
        # Over HTTP: an earlier frame's answer is not this cancel's.
        turn.frame = FrameAnswer()
        link = self.connection
        if not link.reachable:
            # Held, never lost: the link's return sends it before anything else.
            link.owe(turn)
            raise link.link_down()
        try:
            data = await self._call("POST", "/api/v1/acp/cancel",
                                    {"session_id": self._session_id, "join_s": 0,
                                     "turn_id": turn.id},
                                    timeout_s=self.timeouts.agent_request_s, expect=(200, 504))
        except LinkDown:
            link.owe(turn)
            raise
        if not data.get("success"):
            raise AgentTimeout(str(data.get("error") or "agentctl could not write the cancel"))

    def cancel_now(self) -> bool:
        """The cancel as a ``Cancel`` frame handed to the event stream's writer,
        without waiting: True when it was (the link is up, its agentctl reads
        frames, the turn's prompt has been answered: a cancel never overtakes
        its prompt).  False: ``cancel`` makes the request.  agentctl's answer
        comes on the stream into the turn's fresh ``FrameAnswer``
        (``cancel_frame``); until then the cancel is owed to a cut link's return."""
        turn = self._turn
        if turn is None or turn.done.is_set() or not turn.answered.is_set():
            return False
        if not self.connection.send_frame_nowait(cancel_frame(turn.id, self._session_id),
                                                 "Cancel"):
            return False
        turn.frame = FrameAnswer(sent=True)
        return True

    @property
    def cancel_frame(self) -> FrameAnswer | None:
        """The running (or last) turn's ``Cancel`` frame and agentctl's answer
        to it, when its cancel went as a frame (None: over HTTP, or none)."""
        turn = self._turn
        return turn.frame if turn is not None and turn.frame.sent else None

    async def resend_cancel(self) -> None:
        """Have agentctl write the turn's cancel again (an agent dropped the first)."""
        turn = self._turn
        if turn is None or turn.done.is_set():
            return
        await self._call("POST", "/api/v1/acp/cancel",
                         {"session_id": self._session_id, "join_s": 0, "resend": True},
                         timeout_s=self.timeouts.agent_request_s, expect=(200, 504))

    async def cancel_and_join(self, join_s: float) -> dict[str, Any]:
        """agentctl's own join: the cancel, then up to ``join_s`` for the turn's
        end; agentctl's answer (``not_acknowledged`` when it did not end)."""
        return await self._call("POST", "/api/v1/acp/cancel",
                                {"session_id": self._session_id, "join_s": join_s},
                                timeout_s=self.timeouts.agent_request_s + join_s,
                                expect=(200, 202, 504))

    async def respond_permission(self, request_id: str, option_id: str | None) -> None:
        status, data = await self._call_status(
            "POST", "/api/v1/permission",
            {"request_id": request_id, "option_id": option_id, "session_id": self._session_id},
            timeout_s=self.timeouts.agent_request_s, expect=(200, 404, 504))
        if status == 404:
            raise AgentRefused(str(data.get("error")))
        if status == 504:
            raise AgentTimeout(str(data.get("error")))

    def _forget(self, turn: PendingTurn) -> None:
        if self._turn is turn:
            self._turn = None
            self.connection.expect_turn(None)

    def abandon_turn(self) -> bool:
        """Forget the running turn (after an escalation); the caller cancels the
        task blocked in ``prompt``.  agentctl forgets it at the next prompt; a
        late end of it is reported as a notice, never as this adapter's turn end."""
        turn = self._turn
        if turn is None or turn.done.is_set():
            return False
        self._abandoned = turn.id
        self._turn = None
        self.connection.expect_turn(None)
        return True

    def _subagent_changed(self, ev: SubagentChanged) -> None:
        """The event stream says a child changed: one that ended is forgotten."""
        if ev.state not in SUBAGENT_LIVE:
            self._subagents.pop(ev.subagent_id, None)

    def _prune_subagents(self) -> None:
        """A new turn: the children that ended are history; one still at work
        is kept (it can still be stopped)."""
        for key in [k for k, ev in self._subagents.items() if ev.state not in SUBAGENT_LIVE]:
            del self._subagents[key]

    def subagent(self, subagent_id: str) -> SubagentChanged | None:
        """The child as agentctl last answered for it (its state only: the
        supervisor's registry keeps the rest, from the event stream)."""
        return self._subagents.get(subagent_id)

    async def cancel_subagent(self, subagent_id: str) -> bool:
        """``POST /api/v1/acp/subagent_cancel``: agentctl's core writes the
        child's own protocol cancel; False when it wrote nothing (the child is
        unknown to it, ended, or not cancellable)."""
        answer = await self._call("POST", "/api/v1/acp/subagent_cancel",
                                  {"subagent_id": subagent_id},
                                  timeout_s=self.timeouts.agent_request_s)
        state = answer.get("state")
        for known in get_args(SubagentState):
            if state == known:
                self._subagents[subagent_id] = SubagentChanged(
                    subagent_id=subagent_id, title="", state=known, cancellable=False)
        return bool(answer.get("sent"))

    async def status(self) -> dict[str, Any]:
        return await self._call("GET", "/api/v1/status", None,
                                timeout_s=self.timeouts.agent_request_s)

    async def aclose(self) -> None:
        """Close the link and the HTTP client (bounded, shielded).  The agent
        keeps running in agentctl, ready to be re-attached."""
        self.connection.close("agentctl client closed", quiet=True)
        self._subagents.clear()
        with trio.CancelScope(shield=True), trio.move_on_after(self.timeouts.cancel_cleanup_s):
            await self.connection.http.aclose()

    # -- HTTP ---------------------------------------------------------------------

    async def _call(self, method: str, path: str, body: dict[str, Any] | None, *,
                    timeout_s: float, expect: tuple[int, ...] = (200,)) -> dict[str, Any]:
        return (await self._call_status(method, path, body, timeout_s=timeout_s,
                                        expect=expect))[1]

    async def _call_status(self, method: str, path: str, body: dict[str, Any] | None, *,
                           timeout_s: float, expect: tuple[int, ...] = (200,),
                           ) -> tuple[int, dict[str, Any]]:
        return await self.connection.request(method, path, body, timeout_s=timeout_s,
                                             expect=expect)

