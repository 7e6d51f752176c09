// Live task and session lists (contract-notes "Renaming, archiving, deleting; live lists"):
// pure reducers over the state of state.js for the workspace-wide notifications
// `task.changed`, `task.removed`, `session.changed`, `session.removed`, and for re-listings.
//
// Ids of removed tasks and sessions are remembered ("gone"): ids are never reused, and a late
// notification or a listing that left the server before the removal must not bring them back
// (a partial row of a deleted session would otherwise show as a phantom).

import * as S from "./state.js";
import { applyOffersNotification } from "./offers.js";

// ---------------------------------------------------------------------------------------------
// Words

/** {key, label, tone} of a task in the task list: its live status from the DTO's counts. */
export function taskStatus(task) {
  const running = Number(task?.running_count) || 0;
  const count = Number(task?.session_count) || 0;
  // DESIGN.md §15: what needs the person comes before what merely runs.
  const approval = Number(task?.approval_count) || 0;
  if (approval > 0) return { key: "approval", label: approval > 1 ? `Needs approval (${approval})` : "Needs approval", tone: "attention" };
  if ((Number(task?.cancelling_count) || 0) > 0) return { key: "cancelling", label: "Cancelling", tone: "warning" };
  if (running > 0) return { key: "running", label: running > 1 ? `Running (${running})` : "Running", tone: "active" };
  // What no page has shown yet (the backend's attention), then what stays true: failed starts.
  const unseen = (kind) => (Array.isArray(task?.attention_sessions) ? task.attention_sessions : []).filter((a) => a?.attention === kind).length;
  if (unseen("failed") > 0) return { key: "failed", label: "Failed", tone: "error" };
  if (unseen("turn_ended") > 0) return { key: "ended", label: "Turn ended", tone: "attention" };
  if (count === 0) return { key: "empty", label: "No sessions", tone: "neutral" };
  const sessions = count === 1 ? "1 session" : `${count} sessions`;
  const failed = Number(task?.failed_count) || 0;
  if (failed > 0) return { key: "idle", label: `${sessions} · ${failed} failed`, tone: "neutral" };
  return { key: "idle", label: sessions, tone: "neutral" };
}

/** What a session is called: its title when set, else "Session N" (N: 1-based position). */
export function sessionName(row, index) {
  const title = typeof row?.title === "string" ? row.title.trim() : "";
  return title || `Session ${index + 1}`;
}

/** The chat header's line: the title alone when set, else "Session N · agent". */
export function sessionHeading(row, index) {
  const title = typeof row?.title === "string" ? row.title.trim() : "";
  return title || `Session ${index + 1} · ${row?.agent ?? ""}`;
}

/** {active, archived}, each keeping the given order. */
export function splitArchived(items) {
  const active = [];
  const archived = [];
  for (const item of Array.isArray(items) ? items : []) (item?.archived ? archived : active).push(item);
  return { active, archived };
}

// ---------------------------------------------------------------------------------------------
// The task list

function isGoneTask(state, id) {
  return Boolean(state.goneTasks?.[id]);
}

function taskStamp(task) {
  const t = Date.parse(task?.updated_at ?? "");
  return Number.isNaN(t) ? 0 : t;
}

/** Removes a task from the list and remembers it is gone. */
export function removeTask(state, taskId) {
  return {
    ...state,
    tasks: state.tasks.filter((t) => t.id !== taskId),
    goneTasks: { ...(state.goneTasks ?? {}), [taskId]: true },
  };
}

/** Folds a workspace notification into the task list; other actions leave it alone. */
export function applyTaskListNotification(state, action, payload) {
  const p = payload && typeof payload === "object" ? payload : {};
  if (action === "task.changed" && typeof p.task?.id === "string") {
    return isGoneTask(state, p.task.id) ? state : S.upsertTask(state, p.task);
  }
  if (action === "task.removed" && typeof p.task_id === "string") return removeTask(state, p.task_id);
  return state;
}

/**
 * Merges a `task.list` answer. `knownBefore` holds the ids shown when the request left: only
 * those may be dropped for being absent (a task created meanwhile arrived by notification, after
 * the listing was read). A held row strictly newer than the listed one (a rename heard by
 * notification) is kept; otherwise the listing wins (it carries fresh counts).
 */
export function mergeTaskListing(state, tasks, knownBefore) {
  const listed = new Map();
  for (const t of Array.isArray(tasks) ? tasks : []) {
    if (t && typeof t.id === "string" && !isGoneTask(state, t.id)) listed.set(t.id, t);
  }
  const before = new Set(knownBefore ?? []);
  const next = [];
  for (const held of state.tasks) {
    const fresh = listed.get(held.id);
    if (fresh) {
      next.push(taskStamp(held) > taskStamp(fresh) ? { ...fresh, ...held, session_count: fresh.session_count, running_count: fresh.running_count, approval_count: fresh.approval_count, cancelling_count: fresh.cancelling_count, failed_count: fresh.failed_count, attention_sessions: fresh.attention_sessions } : fresh);
      listed.delete(held.id);
    } else if (!before.has(held.id)) {
      next.push(held);
    }
  }
  next.push(...listed.values());
  return S.replaceTasks(state, next);
}

