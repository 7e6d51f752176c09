"""Codex approval requests, the client's side: the decisions offered for each
request method and the answer that carries one, in the shape that method takes
(v2 names and the v1 ones; codex 0.171 schema).  ``protocols/codex.py`` asks and
answers with these."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from .jsonrpc import RequestId

__all__ = [
    "ALLOW_SESSION",
    "APPROVAL_METHODS",
    "DECISIONS",
    "HUMAN_CHECKPOINT",
    "PERMISSIONS_METHOD",
    "Decision",
    "Pending",
    "answer",
    "approval_title",
    "declined",
]


@dataclass(frozen=True, slots=True)
class Decision:
    """One answer the user can give to an approval request."""

    #: What the UI sends back (``respond_permission``'s ``option_id``).
    option_id: str
    name: str
    #: ACP's option kind, so the UI styles both dialects alike.
    kind: str
    #: The turn stops too: the supervisor ends it through its user-cancel path.
    interrupts_turn: bool = False


_ALLOW = Decision("accept", "Allow", "allow_once")
ALLOW_SESSION = Decision("acceptForSession", "Allow for this session", "allow_always")
_DENY = Decision("decline", "Deny", "reject_once")
_DENY_STOP = Decision("cancel", "Deny and stop", "reject_always", interrupts_turn=True)
_V2: Final = (_ALLOW, ALLOW_SESSION, _DENY, _DENY_STOP)
_V1: Final = (
    Decision("approved", "Allow", "allow_once"),
    Decision("approved_for_session", "Allow for this session", "allow_always"),
    Decision("denied", "Deny", "reject_once"),
    Decision("abort", "Deny and stop", "reject_always", interrupts_turn=True),
)

PERMISSIONS_METHOD: Final = "item/permissions/requestApproval"

#: Approval requests (server → client) and the decisions offered for each, in
#: order; the third is the one a cancel sends.  v2 names first, then v1.
DECISIONS: Final[dict[str, tuple[Decision, ...]]] = {
    "item/commandExecution/requestApproval": _V2,
    "item/fileChange/requestApproval": _V2,
    # No wire decision stops the turn here; "Deny and stop" grants nothing and
    # the supervisor's cancel interrupts the turn.
    PERMISSIONS_METHOD: _V2,
    "execCommandApproval": _V1,
    "applyPatchApproval": _V1,
}
#: Back-compat view: method → option ids (allow, allow for session, deny, deny and stop).
APPROVAL_METHODS: Final[dict[str, tuple[str, ...]]] = {
    method: tuple(d.option_id for d in decisions) for method, decisions in DECISIONS.items()
}
#: ``kind`` of a command approval that admits no session-wide answer.
HUMAN_CHECKPOINT: Final = "humanCommand"
#: v1's ``denied`` carries the reason the agent is given (codex 0.169 schema).
_V1_REJECTION: Final = "The user denied this request."


@dataclass(frozen=True, slots=True)
class Pending:
    rpc_id: RequestId
    method: str
    decisions: tuple[Decision, ...]
    #: ``item/permissions/requestApproval``: what was asked, granted back whole.
    permissions: Any = None


def declined(pending: Pending) -> Decision:
    """What a cancel answers: "Deny" (the interrupt itself goes separately)."""
    return DECISIONS[pending.method][2]


def answer(pending: Pending, decision: Decision) -> dict[str, Any]:
    """The result that carries ``decision``, in the shape ``pending.method`` takes."""
    if pending.method == PERMISSIONS_METHOD:
        if decision.option_id in ("accept", "acceptForSession"):
            granted = pending.permissions if isinstance(pending.permissions, dict) else {}
            scope = "session" if decision.option_id == "acceptForSession" else "turn"
            return {"permissions": granted, "scope": scope}
        return {"permissions": {}, "scope": "turn"}  # nothing granted
    if decision.option_id == "denied":
        return {"decision": {"denied": {"rejection": _V1_REJECTION}}}
    return {"decision": decision.option_id}


#: A title for an approval that names neither a command nor a reason.
_APPROVAL_TITLES: Final = {
    "item/fileChange/requestApproval": "Apply file changes",
    "applyPatchApproval": "Apply file changes",
    PERMISSIONS_METHOD: "Grant extra permissions",
}


def approval_title(method: str, details: dict[str, Any]) -> str:
    title = details.get("command") or details.get("reason")
    if title:
        return str(title)
    changes = details.get("changes")
    paths = (
        [str(c.get("path")) for c in changes if isinstance(c, dict)]
        if isinstance(changes, list) else list(changes) if isinstance(changes, dict) else []
    )
    label = _APPROVAL_TITLES.get(method, method)
    return f"{label}: {', '.join(paths[:3])}{' …' if len(paths) > 3 else ''}" if paths else label
