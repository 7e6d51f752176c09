// Unit tests of what the page says (web/static/status.js), the offline rules of state.js, line
// diffs (diff.js), tool-call card contents (tool-card.js) and the Markdown block split.

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { diffStats, lineDiff, unifiedLines, withContext } from "../../web/static/diff.js";
import { splitBlocks } from "../../web/static/markdown.js";
import * as S from "../../web/static/state.js";
import {
  agentOptions,
  formatDuration,
  humanizeError,
  preferredAgent,
  secondsUntil,
  sessionStatus,
  titleMark,
} from "../../web/static/status.js";
import { permissionOutcome, toolView } from "../../web/static/tool-card.js";

const T = "task-1";
function row(id, extra = {}) {
  return {
    id, task_id: T, state: "RUNNING", agent: "mock", created_at: "2026-08-03T10:00:00Z",
    updated_at: "2026-08-03T10:00:00Z", cancellation_pending: false, cancellation_revision: 0, ...extra,
  };
}
function withSession(dto, messages = []) {
  const s = S.hydrate({ page: "task", task: { id: T, title: "t" }, sessions: [dto], selected_session_id: dto.id, messages });
  return S.setConnection(s, "open");
}
const msg = (id, role, kind, content, metadata = {}) => ({ id, session_id: "s1", role, kind, content, metadata, created_at: "2026-08-03T10:00:00Z" });

describe("sessionStatus", () => {
  it("says Running for a plain running turn", () => {
    assert.equal(sessionStatus(withSession(row("s1")), "s1").label, "Running");
  });
  it("says Needs approval while a permission waits", () => {
    const s = withSession(row("s1"), [msg("m1", "agent", "permission", "Write", { status: "pending", request_id: "r" })]);
    const st = sessionStatus(s, "s1");
    assert.equal(st.key, "approval");
    assert.equal(st.label, "Needs approval");
    assert.equal(titleMark(s), "(!) ");
  });
  it("says Cancelling while a cancel is pending, and Stopping once the agent is late", () => {
    let s = withSession(row("s1", { cancellation_pending: true, cancellation_revision: 1 }));
    assert.equal(sessionStatus(s, "s1").label, "Cancelling");
    s = S.applyNotification(s, "session.cancel.progress", { session_id: "s1", phase: "late" }, 1);
    assert.equal(sessionStatus(s, "s1").label, "Stopping an unresponsive agent");
    s = S.applyNotification(s, "session.cancellation_changed", { session_id: "s1", cancellation_pending: false, cancellation_revision: 2 }, 1);
    assert.equal(sessionStatus(s, "s1").label, "Running");
    assert.deepEqual(s.cancelPhases, {});
  });
  it("ignores a progress phase with no pending cancel", () => {
    const s = S.applyNotification(withSession(row("s1")), "session.cancel.progress", { session_id: "s1", phase: "late" }, 1);
    assert.deepEqual(s.cancelPhases, {});
  });
  it("shows a crash as an error with a sentence, not errno text", () => {
    const s = withSession(row("s1", { state: "WAITING_FOR_INPUT" }), [
      msg("m1", "user", "text", "/crash"),
      msg("m2", "system", "status", "Agent error: agent exited (status 1)", { variant: "error" }),
    ]);
    const st = sessionStatus(s, "s1");
    assert.equal(st.tone, "error");
    assert.equal(st.reason, "The agent stopped unexpectedly (exit status 1).");
  });
  it("is Waiting for input again once a later prompt follows the error", () => {
    const s = withSession(row("s1", { state: "WAITING_FOR_INPUT" }), [
      msg("m1", "system", "status", "Agent error: x", { variant: "error" }),
      msg("m2", "user", "text", "again"),
      msg("m3", "agent", "text", "fine"),
    ]);
    assert.equal(sessionStatus(s, "s1").label, "Waiting for input");
  });
  it("gives Failed its reason", () => {
    const s = withSession(row("s1", { state: "FAILED" }), [
      msg("m1", "system", "status", "Agent error: [Errno 2] No such file or directory: 'claude-agent-acp'", { variant: "error" }),
    ]);
    const st = sessionStatus(s, "s1");
    assert.equal(st.label, "Failed");
    assert.match(st.reason, /"claude-agent-acp" is not installed/);
  });
  it("marks the tab title while anything runs", () => {
    assert.equal(titleMark(withSession(row("s1"))), "● ");
    assert.equal(titleMark(withSession(row("s1", { state: "WAITING_FOR_INPUT" }))), "");
  });
});

