"""The mock agent's ACP v2, spoken when the client's ``initialize`` offers 2.

A prompt is answered ``{}`` at once (accepted), followed by a ``user_message`` and a
``running`` ``state_update``; the turn ends with ``state_update {state: "idle",
stopReason}``.  Chunks carry a ``messageId``, tool calls start with ``tool_call_update``,
a permission request has a ``title`` and a ``subject`` (with ``requires_action`` while
it waits), and ``session/resume`` with ``replayFrom: {type: "start"}`` replays the history
before it answers; ``session/load`` is not served.
"""

from __future__ import annotations

from typing import Any

from . import attachments, login
from .acp1 import AGENT_INFO, PERMISSION_TOOL, Acp1Wire
from .base import Child, Turn
from .mcp import ACP2_CAPABILITIES

__all__ = ["Acp2Wire"]


class Acp2Wire(Acp1Wire):
    tool_call_kind = "tool_call_update"
    version = 2
    #: v2: every client handles child sessions.
    subagents = True

    def initialized(self) -> dict[str, Any]:
        result: dict[str, Any] = {
            "protocolVersion": 2, "authMethods": login.acp_methods(self.agent),
            "info": AGENT_INFO,
            # session: the baseline (resume with or without replay).
            # (mcp: stdio and http, so an SSE server is refused before the session opens.)
            "capabilities": ({"session": {"mcp": dict(ACP2_CAPABILITIES)}}
                             if self.agent.restore else {}),
        }
        # Beside the others, not in session.prompt (a session key says "restorable"):
        # protocols/prompt_parts.py reads either.
        result["capabilities"]["promptCapabilities"] = attachments.acp_prompt_capabilities(
            self.agent)
        if self.agent.steering:
            result["_meta"] = {"steering": {"supported": True}}
        return result

    def on_request(self, rid: int | str, method: str, params: dict[str, Any]) -> bool:
        if method == "session/load":
            return False
        return super().on_request(rid, method, params)

    def restorable(self, method: str) -> bool:
        return bool(self.agent.restore)

    def replays(self, method: str, params: dict[str, Any]) -> bool:
        replay = params.get("replayFrom")
        return isinstance(replay, dict) and replay.get("type") == "start"

    def replay(self, session: dict[str, Any]) -> None:
        for i, message in enumerate(session["messages"]):
            user = message.get("role") == "user"
            self.agent.notify("session/update", {"sessionId": session["id"], "update": {
                "sessionUpdate": "user_message" if user else "agent_message",
                "messageId": f"replay_{i}",
                "content": [{"type": "text", "text": str(message.get("text", ""))}],
            }})

    def state(self, state: str, stop: str | None = None) -> None:
        update: dict[str, Any] = {"sessionUpdate": "state_update", "state": state}
        if stop is not None:
            update["stopReason"] = stop
        self.update(update)

    def accept_turn(self, rid: int | str, turn: Turn, text: str) -> None:
        # Accepted at once; the turn itself ends with the idle state_update.
        self.agent.respond(rid, {})
        self.update({"sessionUpdate": "user_message", "messageId": f"user_{turn.turn_id}",
                     "content": [{"type": "text", "text": text}]})
        self.state("running")

    def chunk_update(self, turn: Turn, text: str) -> dict[str, Any]:
        return super().chunk_update(turn, text) | {"messageId": f"msg_{turn.turn_id}"}

    def end_turn(self, turn: Turn, stop: str) -> None:
        self.state("idle", stop)

    def subagent_announced(self, child: Child) -> None:
        super().subagent_announced(child)
        self.child_state(child, "running")

    def subagent_state(self, child: Child, state: str, stop: str | None = None) -> None:
        """v2: on the parent (the mirror) and then on the child's own stream."""
        super().subagent_state(child, state, stop)
        self.child_state(child, state, stop)

    def child_state(self, child: Child, state: str, stop: str | None = None) -> None:
        update: dict[str, Any] = {"sessionUpdate": "state_update", "state": state}
        if stop is not None:
            update["stopReason"] = stop
        self.agent.notify("session/update", {"sessionId": child.id, "update": update})

    def permission_params(self) -> dict[str, Any]:
        params = super().permission_params()
        del params["toolCall"]
        return params | {"title": "Write to disk",
                         "subject": {"type": "tool_call", "toolCall": PERMISSION_TOOL}}

    def ask_permission(self, turn: Turn) -> int:
        self.state("requires_action")
        return super().ask_permission(turn)

    def permission_settled(self, turn: Turn) -> tuple[bool, str]:
        self.state("running")
        return super().permission_settled(turn)
