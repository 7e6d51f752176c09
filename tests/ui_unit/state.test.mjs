// Unit tests of the pure client state (web/static/state.js): run with `node --test tests/ui_unit/`.
// web/static/package.json marks the UI's .js files as ES modules so node can import them as the
// browser does.

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import * as S from "../../web/static/state.js";

import { boot, session, T } from "./fixtures.mjs";

const changed = (sid, pending, revision) => ({
  session_id: sid,
  cancellation_pending: pending,
  cancellation_revision: revision,
});

describe("hydration from the boot state", () => {
  it("shows the pending spinner from the first state when boot says pending", () => {
    const state = S.hydrate(boot([session("a", { cancellation_pending: true, cancellation_revision: 3 })]));
    assert.equal(S.effectiveCancelPending(state, "a"), true);
    assert.equal(S.isOptimisticPending(state, "a"), false, "backend-owned, not optimistic");
    assert.deepEqual(S.cancelControlView(state, "a"), {
      visible: true,
      pending: true,
      disabled: true,
      label: "Cancelling...",
      note: null,
    });
  });

  it("keeps page data: task, agents, selection and messages of the selected session", () => {
    const msg = { id: "m1", session_id: "a", role: "user", kind: "text", content: "hi", created_at: "2026-08-03T10:00:01Z" };
    const state = S.hydrate(boot([session("a"), session("b")], { selected_session_id: "b", messages: [msg] }));
    assert.equal(state.page, "task");
    assert.equal(state.task.id, T);
    assert.deepEqual(state.agents, ["mock", "mock-codex"]);
    assert.equal(state.defaultAgent, "mock");
    assert.equal(state.selectedSessionId, "b");
    assert.deepEqual(state.messages.b, [msg]);
    assert.equal(state.messages.a, undefined, "other sessions load on selection");
  });

  it("survives an empty or missing boot state", () => {
    const state = S.hydrate(null);
    assert.equal(state.page, "tasks");
    assert.deepEqual(state.tasks, []);
    assert.deepEqual(S.cancelControlView(state, null), { visible: false, pending: false, disabled: true, label: "Cancel agent", note: null });
  });

  it("keeps the sandbox warning for the agent picker, and only a string", () => {
    assert.equal(S.hydrate({ page: "task" }).sandboxWarning, null);
    assert.equal(S.hydrate({ page: "task", sandbox_warning: null }).sandboxWarning, null);
    assert.equal(S.hydrate({ page: "task", sandbox_warning: { x: 1 } }).sandboxWarning, null);
    const warned = S.hydrate({ page: "task", sandbox_warning: "no sandbox here" });
    assert.equal(warned.sandboxWarning, "no sandbox here");
  });

  it("orders the task list by most recent update", () => {
    const state = S.hydrate({
      page: "tasks",
      tasks: [
        { id: "old", title: "old", updated_at: "2026-08-01T00:00:00Z" },
        { id: "new", title: "new", updated_at: "2026-08-03T00:00:00Z" },
      ],
    });
    assert.deepEqual(state.tasks.map((t) => t.id), ["new", "old"]);
    const more = S.upsertTask(state, { id: "newest", title: "x", updated_at: "2026-08-04T00:00:00Z" });
    assert.deepEqual(more.tasks.map((t) => t.id), ["newest", "new", "old"]);
  });

  it("keeps a renamed task in its place (ordered by active_at, not updated_at)", () => {
    const state = S.hydrate({
      page: "tasks",
      tasks: [
        { id: "old", title: "old", active_at: "2026-08-01T00:00:00Z", updated_at: "2026-08-01T00:00:00Z" },
        { id: "new", title: "new", active_at: "2026-08-03T00:00:00Z", updated_at: "2026-08-03T00:00:00Z" },
      ],
    });
    const renamed = S.upsertTask(state, { id: "old", title: "renamed", active_at: "2026-08-01T00:00:00Z", updated_at: "2026-08-05T00:00:00Z" });
    assert.deepEqual(renamed.tasks.map((t) => t.title), ["new", "renamed"]);
  });
});

