"""A permission request's life in both dialects' cores (ACP's
``session/request_permission``, Codex's approvals): surfaced as an event,
refused by a cancel or a turn end, refused at once after a cancel, withdrawn
by the agent. What only one dialect does stays in test_acp.py / test_codex.py."""

from __future__ import annotations

import pytest

from protocols.events import PermissionResolved, PermissionWithdrawn
from protocols.jsonrpc import LocalProtocolError

from .dialects import DIALECTS, Dialect

pytestmark = pytest.mark.parametrize("dialect", DIALECTS, ids=lambda d: d.name)


def test_permission_request_surfaces_as_an_event(dialect: Dialect) -> None:
    p = dialect.running()
    assert p.to_client(dialect.ask(p)) == [dialect.asked_event]
    assert p.client.pending_permissions == ("0",)


def test_cancel_refuses_the_pending_permission(dialect: Dialect) -> None:
    """ACP's MUST: every pending permission answered cancelled, before the
    cancel. Codex: the interrupt first, then the approval declined."""
    p = dialect.asked()
    data = p.client.cancel()
    lines = [dialect.cancel_line, dialect.refusal_line]
    reads = [dialect.cancel_read, dialect.refusal_read]
    if not dialect.cancel_first:
        lines.reverse()
        reads.reverse()
    assert data == b"".join(lines)
    assert p.to_agent(data) == reads
    assert p.client.pending_permissions == ()
    assert dialect.end(p, "cancelled") == [
        PermissionResolved(request_id="0", option_id=None),
        dialect.ended("cancelled"),
    ]


def test_permission_asked_after_cancel_is_refused_at_once(dialect: Dialect) -> None:
    p = dialect.cancelled()
    assert p.to_client(dialect.late_ask(p)) == []  # nothing for the user to decide
    assert p.client.data_to_send() == dialect.refusal_line


def test_turn_end_refuses_moot_permissions(dialect: Dialect) -> None:
    p = dialect.asked()
    assert dialect.end(p, "end_turn") == [
        PermissionResolved(request_id="0", option_id=None),
        dialect.ended("end_turn"),
    ]
    assert p.client.data_to_send() == dialect.refusal_line


def test_agent_withdraws_its_permission_request(dialect: Dialect) -> None:
    p = dialect.asked()
    assert p.to_client(dialect.withdraw) == [
        PermissionWithdrawn(request_id="0", reason=dialect.withdraw_reason)
    ]
    assert p.client.data_to_send() == dialect.withdraw_answer
    assert p.client.pending_permissions == ()
    with pytest.raises(LocalProtocolError):
        p.client.respond_permission("0", dialect.asked_event.options[0].option_id)
    # The cancel that follows has no permission left to refuse.
    assert p.client.cancel() == dialect.cancel_line


def test_withdrawal_names_the_id_exactly(dialect: Dialect) -> None:
    """The string "0" is not request 0: the permission stays pending."""
    p = dialect.asked()
    events = p.to_client(dialect.withdraw.replace(b'"requestId":0', b'"requestId":"0"'))
    expected = dialect.withdraw_string_id_events
    assert [
        type(e) if isinstance(x, type) else e for e, x in zip(events, expected, strict=True)
    ] == expected
    assert p.client.pending_permissions == ("0",)
