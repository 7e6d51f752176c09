// Pure client state of the Turnvisor UI: no DOM, no timers, no sockets.
//
// Every function takes a state (or a piece of it) and returns a new value; nothing is mutated,
// so the page controller can re-render from one object and node's test runner can check every
// rule without a browser (tests/ui_unit/).
//
// This module holds the data: the boot state, tasks, sessions, messages and the notifications
// that change them. What the person's controls show (the cancel request and control, the
// composer, the connection) is control-state.js, re-exported here: pages read one namespace.
//
// Cancellation progress (spec/cancel-turn-progress-requirements.txt, DESIGN.md §6):
// - the backend owns `cancellation_pending` / `cancellation_revision` per session;
// - a value is accepted only if its revision is >= the one held (equal accepted, lower rejected);
// - between a click and the first backend signal about that click the page holds an optimistic
//   per-session flag (control-state.js); the control shows pending if optimistic OR backend
//   pending.
//
// Revisions are process-local on the backend, so they are only comparable within one backend
// incarnation. The page cannot see a restart directly, but every restart drops the WebSocket, so
// each value is tagged with the connection "epoch" it arrived on (0 = the boot state embedded in
// the page, then 1, 2, ... per WebSocket open). Within an epoch the revision rule applies; the
// first value of a newer epoch is a fresh read and is accepted as the new baseline. Without this,
// a tab that held revision 5 would reject the restarted backend's `false` at revision 0 and keep
// a stale spinner forever.

import { applyQueue } from "./queue-state.js";
import { effectiveCancelPending, settleOptimisticOnBackendValue } from "./control-state.js";

export * from "./control-state.js";

/** The state of a page before anything is known. */
export function emptyState() {
  return {
    page: "tasks",
    tasks: [],
    task: null,
    agents: [],
    defaultAgent: null,
    sandboxWarning: null, // set when agents run without a sandbox on this machine
    sessions: {}, // session id -> session row (DTO fields + cancellation_epoch)
    sessionOrder: [], // session ids, display order (oldest first)
    selectedSessionId: null,
    messages: {}, // session id -> Message[] (oldest first); absent = not loaded yet
    // session id -> appends held while that session's messages must be listed again (an append
    // did not fit what is held: a lost frame, or one that came before the listing). Present =
    // stale: the page re-fetches the listing, and replaceMessages replays these over it.
    staleMessages: {},
    // session id -> {requestId, baseRevision, baseEpoch, optimistic}: this page's agent.cancel in
    // flight. `optimistic` is the flag of the spec; the record outlives it so that the request's
    // own error still reaches the composer after the backend has taken over.
    cancelRequests: {},
    composerErrors: {}, // session id -> text of the last failed cancel/send, shown in the composer
    cancelPhases: {}, // session id -> last `session.cancel.progress` phase of a pending cancel
    // session id -> that progress whole ({turn_id, phase, tool_call_ids?, title?}): the phase
    // `after_step` names the running tool the stop waits for (DESIGN.md §18).
    cancelProgress: {},
    queues: {}, // session id -> {entries, autoRun, revision, epoch} (queue-state.js, DESIGN.md §9)
    // "connecting" (first connect), "open", or "reconnecting" (the socket was lost, or never
    // came up): the page is offline in the last case and disables what needs the server.
    connection: "connecting",
  };
}

/** Builds the first state from the boot state the server embedded in the page (epoch 0). */
export function hydrate(boot) {
  const b = boot && typeof boot === "object" ? boot : {};
  let state = {
    ...emptyState(),
    page: b.page === "task" ? "task" : "tasks",
    tasks: sortTasks(Array.isArray(b.tasks) ? b.tasks : []),
    task: b.task ?? null,
    agents: Array.isArray(b.agents) ? b.agents : [],
    defaultAgent: b.default_agent ?? (Array.isArray(b.agents) ? b.agents[0] ?? null : null),
    sandboxWarning: typeof b.sandbox_warning === "string" ? b.sandbox_warning : null,
  };
  for (const dto of Array.isArray(b.sessions) ? b.sessions : []) {
    state = upsertSession(state, dto, 0);
  }
  const selected = b.selected_session_id ?? null;
  state = { ...state, selectedSessionId: selected };
  if (selected && Array.isArray(b.messages)) {
    state = replaceMessages(state, selected, b.messages);
  }
  if (selected && b.queue) {
    // The selected session's queue: its entries, or {entries, auto_run, queue_revision}.
    const value = Array.isArray(b.queue) ? { entries: b.queue, queue_revision: b.queue_revision } : b.queue;
    state = applyQueue(state, selected, value, 0);
  }
  return state;
}

