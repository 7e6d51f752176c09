// Unit tests of the live task and session lists (web/static/lists.js): run with
// `node --test tests/ui_unit/`.

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import * as L from "../../web/static/lists.js";
import * as S from "../../web/static/state.js";

const T = "task-1";

function task(id, extra = {}) {
  return {
    id,
    workspace_id: "default",
    title: `Task ${id}`,
    created_at: "2026-08-03T10:00:00Z",
    updated_at: "2026-08-03T10:00:00Z",
    archived: false,
    session_count: 0,
    running_count: 0,
    ...extra,
  };
}

function session(id, extra = {}) {
  return {
    id,
    task_id: T,
    state: "WAITING_FOR_INPUT",
    agent: "mock",
    title: null,
    archived: false,
    created_at: "2026-08-03T10:00:00Z",
    updated_at: "2026-08-03T10:00:00Z",
    cancellation_pending: false,
    cancellation_revision: 0,
    ...extra,
  };
}

function taskPage(sessions, selected = sessions[0]?.id ?? null) {
  return S.hydrate({
    page: "task",
    task: task(T),
    sessions,
    selected_session_id: selected,
    messages: [],
    agents: ["mock"],
  });
}

const ids = (state) => state.tasks.map((t) => t.id);

describe("task status words", () => {
  it("says Running while a session runs, else how many sessions", () => {
    assert.equal(L.taskStatus(task("a", { session_count: 2, running_count: 1 })).label, "Running");
    assert.equal(L.taskStatus(task("a", { session_count: 3, running_count: 2 })).label, "Running (2)");
    assert.equal(L.taskStatus(task("a", { session_count: 3, running_count: 2 })).tone, "active");
    assert.equal(L.taskStatus(task("a", { session_count: 0 })).label, "No sessions");
    assert.equal(L.taskStatus(task("a", { session_count: 1 })).label, "1 session");
    assert.equal(L.taskStatus(task("a", { session_count: 4 })).label, "4 sessions");
    assert.equal(L.taskStatus({ id: "x" }).key, "empty", "a DTO without counts");
  });
});

describe("session names", () => {
  it("uses the title when set, else the number (and the agent in the header)", () => {
    assert.equal(L.sessionName(session("a"), 0), "Session 1");
    assert.equal(L.sessionName(session("a", { title: "  Fix login " }), 2), "Fix login");
    assert.equal(L.sessionName(session("a", { title: "   " }), 1), "Session 2");
    assert.equal(L.sessionHeading(session("a"), 1), "Session 2 · mock");
    assert.equal(L.sessionHeading(session("a", { title: "Fix login" }), 1), "Fix login");
  });

  it("splits archived items off, keeping the order", () => {
    const items = [session("a"), session("b", { archived: true }), session("c"), session("d", { archived: true })];
    const { active, archived } = L.splitArchived(items);
    assert.deepEqual(active.map((s) => s.id), ["a", "c"]);
    assert.deepEqual(archived.map((s) => s.id), ["b", "d"]);
  });
});

describe("the task list follows workspace notifications", () => {
  const base = () => S.replaceTasks(S.emptyState(), [task("a"), task("b", { updated_at: "2026-08-03T11:00:00Z" })]);

  it("adds a new task first and replaces a renamed or archived one", () => {
    let state = L.applyTaskListNotification(base(), "task.changed", { task: task("c", { updated_at: "2026-08-03T12:00:00Z" }) });
    assert.deepEqual(ids(state), ["c", "b", "a"]);
    state = L.applyTaskListNotification(state, "task.changed", {
      task: task("a", { title: "Renamed", archived: true, updated_at: "2026-08-03T13:00:00Z" }),
    });
    assert.deepEqual(ids(state), ["a", "c", "b"]);
    assert.equal(state.tasks[0].title, "Renamed");
    assert.equal(state.tasks[0].archived, true);
  });

  it("removes a deleted task, and no late change brings it back", () => {
    let state = L.applyTaskListNotification(base(), "task.removed", { task_id: "a" });
    assert.deepEqual(ids(state), ["b"]);
    state = L.applyTaskListNotification(state, "task.changed", { task: task("a") });
    assert.deepEqual(ids(state), ["b"], "a change that was on its way is ignored");
    state = L.mergeTaskListing(state, [task("a"), task("b")], ["b"]);
    assert.deepEqual(ids(state), ["b"], "a listing read before the removal is ignored for it");
  });

  it("ignores session and unknown notifications and malformed payloads", () => {
    const state = base();
    assert.equal(L.applyTaskListNotification(state, "session.changed", { session: session("s") }), state);
    assert.equal(L.applyTaskListNotification(state, "task.changed", {}), state);
    assert.equal(L.applyTaskListNotification(state, "task.removed", null), state);
    assert.equal(L.changesTaskCounts("session.changed"), true);
    assert.equal(L.changesTaskCounts("session.removed"), true);
    assert.equal(L.changesTaskCounts("task.changed"), false);
  });
});

