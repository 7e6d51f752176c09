// What the page says about a session, an error or an agent, in words a person reads: pure
// functions over the state of state.js, tested under node (tests/ui_unit/status.test.mjs).

import { cancelProgressOf, effectiveCancelPending, RUNNING, waitsForStep } from "./state.js";

/**
 * Turns backend and OS error text into a sentence. Errno text ("[Errno 2] No such file or
 * directory: 'claude-agent-acp'") is what a launcher saw, not what the person needs to know.
 */
export function humanizeError(text) {
  if (text === null || text === undefined) return null;
  const raw = String(text).trim();
  if (!raw) return null;
  let m = /\[Errno 2\] No such file or directory: '([^']+)'/.exec(raw);
  if (m) return `The agent program "${m[1]}" is not installed (it was not found on this machine).`;
  m = /\[Errno 13\] Permission denied: '([^']+)'/.exec(raw);
  if (m) return `The agent program "${m[1]}" could not be started (permission denied).`;
  m = /agent exited \(status (-?\d+)\)/.exec(raw);
  if (m) return `The agent stopped unexpectedly (exit status ${m[1]}).`;
  if (/agent closed its output/.test(raw)) return "The agent stopped answering (it closed its output).";
  // Strip other errno prefixes, keep the rest; end with a full stop.
  const cleaned = raw.replace(/^\s*(Agent error:\s*)?\[Errno \d+\]\s*/, "").replace(/^Agent error:\s*/, "");
  const sentence = cleaned.charAt(0).toUpperCase() + cleaned.slice(1);
  return /[.!?]$/.test(sentence) ? sentence : `${sentence}.`;
}

function lastOf(list, predicate) {
  if (!Array.isArray(list)) return null;
  for (let i = list.length - 1; i >= 0; i -= 1) if (predicate(list[i])) return list[i];
  return null;
}

/** True if a permission card of the session still waits for an answer. */
export function hasPendingPermission(messages) {
  return Array.isArray(messages) && messages.some((m) => m.kind === "permission" && (m.metadata?.status ?? "pending") === "pending");
}

/**
 * The error status message that ended the latest turn, if it did end in an error: the last
 * status message of variant "error" with no user message after it.
 */
export function lastTurnError(messages) {
  const last = lastOf(messages, (m) => m.role === "user" || m.kind === "status");
  return last && last.kind === "status" && last.metadata?.variant === "error" ? last : null;
}

// DESIGN.md §10: the session's agent process is gone (idle stop, restart, crash); the
// conversation is kept and the next message starts a fresh process that restores it.
const ASLEEP = {
  key: "asleep",
  label: "Agent asleep",
  tone: "neutral",
  reason: "The agent process was stopped; your next message wakes it and restores the conversation.",
};

/**
 * {key, label, tone, reason}: what the header and the session list show for a session.
 * tone: "active" (working), "attention" (the person must act), "warning", "error", "ok", "neutral".
 * Messages are only known for followed sessions; the others show what their state says.
 */
export function sessionStatus(state, sessionId) {
  const row = sessionId ? state.sessions[sessionId] : undefined;
  if (!row) return null;
  const messages = state.messages[sessionId];
  const s = row.state;
  const live = s === RUNNING || s === "STARTING" || s === "CREATED" || s === "WAITING_FOR_INPUT";
  // A session this page does not follow hears its cancel only through `session.attention`.
  const cancelling = effectiveCancelPending(state, sessionId) ||
    (sessionId !== state.selectedSessionId && row.attention_cancelling === true && s === RUNNING);
  if (cancelling) {
    // The live phase, else the DTO's (a reload while a cancel is held).
    const phase = state.cancelPhases?.[sessionId] ?? cancelProgressOf(state, sessionId)?.phase;
    if (phase === "late" || phase === "escalated") return { key: "stopping", label: "Stopping an unresponsive agent", tone: "warning", reason: null };
    // DESIGN.md §20: the stop is held until the remote agent's host answers again.
    if (phase === "link_down") return { key: "unreachable", label: "Waiting for the agent's host", tone: "warning", reason: null };
    // DESIGN.md §18: the stop waits for the running tool call (the composer names it).
    if (waitsForStep(state, sessionId)) return { key: "cancelling", label: "Stopping after this step", tone: "warning", reason: null };
    return { key: "cancelling", label: "Cancelling", tone: "warning", reason: null };
  }
  // DESIGN.md §20: a remote agent whose host does not answer is not shown as running.
  if (row.reachable === false && live) return { key: "unreachable", label: "Host unreachable", tone: "warning", reason: null };
  // The selected session's messages are followed: they say whether a permission waits. Another
  // session's held messages stopped when the page left it, so `session.attention`
  // (needs_approval) speaks for it (a permission asked after it was left, issue 29).
  const followed = sessionId === state.selectedSessionId && Array.isArray(messages);
  const asking = followed
    ? hasPendingPermission(messages)
    : row.needs_approval === true || (typeof row.needs_approval !== "boolean" && hasPendingPermission(messages));
  if (live && asking) {
    return { key: "approval", label: "Needs approval", tone: "attention", reason: null };
  }
  switch (s) {
    case RUNNING:
      return { key: "running", label: "Running", tone: "active", reason: null };
    case "CREATED":
    case "STARTING":
      return { key: "starting", label: "Starting", tone: "active", reason: null };
    case "FAILED": {
      const err = lastOf(messages, (m) => m.kind === "status" && m.metadata?.variant === "error");
      // The agent never came up: the page offers to start it again (retry-start-button).
      return { key: "failed", label: "Failed", tone: "error", reason: humanizeError(err?.content), retry: true };
    }
    case "WAITING_FOR_INPUT": {
      // DESIGN.md §19: the agent asked for a login first (the login card says how).
      if (row.auth?.required) return { key: "login", label: "Needs login", tone: "attention", reason: null };
      const err = lastTurnError(messages);
      if (err) return { key: "turn-failed", label: "Last turn failed", tone: "error", reason: humanizeError(err.content) };
      // Messages not held (another session): the backend's attention says its turn failed.
      if (!Array.isArray(messages) && row.attention === "failed") return { key: "turn-failed", label: "Last turn failed", tone: "error", reason: null };
      if (row.agent_live === false) return ASLEEP;
      return { key: "waiting", label: "Waiting for input", tone: "ok", reason: null };
    }
    case "COMPLETED":
      if (row.agent_live === false) return ASLEEP;
      return { key: "completed", label: "Completed", tone: "neutral", reason: null };
    case "CANCELLED":
      return { key: "cancelled", label: "Cancelled", tone: "neutral", reason: null };
    default:
      return { key: "unknown", label: String(s ?? "Unknown"), tone: "neutral", reason: null };
  }
}

