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
      el.dataset.stale = view.stale ? "true" : "false"; // offline: paused, the dot stops
      if (text.textContent !== view.text) text.textContent = view.text;
    },
  };
}

/** onStopNow(): the person does not want to wait; the page sends agent.stop_now. */
export function createEscalationCountdown({ onStopNow }) {
  const text = h("span", { class: "countdown-text" });
  const stop = h("button", { type: "button", class: "btn btn-danger", dataset: { testid: "stop-now-button" }, title: "Stop the agent now instead of waiting" }, "Stop it now");
  stop.addEventListener("click", () => {
    if (stop.disabled) return;
    stop.disabled = true; // once: the same cancel escalates, there is nothing to repeat
    onStopNow();
  });
  const el = h("div", { class: "escalation-countdown", role: "timer", "aria-live": "off", hidden: true, dataset: { testid: "escalation-countdown" } }, text, stop);
  return {
    el,
    update(view) {
      if (!view.visible) stop.disabled = false; // the next late cancel may be stopped again
      else if (view.offline) stop.disabled = true;
      el.hidden = !view.visible;
      el.dataset.seconds = view.seconds === null || view.seconds === undefined ? "" : String(view.seconds);
      if (text.textContent !== view.text) text.textContent = view.text;
    },
  };
}
