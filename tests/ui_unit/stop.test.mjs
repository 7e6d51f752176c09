// Unit tests of issue 42's page rules (DESIGN.md §18): stop after this step in state.js (the
// cancel control joins the waiting stop as a stop now, a reload shows the DTO's progress), the
// header's words (status.js), and the receipt's and stop-all's words (stop-text.js).

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import * as S from "../../web/static/state.js";
import { sessionStatus } from "../../web/static/status.js";
import {
  killedText,
  receiptLine,
  receiptParts,
  runningTurns,
  stillRunning,
  stopAllQuestion,
  stopAllSummary,
} from "../../web/static/stop-text.js";
import { boot, session } from "./fixtures.mjs";

function running(extra = {}) {
  return S.setConnection(S.hydrate(boot([session("a", extra)])), "open");
}

/** The page asked for a stop after the step and the backend took it (pending, phase after_step). */
function waiting() {
  let s = S.beginCancel(running({ current_turn_id: "t1" }), "a", "r1", 1, "after_step").state;
  s = S.applyNotification(s, "session.cancellation_changed", { session_id: "a", cancellation_pending: true, cancellation_revision: 1 }, 1);
  return S.applyNotification(s, "session.cancel.progress", { session_id: "a", turn_id: "t1", phase: "after_step", tool_call_ids: ["c1"], title: "Run the tests" }, 1);
}

describe("stop after this step", () => {
  it("keeps the cancel control live as a stop now, naming the running tool", () => {
    const view = S.cancelControlView(waiting(), "a");
    assert.equal(view.pending, true);
    assert.equal(view.disabled, false);
    assert.equal(view.label, "Stop now");
    assert.equal(view.note, "Stopping after this step… (Run the tests)");
  });

  it("says so in the header", () => {
    assert.equal(sessionStatus(waiting(), "a").label, "Stopping after this step");
  });

  it("lets a stop now join the waiting stop once, then disables the control", () => {
    const joined = S.beginCancel(waiting(), "a", "r2", 1);
    assert.equal(joined.send, true);
    assert.equal(joined.state.cancelRequests.a.when, "now");
    const view = S.cancelControlView(joined.state, "a");
    assert.equal(view.disabled, true);
    assert.equal(view.label, S.CANCELLING_LABEL);
    assert.equal(view.note, null);
    assert.equal(S.beginCancel(joined.state, "a", "r3", 1).send, false, "a second stop now is a duplicate");
  });

  it("does not start a second stop after the step while one waits", () => {
    assert.equal(S.beginCancel(waiting(), "a", "r2", 1, "after_step").send, false);
  });

  it("treats a plain pending cancel as before: no join, control disabled", () => {
    let s = S.beginCancel(running(), "a", "r1", 1).state;
    s = S.applyNotification(s, "session.cancel.progress", { session_id: "a", phase: "sent" }, 1);
    assert.equal(S.waitsForStep(s, "a"), false);
    assert.equal(S.cancelControlView(s, "a").disabled, true);
    assert.equal(S.beginCancel(s, "a", "r2", 1).send, false);
  });

  it("shows the wait after a reload from the session DTO's cancel_progress", () => {
    const s = running({ current_turn_id: "t1", cancellation_pending: true, cancellation_revision: 3, cancel_progress: { turn_id: "t1", phase: "after_step", tool_call_ids: ["c1"], title: "Build" } });
    assert.equal(S.waitsForStep(s, "a"), true);
    assert.equal(S.cancelControlView(s, "a").note, "Stopping after this step… (Build)");
  });

  it("ignores a DTO progress of another turn, and forgets it when the cancel settles", () => {
    const other = running({ current_turn_id: "t2", cancellation_pending: true, cancellation_revision: 3, cancel_progress: { turn_id: "t1", phase: "after_step" } });
    assert.equal(S.waitsForStep(other, "a"), false);
    const settled = S.applyNotification(waiting(), "session.cancellation_changed", { session_id: "a", cancellation_pending: false, cancellation_revision: 2 }, 1);
    assert.equal(S.cancelProgressOf(settled, "a"), null);
    assert.equal(settled.cancelProgress.a, undefined);
    assert.equal(S.cancelControlView(settled, "a").note, null);
  });

  it("needs no title to say it waits", () => {
    assert.equal(S.afterStepNote({ phase: "after_step" }), "Stopping after this step…");
  });
});

const FULL = {
  turn_id: "t1", outcome: "cancelled", by: "user", when: "now", accepted_at: "2026-08-03T10:00:00Z",
  confirmed_ms: 13, tool_calls: { finished: ["c0"], cancelled: ["c1", "c2"] },
  subagents: { stopped: ["s1"], running: [] }, queue_parked: 2, files_changed: 3, revertible: true, strays: [],
};