/** "● " while a session of the task runs, "(!) " when the shown one waits for approval. */
export function titleMark(state) {
  const selected = sessionStatus(state, state.selectedSessionId);
  if (selected?.key === "approval") return "(!) ";
  const running = Object.keys(state.sessions).some((sid) => {
    const key = sessionStatus(state, sid)?.key;
    return key === "running" || key === "cancelling" || key === "stopping" || key === "approval";
  });
  return running ? "● " : "";
}

/**
 * Agent profiles for the picker: [{name, available, reason}]. The boot state's `agents` may be
 * names or objects carrying availability; `availability` (name -> {available, reason}) fills in
 * for plain names. Unknown availability counts as available (the server decides at launch).
 */
export function agentOptions(agents, availability = {}) {
  const out = [];
  for (const a of Array.isArray(agents) ? agents : []) {
    const name = typeof a === "string" ? a : a?.name;
    if (typeof name !== "string" || !name) continue;
    const info = typeof a === "object" && a !== null && "available" in a ? a : availability?.[name] ?? {};
    out.push({ name, available: info.available !== false, reason: info.available === false ? String(info.reason ?? "not available") : null });
  }
  return out;
}

/** The agent to preselect: the remembered one if still launchable, else the default, else the first launchable. */
export function preferredAgent(options, remembered, fallback) {
  const ok = (name) => options.some((o) => o.name === name && o.available);
  if (remembered && ok(remembered)) return remembered;
  if (fallback && ok(fallback)) return fallback;
  return options.find((o) => o.available)?.name ?? options[0]?.name ?? null;
}

/** "850 ms", "4.2 s", "2 min 5 s" for a tool call's run time. */
export function formatDuration(ms) {
  if (typeof ms !== "number" || !Number.isFinite(ms) || ms < 0) return "";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(ms < 10_000 ? 1 : 0)} s`;
  const min = Math.floor(ms / 60_000);
  return `${min} min ${Math.round((ms % 60_000) / 1000)} s`;
}

/** Seconds left until `retryAt` (for the offline banner's countdown), never negative. */
export function secondsUntil(retryAt, now) {
  if (typeof retryAt !== "number") return null;
  return Math.max(0, Math.ceil((retryAt - now) / 1000));
}

/** A user message that began a turn (a steered one joins the running turn instead). */
function isTurnStart(m) {
  return m.role === "user" && m.metadata?.delivery !== "steer";
}

/**
 * The stall notice of the selected session's running turn (DESIGN.md §9): the latest status
 * message marked `stalled` that is not `resolved`, in the current turn (no user message after it),
 * while the turn runs and no cancel is pending (the cancel control then tells the story).
 * Returns {visible, text}.
 */
export function stallNotice(state, sessionId) {
  const hidden = { visible: false, text: "" };
  const row = sessionId ? state.sessions[sessionId] : undefined;
  if (!row || row.state !== RUNNING || effectiveCancelPending(state, sessionId)) return hidden;
  const last = lastOf(state.messages[sessionId], (m) => isTurnStart(m) || (m.kind === "status" && m.metadata?.stalled));
  if (!last || isTurnStart(last) || last.metadata?.resolved) return hidden;
  return { visible: true, text: String(last.content ?? "No output from the agent for a while") };
}
