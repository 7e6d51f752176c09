// THE cancel control: the one component both composers render (AC-UI-CANCEL-TURN-PROGRESS-001.7),
// so desktop and mobile cannot drift apart. It only draws a view computed by
// state.cancelControlView(); what "pending" means lives in state.js.

import { h, setAttr } from "./dom.js";
import { CANCEL_LABEL, CANCELLING_LABEL } from "./state.js";

/**
 * Returns {el, note, update(view, sessionId)}: `el` is the button, `note` the line the composer
 * places near it that says why a cancel takes long (phase `late`, DESIGN.md §9). `onActivate` runs on click; the caller turns it into
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
  // Not a role="status": the spinner is the one status element while cancelling (DESIGN §8).
  // aria-live still reads the late note out when it appears.
  const note = h("span", { class: "cancel-note", "aria-live": "polite", dataset: { testid: "cancel-phase-note" }, hidden: true });
  button.addEventListener("click", (event) => {
    event.preventDefault();
    if (!button.disabled) onActivate();
  });

  function update(view, sessionId) {
    button.hidden = !view.visible;
    button.disabled = view.disabled;
    spinner.hidden = !view.pending;
    // "Cancel agent": the phone's composer shows its first word only (app.css .label-rest); the
    // text and the accessible name stay whole.
    const [first, ...rest] = String(view.label).split(" ");
    if (label.dataset.text !== view.label) label.replaceChildren(first, ...(rest.length ? [h("span", { class: "label-rest" }, ` ${rest.join(" ")}`)] : []));
    label.dataset.text = view.label;
    // The accessible name is the whole label, "Cancel agent" / "Cancelling..." (on the phone it
    // begins with the word shown).
    button.setAttribute("aria-label", view.label);
    setAttr(button, "aria-busy", view.pending ? "true" : null);
    button.dataset.pending = view.pending ? "true" : "false";
    setAttr(button, "data-session-id", sessionId);
    button.title = view.pending ? view.note ?? CANCELLING_LABEL : `${CANCEL_LABEL} (Esc)`;
    note.hidden = !(view.visible && view.note);
    note.textContent = view.note ?? "";
    // The spinner names the phase too, for those who hear it rather than see the note.
    spinner.setAttribute("aria-label", view.note ?? CANCELLING_LABEL);
  }

  update({ visible: false, pending: false, disabled: true, label: CANCEL_LABEL, note: null }, null);
  return { el: button, note, update };
}
