// The state of the person's controls, pure as state.js (no DOM, no timers, no sockets): the
// cancel this page asked for and its optimistic flag, what the shared cancel control and the
// composer show, and the connection they depend on. state.js holds the data they read (the
// sessions and their backend cancellation values, the messages) and re-exports all of this,
// so a page reads one namespace; this module imports nothing of it (no import cycle).
//
// The optimistic flag (spec/cancel-turn-progress-requirements.txt, DESIGN.md §6): between a
// click and the first backend signal about that click the page holds a per-session flag; the
// control shows pending if optimistic OR backend pending (`cancellation_pending`, merged by
// revision in state.js).

/** The session state of a running turn: the one the cancel control and the composer act on. */
export const RUNNING = "RUNNING";
export const CANCEL_LABEL = "Cancel agent";
export const CANCELLING_LABEL = "Cancelling...";
/** Said beside the control once the join window passed without an answer (phase `late`, §9). */
export const LATE_NOTE = "Agent not responding — stopping it";
/** The cancel control while a stop waits for the running step: pressing it stops at once. */
export const STOP_NOW_LABEL = "Stop now";
/** Said while a stop waits for the running tool call to finish (phase `after_step`, §18). */
export const AFTER_STEP_NOTE = "Stopping after this step…";
/** Said while a cancel is held for a remote agent's host that does not answer (phase `link_down`, §20). */
export const LINK_DOWN_NOTE = "Waiting for the agent's host…";
/** The composer while a remote agent's host does not answer (§20): with a turn, messages queue. */
export const UNREACHABLE_QUEUE_NOTE = "The agent's host does not answer: messages wait in the queue until it does.";
export const UNREACHABLE_SEND_NOTE = "Send waits: the agent's host does not answer.";
/** Client-side bound on one agent.cancel request (issue 5: 15 s). */
export const CANCEL_REQUEST_TIMEOUT_MS = 15_000;

// ---------------------------------------------------------------------------------------------
// The optimistic flag and the backend's values

/**
 * Applies an accepted backend value's effect on the optimistic flag of that session.
 *
 * The flag ends at the first backend signal *about the click*: a pending `true` (this or another
 * page's cancel was accepted, so the backend now owns the state) or any transition after the
 * click (revision moved, or a newer connection). A read that predates the request - `false` at
 * the revision held when the user clicked - says nothing about it, and clearing on it would make
 * the spinner flicker off and on.
 */
export function settleOptimisticOnBackendValue(state, sessionId, pending, revision, epoch) {
  const req = state.cancelRequests[sessionId];
  if (!req || !req.optimistic) return state;
  const aboutTheClick =
    pending === true ||
    epoch !== req.baseEpoch ||
    req.baseRevision === null ||
    revision > req.baseRevision;
  if (!aboutTheClick) return state;
  return { ...state, cancelRequests: { ...state.cancelRequests, [sessionId]: { ...req, optimistic: false } } };
}

function dropCancelRequest(state, sessionId) {
  const cancelRequests = { ...state.cancelRequests };
  delete cancelRequests[sessionId];
  return { ...state, cancelRequests };
}

// ---------------------------------------------------------------------------------------------
// The connection

/** True while the page cannot reach the server (the socket was lost or never came up). */
export function isOffline(state) {
  return state.connection === "reconnecting";
}

/**
 * The socket's status changed. Going offline drops every optimistic cancel flag: a cancel cannot
 * be "in progress" with no server to carry it (the backend's own pending value, last known, stays
 * until the reconnect's snapshot replaces it). Coming back clears errors that described the
 * outage or requests lost in it: the snapshot and listings that follow are the truth again.
 */
export function setConnection(state, status) {
  if (status === state.connection) return state;
  let next = { ...state, connection: status };
  if (status === "reconnecting") {
    const cancelRequests = {};
    for (const [sid, req] of Object.entries(next.cancelRequests)) {
      // Keep the record (its own DISCONNECTED answer is then recognised and ignored), not the flag.
      cancelRequests[sid] = { ...req, optimistic: false, abandoned: true };
    }
    next = { ...next, cancelRequests };
  } else if (status === "open" && state.connection === "reconnecting") {
    next = { ...next, composerErrors: {}, cancelRequests: {} };
  }
  return next;
}

// ---------------------------------------------------------------------------------------------
// The cancel control

/** True while the page itself holds an unanswered cancel request for the session. */
export function isOptimisticPending(state, sessionId) {
  return Boolean(sessionId && state.cancelRequests[sessionId]?.optimistic);
}

/** Effective pending = optimistic OR backend pending. */
export function effectiveCancelPending(state, sessionId) {
  if (!sessionId) return false;
  return isOptimisticPending(state, sessionId) || state.sessions[sessionId]?.cancellation_pending === true;
}

/**
 * The progress of the session's pending cancel: the phase heard, else (after a reload) the
 * session DTO's `cancel_progress` of its running turn; null when none is pending or known.
 */
export function cancelProgressOf(state, sessionId) {
  if (!effectiveCancelPending(state, sessionId)) return null;
  const heard = state.cancelProgress?.[sessionId];
  if (heard) return heard;
  const row = state.sessions[sessionId];
  const dto = row?.cancel_progress;
  if (!dto || typeof dto.phase !== "string") return null;
  return dto.turn_id == null || row.current_turn_id == null || dto.turn_id === row.current_turn_id ? dto : null;
}

/**
 * True while the pending cancel waits for the running step to finish (DESIGN.md §18): the
 * phase says `after_step`, or this page asked for one and no phase is heard yet. A stop now
 * then still joins it, unless this page already sent one.
 */