describe("a task listing merged into the live list", () => {
  it("takes fresh counts, drops tasks shown before but absent, keeps ones that arrived meanwhile", () => {
    let state = S.replaceTasks(S.emptyState(), [task("a"), task("b")]);
    const before = ids(state);
    state = L.applyTaskListNotification(state, "task.changed", { task: task("new", { updated_at: "2026-08-03T12:00:00Z" }) });
    state = L.mergeTaskListing(state, [task("a", { session_count: 2, running_count: 1 })], before);
    assert.deepEqual(ids(state), ["new", "a"]);
    assert.equal(state.tasks.find((t) => t.id === "a").running_count, 1);
  });

  it("keeps a rename heard after the listing was read, with the listing's counts", () => {
    let state = S.replaceTasks(S.emptyState(), [task("a", { title: "New name", updated_at: "2026-08-03T12:00:00Z" })]);
    state = L.mergeTaskListing(state, [task("a", { title: "Old name", session_count: 3 })], ["a"]);
    assert.equal(state.tasks[0].title, "New name");
    assert.equal(state.tasks[0].session_count, 3);
  });

  it("adds listed tasks it did not know (created while offline)", () => {
    const state = L.mergeTaskListing(S.emptyState(), [task("x"), task("y", { updated_at: "2026-08-03T12:00:00Z" })], []);
    assert.deepEqual(ids(state), ["y", "x"]);
  });
});

describe("the task page follows its sessions", () => {
  it("adds a session launched elsewhere and ignores other tasks' sessions", () => {
    let state = taskPage([session("a")]);
    state = L.applyPageNotification(state, "session.changed", { session: session("b", { created_at: "2026-08-03T10:01:00Z" }) }, 1, T);
    assert.deepEqual(state.sessionOrder, ["a", "b"]);
    const other = L.applyPageNotification(state, "session.changed", { session: session("z", { task_id: "task-2" }) }, 1, T);
    assert.equal(other, state);
  });

  it("renames and archives a session from session.changed, keeping the revision rule", () => {
    let state = taskPage([session("a", { cancellation_pending: true, cancellation_revision: 4 })]);
    state = L.applyPageNotification(
      state,
      "session.changed",
      { session: session("a", { title: "Named", archived: true, cancellation_pending: false, cancellation_revision: 3 }) },
      0,
      T,
    );
    assert.equal(state.sessions.a.title, "Named");
    assert.equal(state.sessions.a.archived, true);
    assert.equal(state.sessions.a.cancellation_pending, true, "an older revision does not clear pending");
  });

  it("does not leave 'Cancelling' on a session it does not follow once that session stopped running", () => {
    let state = taskPage([session("a"), session("b", { state: "RUNNING" })], "a");
    const heard = (id, extra) => ({ session: session(id, { cancellation_pending: true, cancellation_revision: 1, ...extra }) });
    state = L.applyPageNotification(state, "session.changed", heard("b", { state: "RUNNING" }), 1, T);
    assert.equal(S.effectiveCancelPending(state, "b"), true, "still running: the cancel is in progress");
    state = L.applyPageNotification(state, "session.changed", heard("b", { state: "WAITING_FOR_INPUT" }), 1, T);
    assert.equal(S.effectiveCancelPending(state, "b"), false);
    state = L.applyPageNotification(state, "session.changed", heard("a", { state: "WAITING_FOR_INPUT" }), 1, T);
    assert.equal(S.effectiveCancelPending(state, "a"), true, "the followed session keeps the exact value");
  });

  it("removes a session with everything held for it; the selection is left for the page to pick", () => {
    let state = taskPage([session("a"), session("b", { created_at: "2026-08-03T10:01:00Z" })], "a");
    state = S.addMessage(state, "a", { id: "m1", session_id: "a", role: "user", kind: "text", content: "hi", created_at: "2026-08-03T10:00:01Z" });
    state = S.setComposerError(state, "a", "Could not send.");
    state = L.applyPageNotification(state, "session.removed", { session_id: "a", task_id: T }, 1, T);
    assert.deepEqual(state.sessionOrder, ["b"]);
    assert.equal(state.sessions.a, undefined);
    assert.equal(state.messages.a, undefined);
    assert.equal(state.composerErrors.a, undefined);
    assert.equal(state.selectedSessionId, null);
    assert.equal(L.nextSelection(state), "b");
  });

  it("keeps the selection when another session is removed", () => {
    let state = taskPage([session("a"), session("b")], "a");
    state = L.applyPageNotification(state, "session.removed", { session_id: "b", task_id: T }, 1, T);
    assert.equal(state.selectedSessionId, "a");
  });

  it("lets no late notification bring a removed session back as a phantom row", () => {
    let state = taskPage([session("a")], "a");
    state = L.applyPageNotification(state, "session.removed", { session_id: "a", task_id: T }, 1, T);
    for (const [action, payload] of [
      ["session.state_changed", { session_id: "a", new_state: "CANCELLED", cancellation_pending: false, cancellation_revision: 2 }],
      ["session.cancellation_changed", { session_id: "a", cancellation_pending: false, cancellation_revision: 2 }],
      ["session.message.added", { session_id: "a", message: { id: "m", session_id: "a" } }],
      ["session.changed", { session: session("a", { state: "CANCELLED" }) }],
    ]) {
      state = L.applyPageNotification(state, action, payload, 1, T);
    }
    assert.deepEqual(state.sessionOrder, []);
    assert.deepEqual(state.sessions, {});
    assert.equal(state.messages.a, undefined);
  });

  it("still folds ordinary session notifications through state.js", () => {
    let state = taskPage([session("a")], "a");
    state = L.applyPageNotification(state, "session.state_changed", { session_id: "a", new_state: "RUNNING" }, 1, T);
    assert.equal(state.sessions.a.state, "RUNNING");
  });

  it("prefers an active session over an archived one for the next selection, newest first", () => {
    const state = taskPage(
      [
        session("old", { updated_at: "2026-08-03T10:00:00Z" }),
        session("new", { updated_at: "2026-08-03T11:00:00Z" }),
        session("arch", { archived: true, updated_at: "2026-08-03T12:00:00Z" }),
      ],
      null,
    );
    assert.equal(L.nextSelection(state), "new");
    const onlyArchived = taskPage([session("arch", { archived: true })], null);
    assert.equal(L.nextSelection(onlyArchived), "arch");
    assert.equal(L.nextSelection(taskPage([], null)), null);
  });
});

