"""The ``turnvisor.toml`` of the browser tests' servers."""

from __future__ import annotations

#: Timeouts of the default test server. A `/hang` turn ignores the cancel, so the backend's
#: operation stays pending until escalation (`cancel_escalate_s`): long enough to navigate,
#: reload and open tabs while it lives, short enough that it settles within a test.
LONG_PENDING_TOML = """\
[timeouts]
cancel_join_s = 1.0
cancel_escalate_s = 10.0
cancel_operation_s = 30.0
"""

#: A server whose cancel of a `/hang` turn fails: the operation's own bound passes before
#: escalation, so the backend answers CONFLICT, clears pending, and the session stays RUNNING.
FAILING_CANCEL_TOML = """\
[timeouts]
cancel_join_s = 0.5
cancel_escalate_s = 120.0
cancel_operation_s = 2.0
"""

#: One token for every browser-test server, so a tab's stored token still works after a restart.
TOKEN = "browser-test-token-0123456789-0123456789"