// ---------------------------------------------------------------------------------------------
// Tasks

// The task list's order: when a task was made or last given a session (`active_at`), so a
// rename or an archive leaves it in its place; updated_at from a server that lacks it.
function taskTime(task) {
  const t = Date.parse(task?.active_at ?? task?.updated_at ?? task?.created_at ?? "");
  return Number.isNaN(t) ? 0 : t;
}

/** Most recently active first, as a task list is read. */
export function sortTasks(tasks) {
  return [...tasks].sort((a, b) => taskTime(b) - taskTime(a));
}

/** Adds or replaces a task by id (used after task.create and task.list). */
export function upsertTask(state, task) {
  if (!task || typeof task.id !== "string") return state;
  const rest = state.tasks.filter((t) => t.id !== task.id);
  return { ...state, tasks: sortTasks([task, ...rest]) };
}

export function replaceTasks(state, tasks) {
  return { ...state, tasks: sortTasks(Array.isArray(tasks) ? tasks : []) };
}

// ---------------------------------------------------------------------------------------------
// Backend cancellation values, merged by revision

/**
 * Whether a backend cancellation value may replace the one held.
 * `held` is {revision, epoch} or null (nothing held yet).
 */
export function acceptsCancellation(held, incoming) {
  if (!held || typeof held.revision !== "number") return true;
  if (incoming.epoch !== held.epoch) return incoming.epoch > held.epoch;
  return incoming.revision >= held.revision;
}

function isCancellationValue(pending, revision) {
  return typeof pending === "boolean" && typeof revision === "number" && Number.isFinite(revision);
}

/**
 * Merges one backend value {pending, revision} received on `epoch` into a session row.
 * Returns {row, accepted}. A row without the fields (a partial event) is left alone.
 */
export function mergeCancellation(row, pending, revision, epoch) {
  if (!isCancellationValue(pending, revision)) return { row, accepted: false };
  const held =
    typeof row.cancellation_revision === "number"
      ? { revision: row.cancellation_revision, epoch: row.cancellation_epoch ?? 0 }
      : null;
  if (!acceptsCancellation(held, { revision, epoch })) return { row, accepted: false };
  return {
    row: {
      ...row,
      cancellation_pending: pending,
      cancellation_revision: revision,
      cancellation_epoch: epoch,
    },
    accepted: true,
  };
}

/** Applies a backend cancellation value for one session (notification, snapshot or DTO). */
export function applyCancellation(state, sessionId, pending, revision, epoch) {
  const row = state.sessions[sessionId] ?? { id: sessionId };
  const merged = mergeCancellation(row, pending, revision, epoch);
  if (!merged.accepted) return state;
  // A settled cancel's progress is history: neither the held one nor the DTO's is shown again.
  let next = putSession(state, pending ? merged.row : { ...merged.row, cancel_progress: null });
  if (!pending && (sessionId in next.cancelPhases || sessionId in (next.cancelProgress ?? {}))) {
    const cancelPhases = { ...next.cancelPhases };
    delete cancelPhases[sessionId];
    const cancelProgress = { ...next.cancelProgress };
    delete cancelProgress[sessionId];
    next = { ...next, cancelPhases, cancelProgress };
  }
  return settleOptimisticOnBackendValue(next, sessionId, pending, revision, epoch);
}

// ---------------------------------------------------------------------------------------------
// Sessions

function sessionTime(row) {
  const t = Date.parse(row?.created_at ?? "");
  return Number.isNaN(t) ? Number.POSITIVE_INFINITY : t;
}

function putSession(state, row) {
  const known = row.id in state.sessions;
  const sessions = { ...state.sessions, [row.id]: row };
  let sessionOrder = known ? state.sessionOrder : [...state.sessionOrder, row.id];
  if (!known) {
    // Keep creation order; rows without a time (partial events) go last.
    sessionOrder = [...sessionOrder].sort((a, b) => sessionTime(sessions[a]) - sessionTime(sessions[b]));
  }
  return { ...state, sessions, sessionOrder };
}

