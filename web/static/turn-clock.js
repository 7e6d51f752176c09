// The task page's clock for turn-progress.js (DESIGN.md §15): when the page saw each session
// run, last heard an agent event of it, and heard its cancel go late; one ticker re-draws the
// working indicator and the escalation countdown while either counts.

import * as S from "./state.js";
import { countdownView, workingView } from "./turn-progress.js";

export function createTurnClock({ env, working, countdown, timeouts, getState }) {
  const seenRunningAt = {};
  const lastEventAt = {};
  const lateAt = {};
  let ticker = null;
  let offlineAt = null; // since when the page hears nothing: its clock stops there

  function render() {
    const state = getState();
    const sid = state.selectedSessionId;
    const now = Date.now();
    offlineAt = S.isOffline(state) ? offlineAt ?? now : null;
    for (const [id, row] of Object.entries(state.sessions)) {
      if (row.state === S.RUNNING) seenRunningAt[id] ??= now;
      else delete seenRunningAt[id];
    }
    const work = workingView(state, sid, { now, seenRunningAt: seenRunningAt[sid], lastEventAt: lastEventAt[sid], offlineAt: offlineAt ?? undefined });
    const late = countdownView(state, sid, { now, lateAt: lateAt[sid], timeouts });
    working.update(work);
    countdown.update({ ...late, offline: S.isOffline(state) });
    const ticking = work.visible || late.visible;
    if (ticking && ticker === null) ticker = env.setInterval(render, 1000);
    if (!ticking && ticker !== null) {
      env.clearInterval(ticker);
      ticker = null;
    }
  }

  /** Times what turn-progress.js needs from a notification. */
  function notice(action, payload) {
    const sid = payload?.session_id;
    if (typeof sid !== "string") return;
    if (action === "session.message.appended" || (action.startsWith("session.message.") && payload.message?.role === "agent")) lastEventAt[sid] = Date.now();
    if (action === "session.cancel.progress") {
      if (payload.phase === "late") lateAt[sid] = Date.now();
      else delete lateAt[sid];
    }
  }

  return { render, notice };
}
