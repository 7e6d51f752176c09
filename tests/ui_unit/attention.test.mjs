// Unit tests of what needs the person (DESIGN.md §15): attention.js's events and marks, the
// state rules for `session.attention`, the task list's words, and the composer while a new
// session starts (issue 29).

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import * as A from "../../web/static/attention.js";
import * as L from "../../web/static/lists.js";
import * as S from "../../web/static/state.js";
import { sessionStatus } from "../../web/static/status.js";
import { boot, session } from "./fixtures.mjs";

describe("attentionEvent", () => {
  it("names a turn that ended, an approval asked and a failure", () => {
    const running = session("s1");
    assert.equal(A.attentionEvent(running, { ...running, state: "WAITING_FOR_INPUT" }), "ended");
    assert.equal(A.attentionEvent(running, { ...running, state: "WAITING_FOR_INPUT" }, { turnFailed: true }), "failed");
    assert.equal(A.attentionEvent(running, { ...running, needs_approval: true }), "approval");
    assert.equal(A.attentionEvent({ ...running, state: "STARTING" }, { ...running, state: "FAILED" }), "failed");
  });
  it("says nothing for what is no news", () => {
    const idle = session("s1", { state: "WAITING_FOR_INPUT" });
    assert.equal(A.attentionEvent(idle, { ...idle, title: "renamed" }), null);
    assert.equal(A.attentionEvent(idle, { ...idle, state: "RUNNING" }), null);
    // First heard of: a turn that ended before the page knew the session is not news.
    assert.equal(A.attentionEvent(undefined, idle), null);
    assert.equal(A.attentionEvent(undefined, { ...idle, needs_approval: true }), "approval");
    const asking = { ...session("s1"), needs_approval: true };
    assert.equal(A.attentionEvent(asking, { ...asking, updated_at: "later" }), null);
  });
});

describe("unseen attention", () => {
  it("never counts the session looked at, and forgets what was seen or removed", () => {
    let att = A.emptyAttention();
    att = A.noteAttention(att, "s1", "ended", { name: "Session 1", taskId: "t" }, "s1");
    assert.equal(A.attentionCount(att), 0);
    att = A.noteAttention(att, "s2", "ended", { name: "Session 2", taskId: "t" }, "s1");
    att = A.noteAttention(att, "s3", "approval", { name: "Session 3", taskId: "t" }, "s1");
    assert.equal(A.attentionMark(att), "(2) ");
    assert.equal(A.badgeText(att), "2 sessions need you");
    att = A.markSeen(att, "s2");
    assert.equal(A.badgeText(att), "1 session needs you");
    att = A.keepOnly(att, (sid) => sid !== "s3");
    assert.equal(A.attentionMark(att), "");
  });
  it("words a notification", () => {
    assert.deepEqual(A.notificationText("approval", "Session 2", "Fix the build"), {
      title: "Session 2 asks for your approval", body: "Task: Fix the build",
    });
  });
});

describe("session.attention in the page's state", () => {
  it("marks a known session that is not followed, and leaves other tasks' sessions out", () => {
    let s = S.setConnection(S.hydrate(boot([session("s1"), session("s2", { created_at: "2026-08-03T10:01:00Z" })])), "open");
    s = S.applyNotification(s, "session.attention", { session_id: "s2", task_id: "task-1", needs_approval: true, cancelling: false }, 1);
    assert.equal(sessionStatus(s, "s2").label, "Needs approval");
    s = S.applyNotification(s, "session.attention", { session_id: "s2", task_id: "task-1", needs_approval: false, cancelling: true }, 1);
    assert.equal(sessionStatus(s, "s2").label, "Cancelling");
    const other = S.applyNotification(s, "session.attention", { session_id: "elsewhere", task_id: "t2", needs_approval: true, cancelling: false }, 1);
    assert.equal(other.sessions.elsewhere, undefined);
  });
  it("believes session.attention over the held messages of a session the page left", () => {
    let s = S.setConnection(S.hydrate(boot([session("s1"), session("s2", { created_at: "2026-08-03T10:01:00Z" })])), "open");
    s = S.replaceMessages(s, "s2", []); // followed once, then left: its messages stop there
    s = S.selectSession(s, "s1");
    s = S.applyNotification(s, "session.attention", { session_id: "s2", task_id: "task-1", needs_approval: true, cancelling: false }, 1);
    assert.equal(sessionStatus(s, "s2").label, "Needs approval");
    s = S.applyNotification(s, "session.attention", { session_id: "s2", task_id: "task-1", needs_approval: false, cancelling: false }, 1);
    assert.equal(sessionStatus(s, "s2").label, "Running");
  });
  it("keeps the followed session's cancel to its own revision rule", () => {
    let s = S.setConnection(S.hydrate(boot([session("s1")])), "open");
    s = S.applyNotification(s, "session.attention", { session_id: "s1", task_id: "task-1", needs_approval: false, cancelling: true }, 1);
    assert.equal(sessionStatus(s, "s1").label, "Running");
    assert.equal(S.cancelControlView(s, "s1").pending, false);
  });
});