describe("merge by revision", () => {
  const start = () => S.hydrate(boot([session("a", { cancellation_pending: true, cancellation_revision: 5 })]));

  it("rejects a lower revision", () => {
    let state = S.applyNotification(start(), "session.cancellation_changed", changed("a", false, 4), 0);
    assert.equal(state.sessions.a.cancellation_pending, true, "against the boot value");
    state = S.applyNotification(start(), "session.state_changed", { ...changed("a", true, 5), new_state: "RUNNING" }, 1);
    state = S.applyNotification(state, "session.cancellation_changed", changed("a", false, 4), 1);
    assert.equal(state.sessions.a.cancellation_pending, true, "within one connection");
    assert.equal(state.sessions.a.cancellation_revision, 5);
  });

  it("takes the first value of a connection as a fresh read over the boot state", () => {
    // The subscription snapshot is read after the page was rendered, so it is never older.
    const state = S.applyNotification(start(), "session.state_changed", { ...changed("a", false, 0), new_state: "RUNNING" }, 1);
    assert.equal(state.sessions.a.cancellation_pending, false);
  });

  it("accepts an equal revision", () => {
    // First value on connection 1 is accepted as a fresh read; then the rule applies within it.
    let state = S.applyNotification(start(), "session.cancellation_changed", changed("a", true, 5), 1);
    state = S.applyNotification(state, "session.state_changed", { ...changed("a", true, 5), new_state: "RUNNING" }, 1);
    assert.equal(state.sessions.a.cancellation_pending, true);
    assert.equal(state.sessions.a.cancellation_revision, 5);
  });

  it("accepts a higher revision", () => {
    const state = S.applyNotification(start(), "session.cancellation_changed", changed("a", false, 6), 0);
    assert.equal(state.sessions.a.cancellation_pending, false);
    assert.equal(state.sessions.a.cancellation_revision, 6);
    assert.equal(S.effectiveCancelPending(state, "a"), false);
  });

  it("applies the rule within one connection epoch", () => {
    let state = S.applyNotification(start(), "session.cancellation_changed", changed("a", false, 6), 1);
    state = S.applyNotification(state, "session.cancellation_changed", changed("a", true, 5), 1);
    assert.equal(state.sessions.a.cancellation_pending, false, "stale true at lower revision rejected");
    state = S.applyNotification(state, "session.cancellation_changed", changed("a", true, 7), 1);
    assert.equal(state.sessions.a.cancellation_pending, true);
  });

  it("accepts a restarted backend's lower revision on a new connection (no stale spinner)", () => {
    // Revisions are process-local: after a restart the snapshot says false at revision 0.
    let state = S.applyNotification(start(), "session.state_changed", { ...changed("a", true, 5), new_state: "RUNNING" }, 1);
    state = S.applyNotification(state, "session.state_changed", { ...changed("a", false, 0), new_state: "RUNNING" }, 2);
    assert.equal(state.sessions.a.cancellation_pending, false);
    assert.equal(state.sessions.a.cancellation_revision, 0);
    const view = S.cancelControlView(state, "a");
    assert.equal(view.pending, false);
    assert.equal(view.disabled, false, "retryable");
    // ...and from then on the new process's revisions count.
    state = S.applyNotification(state, "session.cancellation_changed", changed("a", true, 1), 2);
    assert.equal(state.sessions.a.cancellation_pending, true);
  });

  it("a session.list DTO goes through the same rule", () => {
    let state = S.applyNotification(start(), "session.cancellation_changed", changed("a", false, 6), 1);
    state = S.replaceSessions(state, [session("a", { cancellation_pending: true, cancellation_revision: 5 })], 1);
    assert.equal(state.sessions.a.cancellation_pending, false);
    state = S.replaceSessions(state, [session("a", { state: "WAITING_FOR_INPUT", cancellation_revision: 6 })], 1);
    assert.equal(state.sessions.a.state, "WAITING_FOR_INPUT", "other fields are always taken");
  });

  it("a partial row without the pair leaves the held value alone", () => {
    const dto = { ...session("a") };
    delete dto.cancellation_pending;
    delete dto.cancellation_revision;
    const state = S.upsertSession(start(), dto, 1);
    assert.equal(state.sessions.a.cancellation_pending, true);
    assert.equal(state.sessions.a.cancellation_revision, 5);
  });

  it("acceptsCancellation: nothing held accepts anything", () => {
    assert.equal(S.acceptsCancellation(null, { revision: 0, epoch: 0 }), true);
    assert.equal(S.acceptsCancellation({ revision: 3, epoch: 1 }, { revision: 3, epoch: 1 }), true);
    assert.equal(S.acceptsCancellation({ revision: 3, epoch: 1 }, { revision: 2, epoch: 1 }), false);
    assert.equal(S.acceptsCancellation({ revision: 3, epoch: 2 }, { revision: 9, epoch: 1 }), false, "older connection");
  });
});

