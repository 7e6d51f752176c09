// The revert's confirmation (`revert-dialog`, DESIGN.md §12, §15): before turn.revert (and before
// "Cancel and undo") the page says what goes, from turn.revert.preview: the files the revert will
// change (each with what happens to it: restored, deleted, re-created) and how many later turns'
// changes go too. A file changed since the turn by someone else (by hand, another session) gets a
// choice, `revert-keep-mine` (the default) or `revert-overwrite`, and one pair sets them all. A
// native modal <dialog> like item-dialog.js: focus moves into it (onto the safe choice) and stays
// there, the page under it is inert, and Esc closes it without a revert (the task page's own
// Esc-cancels-the-turn rule steps aside while a dialog is open).

import { h } from "./dom.js";
import { naturalOrder } from "./turn-changes-state.js";

export const REVERT_QUESTION = "Put the files back as they were before this turn?";
export const UNDO_QUESTION = "Undo the revert: put the files back as they were before it?";
export const CANCEL_UNDO_QUESTION = "Cancel the turn and put its files back?";

/** At most this many files without a choice are named; the rest are counted. */
export const REVERT_NAMED = 10;

const ACTION_WORDS = { restored: "put back", deleted: "deleted", "re-created": "re-created" };

function plural(n, one, many) {
  return `${n} ${n === 1 ? one : many}`;
}

let dialogs = 0;

/**
 * Returns {el, ask(preview, {returnFocus, forId, question, confirmLabel}) -> Promise<{overwrite}|null>,
 * close(), openFor}. Mount `el` once.
 */
