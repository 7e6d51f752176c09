"""A turn's end as the task running its prompt sees it, shared by the backend's
lifecycle and agentctl's host.

The pump (the adapter's events → the store, or agentctl's event log) ends a
turn in order with its output.  The prompt's task reports only what the pump
may never see: an error instead of an answer (the prompt could not be
written, the turn timed out, the agent refused).  ``turn_error`` is the end
such an error means; ``left_to_us`` waits briefly for the pump and says
whether the prompt's task must publish the end itself.
"""

from __future__ import annotations

import trio

from protocols.events import TurnEnded
from protocols.jsonrpc import LocalProtocolError
from protocols.transport import AgentRefused, AgentTimeout

__all__ = ["TURN_ERRORS", "left_to_us", "turn_error"]

#: What a prompt raises that ends its turn with an error the agent's output
#: may never carry.  (``AgentClosed`` is not one: the pump ends the turn when
#: the output ends; ``RuntimeError`` is an adapter refusing a second prompt.)
TURN_ERRORS = (AgentTimeout, AgentRefused, LocalProtocolError, RuntimeError)


def turn_error(exc: BaseException) -> TurnEnded:
    """The end a failed prompt means."""
    return TurnEnded(stop_reason="error", error=str(exc) or type(exc).__name__)


async def left_to_us(ended: TurnEnded, pumped: trio.Event, grace_s: float) -> bool:
    """Whether the prompt's task must publish ``ended`` itself: an error end
    (which the pump may never see) that the pump has not published within
    ``grace_s``.  Any other end came through the events: the pump's to publish."""
    if ended.stop_reason != "error" or pumped.is_set():
        return False
    with trio.move_on_after(grace_s):
        await pumped.wait()
    return not pumped.is_set()
