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

describe("the backend's attention, drawn", () => {
  const task = { id: "task-1", title: "Fix the build" };
  const rows = [
    session("s1", { attention: "turn_ended" }),
    session("s2", { attention: null }),
    session("s3", { attention: "approval", agent: "mock-codex" }),
  ];
  const names = new Map([["s1", "Session 1"], ["s2", "Session 2"], ["s3", "Session 3"]]);
  it("lists the sessions that need the person, never the one looked at", () => {
    const all = A.taskPageEntries(rows, { task, names, lookingAt: null });
    assert.deepEqual(all.map((e) => [e.sessionId, e.kind]), [["s1", "turn_ended"], ["s3", "approval"]]);
    const shown = A.taskPageEntries(rows, { task, names, lookingAt: "s1" });
    assert.deepEqual(shown.map((e) => e.sessionId), ["s3"]);
    assert.equal(A.attentionMark(shown.length), "(1) ");
    assert.equal(A.attentionMark(0), "");
    assert.equal(A.badgeText(2), "2 sessions need you");
    assert.equal(A.badgeText(1), "1 session needs you");
  });
  it("names the task and the agent in the tooltip", () => {
    const [ended, asking] = A.taskPageEntries(rows, { task, names, lookingAt: null });
    assert.equal(A.tooltipLine(ended), "Fix the build · mock: finished its turn");
    assert.equal(A.tooltipLine(asking), "Fix the build · mock-codex: asks for your approval");
    assert.deepEqual(A.notificationText(ended), { title: "Session 1 finished its turn", body: "Task: Fix the build" });
  });
  it("reads the task list's attention_sessions", () => {
    const tasks = [{ id: "t1", title: "One", attention_sessions: [{ session_id: "a", attention: "failed", agent: "claude", title: null }] }, { id: "t2", title: "Two" }];
    const entries = A.taskListEntries(tasks);
    assert.deepEqual(entries.map((e) => [e.sessionId, e.taskId, e.kind]), [["a", "t1", "failed"]]);
    assert.equal(A.tooltipLine(entries[0]), "One · claude: failed");
  });
  it("announces only what is new, and not for the session looked at", () => {
    const all = A.taskPageEntries(rows, { task, names, lookingAt: null });
    assert.deepEqual(A.newAttention({ s1: "turn_ended" }, all).map((e) => e.sessionId), ["s3"]);
    assert.deepEqual(A.newAttention({}, all, "s3").map((e) => e.sessionId), ["s1"]);
    assert.deepEqual(A.newAttention(A.kindsOf(all), all), []);
    assert.ok(A.clearedBySeeing("turn_ended") && A.clearedBySeeing("failed"));
    assert.ok(!A.clearedBySeeing("approval") && !A.clearedBySeeing(null));
  });
});

describe("a session whose agent did not start", async () => {
  const F = await import("../../web/static/failed-start.js");
  const failure = { id: "m1", session_id: "s1", turn_id: null, role: "system", kind: "status", content: "agent 'claude' failed to start: Authentication required", metadata: { variant: "error", start_failed: true }, created_at: "x" };
  it("says its reason once: the header, not a pill per attempt", () => {
    const row = session("s1", { state: "FAILED" });
    assert.deepEqual(F.withoutRepeatedFailure([failure, { ...failure, id: "m2" }], row), []);
    const started = session("s1", { state: "WAITING_FOR_INPUT" });
    assert.equal(F.withoutRepeatedFailure([failure], started).length, 1);
  });
  it("turns Send off for that session only", () => {
    const view = { sendDisabled: false, note: null, error: "Could not send." };
    const off = F.failedComposerView(view, session("s1", { state: "FAILED" }));
    assert.equal(off.sendDisabled, true);
    assert.equal(off.error, null);
    assert.match(off.note, /did not start/);
    assert.equal(F.failedComposerView(view, session("s1", { state: "WAITING_FOR_INPUT" })), view);
  });
  it("says what to do: the login first when the agent asks for one", () => {
    assert.ok(F.needsLogin("Authentication required"));
    assert.ok(F.needsLogin("ANTHROPIC_API_KEY is not set"));
    assert.ok(F.needsLogin("Not logged in. Please run codex login"));
    assert.ok(!F.needsLogin("its command 'claude-agent-acp' was not found"));
    const help = F.agentHelp("claude", failure.content);
    assert.equal(help.title, "claude needs you to log in");
    assert.match(help.steps[0], /claude, then \/login/);
    assert.match(help.doc, /docs\/agents.md, “Claude”/);
    const custom = F.agentHelp("broken", "its command 'x' was not found");
    assert.equal(custom.title, "How to set up broken");
    assert.ok(custom.steps.some((s) => s.includes("[agents.broken]") && s.includes("turnvisor.toml")));
    assert.equal(F.startFailure([failure, { ...failure, id: "m3", metadata: {} }]).id, "m1");
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
  it("shows failed sessions, and what no page has shown yet", () => {
    const ended = [{ session_id: "a", attention: "turn_ended", agent: "mock", title: null }];
    assert.equal(L.taskStatus({ session_count: 1, attention_sessions: ended }).label, "Turn ended");
    assert.equal(L.taskStatus({ session_count: 2, attention_sessions: [...ended, { ...ended[0], session_id: "b", attention: "failed" }] }).label, "Failed");
    assert.equal(L.taskStatus({ session_count: 3, failed_count: 1 }).label, "3 sessions · 1 failed");
    assert.equal(L.taskStatus({ session_count: 1, running_count: 1, attention_sessions: ended }).label, "Running");
  });
  it("takes the backend's attention from session.attention, and says a turn failed unfollowed", () => {
    let s = S.setConnection(S.hydrate(boot([session("s1"), session("s2", { state: "WAITING_FOR_INPUT" })])), "open");
    s = S.applyNotification(s, "session.attention", { session_id: "s2", task_id: "task-1", needs_approval: false, cancelling: false, attention: "failed" }, 1);
    assert.equal(s.sessions.s2.attention, "failed");
    assert.equal(sessionStatus(s, "s2").label, "Last turn failed");
    s = S.applyNotification(s, "session.attention", { session_id: "s2", attention: null }, 1);
    assert.equal(s.sessions.s2.attention, null);
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