describe("optimistic flag", () => {
  const running = () => S.hydrate(boot([session("a", { cancellation_revision: 2 })]));

  it("activation disables the control at once and sends one request", () => {
    const { state, send } = S.beginCancel(running(), "a", "r1", 1);
    assert.equal(send, true);
    assert.equal(S.isOptimisticPending(state, "a"), true);
    assert.deepEqual(S.cancelControlView(state, "a"), {
      visible: true,
      pending: true,
      disabled: true,
      label: "Cancelling...",
      note: null,
    });
  });

  it("ignores a same-page duplicate activation", () => {
    const first = S.beginCancel(running(), "a", "r1", 1);
    const second = S.beginCancel(first.state, "a", "r2", 1);
    assert.equal(second.send, false);
    assert.equal(second.state, first.state, "state untouched");
    assert.equal(second.state.cancelRequests.a.requestId, "r1");
  });

  it("ignores activation while the backend already reports pending (e.g. another tab)", () => {
    const state = S.applyNotification(running(), "session.cancellation_changed", changed("a", true, 3), 1);
    assert.equal(S.beginCancel(state, "a", "r1", 1).send, false);
  });

  it("ignores activation when no turn runs", () => {
    const idle = S.hydrate(boot([session("a", { state: "WAITING_FOR_INPUT" })]));
    assert.equal(S.beginCancel(idle, "a", "r1", 1).send, false);
    assert.equal(S.beginCancel(idle, "missing", "r1", 1).send, false);
  });

  it("clears on a successful response", () => {
    let { state } = S.beginCancel(running(), "a", "r1", 1);
    state = S.settleCancel(state, "a", "r1", { ok: true });
    assert.equal(S.isOptimisticPending(state, "a"), false);
    assert.equal(state.composerErrors.a, undefined);
  });

  it("clears on an error response and becomes retryable while running", () => {
    let { state } = S.beginCancel(running(), "a", "r1", 1);
    state = S.settleCancel(state, "a", "r1", { ok: false, error: "Cancel failed: deadline" });
    assert.equal(S.effectiveCancelPending(state, "a"), false);
    assert.equal(state.composerErrors.a, "Cancel failed: deadline");
    const view = S.cancelControlView(state, "a");
    assert.equal(view.visible, true);
    assert.equal(view.disabled, false);
    assert.equal(view.label, "Cancel agent");
    const retry = S.beginCancel(state, "a", "r2", 1);
    assert.equal(retry.send, true);
    assert.equal(retry.state.composerErrors.a, undefined, "a new attempt clears the old error");
  });

  it("clears on the 15 s client timeout", () => {
    assert.equal(S.CANCEL_REQUEST_TIMEOUT_MS, 15_000);
    let { state } = S.beginCancel(running(), "a", "r1", 1);
    state = S.settleCancel(state, "a", "r1", { ok: false, error: "No answer within 15 s" });
    assert.equal(S.isOptimisticPending(state, "a"), false);
    assert.equal(S.beginCancel(state, "a", "r2", 1).send, true);
  });

  it("a late answer to an abandoned request does not touch the retry", () => {
    let { state } = S.beginCancel(running(), "a", "r1", 1);
    state = S.settleCancel(state, "a", "r1", { ok: false, error: "timeout" });
    ({ state } = S.beginCancel(state, "a", "r2", 1));
    const late = S.settleCancel(state, "a", "r1", { ok: true });
    assert.equal(late, state);
    assert.equal(S.isOptimisticPending(late, "a"), true);
  });

  it("hands over to the backend at the first signal about the click", () => {
    let { state } = S.beginCancel(running(), "a", "r1", 1);
    state = S.applyNotification(state, "session.cancellation_changed", changed("a", true, 3), 1);
    assert.equal(S.isOptimisticPending(state, "a"), false, "backend owns it now");
    assert.equal(S.effectiveCancelPending(state, "a"), true);
    // The request is still ours: its error would still show.
    state = S.settleCancel(state, "a", "r1", { ok: true });
    assert.equal(S.effectiveCancelPending(state, "a"), true, "response before pending=false keeps the spinner");
    state = S.applyNotification(state, "session.cancellation_changed", changed("a", false, 4), 1);
    assert.equal(S.effectiveCancelPending(state, "a"), false);
  });

  it("a snapshot that predates the request (false at the same revision) keeps the flag", () => {
    let { state } = S.beginCancel(running(), "a", "r1", 0);
    state = S.applyNotification(state, "session.state_changed", { ...changed("a", false, 2), new_state: "RUNNING" }, 0);
    assert.equal(S.isOptimisticPending(state, "a"), true, "no flicker");
    // A transition after the click (revision moved) ends it.
    state = S.applyNotification(state, "session.cancellation_changed", changed("a", false, 4), 0);
    assert.equal(S.isOptimisticPending(state, "a"), false);
  });

  it("a snapshot on a newer connection ends the flag (it is a fresh read)", () => {
    let { state } = S.beginCancel(running(), "a", "r1", 0);
    state = S.applyNotification(state, "session.state_changed", { ...changed("a", false, 2), new_state: "RUNNING" }, 1);
    assert.equal(S.isOptimisticPending(state, "a"), false);
  });

  it("an error after the backend took over still reaches the composer", () => {
    let { state } = S.beginCancel(running(), "a", "r1", 1);
    state = S.applyNotification(state, "session.cancellation_changed", changed("a", true, 3), 1);
    state = S.applyNotification(state, "session.cancellation_changed", changed("a", false, 4), 1);
    state = S.settleCancel(state, "a", "r1", { ok: false, error: "Cancel failed: CONFLICT" });
    assert.equal(state.composerErrors.a, "Cancel failed: CONFLICT");
    assert.equal(S.cancelControlView(state, "a").disabled, false);
  });
});