export function createRevertDialog() {
  const n = (dialogs += 1);
  const heading = h("h2", { class: "item-dialog-title", id: `revert-dialog-title-${n}` }, REVERT_QUESTION);
  const later = h("p", { class: "item-dialog-text revert-later", id: `revert-dialog-later-${n}`, dataset: { testid: "revert-later" }, hidden: true });
  const editedNote = h("p", { class: "item-dialog-text revert-edited-note", dataset: { testid: "revert-edited-note" }, hidden: true });
  const keepAll = h("button", { type: "button", class: "btn btn-small", dataset: { testid: "revert-keep-mine-all" } }, "Keep all mine");
  const overwriteAll = h("button", { type: "button", class: "btn btn-small", dataset: { testid: "revert-overwrite-all" } }, "Put all back");
  const allRow = h("div", { class: "revert-all", hidden: true }, keepAll, overwriteAll);
  const filesTitle = h("p", { class: "revert-files-title", id: `revert-files-title-${n}` });
  const files = h("ul", { class: "revert-files", "aria-labelledby": `revert-files-title-${n}`, dataset: { testid: "revert-files" } });
  const cancel = h("button", { type: "button", class: "btn", dataset: { testid: "revert-dialog-cancel" } }, "Keep the files");
  const confirm = h("button", { type: "button", class: "btn btn-danger-solid", dataset: { testid: "revert-confirm-button" } }, "Put files back");
  const el = h(
    "dialog",
    { class: "item-dialog revert-dialog", dataset: { testid: "revert-dialog" }, "aria-labelledby": heading.id, "aria-describedby": later.id },
    heading,
    later,
    editedNote,
    allRow,
    filesTitle,
    files,
    h("div", { class: "item-dialog-actions" }, cancel, confirm),
  );

  let pending = null; // {resolve, returnFocus, forId} of the question shown
  let choices = new Map(); // path -> "keep" | "overwrite", for each file edited since

  /** Closes with an answer: the focus goes back, then the question resolves. */
  function finish(answer) {
    const done = pending;
    pending = null;
    if (el.open) el.close();
    if (!done) return;
    const target = done.returnFocus?.();
    if (target?.isConnected && !target.disabled) target.focus();
    done.resolve(answer);
  }

  function overwrites() {
    return [...choices].filter(([, c]) => c === "overwrite").map(([p]) => p);
  }

  cancel.addEventListener("click", () => finish(null));
  confirm.addEventListener("click", () => finish({ overwrite: overwrites() }));
  // Esc (the dialog's own cancel) closes it: no revert. (A close event left over from a question
  // replaced by a new one finds the dialog open again: it is not this one's answer.)
  el.addEventListener("close", () => {
    if (!el.open) finish(null);
  });

  function setAll(choice) {
    for (const path of choices.keys()) choices.set(path, choice);
    for (const input of files.querySelectorAll("input[type=radio]")) input.checked = input.value === choice;
    retitle();
  }

  // What the revert does to each file given the choices made: a file kept as the person left
  // it is not counted as put back, and its row says "kept" instead of what the revert would do.
  function retitle() {
    const total = Number(files.dataset.total ?? 0);
    if (!total) return;
    const kept = [...choices.values()].filter((c) => c === "keep").length;
    const back = total - kept;
    const them = kept === 1 ? "it" : "them";
    filesTitle.textContent = !kept
      ? `Files put back (${back}):`
      : !back
        ? `Nothing put back: ${plural(kept, "file", "files")} kept as you left ${them}.`
        : `Files put back (${back}), ${plural(kept, "file", "files")} kept as you left ${them}:`;
    for (const li of files.querySelectorAll("li[data-edited=true]")) {
      const label = li.querySelector(".revert-action");
      if (label) label.textContent = choices.get(li.dataset.path) === "keep" ? "kept" : (ACTION_WORDS[li.dataset.action] ?? li.dataset.action);
    }
  }
  keepAll.addEventListener("click", () => setAll("keep"));
  overwriteAll.addEventListener("click", () => setAll("overwrite"));

  function choice(path, i) {
    const name = `revert-choice-${n}-${i}`;
    const radio = (value, testid, label) => {
      const input = h("input", { type: "radio", name, value, checked: value === "keep", dataset: { testid } });
      input.addEventListener("change", () => {
        if (!input.checked) return;
        choices.set(path, value);
        retitle();
      });
      return h("label", { class: "revert-choice" }, input, ` ${label}`);
    };
    return h(
      "fieldset",
      { class: "revert-choices", "aria-label": `${path}: changed since this turn` },
      radio("keep", "revert-keep-mine", "Keep mine"),
      radio("overwrite", "revert-overwrite", "Put back"),
    );
  }

  function row(f, i) {
    return h(
      "li",
      { class: `revert-file${f.edited_since ? " revert-file--edited" : ""}`, dataset: { testid: "revert-file", path: f.path, action: f.action, edited: f.edited_since ? "true" : "false" } },
      h("span", { class: "revert-file-head" }, h("bdi", { class: "revert-path" }, f.path), " ", h("span", { class: "revert-action" }, ACTION_WORDS[f.action] ?? f.action)),
      f.edited_since ? h("span", { class: "revert-edited", dataset: { testid: "revert-edited" } }, "Changed since this turn (by you or another session)") : null,
      f.edited_since ? choice(f.path, i) : null,
    );
  }

  function draw(preview) {
    const list = [...(preview?.files ?? [])].sort((a, b) => naturalOrder(a.path, b.path));
    const laterCount = preview?.later_turns?.length ?? 0;
    later.hidden = laterCount === 0;
    later.textContent = laterCount ? `The changes of ${plural(laterCount, "later turn", "later turns")} go too.` : "";
    later.dataset.count = String(laterCount);
    // Every file changed since is named (each needs its choice), then the others up to ten.
    const edited = list.filter((f) => f.edited_since);
    const plain = list.filter((f) => !f.edited_since);
    const shown = [...edited, ...plain.slice(0, REVERT_NAMED)];
    const more = list.length - shown.length;
    choices = new Map(edited.map((f) => [f.path, "keep"]));
    editedNote.hidden = edited.length === 0;
    editedNote.textContent = edited.length
      ? `${plural(edited.length, "file was", "files were")} changed after this turn, not by it. Yours are kept unless you choose "Put back".`
      : "";
    allRow.hidden = edited.length < 2;
    filesTitle.hidden = list.length === 0;
    files.hidden = list.length === 0;
    const items = shown.map(row);
    if (more) items.push(h("li", { class: "revert-more", dataset: { testid: "revert-more" } }, `… and ${more} more`));
    files.replaceChildren(...items);
    files.dataset.total = String(list.length);
    filesTitle.textContent = "";
    retitle();
    confirm.disabled = list.length === 0;
    if (!list.length) filesTitle.hidden = false;
    if (!list.length) filesTitle.textContent = "Nothing to put back: the files are as they were.";
  }

  /**
   * Shows the question; resolves {overwrite: [paths]} when "Put files back" is pressed, null on
   * Keep or Esc. `preview` is turn.revert.preview's answer. returnFocus() names the element to
   * focus after closing, looked up then (the card it came from may have been redrawn meanwhile).
   */
  function ask(preview, { returnFocus, forId = null, question = REVERT_QUESTION, confirmLabel = "Put files back" } = {}) {
    if (pending) finish(null);
    heading.textContent = question;
    confirm.textContent = confirmLabel;
    draw(preview);
    return new Promise((resolve) => {
      pending = { resolve, returnFocus, forId };
      if (!el.open) el.showModal();
      cancel.focus(); // the safe choice: Enter right away keeps the files
    });
  }

  return {
    el,
    ask,
    close: () => finish(null),
    /** The id given to the question shown (the session whose turn it reverts), or null. */
    get openFor() {
      return el.open && pending ? pending.forId : null;
    },
  };
}
