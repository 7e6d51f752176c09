// Unit tests of the queue state (web/static/queue-state.js), the stall notice and the late-cancel
// note (DESIGN.md §9), and "Agent asleep" (§10): run with `node --test tests/ui_unit/`.

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import * as Q from "../../web/static/queue-state.js";
import * as S from "../../web/static/state.js";
import { sessionStatus, stallNotice } from "../../web/static/status.js";

import { boot, session } from "./fixtures.mjs";

const entry = (id, position, content = `text ${id}`) => ({ id, session_id: "a", content, created_at: "2026-08-03T10:00:01Z", position });
const changed = (entries, autoRun, revision, sid = "a") => ({ session_id: sid, entries, auto_run: autoRun, queue_revision: revision });

describe("queue state", () => {
  it("takes the boot state's entries and the DTO's auto_run", () => {
    const state = S.hydrate(boot([session("a", { auto_run: false, queued_count: 2 })], { queue: [entry("e2", 1), entry("e1", 0)] }));
    const view = Q.queueView(state, "a");
    assert.deepEqual(view.entries.map((e) => e.id), ["e1", "e2"], "ordered by position");
    assert.equal(view.visible, true);
    assert.equal(view.autoRun, false);
    assert.equal(view.paused, true);
  });

  it("replaces the queue on session.queue.changed and mirrors the count on the row", () => {
    let state = S.hydrate(boot([session("a")]));
    assert.equal(Q.queueView(state, "a").visible, false);
    state = S.applyNotification(state, "session.queue.changed", changed([entry("e1", 0), entry("e2", 1)], true, 3), 1);
    assert.deepEqual(Q.queueView(state, "a").entries.map((e) => e.id), ["e1", "e2"]);
    assert.equal(state.sessions.a.queued_count, 2);
    assert.equal(Q.queueView(state, "a").paused, false);
    state = S.applyNotification(state, "session.queue.changed", changed([entry("e2", 0)], true, 4), 1);
    assert.deepEqual(Q.queueView(state, "a").entries.map((e) => e.id), ["e2"]);
    assert.equal(state.sessions.a.queued_count, 1);
  });

  it("rejects a lower revision in the same connection, accepts any on a newer one", () => {
    let state = S.hydrate(boot([session("a")]));
    state = S.applyNotification(state, "session.queue.changed", changed([entry("e1", 0)], true, 5), 1);
    const stale = S.applyNotification(state, "session.queue.changed", changed([], true, 4), 1);
    assert.equal(Q.queueView(stale, "a").entries.length, 1);
    const equal = S.applyNotification(state, "session.queue.changed", changed([], false, 5), 1);
    assert.equal(Q.queueView(equal, "a").entries.length, 0);
    const restarted = S.applyNotification(state, "session.queue.changed", changed([], true, 0), 2);
    assert.equal(Q.queueView(restarted, "a").entries.length, 0);
  });

  it("keeps queues apart per session", () => {
    let state = S.hydrate(boot([session("a"), session("b", { created_at: "2026-08-03T10:00:05Z" })]));
    state = S.applyNotification(state, "session.queue.changed", changed([entry("e1", 0)], false, 1, "b"), 1);
    assert.equal(Q.queueView(state, "a").visible, false);
    assert.equal(Q.queueView(state, "b").paused, true);
  });

  it("ignores malformed values", () => {
    const state = S.hydrate(boot([session("a")]));
    assert.equal(S.applyNotification(state, "session.queue.changed", { session_id: "a", entries: "x" }, 1), state);
    assert.equal(Q.applyQueue(state, "a", null, 1), state);
  });

  it("shows a queued answer at once until notifications are followed, never over them", () => {
    let state = S.hydrate(boot([session("a")]));
    const outcome = Q.messageAddOutcome({ delivery: "queued", entry: entry("e1", 0) });
    assert.equal(outcome.delivery, "queued");
    assert.equal(outcome.message, null);
    state = Q.addQueuedEntry(state, "a", outcome.entry);
    assert.deepEqual(Q.queueView(state, "a").entries.map((e) => e.id), ["e1"]);
    assert.equal(Q.addQueuedEntry(state, "a", outcome.entry), state, "no duplicate");
    // The notification said the entry already started: a late answer must not bring it back.
    state = S.applyNotification(state, "session.queue.changed", changed([], true, 7), 1);
    state = Q.addQueuedEntry(state, "a", entry("e9", 0));
    assert.equal(Q.queueView(state, "a").visible, false);
  });

  it("reads every message.add answer shape", () => {
    const message = { id: "m1", role: "user", content: "hi" };
    assert.deepEqual(Q.messageAddOutcome(message), { delivery: "started", message, entry: null, steerUnsupported: false });
    assert.equal(Q.messageAddOutcome({ delivery: "started", message }).message, message);
    assert.deepEqual(Q.messageAddOutcome({ delivery: "started", ...message }).message, message);
    assert.deepEqual(Q.messageAddOutcome({ delivery: "steered", ...message }).message, message);
    const interrupting = Q.messageAddOutcome({ delivery: "interrupting", entry: entry("e", 0) });
    assert.equal(interrupting.message, null);
    assert.equal(interrupting.entry.id, "e");
    assert.equal(Q.messageAddOutcome({ delivery: "queued", entry: entry("e", 0), steer_unsupported: true }).steerUnsupported, true);
    assert.equal(Q.messageAddOutcome(null).message, null);
  });

  it("says why a paused queue waits", () => {
    const status = (content, metadata) => ({ id: content, kind: "status", role: "system", content, metadata });
    assert.equal(Q.pausedReason([status("Turn cancelled by user", { cancelled: true, variant: "warning" })]), "Paused after you stopped the agent.");
    assert.equal(Q.pausedReason([status("Agent error: boom", { variant: "error" })]), "Paused because the last turn failed.");
    assert.equal(Q.pausedReason([status("Turn interrupted by a restart", { interrupted: true, variant: "warning" })]), "Paused: a restart interrupted the last turn.");
    assert.equal(Q.pausedReason([]), "Paused.");
    let state = S.hydrate(boot([session("a", { state: "WAITING_FOR_INPUT" })], { messages: [status("Turn cancelled by user", { cancelled: true, variant: "warning" })] }));
    state = S.applyNotification(state, "session.queue.changed", changed([entry("e1", 0)], false, 1), 1);
    assert.equal(Q.queueView(state, "a").reason, "Paused after you stopped the agent.");
    assert.equal(Q.queueView(state, "a", { offline: true }).disabled, true);
  });

  it("computes move targets and refuses the ends", () => {
    const entries = [entry("e1", 0), entry("e2", 1), entry("e3", 2)];
    assert.equal(Q.movedPosition(entries, "e2", -1), 0);
    assert.equal(Q.movedPosition(entries, "e2", 1), 2);
    assert.equal(Q.movedPosition(entries, "e1", -1), null);
    assert.equal(Q.movedPosition(entries, "e3", 1), null);
    assert.equal(Q.movedPosition(entries, "nope", 1), null);
  });
});

