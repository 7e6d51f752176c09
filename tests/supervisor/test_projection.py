"""The cancellation projection as a state machine: any interleaving of begin/release."""

from __future__ import annotations

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from supervisor.projection import CancellationProjection, Progress

SESSIONS = ["a", "b", "c"]


def test_revision_moves_only_on_edges_and_only_edges_are_returned() -> None:
    proj = CancellationProjection()
    assert proj.get("a") == Progress(False, 0)
    seen = [proj.begin("a"), proj.begin("a"), proj.release("a")]
    assert proj.get("a") == Progress(True, 1)
    seen.append(proj.release("a"))
    assert proj.get("a") == Progress(False, 2)
    assert seen == [Progress(True, 1), None, None, Progress(False, 2)]
    with pytest.raises(RuntimeError):
        proj.release("a")


class ProjectionMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.published: list[tuple[str, Progress]] = []
        self.proj = CancellationProjection()
        self.refs = dict.fromkeys(SESSIONS, 0)

    @rule(session=st.sampled_from(SESSIONS))
    def begin(self, session: str) -> None:
        before = {s: self.proj.get(s) for s in SESSIONS}
        self._note(session, self.proj.begin(session))
        self.refs[session] += 1
        for other in SESSIONS:
            if other != session:
                assert self.proj.get(other) == before[other]  # isolation

    @precondition(lambda self: any(self.refs.values()))
    @rule(data=st.data())
    def release(self, data: st.DataObject) -> None:
        session = data.draw(st.sampled_from([s for s in SESSIONS if self.refs[s]]))
        self._note(session, self.proj.release(session))
        self.refs[session] -= 1

    def _note(self, session: str, moved: Progress | None) -> None:
        if moved is not None:
            self.published.append((session, moved))

    @invariant()
    def pending_matches_refs(self) -> None:
        for s in SESSIONS:
            assert self.proj.get(s).pending == (self.refs[s] > 0)

    @invariant()
    def publishes_alternate_with_rising_revisions(self) -> None:
        for s in SESSIONS:
            mine = [p for sid, p in self.published if sid == s]
            assert [p.pending for p in mine] == [i % 2 == 0 for i in range(len(mine))]
            assert [p.revision for p in mine] == list(range(1, len(mine) + 1))
            assert self.proj.get(s).revision == len(mine)

    def teardown(self) -> None:
        for s in SESSIONS:
            while self.refs[s]:
                self._note(s, self.proj.release(s))
                self.refs[s] -= 1
            assert self.proj.get(s).pending is False
            mine = [p for sid, p in self.published if sid == s]
            assert not mine or mine[-1].pending is False


TestProjectionMachine = ProjectionMachine.TestCase
TestProjectionMachine.settings = settings(max_examples=200, stateful_step_count=40,
                                          deadline=None)
