// The words of a stop (DESIGN.md §18): the stop receipt's line under a stopped turn, and the
// stop-all question and summary. Pure functions, tested under node (tests/ui_unit/stop.test.mjs);
// stop-receipt.js and stop-all.js draw them.

import { formatDuration } from "./status.js";

/** Said for a part of the receipt still being determined (the status message is updated). */
export const UNKNOWN = "…";

function count(list) {
  return Array.isArray(list) ? list.length : 0;
}

function plural(n, one, many) {
  return `${n} ${n === 1 ? one : many}`;
}

// Who stopped it, when not the person's own Stop (which needs no words).
const BY_WORDS = { stop_all: " (Stop all)", interrupt: " (Ctrl-C)", permission: " (at a permission request)", offline: " (by its host: no Turnvisor connected)" };

/** "Stopped in 13 ms", "Stopped after the step in 2.1 s", "Stopped by force in 6.0 s (Stop all)". */
function leadText(receipt) {
  const forced = receipt.outcome === "escalated";
  const head = forced ? "Stopped by force" : receipt.when === "after_step" ? "Stopped after the step" : "Stopped";
  const ms = receipt.confirmed_ms;
  const time = typeof ms === "number" && Number.isFinite(ms) && ms >= 0 ? ` in ${formatDuration(ms)}` : "";
  return `${head}${time}${BY_WORDS[receipt.by] ?? ""}`;
}

/**
 * The subagents the receipt says still run, less those it also counts stopped (a child still
 * stopping at the close is in both) and those the page has since seen end (`ended`: ids).
 */
export function stillRunning(receipt, ended = []) {
  const gone = new Set([...(receipt?.subagents?.stopped ?? []), ...ended]);
  return (receipt?.subagents?.running ?? []).filter((id) => !gone.has(id));
}

/**
 * The receipt's parts, in reading order: [{key, text, action}]; `action` names what the card
 * offers beside the part ("undo", "resume", "subagents", "strays"), null when nothing. A part
 * with nothing to tell (0 of it) is left out; one still being determined (null) reads "…".
 * `ended`: ids of subagents the page has seen end since (no longer "still running").
 */
export function receiptParts(receipt, { ended = [] } = {}) {
  if (!receipt || typeof receipt !== "object") return [];
  const parts = [{ key: "stopped", text: leadText(receipt), action: null }];
  // DESIGN.md §20: the stop was held while the agent's host did not answer, then sent.
  const held = receipt.link_down_ms;
  if (typeof held === "number" && Number.isFinite(held) && held >= 0) parts.push({ key: "held", text: `held ${formatDuration(held)} for the agent's host`, action: null });
  const cancelled = count(receipt.tool_calls?.cancelled);
  const finished = count(receipt.tool_calls?.finished);
  if (receipt.when === "after_step" && finished > 0) parts.push({ key: "finished", text: `${plural(finished, "tool call", "tool calls")} finished`, action: null });
  if (cancelled > 0) parts.push({ key: "cancelled", text: `${plural(cancelled, "tool call", "tool calls")} cancelled`, action: null });
  const stopped = count(receipt.subagents?.stopped);
  const running = stillRunning(receipt, ended).length;
  if (stopped > 0) parts.push({ key: "subagents-stopped", text: `${plural(stopped, "subagent", "subagents")} stopped`, action: null });
  if (running > 0) parts.push({ key: "subagents-running", text: `${plural(running, "subagent", "subagents")} still running`, action: "subagents" });
  const files = receipt.files_changed;
  // A complete receipt's unknowns stay unknown (no checkpoint of the turn; an executor that
  // cannot see the agent's processes): they go unsaid rather than read "…" for ever.
  const determined = receipt.complete === true || Array.isArray(receipt.strays);
  if ((files === null || files === undefined) && !determined) parts.push({ key: "files", text: `Files ${UNKNOWN}`, action: null });
  else if (files > 0) parts.push({ key: "files", text: `${plural(files, "file", "files")} changed`, action: receipt.revertible ? "undo" : null });
  const parked = Number(receipt.queue_parked) || 0;
  if (parked > 0) parts.push({ key: "queued", text: `${parked} queued`, action: "resume" });
  const strays = receipt.strays;
  if ((strays === null || strays === undefined) && receipt.complete !== true) parts.push({ key: "strays", text: `Processes ${UNKNOWN}`, action: null });
  else if (Array.isArray(strays) && strays.length > 0) parts.push({ key: "strays", text: `${plural(strays.length, "process", "processes")} still running`, action: "strays" });
  return parts;
}

/** The receipt in one line: "Stopped in 13 ms · 2 tool calls cancelled · 3 files changed · 2 queued". */
export function receiptLine(receipt) {
  return receiptParts(receipt).map((p) => p.text).join(" · ");
}

/** What session.kill_strays did: "Ended 2 processes", and what would not end. */
export function killedText(answer) {
  const killed = count(answer?.killed);
  const left = count(answer?.remaining);
  const ended = killed > 0 ? `Ended ${plural(killed, "process", "processes")}` : "No process was ended";
  return left > 0 ? `${ended}; ${left} still running` : ended;
}

/** How many turns run in the workspace, from the task list's counts. */
export function runningTurns(tasks) {
  let n = 0;
  for (const t of Array.isArray(tasks) ? tasks : []) n += Math.max(0, Number(t?.running_count) || 0);
  return n;
}

/** The stop-all confirmation's question: "Stop 3 running turns?". */
export function stopAllQuestion(n) {
  return `Stop ${plural(n, "running turn", "running turns")}?`;
}

/** After workspace.stop_all: "Stopped 3 turns", and the processes any of them left running. */
export function stopAllSummary(answer) {
  const sessions = Array.isArray(answer?.sessions) ? answer.sessions : [];
  if (sessions.length === 0) return "Nothing was running";
  const strays = sessions.reduce((n, s) => n + count(s?.receipt?.strays), 0);
  const head = `Stopped ${plural(sessions.length, "turn", "turns")}`;
  return strays > 0 ? `${head} · ${plural(strays, "process", "processes")} still running` : head;
}
