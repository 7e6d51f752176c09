// Pure state of the per-session message queue (DESIGN.md §9): no DOM, no sockets.
//
// The backend owns the queue; the page only mirrors it. Every `session.queue.changed` carries the
// whole queue with a `queue_revision`, so a value replaces the one held when its revision is not
// lower. As with cancellation values (state.js), revisions are only comparable within one
// connection epoch: the first value of a newer epoch is a fresh read and always accepted.

/** One queue as the page holds it: entries (by position), auto_run, and where it came from. */
function record(entries, autoRun, revision, epoch) {
  const list = Array.isArray(entries) ? entries.filter((e) => e && typeof e.id === "string") : [];
  list.sort((a, b) => (a.position ?? 0) - (b.position ?? 0));
  return { entries: list, autoRun: autoRun !== false, revision, epoch };
}

/** Whether a queue value from (revision, epoch) may replace `held`. */
export function acceptsQueue(held, revision, epoch) {
  if (!held || typeof held.revision !== "number") return true;
  if (typeof revision !== "number") return epoch > held.epoch; // an unversioned read (boot, list)
  if (epoch !== held.epoch) return epoch > held.epoch;
  return revision >= held.revision;
}

/**
 * Folds a queue value {entries, auto_run, queue_revision} for `sessionId` into the state, and
 * mirrors its count and flag on the session row (the list shows "N queued"). Stale values are
 * ignored.
 */
export function applyQueue(state, sessionId, value, epoch) {
  if (!sessionId || !value || typeof value !== "object" || !Array.isArray(value.entries)) return state;
  const held = state.queues?.[sessionId];
  const revision = typeof value.queue_revision === "number" ? value.queue_revision : null;
  if (!acceptsQueue(held, revision, epoch)) return state;
  const autoRun = typeof value.auto_run === "boolean" ? value.auto_run : held?.autoRun ?? state.sessions[sessionId]?.auto_run;
  const next = record(value.entries, autoRun, revision, epoch);
  const row = state.sessions[sessionId];
  const sessions = row
    ? { ...state.sessions, [sessionId]: { ...row, queued_count: next.entries.length, auto_run: next.autoRun } }
    : state.sessions;
  return { ...state, sessions, queues: { ...(state.queues ?? {}), [sessionId]: next } };
}

/**
 * A `message.add` answer queued an entry (`{delivery: "queued", entry}`): show it at once, unless
 * the page already follows the queue's notifications (a held revision). Then the notification is
 * the truth: it may already have come, and even have been followed by the entry's start, which
 * an answer read late must not undo.
 */
export function addQueuedEntry(state, sessionId, entry) {
  if (!sessionId || !entry || typeof entry.id !== "string") return state;
  const held = state.queues?.[sessionId] ?? record([], state.sessions[sessionId]?.auto_run, null, 0);
  if (typeof held.revision === "number" || held.entries.some((e) => e.id === entry.id)) return state;
  const position = typeof entry.position === "number" ? entry.position : held.entries.length;
  const next = { ...record([...held.entries, { ...entry, position }], held.autoRun, held.revision, held.epoch) };
  const row = state.sessions[sessionId];
  const sessions = row ? { ...state.sessions, [sessionId]: { ...row, queued_count: next.entries.length } } : state.sessions;
  return { ...state, sessions, queues: { ...(state.queues ?? {}), [sessionId]: next } };
}

/**
 * What a `message.add` (or `queue.send_now`) answer means for the page: the message started a
 * turn or was steered into one (`message`: the message DTO, its fields beside `delivery`, or
 * nested as `message`), was queued (`entry`), or is interrupting the running turn (`entry`).
 * Older backends answer with the bare message DTO.
 */
export function messageAddOutcome(response) {
  const r = response && typeof response === "object" ? response : {};
  const { delivery, entry, message: nested, steer_unsupported: steerUnsupported, ...rest } = r;
  let message = null;
  if (nested && typeof nested === "object") message = nested;
  else if (rest.id !== undefined && rest.id !== null) message = rest;
  return {
    delivery: typeof delivery === "string" ? delivery : "started",
    message,
    entry: entry && typeof entry === "object" ? entry : null,
    steerUnsupported: steerUnsupported === true,
  };
}

function lastStatus(messages) {
  if (!Array.isArray(messages)) return null;
  for (let i = messages.length - 1; i >= 0; i -= 1) if (messages[i].kind === "status") return messages[i];
  return null;
}

/** Why a queue with auto-run off is waiting, in a sentence, from the status that parked it. */
export function pausedReason(messages) {
  const status = lastStatus(messages);
  const meta = status?.metadata ?? {};
  if (meta.variant === "error") return "Paused because the last turn failed.";
  if (meta.cancelled && /by user/.test(status.content ?? "")) return "Paused after you stopped the agent.";
  if (meta.interrupted && !/new message/.test(status.content ?? "")) return "Paused: a restart interrupted the last turn.";
  return "Paused.";
}

/**
 * What the queue list shows for a session: its entries, and whether it waits for the person
 * (`paused`, with the reason, and Resume offered). Offline, nothing can be changed.
 */
export function queueView(state, sessionId, { offline = false } = {}) {
  const row = sessionId ? state.sessions[sessionId] : undefined;
  const held = sessionId ? state.queues?.[sessionId] : undefined;
  const entries = held?.entries ?? [];
  const autoRun = held ? held.autoRun : row?.auto_run !== false;
  const paused = !autoRun && entries.length > 0;
  return {
    sessionId: sessionId ?? null,
    visible: Boolean(row) && entries.length > 0,
    entries,
    autoRun,
    paused,
    reason: paused ? pausedReason(state.messages?.[sessionId]) : null,
    disabled: offline,
  };
}

/** The position an entry moves to for "up" (-1) or "down" (+1), or null at the ends. */
export function movedPosition(entries, entryId, delta) {
  const index = entries.findIndex((e) => e.id === entryId);
  if (index < 0) return null;
  const target = index + delta;
  if (target < 0 || target >= entries.length) return null;
  return target;
}
