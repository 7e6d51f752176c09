// Subagents (DESIGN.md §13): the child sessions of a session's agent, as the session DTO's
// `subagents` lists them and `session.subagent.changed` updates them. Pure functions over the
// page state (tests/ui_unit/subagents.test.mjs); subagent-rows.js draws what `subagentRows` says.

/** States in which a child still works (it may be stopped, if the agent lets it be). */
export const ACTIVE = new Set(["running", "requires_action"]);

const LABELS = {
  running: "Running",
  requires_action: "Waiting for approval",
  cancelling: "Stopping…",
  completed: "Done",
  cancelled: "Stopped",
  failed: "Failed",
  unknown: "Gone",
};

/** What a row says of a child's state. */
export function stateLabel(state) {
  return LABELS[state] ?? String(state ?? "");
}

function withList(state, sid, list) {
  const row = state.sessions?.[sid];
  if (!row) return state;
  return { ...state, sessions: { ...state.sessions, [sid]: { ...row, subagents: list } } };
}

/**
 * Folds a `session.subagent.changed` payload into the session's list, as the server keeps it:
 * a known child is replaced in place; the first child of another turn drops the ended children
 * of earlier turns (one still working stays: it can still be stopped).
 */
export function applySubagentChanged(state, payload) {
  const sid = payload?.session_id;
  const sub = payload?.subagent;
  if (typeof sid !== "string" || typeof sub?.id !== "string" || !state.sessions?.[sid]) return state;
  const list = Array.isArray(state.sessions[sid].subagents) ? state.sessions[sid].subagents : [];
  const at = list.findIndex((s) => s.id === sub.id);
  if (at >= 0) return withList(state, sid, list.map((s, i) => (i === at ? { ...sub, turn_id: s.turn_id } : s)));
  const newTurn = sub.turn_id != null && list.some((s) => s.turn_id != null && s.turn_id !== sub.turn_id);
  const kept = newTurn ? list.filter((s) => ACTIVE.has(s.state) || s.state === "cancelling") : list;
  return withList(state, sid, [...kept, sub]);
}

/** The Stop was pressed: the row shows "Stopping…" at once (the server's answer confirms it). */
export function markStopping(state, sid, subId) {
  const list = state.sessions?.[sid]?.subagents;
  if (!Array.isArray(list)) return state;
  return withList(state, sid, list.map((s) => (s.id === subId && ACTIVE.has(s.state) ? { ...s, state: "cancelling", cancellable: false } : s)));
}

/**
 * The rows under the session's conversation: while a turn runs, its children (whatever their
 * state, so a stopped one reads "Stopped" beside the others); at any time, a child still working
 * (a parent that ended may leave one running). Each: {id, title, task, activity (its last, while
 * it works), state, label, canStop}.
 */
export function subagentRows(state, sid, { offline = false } = {}) {
  const row = sid ? state.sessions?.[sid] : undefined;
  const list = Array.isArray(row?.subagents) ? row.subagents : [];
  const turn = row?.state === "RUNNING" ? row.current_turn_id : null;
  return list
    .filter((s) => (turn != null && s.turn_id === turn) || ACTIVE.has(s.state) || s.state === "cancelling")
    .map((s) => ({
      id: s.id,
      title: s.title || s.id,
      task: typeof s.task === "string" ? s.task : "",
      activity: ACTIVE.has(s.state) && typeof s.last_activity === "string" ? s.last_activity : "",
      state: s.state,
      label: stateLabel(s.state),
      canStop: Boolean(s.cancellable) && ACTIVE.has(s.state) && !offline,
    }));
}

/** What a trace line says of how a child ended (the `subagent` message's `outcome`). */
const OUTCOME_WORDS = {
  finished: "finished",
  stopped_by_you: "stopped by you",
  stopped: "stopped",
  failed: "failed",
  ran: "ran",
};

/**
 * A `subagent` message (a child's trace, written when it ended) as the transcript shows it:
 * {title, outcome, words, task, output, outputCut, tools, toolsMore, empty}.
 */
export function traceView(message) {
  const meta = message?.metadata ?? {};
  const outcome = typeof meta.outcome === "string" ? meta.outcome : "ran";
  const tools = Array.isArray(meta.tools) ? meta.tools.filter((t) => typeof t === "string") : [];
  const output = typeof meta.output === "string" ? meta.output : "";
  return {
    title: String(meta.title || message?.content || "Subagent"),
    outcome,
    words: OUTCOME_WORDS[outcome] ?? outcome,
    task: typeof meta.task === "string" ? meta.task : "",
    output,
    outputCut: Boolean(meta.output_cut),
    tools,
    toolsMore: Number.isInteger(meta.tools_more) ? meta.tools_more : 0,
    empty: !output.trim() && tools.length === 0,
  };
}