describe("composer while a turn runs", () => {
  it("queues instead of doing nothing, and is off only offline", () => {
    let state = S.hydrate(boot([session("a")]));
    assert.equal(S.composerView(state).sendDisabled, false);
    assert.equal(S.composerView(state).sendLabel, "Queue");
    state = S.setConnection(state, "reconnecting");
    assert.equal(S.composerView(state).sendDisabled, true);
  });
});

describe("late cancel note", () => {
  it("says the agent is not responding in the late and escalated phases only", () => {
    let state = S.hydrate(boot([session("a", { cancellation_pending: true, cancellation_revision: 1 })]));
    assert.equal(S.cancelControlView(state, "a").note, null);
    state = S.applyNotification(state, "session.cancel.progress", { session_id: "a", turn_id: "t", phase: "sent" }, 1);
    assert.equal(S.cancelControlView(state, "a").note, null);
    state = S.applyNotification(state, "session.cancel.progress", { session_id: "a", turn_id: "t", phase: "late" }, 1);
    assert.equal(S.cancelControlView(state, "a").note, S.LATE_NOTE);
    assert.equal(S.cancelControlView(state, "a").label, "Cancelling...", "the button keeps its label (DESIGN §8)");
    state = S.applyNotification(state, "session.cancellation_changed", { session_id: "a", cancellation_pending: false, cancellation_revision: 2 }, 1);
    assert.equal(S.cancelControlView(state, "a").note, null);
  });
});