describe("humanizeError", () => {
  it("turns errno text into sentences", () => {
    assert.equal(humanizeError("[Errno 2] No such file or directory: 'gemini'"), 'The agent program "gemini" is not installed (it was not found on this machine).');
    assert.equal(humanizeError("agent closed its output"), "The agent stopped answering (it closed its output).");
    assert.equal(humanizeError("no running agent"), "No running agent.");
    assert.equal(humanizeError(""), null);
  });
});

describe("offline", () => {
  it("disables the controls that need the server and drops the optimistic flag", () => {
    let s = withSession(row("s1"));
    const begun = S.beginCancel(s, "s1", "c1", 1);
    assert.equal(begun.send, true);
    s = S.setConnection(begun.state, "reconnecting");
    assert.equal(S.isOffline(s), true);
    assert.equal(S.effectiveCancelPending(s, "s1"), false);
    const view = S.composerView(s);
    assert.equal(view.sendDisabled, true);
    assert.equal(view.cancel.disabled, true);
    assert.equal(view.cancel.pending, false);
    // The abandoned request's DISCONNECTED answer leaves no error behind.
    s = S.settleCancel(s, "s1", "c1", { ok: false, error: "dropped" });
    assert.equal(S.composerView(s).error, null);
    // No new cancel can start offline.
    assert.equal(S.beginCancel(s, "s1", "c2", 1).send, false);
  });
  it("clears stale composer errors when the connection comes back", () => {
    let s = S.setComposerError(withSession(row("s1", { state: "WAITING_FOR_INPUT" })), "s1", "Could not send.");
    s = S.setConnection(s, "reconnecting");
    assert.equal(S.composerView(s).error, "Could not send.");
    s = S.setConnection(s, "open");
    assert.equal(S.composerView(s).error, null);
    assert.equal(S.composerView(s).sendDisabled, false);
  });
  it("keeps the first connect attempt online", () => {
    const s = S.hydrate({ page: "task", sessions: [row("s1")] });
    assert.equal(s.connection, "connecting");
    assert.equal(S.isOffline(s), false);
  });
  it("counts down to the next try", () => {
    assert.equal(secondsUntil(5_500, 1_000), 5);
    assert.equal(secondsUntil(500, 1_000), 0);
    assert.equal(secondsUntil(null, 1_000), null);
  });
});

describe("agents", () => {
  it("reads names with an availability map, or objects", () => {
    const opts = agentOptions(["claude", "mock"], { claude: { available: false, reason: "not installed" } });
    assert.deepEqual(opts, [
      { name: "claude", available: false, reason: "not installed" },
      { name: "mock", available: true, reason: null },
    ]);
    assert.deepEqual(agentOptions([{ name: "x", available: false, reason: "r" }]), [{ name: "x", available: false, reason: "r" }]);
  });
  it("prefers the remembered launchable agent, then the default", () => {
    const opts = agentOptions(["claude", "mock", "mock-codex"], { claude: { available: false, reason: "r" } });
    assert.equal(preferredAgent(opts, "mock-codex", "mock"), "mock-codex");
    assert.equal(preferredAgent(opts, "claude", "mock"), "mock");
    assert.equal(preferredAgent(opts, null, "claude"), "mock");
  });
});

describe("durations", () => {
  it("reads well", () => {
    assert.equal(formatDuration(850), "850 ms");
    assert.equal(formatDuration(4_200), "4.2 s");
    assert.equal(formatDuration(125_000), "2 min 5 s");
    assert.equal(formatDuration(null), "");
  });
});

