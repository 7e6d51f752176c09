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

  it("orders paths naturally: edit-2 before edit-10", () => {
    const files = ["edit-10.txt", "edit-1.txt", "edit-11.txt", "edit-2.txt", "B.txt", "a.txt"].map((p) => file(p));
    assert.deepEqual(C.sortFiles(files).map((f) => f.path), ["a.txt", "B.txt", "edit-1.txt", "edit-2.txt", "edit-10.txt", "edit-11.txt"]);
    assert.equal(files[0].path, "edit-10.txt", "a copy: the list given stays as it was");
  });

  it("puts a revert's undo after its status message, marked once a later revert undid it", () => {
    const status = (id, meta) => ({ id, session_id: "s", turn_id: null, role: "system", kind: "status", content: "Files restored to before this turn", metadata: { reverted: true, variant: "info", ...meta } });
    const messages = [msg("a", "t1"), status("r1", { turn_id: "t1", revert_id: "R1", kept_edits: ["a.txt"] })];
    let shown = C.withChangeCards(messages, "s", undefined);
    assert.deepEqual(shown.map((m) => m.id), ["a", "r1", "revert-undo-R1"]);
    assert.deepEqual(shown[2].metadata.undo, { revert_id: "R1", undone: false, kept: ["a.txt"] });
    assert.equal(C.withChangeCards(messages, "s", undefined)[2], shown[2], "the same card object");
    shown = C.withChangeCards([...messages, status("r2", { turn_id: "R1", revert_id: "R2", undo_of: "R1" })], "s", {});
    assert.deepEqual(shown.map((m) => m.id), ["a", "r1", "revert-undo-R1", "r2", "revert-undo-R2"]);
    assert.equal(shown[2].metadata.undo.undone, true);
    assert.equal(shown[4].metadata.undo.undone, false);
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
  it("names a session's own default folder for its task, never a bare uuid path", () => {
    const place = C.workplace({ id: "S1", cwd: null }, { title: "Fix it", workspace_id: "default", project_dir: null });
    assert.deepEqual(place, { path: null, under: "default/S1", branch: null, label: "Default work folder · Fix it" });
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