describe("the task page's own task", () => {
  it("takes a rename and learns that the task was deleted", () => {
    let state = taskPage([]);
    state = L.applyPageNotification(state, "task.changed", { task: task(T, { title: "Renamed" }) }, 1, T);
    assert.equal(state.task.title, "Renamed");
    assert.equal(L.applyPageNotification(state, "task.changed", { task: task("other") }, 1, T), state);
    assert.equal(L.applyPageNotification(state, "task.removed", { task_id: "other" }, 1, T), state);
    state = L.applyPageNotification(state, "task.removed", { task_id: T }, 1, T);
    assert.equal(state.taskGone, true);
  });

  it("re-reads its title on reconnect, or finds it gone", () => {
    let state = taskPage([]);
    state = L.syncTask(state, [task("x"), task(T, { title: "While away" })], T);
    assert.equal(state.task.title, "While away");
    assert.equal(state.taskGone, undefined);
    assert.equal(L.syncTask(state, [task("x")], T).taskGone, true);
  });
});

describe("a session listing after a reconnect", () => {
  it("drops sessions removed while away, keeps those launched since the request, adds new ones", () => {
    let state = taskPage([session("a"), session("b")], "b");
    const before = [...state.sessionOrder];
    state = L.applyPageNotification(state, "session.changed", { session: session("late", { created_at: "2026-08-03T10:05:00Z" }) }, 2, T);
    state = L.syncSessions(state, [session("a", { state: "RUNNING" }), session("c", { created_at: "2026-08-03T10:02:00Z" })], 2, before);
    assert.deepEqual(state.sessionOrder, ["a", "c", "late"]);
    assert.equal(state.sessions.a.state, "RUNNING");
    assert.equal(state.selectedSessionId, null, "the shown one was removed: the page picks another");
  });

  it("does not bring back a session removed after the listing was read", () => {
    let state = taskPage([session("a"), session("b")], "a");
    const before = [...state.sessionOrder];
    state = L.applyPageNotification(state, "session.removed", { session_id: "b", task_id: T }, 1, T);
    state = L.syncSessions(state, [session("a"), session("b")], 1, before);
    assert.deepEqual(state.sessionOrder, ["a"]);
  });
});
