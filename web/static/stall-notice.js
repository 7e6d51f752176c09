// The stall notice (DESIGN.md §9, §11: `stall-notice`): a running turn with no agent output for a
// while says so above the composer and offers its own Cancel, which takes the same path as the
// cancel control. What "stalled" means is status.stallNotice()'s; this only draws it.

import { h } from "./dom.js";

/** Returns {el, update(notice, cancelView)}; onCancel() asks to cancel the selected turn. */
export function createStallNotice({ onCancel }) {
  const text = h("span", { class: "stall-text" });
  const cancel = h(
    "button",
    { type: "button", class: "btn btn-cancel btn-small", dataset: { testid: "stall-cancel-button" } },
    "Cancel the turn",
  );
  cancel.addEventListener("click", () => {
    if (!cancel.disabled) onCancel();
  });
  // aria-live, not role="status": the cancel spinner is the page's one status element.
  const el = h(
    "div",
    { class: "stall-notice", dataset: { testid: "stall-notice" }, "aria-live": "polite", hidden: true },
    h("span", { class: "badge-icon", "aria-hidden": "true" }, "⚠"),
    text,
    cancel,
  );

  return {
    el,
    update(notice, cancelView) {
      el.hidden = !notice.visible;
      text.textContent = notice.visible ? `${notice.text}. It may be stuck.` : "";
      cancel.disabled = !cancelView.visible || cancelView.disabled;
    },
  };
}
