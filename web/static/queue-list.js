// The queue of messages waiting for the running turn (DESIGN.md §9, §11: `queue-list`), drawn
// right above the composer. Desktop and the compact composer share this one component, so their
// controls cannot drift apart. It draws queue-state.queueView(); every change is a request to
// the backend, which owns the queue and answers with `session.queue.changed`.

import { h } from "./dom.js";
import { movedPosition } from "./queue-state.js";

/**
 * handlers: {onUpdate(id, text), onRemove(id), onMove(id, position), onSendNow(id),
 * onSetAutoRun(bool)}; each may return a promise (failures are the page's to show).
 * Returns {el, update(view)}.
 */
export function createQueueList(handlers) {
  const title = h("h3", { class: "queue-title" });
  const paused = h("p", { class: "queue-paused", dataset: { testid: "queue-paused" }, hidden: true });
  const toggle = h("button", { type: "button", class: "btn btn-secondary btn-small", dataset: { testid: "auto-run-toggle" } });
  const items = h("ol", { class: "queue-items" });
  const el = h(
    "section",
    { class: "queue", dataset: { testid: "queue-list" }, "aria-label": "Queued messages", hidden: true },
    h("div", { class: "queue-head" }, title, paused, toggle),
    items,
  );

  let view = null;
  let drawn = null;
  // The entry being edited and its draft: kept across redraws (a streaming turn re-renders the
  // page on every chunk), so typing is never lost to a repaint.
  let editing = null; // {id, draft}

  toggle.addEventListener("click", () => {
    if (view && !view.disabled) handlers.onSetAutoRun(!view.autoRun);
  });

  function button(label, testid, action, entryId, onClick, { text = label, disabled = false } = {}) {
    const b = h(
      "button",
      { type: "button", class: `btn btn-small btn-queue btn-queue--${action}`, dataset: { testid, action, entryId }, "aria-label": label, title: label },
      text,
    );
    b.disabled = disabled || Boolean(view?.disabled);
    b.addEventListener("click", onClick);
    return b;
  }

  function finishEdit(entry, save) {
    const draft = editing?.draft.trim() ?? "";
    editing = null;
    if (save && draft && draft !== entry.content) handlers.onUpdate(entry.id, draft);
    redraw(true);
    items.querySelector(`[data-entry-id="${CSS.escape(entry.id)}"][data-action="edit"]`)?.focus();
  }

  function drawEditor(entry) {
    const input = h("textarea", {
      class: "queue-edit-input",
      rows: 2,
      "aria-label": "Edit the queued message",
      dataset: { testid: "queued-edit-input" },
    });
    input.value = editing.draft;
    input.addEventListener("input", () => {
      if (editing) editing.draft = input.value;
    });
    input.addEventListener("keydown", (event) => {
      if (event.key === "Escape") {
        // Leaves the editor; it must not also reach the page's Esc, which cancels the turn.
        event.preventDefault();
        event.stopPropagation();
        finishEdit(entry, false);
      } else if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        finishEdit(entry, true);
      }
    });
    return [
      input,
      h(
        "div",
        { class: "queue-actions" },
        button("Save", "save-queued-button", "save", entry.id, () => finishEdit(entry, true)),
        button("Discard the edit", "discard-edit-button", "discard", entry.id, () => finishEdit(entry, false), { text: "Cancel" }),
      ),
    ];
  }

  function drawEntry(entry, index, count) {
    const isEditing = editing?.id === entry.id;
    const body = isEditing
      ? drawEditor(entry)
      : [
          h("p", { class: "queued-text" }, entry.content),
          h(
            "div",
            { class: "queue-actions" },
            button("Move up", "move-up-button", "up", entry.id, () => move(entry.id, -1), { text: "↑", disabled: index === 0 }),
            button("Move down", "move-down-button", "down", entry.id, () => move(entry.id, 1), { text: "↓", disabled: index === count - 1 }),
            button("Edit", "edit-queued-button", "edit", entry.id, () => {
              editing = { id: entry.id, draft: entry.content };
              redraw(true);
              items.querySelector(".queue-edit-input")?.focus();
            }),
            button("Remove", "remove-queued-button", "remove", entry.id, () => handlers.onRemove(entry.id)),
            button("Send now", "send-now-button", "send-now", entry.id, () => handlers.onSendNow(entry.id)),
          ),
        ];
    return h(
      "li",
      { class: `queued-message${isEditing ? " is-editing" : ""}`, dataset: { testid: "queued-message", entryId: entry.id } },
      h("span", { class: "queued-index", "aria-hidden": "true" }, String(index + 1)),
      h("div", { class: "queued-body" }, ...body),
    );
  }

  function move(entryId, delta) {
    const position = movedPosition(view?.entries ?? [], entryId, delta);
    if (position !== null) handlers.onMove(entryId, position);
  }

  function redraw(force = false) {
    if (!view) return;
    if (editing && !view.entries.some((e) => e.id === editing.id)) editing = null; // sent or removed
    const signature = JSON.stringify([view.entries.map((e) => [e.id, e.content]), view.autoRun, view.reason, view.disabled, editing?.id ?? null]);
    if (!force && signature === drawn) return;
    drawn = signature;
    // Keep keyboard focus on the same control of the same entry across the redraw (a moved
    // entry's "Move up" stays focused, so pressing it again moves it again).
    const active = document.activeElement;
    const keep = items.contains(active) && active.dataset?.entryId ? [active.dataset.entryId, active.dataset.action] : null;
    const count = view.entries.length;
    title.textContent = count === 1 ? "1 queued message" : `${count} queued messages`;
    paused.hidden = !view.paused;
    paused.textContent = view.reason ?? "";
    toggle.textContent = view.autoRun ? "Pause queue" : "Resume";
    toggle.setAttribute("aria-pressed", view.autoRun ? "true" : "false");
    toggle.title = view.autoRun ? "Hold the queue after the current turn" : "Run the queue: the next message starts when the agent is free";
    toggle.disabled = view.disabled;
    items.replaceChildren(...view.entries.map((e, i) => drawEntry(e, i, count)));
    if (keep) {
      const [id, action] = keep;
      const again = items.querySelector(`[data-entry-id="${CSS.escape(id)}"][data-action="${CSS.escape(action ?? "")}"]`);
      (again && !again.disabled ? again : items.querySelector(`[data-entry-id="${CSS.escape(id)}"] button:not([disabled])`))?.focus();
    }
  }

  return {
    el,
    update(next) {
      if (view && next.sessionId !== view.sessionId) editing = null; // another session's queue
      view = next;
      el.hidden = !next.visible;
      el.dataset.paused = next.paused ? "true" : "false";
      redraw();
    },
  };
}
