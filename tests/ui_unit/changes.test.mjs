// Unit tests of a turn's changes and the project picker's paths (web/static/turn-changes-state.js):
// run with `node --test tests/ui_unit/`.

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import * as C from "../../web/static/turn-changes-state.js";

const msg = (id, turn, role = "agent") => ({ id, session_id: "s", turn_id: turn, role, kind: "text", content: id, metadata: {} });
const file = (path, additions = 1, deletions = 0) => ({ path, status: "modified", additions, deletions });

describe("turn changes", () => {
  it("puts a card after the last message of a turn that changed files", () => {
    let known = C.applyTurnChanges({}, { session_id: "s", turn_id: "t1", files: [file("a.txt")], skipped: [] });
    known = C.markProbed(known, "s", "t2");
    const messages = [msg("u1", "t1", "user"), msg("a1", "t1"), msg("u2", "t2", "user"), msg("a2", "t2")];
    const shown = C.withChangeCards(messages, "s", known.s);
    assert.deepEqual(shown.map((m) => m.id), ["u1", "a1", "turn-changes-t1", "u2", "a2"]);
    assert.equal(shown[2].kind, "turn_changes");
    assert.deepEqual(shown[2].metadata.files, [file("a.txt")]);
    // The same entry gives the same card object: the message list keeps its row.
    assert.equal(C.withChangeCards(messages, "s", known.s)[2], shown[2]);
  });

  it("shows a turn with changes but no message yet at the end, and none for an empty list", () => {
    const known = C.applyTurnChanges({}, { session_id: "s", turn_id: "t9", files: [file("b")] });
    assert.deepEqual(C.withChangeCards([msg("u1", "t1")], "s", known.s).map((m) => m.id), ["u1", "turn-changes-t9"]);
    const none = C.applyTurnChanges({}, { session_id: "s", turn_id: "t1", files: [] });
    assert.deepEqual(C.withChangeCards([msg("u1", "t1")], "s", none.s).map((m) => m.id), ["u1"]);
  });

  it("ignores a payload without ids or files", () => {
    assert.deepEqual(C.applyTurnChanges({}, { session_id: "s" }), {});
    assert.deepEqual(C.applyTurnChanges({}, { session_id: "s", turn_id: "t", files: "x" }), {});
  });

  it("probes the latest ended turns not known yet, never the running one", () => {
    const messages = [];
    for (let i = 1; i <= 12; i += 1) messages.push(msg(`m${i}`, `t${i}`));
    const known = C.markProbed({}, "s", "t11");
    // The last ten ended turns are t2..t11; t11 was asked already.
    assert.deepEqual(C.turnsToProbe(messages, known.s, "t12"), ["t2", "t3", "t4", "t5", "t6", "t7", "t8", "t9", "t10"]);
    assert.ok(!C.turnsToProbe(messages, known.s, null).includes("t11"));
  });

  it("lists the later turns with changes a revert takes along", () => {
    let known = {};
    for (const t of ["t1", "t3"]) known = C.applyTurnChanges(known, { session_id: "s", turn_id: t, files: [file("x")] });
    known = C.markProbed(known, "s", "t2");
    const messages = [msg("a", "t1"), msg("b", "t2"), msg("c", "t3")];
    assert.deepEqual(C.laterChangedTurns(messages, known.s, "t1"), ["t3"]);
    assert.deepEqual(C.laterChangedTurns(messages, known.s, "t3"), []);
    assert.deepEqual(C.laterChangedTurns(messages, known.s, "nope"), []);
  });

  it("sums up a revert: the files put back and the later turns that go", () => {
    let known = {};
    known = C.applyTurnChanges(known, { session_id: "s", turn_id: "t1", files: [file("a.txt"), file("b.txt")] });
    known = C.markProbed(known, "s", "t2");
    known = C.applyTurnChanges(known, { session_id: "s", turn_id: "t3", files: [file("b.txt"), file("c.txt")] });
    const messages = [msg("a", "t1"), msg("b", "t2"), msg("c", "t3")];
    assert.deepEqual(C.revertSummary(messages, known.s, "t1"), { later: 1, paths: ["a.txt", "b.txt", "c.txt"], more: 0 });
    assert.deepEqual(C.revertSummary(messages, known.s, "t3"), { later: 0, paths: ["b.txt", "c.txt"], more: 0 });
    assert.deepEqual(C.revertSummary(messages, known.s, "nope"), { later: 0, paths: [], more: 0 });
    assert.deepEqual(C.revertSummary(messages, undefined, "t1"), { later: 0, paths: [], more: 0 });
  });

  it("names ten files of a big revert and counts the rest", () => {
    let many = {};
    many = C.applyTurnChanges(many, { session_id: "s", turn_id: "t1", files: Array.from({ length: 12 }, (_, i) => file(`f${i}`)) });
    many = C.applyTurnChanges(many, { session_id: "s", turn_id: "t2", files: [file("f0"), file("g")] });
    const summary = C.revertSummary([msg("a", "t1"), msg("b", "t2")], many.s, "t1");
    assert.equal(C.REVERT_NAMED, 10);
    assert.deepEqual(summary.paths, Array.from({ length: 10 }, (_, i) => `f${i}`));
    assert.equal(summary.more, 3, "f10, f11 and g; f0 counted once");
    assert.equal(summary.later, 1);
    const ten = C.applyTurnChanges({}, { session_id: "s", turn_id: "t1", files: Array.from({ length: 10 }, (_, i) => file(`f${i}`)) });
    assert.equal(C.revertSummary([msg("a", "t1")], ten.s, "t1").more, 0);
  });

  it("adds up a file list's lines", () => {
    assert.deepEqual(C.totals([file("a", 2, 1), file("b", 3, 0)]), { additions: 5, deletions: 1 });
  });
});

