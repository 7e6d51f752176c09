// What the task page asks of the selected session's running turn: the cancel (and "cancel and
// undo"), stop-now, a subagent's stop, a permission's answer, and the queue's actions. Each
// folds its answer into the page's state through `setState`.

import { applyQueue, messageAddOutcome } from "./queue-state.js";
import * as S from "./state.js";
import * as SA from "./subagents-state.js";
import { humanizeError } from "./status.js";
import { newRequestId } from "./ws.js";

/** Text for a failed agent.cancel: the request's own error stays visible (spec, state machine). */
export function cancelErrorText(err) {
  switch (err?.code) {
    case "TIMEOUT":
      return "No answer to the cancel request within 15 s. You can try again.";
    case "DISCONNECTED":
      return "The connection dropped before the cancel was confirmed. You can try again.";
    default:
      return `The cancel failed: ${humanizeError(err?.message) ?? "unknown error"}`;
  }
}

export function createTurnActions({ ws, taskId, getState, setState, showError, setPageError, focusComposer, changes }) {
  /** overwrite: with revert, the files changed since the turn to put back all the same (§15). */
  /** when: "now" or "after_step" (DESIGN.md §18); a stop now while one waits for the step joins it. */
  function cancel({ revert = false, overwrite = [], when = "now" } = {}) {
    const state = getState();
    const sid = state.selectedSessionId;
    const requestId = newRequestId();
    const joins = when === "now" && S.waitsForStep(state, sid);
    const begun = S.beginCancel(state, sid, requestId, ws.epoch, when);
    if (!begun.send) return; // duplicate activation, nothing running, or offline
    setState(begun.state); // disabled + spinner now, before the request leaves
    // The clicked button is now disabled and drops focus: hand it to the input, so typing (and
    // the next Esc) go on from there.
    focusComposer();
    // Aimed at the turn this page shows (DESIGN.md §14): if it ended meanwhile, the backend
    // leaves the next one alone.
    const turnId = getState().sessions[sid]?.current_turn_id;
    const target = turnId ? { session_id: sid, task_id: taskId, turn_id: turnId } : { session_id: sid, task_id: taskId };
    if (revert) Object.assign(target, { revert: true, overwrite }); // "Cancel and undo": reverted once it settled
    // A plain cancel says nothing of `when` (the default, "now"); a joining stop now says it.
    if (when === "after_step" || joins) target.when = when;
    // While the backend holds the stop (pending: a stop after a long step, a late cancel) the
    // request waits on: its answer, an error included, comes when the stop settles.
    const holdWhile = () => getState().sessions[sid]?.cancellation_pending === true;
    ws.request("agent.cancel", target, { id: requestId, timeoutMs: S.CANCEL_REQUEST_TIMEOUT_MS, holdWhile }).then(
      (answer) => {
        if (revert && answer?.reverted) changes.markReverted(sid, [answer.reverted.turn_id, ...(answer.reverted.later_turns ?? [])]);
        if (revert && answer?.revert_error) setPageError(`The turn was cancelled, but its files were not put back: ${answer.revert_error}`);
        setState((s) => S.settleCancel(s, sid, requestId, { ok: true }));
      },
      (err) => setState((s) => S.settleCancel(s, sid, requestId, { ok: false, error: cancelErrorText(err) })),
    );
  }

  /** stop-now-button: the late cancel escalates at once (the same operation, DESIGN.md §15). */
  function stopNow() {
    const state = getState();
    const sid = state.selectedSessionId;
    const turnId = state.sessions[sid]?.current_turn_id;
    ws.request("agent.stop_now", turnId ? { session_id: sid, turn_id: turnId } : { session_id: sid }).catch((err) => {
      if (err?.code !== "DISCONNECTED") setState((s) => S.setComposerError(s, sid, `Could not stop the agent now. ${humanizeError(err?.message) ?? ""}`.trim()));
    });
    focusComposer(); // the clicked button is disabled now
  }

  /** DESIGN.md §13: one child stopped through its own cancel; the parent's turn goes on. */
  function stopSubagent(subId) {
    const state = getState();
    const sid = state.selectedSessionId;
    if (!sid || S.isOffline(state)) return;
    setState((s) => SA.markStopping(s, sid, subId));
    ws.request("subagent.cancel", { session_id: sid, subagent_id: subId }).catch((err) => {
      if (err?.code !== "DISCONNECTED") setState((s) => S.setComposerError(s, sid, `Could not stop the subagent. ${humanizeError(err?.message) ?? ""}`.trim()));
    });
  }

  /** One queue action on the selected session; the backend answers with session.queue.changed. */
  async function queueAction(action, payload, failure) {
    const state = getState();
    const sid = state.selectedSessionId;
    if (!sid || S.isOffline(state)) return;
    try {
      const result = await ws.request(action, { session_id: sid, ...payload });
      const epoch = ws.epoch;
      // An answer that carries the queue is applied at once (the notification may lag it).
      setState((s) => {
        let next = S.clearComposerError(s, sid);
        if (result && Array.isArray(result.entries)) next = applyQueue(next, sid, result, epoch);
        // queue.send_now on an idle session answers like message.add: the started message.
        const started = result && typeof result.delivery === "string" ? messageAddOutcome(result).message : null;
        if (started) next = S.addMessage(next, sid, started);
        return next;
      });
    } catch (err) {
      if (err?.code !== "DISCONNECTED") setState((s) => S.setComposerError(s, sid, `${failure} ${humanizeError(err?.message) ?? ""}`.trim()));
    }
  }

  function respondPermission(requestId, optionId) {
    const sid = getState().selectedSessionId;
    ws.request("permission.respond", { session_id: sid, request_id: requestId, option_id: optionId }).catch((err) =>
      showError(`Could not answer the permission request. ${humanizeError(err.message)}`),
    );
  }

  return { cancel, stopNow, stopSubagent, queueAction, respondPermission };
}
