// DESIGN.md §20 on the page: a session whose remote agent's host does not answer is never shown
// as simply running, its held cancel says "Waiting for the agent's host…", and the composer says
// what happens to a message meanwhile (state.js, status.js).

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import * as S from "../../web/static/state.js";
import { sessionStatus } from "../../web/static/status.js";
import { receiptLine } from "../../web/static/stop-text.js";

const T = "task-1";
function row(extra = {}) {
  return {
    id: "s1", task_id: T, state: "RUNNING", agent: "remote", created_at: "2026-12-07T10:00:00Z",
    updated_at: "2026-12-07T10:00:00Z", cancellation_pending: false, cancellation_revision: 0,
    current_turn_id: "t1", reachable: true, ...extra,
  };
}
function page(dto) {
  const s = S.hydrate({ page: "task", task: { id: T, title: "t" }, sessions: [dto], selected_session_id: dto.id, messages: [] });
  return S.setConnection(s, "open");
}

describe("a remote agent's host that does not answer", () => {
  it("is shown as unreachable, not running, and back as running when it answers", () => {
    let s = page(row());
    assert.equal(sessionStatus(s, "s1").key, "running");
    s = S.applyNotification(s, "session.state_changed", { session_id: "s1", task_id: T, new_state: "RUNNING", reachable: false }, 0);
    assert.deepEqual(sessionStatus(s, "s1"), { key: "unreachable", label: "Host unreachable", tone: "warning", reason: null });
    s = S.applyNotification(s, "session.state_changed", { session_id: "s1", task_id: T, new_state: "RUNNING", reachable: true }, 0);
    assert.equal(sessionStatus(s, "s1").key, "running");
  });

  it("a running turn's composer queues and says so; with no turn Send waits", () => {
    const running = S.composerView(page(row({ reachable: false })));
    assert.equal(running.note, S.UNREACHABLE_QUEUE_NOTE);
    assert.equal(running.sendDisabled, false);
    const idle = S.composerView(page(row({ reachable: false, state: "WAITING_FOR_INPUT", current_turn_id: null })));
    assert.equal(idle.note, S.UNREACHABLE_SEND_NOTE);
    assert.equal(idle.sendDisabled, true);
    assert.equal(S.composerView(page(row())).note, null);
  });

  it("a held cancel (phase link_down) says it waits for the host, from a reload too", () => {
    const progress = { turn_id: "t1", phase: "link_down" };
    let s = page(row({ reachable: false, cancellation_pending: true, cancellation_revision: 1, cancel_progress: progress }));
    assert.equal(S.cancelControlView(s, "s1").note, "Waiting for the agent's host…");
    assert.equal(S.cancelControlView(s, "s1").disabled, true);
    assert.equal(sessionStatus(s, "s1").label, "Waiting for the agent's host");
    // Live: the phase moves on to `sent` when the link returns.
    s = S.applyNotification(s, "session.cancel.progress", { session_id: "s1", turn_id: "t1", phase: "sent" }, 0);
    assert.equal(S.cancelControlView(s, "s1").note, null);
  });
});

describe("the receipt of a stop held for the agent's host", () => {
  const base = {
    turn_id: "t1", outcome: "cancelled", by: "user", when: "now", accepted_at: "2026-12-07T10:00:00.000Z",
    confirmed_ms: 12_400, tool_calls: { finished: [], cancelled: [] }, subagents: { stopped: [], running: [] },
    queue_parked: 0, files_changed: 0, revertible: false, strays: [], complete: true,
  };

  it("says how long it was held", () => {
    assert.equal(receiptLine({ ...base, link_down_ms: 12_300 }), "Stopped in 12 s · held 12 s for the agent's host");
    assert.equal(receiptLine({ ...base, link_down_ms: null }), "Stopped in 12 s");
  });

  it("names a stop its host made by itself (offline_cancel_s)", () => {
    assert.equal(receiptLine({ ...base, by: "offline", confirmed_ms: 3 }), "Stopped in 3 ms (by its host: no Turnvisor connected)");
  });
});