describe("the receipt's words", () => {
  it("says what a stop did in one line", () => {
    assert.equal(receiptLine(FULL), "Stopped in 13 ms · 2 tool calls cancelled · 1 subagent stopped · 3 files changed · 2 queued");
  });

  it("offers Undo only when revertible, Resume only with a parked queue", () => {
    const actions = (r) => receiptParts(r).filter((p) => p.action).map((p) => p.action);
    assert.deepEqual(actions(FULL), ["undo", "resume"]);
    assert.deepEqual(actions({ ...FULL, revertible: false, queue_parked: 0 }), []);
  });

  it("reads the parts still being determined as …", () => {
    assert.equal(receiptLine({ ...FULL, files_changed: null, strays: null, queue_parked: 0, subagents: {}, tool_calls: {} }), "Stopped in 13 ms · Files … · Processes …");
  });

  it("leaves out files that cannot be known once the rest is determined", () => {
    assert.equal(receiptLine({ ...FULL, files_changed: null, strays: [], queue_parked: 0, subagents: {}, tool_calls: {} }), "Stopped in 13 ms");
  });

  it("counts the processes and subagents still running, each with its action", () => {
    const parts = receiptParts({ ...FULL, strays: [{ pid: 7, command: "sleep 60" }, { pid: 8, command: "tail -f x" }], subagents: { stopped: [], running: ["s2"] } });
    assert.deepEqual(parts.find((p) => p.key === "strays"), { key: "strays", text: "2 processes still running", action: "strays" });
    assert.deepEqual(parts.find((p) => p.key === "subagents-running"), { key: "subagents-running", text: "1 subagent still running", action: "subagents" });
  });

  it("does not say a subagent still runs once it is counted stopped or seen to end", () => {
    const r = { ...FULL, subagents: { stopped: ["s1"], running: ["s1", "s2", "s3"] } };
    assert.deepEqual(stillRunning(r), ["s2", "s3"]);
    assert.deepEqual(stillRunning(r, ["s3"]), ["s2"]);
    const texts = receiptParts(r, { ended: ["s2", "s3"] }).map((p) => p.text);
    assert.ok(texts.includes("1 subagent stopped"));
    assert.ok(!texts.some((t) => t.includes("still running")), texts);
  });

  it("tells a stop after the step, a forced one and who stopped it", () => {
    const after = { ...FULL, when: "after_step", confirmed_ms: 2100, tool_calls: { finished: ["c1"], cancelled: [] }, files_changed: 0, queue_parked: 0, subagents: {} };
    assert.equal(receiptLine(after), "Stopped after the step in 2.1 s · 1 tool call finished");
    assert.equal(receiptParts({ ...after, outcome: "escalated", by: "stop_all" })[0].text, "Stopped by force in 2.1 s (Stop all)");
    assert.equal(receiptParts({ ...after, confirmed_ms: null })[0].text, "Stopped after the step");
  });

  it("is empty for no receipt", () => {
    assert.deepEqual(receiptParts(null), []);
  });

  it("says what ending the processes did", () => {
    assert.equal(killedText({ killed: [7, 8], remaining: [] }), "Ended 2 processes");
    assert.equal(killedText({ killed: [7], remaining: [{ pid: 8, command: "x" }] }), "Ended 1 process; 1 still running");
    assert.equal(killedText({ killed: [], remaining: [] }), "No process was ended");
  });
});

describe("stop all's words", () => {
  it("counts the running turns of the task list", () => {
    assert.equal(runningTurns([{ running_count: 2 }, { running_count: 0 }, { running_count: 1 }, {}]), 3);
    assert.equal(runningTurns(undefined), 0);
  });

  it("asks and sums up", () => {
    assert.equal(stopAllQuestion(3), "Stop 3 running turns?");
    assert.equal(stopAllQuestion(1), "Stop 1 running turn?");
    const receipt = (strays) => ({ session_id: "a", turn_id: "t", receipt: { ...FULL, strays } });
    assert.equal(stopAllSummary({ sessions: [receipt([]), receipt([]), receipt(null)] }), "Stopped 3 turns");
    assert.equal(stopAllSummary({ sessions: [receipt([{ pid: 1, command: "x" }])] }), "Stopped 1 turn · 1 process still running");
    assert.equal(stopAllSummary({ sessions: [] }), "Nothing was running");
  });
});

describe("a complete receipt", () => {
  it("leaves its unknowns unsaid", async () => {
  const { receiptParts } = await import("../../web/static/stop-text.js");
  const base = { outcome: "cancelled", when: "now", confirmed_ms: 12, tool_calls: { finished: [], cancelled: [] },
                 subagents: { stopped: [], running: [] }, queue_parked: 0, revertible: false,
                 files_changed: null, strays: null };
  const pending = receiptParts({ ...base, complete: false }).map((p) => p.key);
  assert.ok(pending.includes("files") && pending.includes("strays"), pending);
  const done = receiptParts({ ...base, complete: true }).map((p) => p.key);
  assert.ok(!done.includes("files") && !done.includes("strays"), done);
  });
});
