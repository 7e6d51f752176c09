// What a running turn is doing, pure (DESIGN.md §15): the `working-indicator` (elapsed time and
// the last activity, so a silent turn still shows the agent works) and the late cancel's
// `escalation-countdown` (seconds until the agent is stopped). Times are the page's clock in
// ms; the page ticks once a second while either is shown.

import { effectiveCancelPending, RUNNING } from "./state.js";
import { formatDuration } from "./status.js";

/** A user message that began a turn (a steered one joins the running turn instead). */
function isTurnStart(m) {
  return m.role === "user" && m.metadata?.delivery !== "steer";
}

function seconds(ms) {
  return Math.max(0, Math.floor(ms / 1000));
}

/** "12 s", "2 min 5 s": elapsed time, whole seconds. */
export function elapsedText(ms) {
  return seconds(ms) < 60 ? `${seconds(ms)} s` : formatDuration(seconds(ms) * 1000);
}

/** The words for the turn's latest agent event (messages of the current turn only). */
export function lastActivity(messages) {
  const list = Array.isArray(messages) ? messages : [];
  for (let i = list.length - 1; i >= 0; i -= 1) {
    const m = list[i];
    if (isTurnStart(m)) break;
    if (m.role !== "agent") continue;
    if (m.kind === "permission") return m.metadata?.status === "pending" ? "Waiting for your approval" : "Went on after the approval";
    if (m.kind === "tool_call") {
      const title = String(m.content || m.metadata?.kind || "a tool").slice(0, 80);
      const done = ["completed", "failed"].includes(m.metadata?.status);
      return done ? `Ran ${title}` : `Running ${title}`;
    }
    if (m.kind === "plan") return "Planning";
    if (m.kind === "text") return m.metadata?.channel === "thought" ? "Thinking" : "Writing";
  }
  return "Waiting for the agent's first output";
}

/** When the running turn began: its user message's time, else when this page saw it run. */
export function turnStartedAt(messages, seenRunningAt) {
  const list = Array.isArray(messages) ? messages : [];
  for (let i = list.length - 1; i >= 0; i -= 1) {
    if (isTurnStart(list[i])) {
      const t = Date.parse(list[i].created_at ?? "");
      if (!Number.isNaN(t)) return t;
      break;
    }
  }
  return seenRunningAt ?? null;
}

/**
 * {visible, text, stale?}: shown while the selected session's turn runs and no cancel is pending
 * (the cancel control then tells the story). `clock` = {now, seenRunningAt, lastEventAt,
 * offlineAt}: offline since `offlineAt`, what the page knows stopped there, so the clock stops
 * there too and says it is the last known (`stale`), instead of counting on a turn it cannot see.
 */
export function workingView(state, sessionId, clock) {
  const row = sessionId ? state.sessions[sessionId] : undefined;
  if (!row || row.state !== RUNNING || effectiveCancelPending(state, sessionId)) return { visible: false, text: "" };
  const messages = state.messages[sessionId];
  const started = turnStartedAt(messages, clock.seenRunningAt);
  const stale = typeof clock.offlineAt === "number";
  const now = stale ? Math.min(clock.now, clock.offlineAt) : clock.now;
  const parts = ["Working", started !== null ? elapsedText(now - started) : null].filter(Boolean);
  let text = `${parts.join(" · ")} — ${lastActivity(messages)}`;
  if (typeof clock.lastEventAt === "number" && now - clock.lastEventAt >= 10_000) {
    text += ` (last output ${elapsedText(now - clock.lastEventAt)} ago)`;
  }
  if (!stale) return { visible: true, text };
  return { visible: true, text: `Offline, clock paused: ${text} (last known)`, stale };
}

/**
 * {visible, seconds, text}: during a late cancel (phase `late`), the seconds until the
 * backend stops the agent: `escalate_s` after the cancel was sent, which was `join_s` before
 * the page heard `late` (at `lateAt`).
 */
export function countdownView(state, sessionId, { now, lateAt, timeouts }) {
  const hidden = { visible: false, seconds: null, text: "" };
  if (!sessionId || !effectiveCancelPending(state, sessionId)) return hidden;
  const phase = state.cancelPhases?.[sessionId];
  if (phase !== "late" || typeof lateAt !== "number") return hidden;
  const join = Number(timeouts?.join_s);
  const escalate = Number(timeouts?.escalate_s);
  if (!Number.isFinite(join) || !Number.isFinite(escalate)) {
    return { visible: true, seconds: null, text: "The agent is not answering the cancel; it will be stopped." };
  }
  const left = Math.max(0, Math.ceil(escalate - join - (now - lateAt) / 1000));
  return {
    visible: true,
    seconds: left,
    text: left > 0 ? `The agent is not answering; it is stopped in ${left} s.` : "Stopping the agent now…",
  };
}
