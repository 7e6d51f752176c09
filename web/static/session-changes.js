// What each turn of the task page's sessions changed (DESIGN.md §12), kept as
// turn-changes-state.js says: {sessionId: {turnId: {files, skipped} | null}}; the requests that
// fill it after a reload (turn.diff), open a file's diff, and the three ways files go back, each
// after the revert-dialog.js question filled by turn.revert.preview (DESIGN.md §15): revert a turn
// (`revert-turn-button`), undo a revert (`undo-revert-button`, by its revert_id), and cancel the
// running turn and undo it ("Cancel and undo": `cancelAndUndo`, also the keyboard's).

import { CANCEL_UNDO_QUESTION, UNDO_QUESTION } from "./revert-dialog.js";
import { humanizeError } from "./status.js";
import * as C from "./turn-changes-state.js";

/**
 * askRevert(preview, {returnFocus, forId, question, confirmLabel}) -> Promise<{overwrite}|null>:
 * the revert dialog's question. cancelTurn({revert, overwrite}) is turn-actions.js's cancel.
 */
export function createSessionChanges({ ws, getState, render, showError, changesView, askRevert, cancelTurn }) {
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
   * turn.diff for the latest ended turns' files, one at a time.
   */
  async function probe(sid) {
    const state = getState();
    const row = state.sessions[sid];
    if (probing || !row) return;
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

  /** What a revert to `turnId`'s start would change now, asked and answered; null: not asked. */
  async function ask(sid, turnId, options) {
    let preview;
    try {
      preview = await ws.request("turn.revert.preview", { session_id: sid, turn_id: turnId });
    } catch (err) {
      showError(`Could not tell what would be put back. ${humanizeError(err.message) ?? ""}`.trim());
      return null;
    }
    if (getState().selectedSessionId !== sid) return null;
    const answer = await askRevert(preview, { forId: sid, ...options });
    return answer && getState().selectedSessionId === sid ? answer : null;
  }

  /** turn.revert of a turn (or, by its revert_id, of a revert), after the question. */
  async function revertTo(turnId, button, { testid, question, confirmLabel }) {
    const sid = getState().selectedSessionId;
    // The card may be redrawn while the dialog is open: the focus goes back to its button then.
    const again = () => (button.isConnected ? button : document.querySelector(`[data-testid="${testid}"][data-turn-id="${CSS.escape(turnId)}"]`));
    const answer = await ask(sid, turnId, { returnFocus: again, question, confirmLabel });
    if (!answer) return;
    button.disabled = true;
    try {
      const done = await ws.request("turn.revert", { session_id: sid, turn_id: turnId, overwrite: answer.overwrite });
      markReverted(sid, [turnId, ...(done.later_turns ?? [])]);
      changesView.reload();
      render();
    } catch (err) {
      button.disabled = false;
      showError(`Could not put the files back. ${humanizeError(err.message)}`);
    }
  }

  /** revert-turn-button. */
  function revert(turnId, button) {
    return revertTo(turnId, button, { testid: "revert-turn-button" });
  }

  /** undo-revert-button: the revert's own revert (its revert_id), under the same rules. */
  function undoRevert(revertId, button) {
    return revertTo(revertId, button, { testid: "undo-revert-button", question: UNDO_QUESTION, confirmLabel: "Undo the revert" });
  }

  /**
   * "Cancel and undo" (cancel-revert-button, and the keyboard's shortcut): asks first with the
   * revert's dialog (what goes, the per-file choice); a dismissal cancels nothing.
   */
  async function cancelAndUndo() {
    const state = getState();
    const sid = state.selectedSessionId;
    const turnId = state.sessions[sid]?.current_turn_id;
    if (!sid || !turnId) return;
    const trigger = document.activeElement;
    const answer = await ask(sid, turnId, { returnFocus: () => trigger, question: CANCEL_UNDO_QUESTION, confirmLabel: "Cancel and put back" });
    if (!answer) return;
    if (getState().sessions[sid]?.current_turn_id === turnId) {
      cancelTurn({ revert: true, overwrite: answer.overwrite });
      return;
    }
    // The turn ended while the question was open: its files go back all the same.
    try {
      const done = await ws.request("turn.revert", { session_id: sid, turn_id: turnId, overwrite: answer.overwrite });
      markReverted(sid, [turnId, ...(done.later_turns ?? [])]);
      render();
    } catch (err) {
      showError(`Could not put the files back. ${humanizeError(err.message)}`);
    }
  }

  /** What a turn-changes card (and a revert's undo) asks of it: turn-changes-card.js's ctx. */
  const cardContext = { loadTurnDiff: loadDiff, onRevert: revert, onUndoRevert: undoRevert };

  return { of: (sid) => changes[sid], apply, markReverted, probe, loadDiff, revert, undoRevert, cancelAndUndo, cardContext };
}