describe("project paths", () => {
  const roots = ["/srv/code", "/home/me/"];
  it("goes up inside a root and stops at it", () => {
    assert.equal(C.parentWithin("/srv/code/app/src", roots), "/srv/code/app");
    assert.equal(C.parentWithin("/srv/code/app", roots), "/srv/code");
    assert.equal(C.parentWithin("/srv/code", roots), null);
    assert.equal(C.parentWithin("/home/me", roots), null);
    assert.equal(C.parentWithin("/srv/codex/x", roots), null, "a sibling with the root's prefix is outside");
  });
  it("joins a child's name", () => {
    assert.equal(C.childPath("/srv/code/", "app"), "/srv/code/app");
  });
});

describe("reverts and the workplace", () => {
  it("marks reverted turns with a new entry object (a redrawn card)", () => {
    const known = C.applyTurnChanges({}, { session_id: "s", turn_id: "t1", files: [file("a")] });
    const next = C.markReverted(known, "s", ["t1", "t7"]);
    assert.equal(next.s.t1.reverted, true);
    assert.notEqual(next.s.t1, known.s.t1);
    assert.ok(!("t7" in next.s));
    assert.equal(C.markReverted({}, "s", ["t1"]).s, undefined);
  });
  it("names the worktree and branch first, then the cwd, then the task's project", () => {
    const task = { project_dir: "/p" };
    assert.deepEqual(C.workplace({ cwd: "/w", worktree: { path: "/w", branch: "tv/x" } }, task), { path: "/w", branch: "tv/x" });
    assert.deepEqual(C.workplace({ cwd: "/p" }, task), { path: "/p", branch: null });
    assert.deepEqual(C.workplace({ cwd: null }, task), { path: "/p", branch: null });
    assert.equal(C.workplace(null, {}), null);
  });
});

describe("the session's changes view", () => {
  it("cuts one file's part out of a multi-file diff", async () => {
    const { fileSection } = await import("../../web/static/changes-view.js");
    const a = "diff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-x\n+y\n";
    const b = "diff --git a/dir/b.txt b/dir/b.txt\nnew file mode 100644\n--- /dev/null\n+++ b/dir/b.txt\n@@ -0,0 +1 @@\n+z\n";
    assert.equal(fileSection(a + b, "dir/b.txt"), b);
    assert.equal(fileSection(a + b, "a.txt"), a);
    assert.equal(fileSection(a + b, "b.txt"), "", "a suffix of another path is not that file");
    assert.equal(fileSection("", "a.txt"), "");
  });
});