describe("the task list's words", () => {
  it("puts approval and cancelling before running", () => {
    assert.equal(L.taskStatus({ running_count: 2, session_count: 2, approval_count: 1 }).label, "Needs approval");
    assert.equal(L.taskStatus({ running_count: 1, session_count: 2, cancelling_count: 1 }).label, "Cancelling");
    assert.equal(L.taskStatus({ running_count: 1, session_count: 1 }).label, "Running");
    assert.ok(L.changesTaskCounts("session.attention"));
  });
});

describe("the composer while a new session starts", () => {
  it("waits: nothing typed goes to the session still shown", () => {
    const s = { ...S.setConnection(S.hydrate(boot([session("s1", { state: "WAITING_FOR_INPUT" })])), "open"), launching: true };
    const view = S.composerView(s);
    assert.equal(view.sendDisabled, true);
    assert.equal(view.sendLabel, "Starting…");
    assert.equal(S.composerView({ ...s, launching: false }).sendDisabled, false);
  });
  it("offers Retry start on a session whose agent failed", () => {
    const s = S.hydrate(boot([session("s1", { state: "FAILED" })]));
    assert.equal(sessionStatus(s, "s1").retry, true);
  });
});

describe("the working indicator and the escalation countdown", async () => {
  const P = await import("../../web/static/turn-progress.js");
  const started = "2026-08-03T10:00:00Z";
  const t0 = Date.parse(started);
  const user = { id: "u", session_id: "s1", role: "user", kind: "text", content: "go", metadata: {}, created_at: started };
  const tool = { id: "t", session_id: "s1", role: "agent", kind: "tool_call", content: "ls -la", metadata: { status: "in_progress" }, created_at: started };
  function running(messages) {
    return S.setConnection(S.hydrate(boot([session("s1")], { messages })), "open");
  }
  it("says how long the turn runs and what the agent did last", () => {
    const v = P.workingView(running([user]), "s1", { now: t0 + 12_000 });
    assert.deepEqual(v, { visible: true, text: "Working · 12 s — Waiting for the agent's first output" });
    const w = P.workingView(running([user, tool]), "s1", { now: t0 + 75_000, lastEventAt: t0 + 5_000 });
    assert.equal(w.text, "Working · 1 min 15 s — Running ls -la (last output 1 min 10 s ago)");
  });
  it("is hidden when no turn runs or a cancel tells the story", () => {
    const idle = S.hydrate(boot([session("s1", { state: "WAITING_FOR_INPUT" })]));
    assert.equal(P.workingView(idle, "s1", { now: t0 }).visible, false);
    const pending = S.hydrate(boot([session("s1", { cancellation_pending: true, cancellation_revision: 1 })]));
    assert.equal(P.workingView(pending, "s1", { now: t0 }).visible, false);
  });
  it("counts down from the late phase to escalation", () => {
    let s = S.hydrate(boot([session("s1", { cancellation_pending: true, cancellation_revision: 1 })]));
    const timeouts = { join_s: 1, escalate_s: 10 };
    assert.equal(P.countdownView(s, "s1", { now: t0, lateAt: t0, timeouts }).visible, false); // not late yet
    s = S.applyNotification(s, "session.cancel.progress", { session_id: "s1", turn_id: "x", phase: "late" }, 0);
    const v = P.countdownView(s, "s1", { now: t0 + 2_500, lateAt: t0, timeouts });
    assert.equal(v.seconds, 7);
    assert.equal(v.text, "The agent is not answering; it is stopped in 7 s.");
    assert.equal(P.countdownView(s, "s1", { now: t0 + 60_000, lateAt: t0, timeouts }).text, "Stopping the agent now…");
  });
});

describe("the smaller items of issue 29", async () => {
  const { permissionOutcome } = await import("../../web/static/tool-card.js");
  it("words a withdrawn question apart from a cancelled turn", () => {
    assert.equal(permissionOutcome({ status: "cancelled", withdrawn: true }), "Withdrawn by the agent");
    assert.equal(permissionOutcome({ status: "cancelled" }), "Cancelled with the turn");
  });
});
