"""The ``agent-client-protocol`` package's pydantic models we validate against.

Only its schema is used (its connection code is asyncio).  Its envelope models
do not dispatch on ``method``, so the method → params table is ours, and so is
the update kind → model table below.  Imported only by the client side: the
mock agent must start without pydantic.
"""

from __future__ import annotations

from typing import Final

from acp import schema
from pydantic import BaseModel

__all__ = [
    "PARAMS_BY_METHOD",
    "UPDATE_MODELS",
    "PromptResponse",
    "RequestPermissionRequest",
]

PromptResponse = schema.PromptResponse
RequestPermissionRequest = schema.RequestPermissionRequest

UPDATE_MODELS: Final[dict[str, type[BaseModel]]] = {
    "agent_message_chunk": schema.AgentMessageChunk,
    "agent_thought_chunk": schema.AgentThoughtChunk,
    "user_message_chunk": schema.UserMessageChunk,
    "tool_call": schema.ToolCallStart,
    "tool_call_update": schema.ToolCallProgress,
    "plan": schema.AgentPlanUpdate,
}

#: Incoming agent → client messages we validate, by method.
PARAMS_BY_METHOD: Final[dict[str, type[BaseModel]]] = {
    "session/update": schema.SessionNotification,
    "session/request_permission": schema.RequestPermissionRequest,
}
