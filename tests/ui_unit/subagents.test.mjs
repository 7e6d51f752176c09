// Unit tests of the subagent rows' state rules (web/static/subagents-state.js):
// run with `node --test tests/ui_unit/`.

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import * as SA from "../../web/static/subagents-state.js";

const sub = (id, state = "running", turn = "t1", cancellable = state === "running") => ({ id, title: `Sub ${id}`, state, cancellable, turn_id: turn });
const page = (row) => ({ sessions: { s: { id: "s", state: "RUNNING", current_turn_id: "t1", subagents: [], ...row } } });

describe("subagents", () => {
  it("shows the running turn's children, each with its own Stop while it can be stopped", () => {
    const state = page({ subagents: [sub("a"), sub("b", "requires_action", "t1", true), sub("c", "running", "t1", false)] });
    const rows = SA.subagentRows(state, "s");
    assert.deepEqual(rows.map((r) => [r.id, r.label, r.canStop]), [
      ["a", "Running", true], ["b", "Waiting for approval", true], ["c", "Running", false]]);
    // Offline: nothing can be sent, no Stop works.
    assert.ok(SA.subagentRows(state, "s", { offline: true }).every((r) => !r.canStop));
  });

  it("keeps a stopped child in the running turn's rows, without a Stop", () => {
    const state = page({ subagents: [sub("a", "cancelled"), sub("b")] });
    assert.deepEqual(SA.subagentRows(state, "s").map((r) => [r.id, r.label, r.canStop]), [
      ["a", "Stopped", false], ["b", "Running", true]]);
  });

  it("after the turn shows only children still working", () => {
    const state = page({ state: "WAITING_FOR_INPUT", current_turn_id: null, subagents: [sub("a", "completed"), sub("b")] });
    assert.deepEqual(SA.subagentRows(state, "s").map((r) => r.id), ["b"]);
    assert.deepEqual(SA.subagentRows(page({}), "s"), []);
    assert.deepEqual(SA.subagentRows(page({}), null), []);
  });

  it("marks a child stopping at once, and only a working one", () => {
    let state = page({ subagents: [sub("a"), sub("b", "completed")] });
    state = SA.markStopping(state, "s", "a");
    state = SA.markStopping(state, "s", "b");
    const [a, b] = state.sessions.s.subagents;
    assert.deepEqual([a.state, a.cancellable, b.state], ["cancelling", false, "completed"]);
    assert.deepEqual(SA.subagentRows(state, "s").map((r) => [r.label, r.canStop]), [["Stopping…", false], ["Done", false]]);
  });

  it("folds session.subagent.changed in place, appends new children, and a new turn drops ended ones", () => {
    let state = page({ subagents: [sub("a"), sub("b")] });
    state = SA.applySubagentChanged(state, { session_id: "s", subagent: sub("a", "cancelled") });
    assert.deepEqual(state.sessions.s.subagents.map((s) => [s.id, s.state]), [["a", "cancelled"], ["b", "running"]]);
    state = SA.applySubagentChanged(state, { session_id: "s", subagent: sub("c", "running", "t2") });
    assert.deepEqual(state.sessions.s.subagents.map((s) => s.id), ["b", "c"]);
    // Unknown sessions and malformed payloads change nothing.
    assert.equal(SA.applySubagentChanged(state, { session_id: "x", subagent: sub("d") }), state);
    assert.equal(SA.applySubagentChanged(state, { session_id: "s" }), state);
  });
  it("says what each child was asked and, while it works, what it does now", () => {
    const state = page({ subagents: [
      { ...sub("a"), task: "Find the flaky test", last_activity: "Read notes.txt" },
      { ...sub("b", "cancelled"), task: "", last_activity: "…half a sentence" },
    ] });
    assert.deepEqual(SA.subagentRows(state, "s").map((r) => [r.task, r.activity]), [
      ["Find the flaky test", "Read notes.txt"], ["", ""]]);
  });

  it("words a child's trace by how it ended, with its output and tools", () => {
    const trace = (meta) => SA.traceView({ kind: "subagent", content: "Sub a", metadata: meta });
    const stopped = trace({ title: "Sub a", outcome: "stopped_by_you", output: "chunk0 ", tools: ["cat a.txt"], tools_more: 2 });
    assert.deepEqual([stopped.title, stopped.words, stopped.output, stopped.tools, stopped.toolsMore, stopped.empty],
      ["Sub a", "stopped by you", "chunk0 ", ["cat a.txt"], 2, false]);
    assert.equal(trace({ outcome: "finished" }).words, "finished");
    assert.equal(trace({ outcome: "ran" }).words, "ran");
    // An older or foreign trace without metadata still reads as a line, and says it is empty.
    const bare = SA.traceView({ kind: "subagent", content: "Sub b", metadata: {} });
    assert.deepEqual([bare.title, bare.words, bare.empty], ["Sub b", "ran", true]);
  });
});
