// What each turn of the task page's sessions changed (DESIGN.md §12), kept as
// turn-changes-state.js says: {sessionId: {turnId: {files, skipped} | null}}; the requests that
// fill it after a reload (turn.diff), open a file's diff, and revert a turn (after the
// revert-dialog.js question).

import * as C from "./turn-changes-state.js";
import { humanizeError } from "./status.js";

/**
 * askRevert(summary, {returnFocus, forId}) -> Promise<boolean>: the revert dialog's question (true: put
 * the files back).
 */
export function createSessionChanges({ ws, getState, render, showError, changesView, askRevert }) {
  let changes = {};
  let probing = false;

  /** session.turn.changes, heard or answered. */
  function apply(payload) {
    changes = C.applyTurnChanges(changes, payload);
    if (payload?.session_id === getState().selectedSessionId) changesView.reload();
  }

  function markReverted(sid, turnIds) {
    changes = C.markReverted(changes, sid, turnIds);
  }

  /**
   * After a reload the page has not seen the session.turn.changes of earlier turns: it asks
   * turn.diff for the latest ended turns' files, one at a time (only sessions with a project
   * have checkpoints).
   */
  async function probe(sid) {
    const state = getState();
    const row = state.sessions[sid];
    if (probing || !row || !(row.cwd || state.task?.project_dir)) return;
    probing = true;
    try {
      for (const tid of C.turnsToProbe(state.messages[sid], changes[sid], row.current_turn_id)) {
        if (!ws.isOpen) break;
        try {
          const answer = await ws.request("turn.diff", { session_id: sid, turn_id: tid });
          changes = answer.files.length ? C.applyTurnChanges(changes, answer) : C.markProbed(changes, sid, tid);
        } catch (err) {
          if (err?.code === "DISCONNECTED") break;
          changes = C.markProbed(changes, sid, tid); // no checkpoint, or not ended: nothing to show
        }
        render();
      }
    } finally {
      probing = false;
    }
  }

  async function loadDiff(turnId, path) {
    const { diff } = await ws.request("turn.diff", { session_id: getState().selectedSessionId, turn_id: turnId, path });
    return diff;
  }

  /** revert-turn-button: asks first (the files and the later turns that go), then turn.revert. */
  async function revert(turnId, button) {
    const state = getState();
    const sid = state.selectedSessionId;
    // The card may be redrawn while the dialog is open: the focus goes back to its button then.
    const again = () => (button.isConnected ? button : document.querySelector(`[data-testid="revert-turn-button"][data-turn-id="${CSS.escape(turnId)}"]`));
    const yes = await askRevert(C.revertSummary(state.messages[sid], changes[sid], turnId), { returnFocus: again, forId: sid });
    if (!yes || getState().selectedSessionId !== sid) return;
    button.disabled = true;
    try {
      const answer = await ws.request("turn.revert", { session_id: sid, turn_id: turnId });
      markReverted(sid, [turnId, ...(answer.later_turns ?? [])]);
      changesView.reload();
      render();
    } catch (err) {
      button.disabled = false;
      showError(`Could not revert the turn. ${humanizeError(err.message)}`);
    }
  }

  return { of: (sid) => changes[sid], apply, markReverted, probe, loadDiff, revert };
}
