// The offline banner (`connection-banner`, role="alert", DESIGN.md §11): shown while the page's
// WebSocket is down, with a countdown to the next reconnect try and a "Retry now" button.

import { h } from "./dom.js";
import { secondsUntil } from "./status.js";

export function createConnectionBanner({ onRetry, env = globalThis }) {
  const text = h("span", { class: "connection-banner-text" });
  const retry = h("button", { type: "button", class: "btn btn-small", dataset: { testid: "reconnect-now" } }, "Retry now");
  retry.addEventListener("click", () => onRetry());
  const el = h("div", { class: "connection-banner", role: "alert", dataset: { testid: "connection-banner" }, hidden: true }, text, retry);
  let retryAt = null;
  let ticker = null;

  function draw() {
    const left = secondsUntil(retryAt, env.Date.now());
    text.textContent =
      left === null || left === 0
        ? "No connection to the server. Reconnecting…"
        : `No connection to the server. Reconnecting in ${left} s.`;
    retry.hidden = left === null || left === 0;
  }

  /** offline: boolean; at: the Date.now() time of the next try, or null while trying. */
  function update(offline, at) {
    el.hidden = !offline;
    retryAt = offline ? at ?? null : null;
    if (offline && ticker === null) ticker = env.setInterval(draw, 1000);
    if (!offline && ticker !== null) {
      env.clearInterval(ticker);
      ticker = null;
    }
    if (offline) draw();
  }

  return { el, update };
}
