// THE cancel control: the one component both composers render (AC-UI-CANCEL-TURN-PROGRESS-001.7),
// so desktop and mobile cannot drift apart. It only draws a view computed by
// state.cancelControlView(); what "pending" means lives in state.js.

import { h, setAttr } from "./dom.js";
import { CANCEL_LABEL, CANCELLING_LABEL } from "./state.js";

/**
 * Returns {el, update(view, sessionId)}. `onActivate` runs on click; the caller turns it into
 * state.beginCancel(), which ignores duplicates, and re-renders synchronously so the button is
 * disabled before the request leaves.
 */
export function createCancelControl({ onActivate }) {
  // role="status" makes the progress animation perceivable without sight; it exists (is not
  // hidden) only while cancelling, so it is the page's one status element at that time.
  const spinner = h("span", { class: "spinner", role: "status", "aria-label": CANCELLING_LABEL, hidden: true });
  const label = h("span", { class: "cancel-label" }, CANCEL_LABEL);
  const button = h(
    "button",
    { type: "button", class: "btn btn-cancel", dataset: { testid: "cancel-agent-button" }, hidden: true },
    spinner,
    label,
  );
  button.addEventListener("click", (event) => {
    event.preventDefault();
    if (!button.disabled) onActivate();
  });

  function update(view, sessionId) {
    button.hidden = !view.visible;
    button.disabled = view.disabled;
    spinner.hidden = !view.pending;
    label.textContent = view.label;
    // The accessible name is exactly the visible label: "Cancel agent" / "Cancelling...".
    button.setAttribute("aria-label", view.label);
    setAttr(button, "aria-busy", view.pending ? "true" : null);
    button.dataset.pending = view.pending ? "true" : "false";
    setAttr(button, "data-session-id", sessionId);
    button.title = view.pending ? CANCELLING_LABEL : `${CANCEL_LABEL} (Esc)`;
  }

  update({ visible: false, pending: false, disabled: true, label: CANCEL_LABEL }, null);
  return { el: button, update };
}
