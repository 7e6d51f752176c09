// The running turn's live row (`working-indicator`, at the end of the conversation) and the late
// cancel's `escalation-countdown` (above the composer). They draw turn-progress.js's views; the
// page ticks them once a second while shown. Neither is a live region that speaks every tick:
// the indicator is aria-live="off" and the countdown a role="timer" (the cancel control's
// spinner stays the page's one status element while cancelling, DESIGN.md §8).

import { h } from "./dom.js";

export function createWorkingIndicator() {
  const text = h("span", { class: "working-text" });
  const el = h("div", { class: "working-indicator", "aria-live": "off", hidden: true, dataset: { testid: "working-indicator" } },
    h("span", { class: "working-dot", "aria-hidden": "true" }), text);
  return {
    el,
    update(view) {
      el.hidden = !view.visible;
      if (text.textContent !== view.text) text.textContent = view.text;
    },
  };
}

export function createEscalationCountdown() {
  const text = h("span", { class: "countdown-text" });
  const el = h("div", { class: "escalation-countdown", role: "timer", "aria-live": "off", hidden: true, dataset: { testid: "escalation-countdown" } }, text);
  return {
    el,
    update(view) {
      el.hidden = !view.visible;
      el.dataset.seconds = view.seconds === null || view.seconds === undefined ? "" : String(view.seconds);
      if (text.textContent !== view.text) text.textContent = view.text;
    },
  };
}