/** True when a notification may change the list's counts, so the page re-lists (once). */
export function changesTaskCounts(action) {
  return action === "session.changed" || action === "session.removed" || action === "session.attention";
}

// ---------------------------------------------------------------------------------------------
// The task page: its task and sessions

function isGoneSession(state, id) {
  return Boolean(state.goneSessions?.[id]);
}

function without(map, key) {
  if (!map || !(key in map)) return map;
  const next = { ...map };
  delete next[key];
  return next;
}

/**
 * Drops a session and everything held for it, and remembers it is gone. If it was the selected
 * one, nothing is selected afterwards: the page picks the next (nextSelection) and follows it.
 */
export function removeSession(state, sessionId) {
  const next = {
    ...state,
    sessions: without(state.sessions, sessionId),
    sessionOrder: state.sessionOrder.filter((id) => id !== sessionId),
    messages: without(state.messages, sessionId),
    cancelRequests: without(state.cancelRequests, sessionId),
    composerErrors: without(state.composerErrors, sessionId),
    cancelPhases: without(state.cancelPhases, sessionId),
    goneSessions: { ...(state.goneSessions ?? {}), [sessionId]: true },
  };
  return state.selectedSessionId === sessionId ? { ...next, selectedSessionId: null } : next;
}

/**
 * The session to show when none is selected: the most recently updated one that is not
 * archived, else the most recently updated archived one, else null (the empty state).
 */
export function nextSelection(state) {
  const rows = S.orderedSessions(state);
  const newest = (list) => {
    let best = null;
    for (const row of list) {
      if (!best || Date.parse(row.updated_at ?? "") >= Date.parse(best.updated_at ?? "")) best = row;
    }
    return best?.id ?? null;
  };
  const { active, archived } = splitArchived(rows);
  return newest(active) ?? newest(archived);
}

/**
 * Folds one notification into the task page's state: the workspace list notifications for this
 * task, and every session notification (through state.applyNotification) unless it is about a
 * removed session.
 */
export function applyPageNotification(state, action, payload, epoch, taskId) {
  const p = payload && typeof payload === "object" ? payload : {};
  switch (action) {
    case "task.changed":
      if (p.task?.id !== taskId || state.taskGone) return state;
      return { ...state, task: { ...(state.task ?? {}), ...p.task } };
    case "task.removed":
      return p.task_id === taskId ? { ...state, taskGone: true } : state;
    case "session.changed": {
      const dto = p.session;
      if (!dto || typeof dto.id !== "string" || dto.task_id !== taskId || isGoneSession(state, dto.id)) return state;
      // Only the followed session hears its cancellation settle (session.cancellation_changed);
      // the others hear only state changes, and a cancel's state change comes before its pending
      // clears. Once such a session left RUNNING its cancel is over as far as this list goes:
      // otherwise "Cancelling" would stay on it. Following it later brings the exact value.
      const followed = dto.id === state.selectedSessionId;
      const row = followed || dto.state === S.RUNNING ? dto : { ...dto, cancellation_pending: false };
      return S.upsertSession(state, row, epoch);
    }
    case "session.removed":
      if (p.task_id !== taskId || typeof p.session_id !== "string") return state;
      return removeSession(state, p.session_id);
    default:
      if (typeof p.session_id === "string" && isGoneSession(state, p.session_id)) return state;
      // DESIGN.md §19: the agent's options, commands and usage (offers.js).
      return applyOffersNotification(S.applyNotification(state, action, payload, epoch), action, payload);
  }
}

/**
 * Merges a `session.list` answer: every listed session is upserted (revision rule kept), and a
 * session shown when the request left (`knownBefore`) but absent from the answer was removed
 * while this page was not listening.
 */
export function syncSessions(state, dtos, epoch, knownBefore) {
  let next = state;
  const listed = new Set();
  for (const dto of Array.isArray(dtos) ? dtos : []) {
    if (!dto || typeof dto.id !== "string" || isGoneSession(next, dto.id)) continue;
    listed.add(dto.id);
    next = S.upsertSession(next, dto, epoch);
  }
  for (const id of knownBefore ?? []) {
    if (!listed.has(id) && id in next.sessions) next = removeSession(next, id);
  }
  return next;
}

/** Applies a task DTO heard in a re-listing: the task's new title, or gone when absent. */
export function syncTask(state, tasks, taskId) {
  const found = (Array.isArray(tasks) ? tasks : []).find((t) => t?.id === taskId);
  if (!found) return { ...state, taskGone: true };
  return { ...state, task: { ...(state.task ?? {}), ...found } };
}
