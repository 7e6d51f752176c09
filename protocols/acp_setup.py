"""What ``initialize``'s answer settles for ``AcpClient`` (protocols/acp.py), sans-IO.

The version: the agent answers the one offered or its own latest; one we did
not offer (or cannot speak) ends the connection there, as an ``ErrorResponse``.
Then who it is (v1 ``agentInfo``, v2 ``info``), what it can do (v1
``agentCapabilities``, v2 ``capabilities``), the extensions it offers
(``_meta``) and how it logs in (``authMethods``: protocols/acp_auth.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .acp_auth import AuthMethod, read_auth_methods
from .acp_v2 import AcpVersion
from .jsonrpc import ErrorResponse, Response

__all__ = ["Initialized", "read_initialized"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Initialized:
    version: int
    agent_info: dict[str, Any] = field(default_factory=dict)
    capabilities: dict[str, Any] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)
    auth_methods: tuple[AuthMethod, ...] = ()


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def read_initialized(asked: AcpVersion, ev: Response) -> Initialized | ErrorResponse:
    """``initialize``'s answer read, or the error that ends the connection."""
    result = _dict(ev.result)
    answered = result.get("protocolVersion")
    offered = 1 if asked == 1 else 2
    if type(answered) is not int or not 1 <= answered <= offered:
        return ErrorResponse(
            id=ev.id, method=ev.method, code=-32603,
            message=f"the agent answered protocolVersion {answered!r}; "
                    f"this client speaks 1..{offered}")
    if asked == 2 and answered != 2:
        return ErrorResponse(
            id=ev.id, method=ev.method, code=-32603,
            message=f"the profile asks for ACP 2; the agent answered {answered}")
    v2 = answered == 2
    return Initialized(
        version=answered, agent_info=_dict(result.get("info" if v2 else "agentInfo")),
        capabilities=_dict(result.get("capabilities" if v2 else "agentCapabilities")),
        meta=_dict(result.get("_meta")), auth_methods=read_auth_methods(result))