describe("isolation between sessions", () => {
  const two = () => S.hydrate(boot([session("a"), session("b", { created_at: "2026-08-03T10:05:00Z" })]));

  it("an optimistic cancel of one session leaves the other enabled", () => {
    const { state } = S.beginCancel(two(), "a", "r1", 1);
    assert.equal(S.cancelControlView(state, "a").pending, true);
    assert.deepEqual(S.cancelControlView(state, "b"), { visible: true, pending: false, disabled: false, label: "Cancel agent", note: null });
    assert.equal(S.beginCancel(state, "b", "r2", 1).send, true, "the other can be cancelled too");
  });

  it("a backend value for one session never touches another", () => {
    let state = S.applyNotification(two(), "session.cancellation_changed", changed("a", true, 1), 1);
    assert.equal(state.sessions.b.cancellation_pending, false);
    assert.equal(state.sessions.b.cancellation_revision, 0);
    // b's own history is independent: revision 1 for b is not compared with a's.
    state = S.applyNotification(state, "session.cancellation_changed", changed("b", true, 1), 1);
    state = S.applyNotification(state, "session.cancellation_changed", changed("a", false, 2), 1);
    assert.equal(S.effectiveCancelPending(state, "a"), false);
    assert.equal(S.effectiveCancelPending(state, "b"), true);
  });

  it("settling one session's request leaves the other's flag", () => {
    let { state } = S.beginCancel(two(), "a", "r1", 1);
    ({ state } = S.beginCancel(state, "b", "r2", 1));
    state = S.settleCancel(state, "a", "r1", { ok: false, error: "x" });
    assert.equal(S.isOptimisticPending(state, "a"), false);
    assert.equal(S.isOptimisticPending(state, "b"), true);
    assert.equal(state.composerErrors.b, undefined);
  });

  it("selection changes which session the composer shows, not their states", () => {
    let { state } = S.beginCancel(two(), "a", "r1", 1);
    state = S.selectSession(state, "b");
    assert.equal(S.composerView(state).cancel.pending, false);
    state = S.selectSession(state, "a");
    assert.equal(S.composerView(state).cancel.pending, true);
  });
});

