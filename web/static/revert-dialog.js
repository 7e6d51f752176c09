// The revert's confirmation (`revert-dialog`, DESIGN.md §12, §15): before turn.revert the page
// says what goes, from turn-changes-state.js revertSummary(): the files put back (named, ten at
// most) and how many later turns' changes go too. A native modal <dialog> like item-dialog.js:
// focus moves into it (onto the safe choice) and stays there, the page under it is inert, and Esc
// closes it without a revert (the task page's own Esc-cancels-the-turn rule steps aside while a
// dialog is open).

import { h } from "./dom.js";

export const REVERT_QUESTION = "Put the files back as they were before this turn?";

function plural(n, one, many) {
  return `${n} ${n === 1 ? one : many}`;
}

/**
 * Returns {el, ask(summary, {returnFocus, forId}) -> Promise<boolean>, close(), openFor}. Mount
 * `el` once.
 */
export function createRevertDialog() {
  const heading = h("h2", { class: "item-dialog-title", id: "revert-dialog-title" }, REVERT_QUESTION);
  const later = h("p", { class: "item-dialog-text revert-later", id: "revert-dialog-later", dataset: { testid: "revert-later" }, hidden: true });
  const filesTitle = h("p", { class: "revert-files-title", id: "revert-files-title" });
  const files = h("ul", { class: "revert-files", "aria-labelledby": "revert-files-title", dataset: { testid: "revert-files" } });
  const cancel = h("button", { type: "button", class: "btn", dataset: { testid: "revert-dialog-cancel" } }, "Keep the files");
  const confirm = h("button", { type: "button", class: "btn btn-danger-solid", dataset: { testid: "revert-confirm-button" } }, "Put files back");
  const el = h(
    "dialog",
    { class: "item-dialog revert-dialog", dataset: { testid: "revert-dialog" }, "aria-labelledby": "revert-dialog-title", "aria-describedby": "revert-dialog-later" },
    heading,
    later,
    filesTitle,
    files,
    h("div", { class: "item-dialog-actions" }, cancel, confirm),
  );

  let pending = null; // {resolve, returnFocus} of the question shown

  /** Closes with an answer: the focus goes back, then the question resolves. */
  function finish(yes) {
    const done = pending;
    pending = null;
    if (el.open) el.close();
    if (!done) return;
    const target = done.returnFocus?.();
    if (target?.isConnected && !target.disabled) target.focus();
    done.resolve(yes);
  }

  cancel.addEventListener("click", () => finish(false));
  confirm.addEventListener("click", () => finish(true));
  // Esc (the dialog's own cancel) closes it: no revert. (A close event left over from a question
  // replaced by a new one finds the dialog open again: it is not this one's answer.)
  el.addEventListener("close", () => {
    if (!el.open) finish(false);
  });

  function draw(summary) {
    const { later: laterCount = 0, paths = [], more = 0 } = summary ?? {};
    later.hidden = laterCount === 0;
    later.textContent = laterCount ? `The changes of ${plural(laterCount, "later turn", "later turns")} go too.` : "";
    later.dataset.count = String(laterCount);
    const total = paths.length + more;
    filesTitle.hidden = total === 0;
    files.hidden = total === 0;
    filesTitle.textContent = `Files put back (${total}):`;
    const items = paths.map((path) => h("li", { class: "revert-file", dataset: { testid: "revert-file", path } }, path));
    if (more) items.push(h("li", { class: "revert-more", dataset: { testid: "revert-more" } }, `… and ${more} more`));
    files.replaceChildren(...items);
    files.dataset.total = String(total);
  }

  /**
   * Shows the question; resolves true when "Put files back" is pressed, false on Keep or Esc.
   * returnFocus() names the element to focus after closing, looked up then (the card it came
   * from may have been redrawn meanwhile).
   */
  function ask(summary, { returnFocus, forId = null } = {}) {
    if (pending) finish(false);
    draw(summary);
    return new Promise((resolve) => {
      pending = { resolve, returnFocus, forId };
      if (!el.open) el.showModal();
      cancel.focus(); // the safe choice: Enter right away keeps the files
    });
  }

  function close() {
    finish(false);
  }

  return {
    el,
    ask,
    close,
    /** The id given to the question shown (the session whose turn it reverts), or null. */
    get openFor() {
      return el.open && pending ? pending.forId : null;
    },
  };
}