/**
 * Adds or updates a session from a session DTO (boot, session.list, session.launch).
 * Every field but the cancellation pair is taken as is; the pair goes through the revision rule.
 */
export function upsertSession(state, dto, epoch) {
  if (!dto || typeof dto.id !== "string") return state;
  const { cancellation_pending: pending, cancellation_revision: revision, ...fields } = dto;
  const held = state.sessions[dto.id] ?? {};
  const next = putSession(state, { ...held, ...fields });
  return applyCancellation(next, dto.id, pending, revision, epoch);
}

/** Replaces the task's sessions with a fresh listing, keeping the revision rule per session. */
export function replaceSessions(state, dtos, epoch) {
  let next = state;
  for (const dto of Array.isArray(dtos) ? dtos : []) next = upsertSession(next, dto, epoch);
  return next;
}

export function selectSession(state, sessionId) {
  return { ...state, selectedSessionId: sessionId ?? null };
}

/** Sessions in display order, for the session list. */
export function orderedSessions(state) {
  return state.sessionOrder.map((id) => state.sessions[id]).filter(Boolean);
}

// ---------------------------------------------------------------------------------------------
// Messages

function messageTime(m) {
  const t = Date.parse(m?.created_at ?? "");
  return Number.isNaN(t) ? Number.POSITIVE_INFINITY : t;
}

/**
 * Inserts or replaces a message by id, keeping the list oldest first. `added`/`updated` arrive
 * whole, so replace, not patch (streamed growth comes as appends: applyAppend).
 */
export function upsertMessage(list, message) {
  if (!message || message.id === undefined || message.id === null) return list;
  const current = Array.isArray(list) ? list : [];
  const index = current.findIndex((m) => m.id === message.id);
  if (index >= 0) {
    const next = [...current];
    next[index] = message;
    return next;
  }
  const next = [...current, message];
  const last = current[current.length - 1];
  if (last && messageTime(message) < messageTime(last)) {
    next.sort((a, b) => messageTime(a) - messageTime(b)); // stable: ties keep arrival order
  }
  return next;
}

export function addMessage(state, sessionId, message) {
  const list = upsertMessage(state.messages[sessionId], message);
  return { ...state, messages: { ...state.messages, [sessionId]: list } };
}

/**
 * Replaces a session's messages with a fresh listing (boot, or message.list after subscribe or
 * to resync), then replays the appends held meanwhile: those the listing already holds are
 * skipped, the rest apply, or (a gap again) leave the session stale for another listing.
 */
export function replaceMessages(state, sessionId, messages) {
  let list = [];
  for (const m of Array.isArray(messages) ? messages : []) list = upsertMessage(list, m);
  const held = state.staleMessages?.[sessionId] ?? [];
  let next = { ...state, messages: { ...state.messages, [sessionId]: list }, staleMessages: withoutKey(state.staleMessages, sessionId) };
  for (const p of held) next = applyAppend(next, sessionId, p);
  return next;
}

function withoutKey(map, key) {
  if (!map || !(key in map)) return map ?? {};
  const rest = { ...map };
  delete rest[key];
  return rest;
}

/** Appends held per stale session at most; beyond, the oldest go (the replay then finds a gap). */
export const MAX_HELD_APPENDS = 500;

function holdAppend(state, sessionId, payload) {
  const held = [...(state.staleMessages?.[sessionId] ?? []), payload].slice(-MAX_HELD_APPENDS);
  return { ...state, staleMessages: { ...state.staleMessages, [sessionId]: held } };
}

/** True when the session's messages must be listed again (an append did not fit). */
export function messagesStale(state, sessionId) {
  return Boolean(sessionId && state.staleMessages && sessionId in state.staleMessages);
}

/**
 * Applies `session.message.appended {message_id, offset, text}` (subscribed with text_appends,
 * contract-notes): `offset` is the message's length before the append in UTF-16 code units,
 * which is what a JavaScript string's length counts. At the held length the text is appended;
 * already held (the listing was read after the append was written) it is skipped; anything
 * else (a gap, an unknown message) marks the session stale and holds the append for the replay.
 */