describe("control visibility by state", () => {
  for (const st of ["CREATED", "STARTING", "WAITING_FOR_INPUT", "COMPLETED", "FAILED", "CANCELLED"]) {
    it(`hidden when ${st} and nothing pending`, () => {
      const state = S.hydrate(boot([session("a", { state: st })]));
      assert.equal(S.cancelControlView(state, "a").visible, false);
      assert.equal(S.composerView(state).sendDisabled, false);
    });
  }

  it("shown and enabled while RUNNING; Send queues during the turn (DESIGN.md §9)", () => {
    const state = S.hydrate(boot([session("a")]));
    assert.deepEqual(S.cancelControlView(state, "a"), { visible: true, pending: false, disabled: false, label: "Cancel agent", note: null });
    assert.equal(S.composerView(state).sendDisabled, false);
    assert.equal(S.composerView(state).sendLabel, "Queue");
  });

  it("stays visible with the spinner until pending goes false, even after the turn ended", () => {
    let state = S.hydrate(boot([session("a", { cancellation_pending: true, cancellation_revision: 1 })]));
    state = S.applyNotification(state, "session.state_changed", { session_id: "a", new_state: "WAITING_FOR_INPUT", cancellation_pending: true, cancellation_revision: 1 }, 1);
    assert.equal(S.cancelControlView(state, "a").visible, true);
    state = S.applyNotification(state, "session.cancellation_changed", changed("a", false, 2), 1);
    assert.equal(S.cancelControlView(state, "a").visible, false);
  });

  it("appears when a state change says RUNNING", () => {
    let state = S.hydrate(boot([session("a", { state: "WAITING_FOR_INPUT" })]));
    state = S.applyNotification(state, "session.state_changed", { session_id: "a", task_id: T, new_state: "RUNNING", updated_at: "2026-08-03T10:01:00Z", cancellation_pending: false, cancellation_revision: 0 }, 1);
    assert.equal(S.cancelControlView(state, "a").visible, true);
    assert.equal(state.sessions.a.updated_at, "2026-08-03T10:01:00Z");
  });

  it("with no session, Send starts one", () => {
    const state = S.hydrate(boot([]));
    const view = S.composerView(state);
    assert.equal(view.hasSession, false);
    assert.equal(view.sendLabel, "Start session");
    assert.equal(view.cancel.visible, false);
  });
});

describe("messages", () => {
  const m = (id, at, extra = {}) => ({ id, session_id: "a", role: "agent", kind: "text", content: id, created_at: at, ...extra });

  it("upsert appends new and replaces existing by id", () => {
    let list = S.upsertMessage([], m("1", "2026-08-03T10:00:01Z"));
    list = S.upsertMessage(list, m("2", "2026-08-03T10:00:02Z"));
    list = S.upsertMessage(list, m("1", "2026-08-03T10:00:01Z", { content: "1 more" }));
    assert.deepEqual(list.map((x) => [x.id, x.content]), [["1", "1 more"], ["2", "2"]]);
  });

  it("keeps oldest first when a message arrives out of order", () => {
    let list = S.upsertMessage([], m("2", "2026-08-03T10:00:02Z"));
    list = S.upsertMessage(list, m("1", "2026-08-03T10:00:01Z"));
    assert.deepEqual(list.map((x) => x.id), ["1", "2"]);
  });

  it("streams agent text through added then updated notifications", () => {
    let state = S.hydrate(boot([session("a")]));
    state = S.replaceMessages(state, "a", []);
    state = S.applyNotification(state, "session.message.added", { session_id: "a", message: m("x", "2026-08-03T10:00:01Z", { content: "He" }) }, 1);
    state = S.applyNotification(state, "session.message.updated", { session_id: "a", message: m("x", "2026-08-03T10:00:01Z", { content: "Hello" }) }, 1);
    assert.deepEqual(state.messages.a.map((x) => x.content), ["Hello"]);
  });

  it("marks a permission card cancelled", () => {
    let state = S.hydrate(boot([session("a")]));
    const card = m("p", "2026-08-03T10:00:01Z", { kind: "permission", metadata: { request_id: "req-1", status: "pending", options: [] } });
    state = S.replaceMessages(state, "a", [card]);
    state = S.applyNotification(state, "session.permission.cancelled", { session_id: "a", request_id: "req-1" }, 1);
    assert.equal(state.messages.a[0].metadata.status, "cancelled");
  });

  it("ignores notifications without a session id and unknown actions", () => {
    const state = S.hydrate(boot([session("a")]));
    assert.equal(S.applyNotification(state, "session.cancellation_changed", {}, 1), state);
    assert.equal(S.applyNotification(state, "session.turn.completed", { session_id: "a" }, 1), state);
  });
});
