// The dialog that renames, archives/unarchives and deletes a task or a session (`item-dialog`).
// A native modal <dialog>: focus moves into it and stays there, the page under it is inert, and
// Esc closes it (the task page's own Esc-cancels-the-turn rule steps aside while it is open).
// Delete asks again in the same dialog before anything is sent.

import { h } from "./dom.js";
import { humanizeError } from "./status.js";

/**
 * spec of open(): {kind: "task"|"session", id, name, title, placeholder, archived, deleteText,
 * maxLength, rename(title), setArchived(bool), remove(): promises; returnFocus(): the element to focus after
 * closing (looked up then: the list may have been redrawn meanwhile)}.
 */
export function createItemDialog() {
  const heading = h("h2", { class: "item-dialog-title", id: "item-dialog-title" });
  const input = h("input", {
    id: "item-dialog-name",
    class: "text-input",
    type: "text",
    autocomplete: "off",
    dataset: { testid: "rename-input" },
  });
  const renameButton = h("button", { type: "submit", class: "btn btn-primary", dataset: { testid: "rename-button" } }, "Rename");
  const renameForm = h(
    "form",
    { class: "item-dialog-rename" },
    h("label", { for: "item-dialog-name", class: "field-label" }, "Name"),
    h("div", { class: "item-dialog-row" }, input, renameButton),
  );
  const archiveButton = h("button", { type: "button", class: "btn", dataset: { testid: "archive-button" } });
  const deleteButton = h("button", { type: "button", class: "btn btn-danger", dataset: { testid: "delete-button" } }, "Delete…");
  const closeButton = h("button", { type: "button", class: "btn", dataset: { testid: "dialog-close" } }, "Close");
  const manageView = h(
    "div",
    { class: "item-dialog-view" },
    renameForm,
    h("div", { class: "item-dialog-actions" }, archiveButton, deleteButton, closeButton),
  );

  const confirmText = h("p", { class: "item-dialog-text", dataset: { testid: "confirm-text" } });
  const confirmButton = h("button", { type: "button", class: "btn btn-danger-solid", dataset: { testid: "confirm-delete" } }, "Delete");
  const keepButton = h("button", { type: "button", class: "btn", dataset: { testid: "confirm-keep" } }, "Keep it");
  const confirmView = h("div", { class: "item-dialog-view", hidden: true }, confirmText, h("div", { class: "item-dialog-actions" }, keepButton, confirmButton));

  const error = h("p", { class: "form-error", role: "alert", dataset: { testid: "dialog-error" }, hidden: true });
  const el = h(
    "dialog",
    { class: "item-dialog", dataset: { testid: "item-dialog" }, "aria-labelledby": "item-dialog-title" },
    heading,
    manageView,
    confirmView,
    error,
  );

  let spec = null;
  let busy = false;
  let offline = false;

  function draw() {
    for (const b of [renameButton, archiveButton, deleteButton, confirmButton]) b.disabled = busy || offline;
    input.disabled = busy;
    el.setAttribute("aria-busy", busy ? "true" : "false");
  }

  function showError(text) {
    error.hidden = !text;
    error.textContent = text ?? "";
  }

  function showConfirm(on) {
    manageView.hidden = on;
    confirmView.hidden = !on;
    const noun = spec?.kind === "task" ? "task" : "session";
    heading.textContent = on ? `Delete this ${noun}?` : `${spec?.kind === "task" ? "Task" : "Session"}: ${spec?.name ?? ""}`;
    showError(null);
    (on ? keepButton : input).focus();
  }

  async function run(action, failure) {
    if (!spec || busy) return;
    busy = true;
    showError(null);
    draw();
    try {
      await action();
      close();
    } catch (err) {
      showError(`${failure} ${humanizeError(err?.message) ?? ""}`.trim());
    } finally {
      busy = false;
      draw();
    }
  }

  renameForm.addEventListener("submit", (event) => {
    event.preventDefault();
    const text = input.value.trim();
    if (!text && spec?.kind === "task") {
      showError("Give the task a title.");
      input.focus();
      return;
    }
    run(() => spec.rename(text), "Could not rename it.");
  });
  archiveButton.addEventListener("click", () => {
    const archive = !spec?.archived;
    run(() => spec.setArchived(archive), archive ? "Could not archive it." : "Could not unarchive it.");
  });
  deleteButton.addEventListener("click", () => showConfirm(true));
  keepButton.addEventListener("click", () => showConfirm(false));
  confirmButton.addEventListener("click", () => run(() => spec.remove(), "Could not delete it."));
  closeButton.addEventListener("click", () => close());
  el.addEventListener("close", () => {
    const done = spec;
    spec = null;
    const target = done?.returnFocus?.();
    if (target?.isConnected) target.focus();
  });

  function open(next) {
    spec = next;
    busy = false;
    input.value = next.title ?? "";
    input.placeholder = next.placeholder ?? "";
    input.maxLength = next.maxLength ?? 200;
    archiveButton.textContent = next.archived ? "Unarchive" : "Archive";
    confirmText.textContent = next.deleteText;
    draw();
    if (!el.open) el.showModal();
    showConfirm(false);
    input.select();
  }

  function close() {
    if (el.open) el.close();
  }

  return {
    el,
    open,
    close,
    /** The id of the item the dialog is open for, or null. */
    get openFor() {
      return el.open && spec ? spec.id : null;
    },
    setOffline(value) {
      if (offline === value) return;
      offline = value;
      draw();
    },
  };
}
