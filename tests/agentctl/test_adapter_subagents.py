"""``AgentctlAdapter``'s cache of children (the state agentctl last answered a
cancel of them with) is pruned as supervisor/subagents.py prunes its registry: a
child that ended is forgotten when the event stream says so and at the next
turn, every child with the session.  No agentctl process: the link's requests are
stubbed and the stream's frames handed to the link."""

from __future__ import annotations

from typing import Any

import pytest

from protocols.agentctl_wire import LoggedEvent
from protocols.events import SubagentChanged, SubagentState
from protocols.transport import AgentTimeout
from supervisor.executors.agentctl_adapter import AgentctlAdapter


def _changed(sid: str, state: SubagentState) -> SubagentChanged:
    return SubagentChanged(subagent_id=sid, title=sid, state=state,
                           cancellable=state == "running")


class _Agentctl:
    """Stub answers by path; every request made, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any] | None]] = []
        self.answers: dict[str, list[dict[str, Any]]] = {}

    async def __call__(self, method: str, path: str, body: dict[str, Any] | None, *,
                       timeout_s: float, expect: tuple[int, ...] = (200,),
                       ) -> tuple[int, dict[str, Any]]:
        self.calls.append((path, body))
        if path == "/api/v1/prompt":
            raise AgentTimeout("stubbed: no agentctl")
        return 200, self.answers[path].pop(0)


async def test_the_childrens_cache_is_pruned(monkeypatch: pytest.MonkeyPatch) -> None:
    adapter = AgentctlAdapter("http://127.0.0.1:9", "token")
    ctl = _Agentctl()
    monkeypatch.setattr(adapter.connection, "request", ctl)
    ctl.answers["/api/v1/session"] = [{"session_id": "s1"}, {"session_id": "s1"},
                                      {"session_id": "s2"}]
    ctl.answers["/api/v1/acp/subagent_cancel"] = [
        {"sent": True, "state": "cancelling"}, {"sent": False, "state": "completed"},
        {"sent": True, "state": "cancelling"}, {"sent": True, "state": "cancelling"}]
    await adapter.new_session("/")
    assert await adapter.cancel_subagent("a")
    assert not await adapter.cancel_subagent("b")
    assert await adapter.cancel_subagent("c")
    assert [(k, v.state) for k, v in adapter._subagents.items()] == [
        ("a", "cancelling"), ("b", "completed"), ("c", "cancelling")]

    # The stream says a child ended: forgotten.  One still at work is kept.
    link = adapter.connection
    await link._on_frame(LoggedEvent(seq=1, turn="t1", event=_changed("a", "cancelled")))
    await link._on_frame(LoggedEvent(seq=2, turn="t1", event=_changed("c", "running")))
    assert adapter.subagent("a") is None
    assert sorted(adapter._subagents) == ["b", "c"]

    # A new turn: the ended ones are history, the one still cancelling stays.
    with pytest.raises(AgentTimeout):
        await adapter.prompt("next")
    assert list(adapter._subagents) == ["c"]

    # The same session again (re-attached) keeps it; another session does not.
    await adapter.new_session("/")
    assert list(adapter._subagents) == ["c"]
    await adapter.new_session("/")
    assert adapter._subagents == {}

    # The session's close forgets them all.
    assert await adapter.cancel_subagent("d")
    assert list(adapter._subagents) == ["d"]
    await adapter.aclose()
    assert adapter._subagents == {}