export function applyAppend(state, sessionId, p) {
  if (typeof p.message_id !== "string" || typeof p.text !== "string" || !Number.isInteger(p.offset)) return state;
  if (messagesStale(state, sessionId)) return holdAppend(state, sessionId, p);
  const list = state.messages[sessionId];
  const index = Array.isArray(list) ? list.findIndex((m) => m.id === p.message_id) : -1;
  const message = index >= 0 ? list[index] : null;
  if (!message || typeof message.content !== "string") return holdAppend(state, sessionId, p);
  const content = message.content;
  if (p.offset === content.length) {
    const next = [...list];
    next[index] = { ...message, content: content + p.text };
    return { ...state, messages: { ...state.messages, [sessionId]: next } };
  }
  const end = p.offset + p.text.length;
  if (p.offset >= 0 && end <= content.length && content.slice(p.offset, end) === p.text) return state;
  return holdAppend(state, sessionId, p);
}

/** Marks a permission card answered-by-cancel; the message update usually follows anyway. */
export function markPermissionCancelled(state, sessionId, requestId) {
  const list = state.messages[sessionId];
  if (!Array.isArray(list)) return state;
  const next = list.map((m) =>
    m.kind === "permission" && m.metadata?.request_id === requestId
      ? { ...m, metadata: { ...m.metadata, status: "cancelled" } }
      : m,
  );
  return { ...state, messages: { ...state.messages, [sessionId]: next } };
}

// ---------------------------------------------------------------------------------------------
// Notifications (DESIGN.md §4)

/** Folds one WebSocket notification, received on connection `epoch`, into the state. */
export function applyNotification(state, action, payload, epoch) {
  const p = payload && typeof payload === "object" ? payload : {};
  const sid = p.session_id;
  if (typeof sid !== "string") return state;
  switch (action) {
    case "session.state_changed": {
      const row = state.sessions[sid] ?? { id: sid };
      const fields = { ...row };
      if (typeof p.new_state === "string") fields.state = p.new_state;
      if (typeof p.updated_at === "string") fields.updated_at = p.updated_at;
      if (typeof p.task_id === "string") fields.task_id = p.task_id;
      // DESIGN.md §10: whether the agent process is up ("Agent asleep" when it is not).
      if (typeof p.agent_live === "boolean") fields.agent_live = p.agent_live;
      // DESIGN.md §20: false while a remote agent's host does not answer.
      if (typeof p.reachable === "boolean") fields.reachable = p.reachable;
      if (typeof p.queued_count === "number") fields.queued_count = p.queued_count;
      if (typeof p.auto_run === "boolean") fields.auto_run = p.auto_run;
      // The running turn (null when none): what a cancel from this page aims at.
      if (p.current_turn_id !== undefined) fields.current_turn_id = p.current_turn_id;
      const next = putSession(state, fields);
      return applyCancellation(next, sid, p.cancellation_pending, p.cancellation_revision, epoch);
    }
    case "session.attention": {
      // DESIGN.md §15, heard by every tab: a known session waits for an approval or is being
      // cancelled. Only rows this page already shows take it (no partial rows of other tasks).
      const row = state.sessions[sid];
      if (!row) return state;
      const fields = { ...row };
      if (typeof p.needs_approval === "boolean") fields.needs_approval = p.needs_approval;
      if (typeof p.cancelling === "boolean") fields.attention_cancelling = p.cancelling;
      if (p.attention !== undefined) fields.attention = p.attention; // the DTO's (attention.js)
      return putSession(state, fields);
    }
    case "session.cancellation_changed":
      return applyCancellation(state, sid, p.cancellation_pending, p.cancellation_revision, epoch);
    case "session.message.added":
    case "session.message.updated":
      return addMessage(state, sid, p.message);
    case "session.message.appended":
      return applyAppend(state, sid, p);
    case "session.permission.cancelled":
      return markPermissionCancelled(state, sid, p.request_id);
    case "session.queue.changed":
      return applyQueue(state, sid, p, epoch);
    case "session.cancel.progress":
      // DESIGN.md §9: `late` / `escalated` mean the agent did not answer the cancel.
      if (typeof p.phase !== "string" || !effectiveCancelPending(state, sid)) return state;
      return {
        ...state,
        cancelPhases: { ...state.cancelPhases, [sid]: p.phase },
        cancelProgress: { ...state.cancelProgress, [sid]: { turn_id: p.turn_id ?? null, phase: p.phase, tool_call_ids: p.tool_call_ids ?? [], title: p.title ?? null } },
      };
    default:
      // session.turn.completed, session.agent.cancelled, session.permission.requested: the
      // state and message notifications that come with them carry everything the page shows.
      return state;
  }
}