export function waitsForStep(state, sessionId) {
  const req = state.cancelRequests[sessionId];
  if (req?.when === "now") return false;
  const progress = cancelProgressOf(state, sessionId);
  if (progress) return progress.phase === "after_step";
  return req?.when === "after_step" && effectiveCancelPending(state, sessionId);
}

/**
 * Starts a cancel for a session: sets the optimistic flag unless the activation must be ignored
 * (already pending here or on the backend, or nothing running). Returns {state, send}; the caller
 * sends `agent.cancel` with `requestId` only when `send` is true. `when`: "now" (default) or
 * "after_step"; a stop now while a stop after the step waits joins it (DESIGN.md §18).
 */
export function beginCancel(state, sessionId, requestId, epoch, when = "now") {
  const row = sessionId ? state.sessions[sessionId] : undefined;
  if (!row || row.state !== RUNNING) return { state, send: false };
  if (isOffline(state)) return { state, send: false }; // nothing could carry it
  const joins = when === "now" && waitsForStep(state, sessionId);
  if (effectiveCancelPending(state, sessionId) && !joins) return { state, send: false };
  const baseRevision = typeof row.cancellation_revision === "number" ? row.cancellation_revision : null;
  const baseEpoch = typeof row.cancellation_revision === "number" ? row.cancellation_epoch ?? 0 : epoch;
  const record = { requestId, baseRevision, baseEpoch, optimistic: true, when };
  const cancelRequests = { ...state.cancelRequests, [sessionId]: record };
  return { state: clearComposerError({ ...state, cancelRequests }, sessionId), send: true };
}

/**
 * Ends the optimistic flag when the request itself settles. `outcome` is
 * {ok: true} or {ok: false, error: "text"} (failure, rejection, disconnect, or the 15 s bound
 * passed with nothing pending on the backend: while it holds the stop the request waits on,
 * turn-actions.js `holdWhile`, so a stop that fails late says its own error).
 * Only the request that set the flag may clear it: a late answer to an abandoned request must not
 * touch a newer retry.
 */
export function settleCancel(state, sessionId, requestId, outcome) {
  const req = state.cancelRequests[sessionId];
  if (!req || req.requestId !== requestId) return state;
  const next = dropCancelRequest(state, sessionId);
  // Abandoned when the connection dropped: the offline banner already says why; the reconnect
  // snapshot says what the backend did.
  if (req.abandoned) return next;
  return outcome?.ok ? next : setComposerError(next, sessionId, outcome?.error || "Cancel failed");
}

/** What the shared cancel control shows for a session. */
export function cancelControlView(state, sessionId) {
  const row = sessionId ? state.sessions[sessionId] : undefined;
  if (!row) return { visible: false, pending: false, disabled: true, label: CANCEL_LABEL, note: null };
  const pending = effectiveCancelPending(state, sessionId);
  // The live phase, else the DTO's (a reload while a cancel is held says so at once).
  const phase = pending ? state.cancelPhases[sessionId] ?? cancelProgressOf(state, sessionId)?.phase : undefined;
  // While a stop waits for the running step, the control stays live and means "stop now".
  const waiting = pending && waitsForStep(state, sessionId);
  // Shown while a turn runs, and also while a cancel is still pending after the state moved on,
  // so the spinner lasts "until the backend's cancellation_pending goes false" (DESIGN §8).
  return {
    visible: row.state === RUNNING || pending,
    pending,
    disabled: (pending && !waiting) || isOffline(state),
    label: waiting ? STOP_NOW_LABEL : pending ? CANCELLING_LABEL : CANCEL_LABEL,
    // The button keeps its label (DESIGN §8); a late cancel says why it takes so long beside it.
    note: waiting ? afterStepNote(cancelProgressOf(state, sessionId)) : phase === "link_down" ? LINK_DOWN_NOTE
      : phase === "late" || phase === "escalated" ? LATE_NOTE : null,
  };
}

/** "Stopping after this step… (Run the tests)": the tool the stop waits for, when known. */
export function afterStepNote(progress) {
  const title = typeof progress?.title === "string" ? progress.title.trim() : "";
  return title ? `${AFTER_STEP_NOTE} (${title})` : AFTER_STEP_NOTE;
}

// ---------------------------------------------------------------------------------------------
// The composer

export function setComposerError(state, sessionId, text) {
  if (!sessionId) return state;
  return { ...state, composerErrors: { ...state.composerErrors, [sessionId]: String(text) } };
}

export function clearComposerError(state, sessionId) {
  if (!sessionId || !(sessionId in state.composerErrors)) return state;
  const composerErrors = { ...state.composerErrors };
  delete composerErrors[sessionId];
  return { ...state, composerErrors };
}

/**
 * What the composer shows for the selected session. With no session selected, Send launches a
 * new one with the typed prompt; while a turn runs, Send queues the text (DESIGN.md §9: nothing
 * typed is lost or silently ignored) and the cancel control stands beside it.
 */
export function composerView(state) {
  const sid = state.selectedSessionId;
  const row = sid ? state.sessions[sid] : undefined;
  const running = row?.state === RUNNING;
  const offline = isOffline(state);
  const unreachable = row?.reachable === false;
  return {
    sessionId: sid ?? null,
    hasSession: Boolean(row),
    running,
    offline,
    // While a new session starts, Send waits: what is typed then is meant for the new one, and
    // must not go to the session still shown (issue 29).
    launching: Boolean(state.launching),
    sendDisabled: offline || Boolean(state.launching) || (unreachable && !running),
    sendLabel: state.launching ? "Starting…" : row ? (running ? "Queue" : "Send") : "Start session",
    cancel: cancelControlView(state, sid),
    error: (sid && state.composerErrors[sid]) || null,
    note: unreachable ? (running ? UNREACHABLE_QUEUE_NOTE : UNREACHABLE_SEND_NOTE) : null,
  };
}