describe("diffs", () => {
  it("finds the changed lines", () => {
    const d = lineDiff("a\nb\nc\n", "a\nB\nc\nd\n");
    assert.deepEqual(d, [
      { op: " ", text: "a" }, { op: "-", text: "b" }, { op: "+", text: "B" }, { op: " ", text: "c" }, { op: "+", text: "d" },
    ]);
    assert.deepEqual(diffStats(d), { added: 2, removed: 1 });
  });
  it("treats a new file as all added", () => {
    assert.deepEqual(lineDiff(null, "x\ny"), [{ op: "+", text: "x" }, { op: "+", text: "y" }]);
  });
  it("folds long unchanged runs", () => {
    const old = Array.from({ length: 20 }, (_, i) => `l${i}`).join("\n");
    const next = old.replace("l10", "L10");
    const shown = withContext(lineDiff(old, next), 2);
    assert.equal(shown[0].op, "…");
    assert.equal(shown.filter((l) => l.op === "-").length, 1);
    assert.equal(shown.at(-1).op, "…");
  });
  it("reads a unified diff", () => {
    const lines = unifiedLines("--- a/f\n+++ b/f\n@@ -1 +1 @@\n-old\n+new\n ctx\n");
    assert.deepEqual(lines.map((l) => l.op), ["h", "h", "@", "-", "+", " "]);
  });
});

describe("tool cards", () => {
  it("reads an ACP edit: input, diff, locations, duration", () => {
    const view = toolView({
      content: "Edit src/app.py",
      created_at: "2026-08-03T10:00:00.000Z",
      metadata: {
        tool_call_id: "t1", status: "completed", kind: "edit", finished_at: "2026-08-03T10:00:01.500Z",
        rawInput: { file_path: "src/app.py" },
        content: [{ type: "diff", path: "src/app.py", oldText: "a\n", newText: "b\n" }, { type: "content", content: { type: "text", text: "ok" } }],
        locations: [{ path: "src/app.py", line: 3 }],
      },
    });
    assert.equal(view.kindText, "Edit");
    assert.equal(view.statusText, "Done");
    assert.equal(view.durationMs, 1500);
    assert.match(view.input, /file_path/);
    assert.equal(view.output, "ok");
    assert.equal(view.diffs[0].added, 1);
    assert.deepEqual(view.locations, ["src/app.py:3"]);
  });
  it("reads a Codex command and file change", () => {
    const cmd = toolView({ content: "ls", metadata: { status: "failed", kind: "execute", command: "ls", aggregatedOutput: "boom", exitCode: 2, durationMs: 40 } });
    assert.equal(cmd.input, "ls");
    assert.match(cmd.output, /boom/);
    assert.match(cmd.output, /exit code 2/);
    assert.equal(cmd.durationMs, 40);
    const fc = toolView({ content: "fileChange", metadata: { status: "completed", kind: "other", changes: [{ path: "a.txt", kind: { type: "add" }, diff: "+hi\n" }] } });
    assert.equal(fc.title, "Edit a.txt");
    assert.equal(fc.diffs[0].created, true);
  });
  it("words a settled permission", () => {
    const options = [{ option_id: "a", kind: "allow_once", name: "Allow" }, { option_id: "r", kind: "reject_once", name: "Reject" }];
    assert.equal(permissionOutcome({ status: "selected", option_id: "a", options }), "Allowed");
    assert.equal(permissionOutcome({ status: "selected", option_id: "r", options }), "Rejected");
    assert.equal(permissionOutcome({ status: "cancelled", options }), "Cancelled with the turn");
    assert.equal(permissionOutcome({ status: "pending", options }), null);
  });
});

describe("markdown blocks", () => {
  const doc = "# Title\n\nSome **bold**\nmore\n\n```py\nprint(1)\n```\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n- x\n- y\n\nlast";
  it("splits into complete blocks and one open block that add up to the source", () => {
    const { complete, open } = splitBlocks(doc);
    assert.equal(complete.length, 5);
    assert.equal(open, "last");
    assert.equal(complete.join("") + open, doc);
  });
  it("lexing on from a completed prefix, chunk by chunk, ends with the same blocks as one pass", () => {
    // What the live view does: complete blocks are kept, only the rest is lexed again.
    let prefix = "";
    const kept = [];
    for (let i = 1; i <= doc.length; i += 3) {
      const text = doc.slice(0, i);
      const { complete } = splitBlocks(text.slice(prefix.length));
      for (const b of complete) {
        kept.push(b);
        prefix += b;
      }
    }
    const rest = splitBlocks(doc.slice(prefix.length));
    assert.deepEqual([...kept, ...rest.complete, rest.open], [...splitBlocks(doc).complete, splitBlocks(doc).open]);
  });
});