describe("stall notice", () => {
  const user = (id) => ({ id, role: "user", kind: "text", content: "go", metadata: {} });
  const stalled = (id, extra = {}) => ({ id, role: "system", kind: "status", content: "No output from the agent for 2 min", metadata: { stalled: true, variant: "warning", ...extra } });

  it("shows for an unresolved stall of the running turn", () => {
    const state = S.hydrate(boot([session("a")], { messages: [user("u1"), stalled("s1")] }));
    assert.deepEqual(stallNotice(state, "a"), { visible: true, text: "No output from the agent for 2 min" });
  });

  it("hides once resolved, when the turn ends, during a cancel, or for an older turn", () => {
    const resolved = S.hydrate(boot([session("a")], { messages: [user("u1"), stalled("s1", { resolved: true })] }));
    assert.equal(stallNotice(resolved, "a").visible, false);
    let state = S.hydrate(boot([session("a")], { messages: [user("u1"), stalled("s1")] }));
    state = S.applyNotification(state, "session.message.updated", { session_id: "a", message: stalled("s1", { resolved: true }) }, 1);
    assert.equal(stallNotice(state, "a").visible, false);
    const ended = S.hydrate(boot([session("a", { state: "WAITING_FOR_INPUT" })], { messages: [user("u1"), stalled("s1")] }));
    assert.equal(stallNotice(ended, "a").visible, false);
    const cancelling = S.hydrate(boot([session("a", { cancellation_pending: true, cancellation_revision: 1 })], { messages: [user("u1"), stalled("s1")] }));
    assert.equal(stallNotice(cancelling, "a").visible, false);
    const older = S.hydrate(boot([session("a")], { messages: [user("u1"), stalled("s1"), user("u2")] }));
    assert.equal(stallNotice(older, "a").visible, false);
  });

  it("a steered message joins the turn and keeps the notice", () => {
    const steer = { ...user("u2"), metadata: { delivery: "steer" } };
    const state = S.hydrate(boot([session("a")], { messages: [user("u1"), stalled("s1"), steer] }));
    assert.equal(stallNotice(state, "a").visible, true);
  });
});

describe("agent asleep", () => {
  it("says Agent asleep for an idle session whose agent process is gone", () => {
    const state = S.hydrate(boot([session("a", { state: "WAITING_FOR_INPUT", agent_live: false })]));
    const status = sessionStatus(state, "a");
    assert.equal(status.key, "asleep");
    assert.equal(status.label, "Agent asleep");
  });

  it("not while running, not when alive or unknown, and a failed turn says so first", () => {
    const running = S.hydrate(boot([session("a", { agent_live: false })]));
    assert.equal(sessionStatus(running, "a").key, "running");
    const alive = S.hydrate(boot([session("a", { state: "WAITING_FOR_INPUT", agent_live: true })]));
    assert.equal(sessionStatus(alive, "a").key, "waiting");
    const unknown = S.hydrate(boot([session("a", { state: "WAITING_FOR_INPUT" })]));
    assert.equal(sessionStatus(unknown, "a").key, "waiting");
    const failed = S.hydrate(
      boot([session("a", { state: "WAITING_FOR_INPUT", agent_live: false })], {
        messages: [{ id: "x", kind: "status", role: "system", content: "Agent error: boom", metadata: { variant: "error" } }],
      }),
    );
    assert.equal(sessionStatus(failed, "a").key, "turn-failed");
  });
});

describe("agent_live from state changes", () => {
  it("an idle stop's state change puts the agent to sleep, a new turn wakes it", () => {
    let state = S.hydrate(boot([session("a", { state: "WAITING_FOR_INPUT", agent_live: true })]));
    state = S.applyNotification(state, "session.state_changed", { session_id: "a", new_state: "WAITING_FOR_INPUT", agent_live: false }, 1);
    assert.equal(sessionStatus(state, "a").label, "Agent asleep");
    state = S.applyNotification(state, "session.state_changed", { session_id: "a", new_state: "RUNNING", agent_live: false }, 1);
    assert.equal(sessionStatus(state, "a").label, "Running");
  });
});

describe("the turn a cancel aims at", () => {
  it("follows current_turn_id from state changes (null once the turn ended)", () => {
    let state = S.hydrate(boot([session("a", { state: "WAITING_FOR_INPUT" })]));
    state = S.applyNotification(state, "session.state_changed", { session_id: "a", new_state: "RUNNING", current_turn_id: "t1" }, 1);
    assert.equal(state.sessions.a.current_turn_id, "t1");
    state = S.applyNotification(state, "session.state_changed", { session_id: "a", new_state: "WAITING_FOR_INPUT", current_turn_id: null }, 1);
    assert.equal(state.sessions.a.current_turn_id, null);
    state = S.applyNotification(state, "session.state_changed", { session_id: "a", new_state: "WAITING_FOR_INPUT" }, 1);
    assert.equal(state.sessions.a.current_turn_id, null, "an older server's notification leaves it");
  });
});
