// Opt-in browser notifications (DESIGN.md §15): `notify-toggle` asks the browser's permission
// once, and the choice is remembered per browser (localStorage `turnvisor.notify`). The pages
// call `notify()` only for sessions the person is not looking at (attention.js decides).

import { h, setAttr } from "./dom.js";

const KEY = "turnvisor.notify";

function stored(env) {
  try {
    return env.localStorage?.getItem(KEY) === "on";
  } catch {
    return false; // storage refused (private mode): off
  }
}

function store(env, on) {
  try {
    env.localStorage?.setItem(KEY, on ? "on" : "off");
  } catch {
    // not remembered; this tab still follows the choice
  }
}

const SVG = "http://www.w3.org/2000/svg";

/** A bell (struck through while off), drawn in the text colour: no emoji font needed. */
function bell(doc, on) {
  const svg = doc.createElementNS(SVG, "svg");
  svg.setAttribute("viewBox", "0 0 24 24");
  svg.setAttribute("class", "notify-icon");
  svg.setAttribute("aria-hidden", "true");
  const shapes = ["M6 16V11a6 6 0 0 1 12 0v5l2 2H4z", "M10 20a2 2 0 0 0 4 0"];
  if (!on) shapes.push("M4 4l16 16");
  for (const d of shapes) {
    const path = doc.createElementNS(SVG, "path");
    path.setAttribute("d", d);
    svg.append(path);
  }
  return svg;
}

/**
 * Returns {el, notify(title, body, tag, onClick)}. Without the Notification API the toggle
 * says so and stays disabled.
 */
export function createNotifier(env = globalThis) {
  const api = env.Notification;
  let on = stored(env) && api?.permission === "granted";
  const button = h("button", { type: "button", class: "btn btn-secondary btn-small notify-toggle", dataset: { testid: "notify-toggle" } });

  function draw() {
    const denied = api?.permission === "denied";
    button.disabled = !api || denied;
    const words = on ? "Notifications on" : "Notify me";
    // A bell alone on a phone; the words stay its accessible name.
    button.replaceChildren(bell(env.document, on), h("span", { class: "notify-words" }, words));
    button.setAttribute("aria-label", words);
    setAttr(button, "aria-pressed", on ? "true" : "false");
    button.title = !api
      ? "This browser cannot show notifications"
      : denied
        ? "Notifications are blocked for this site in the browser's settings"
        : on
          ? "Stop notifying when a session needs you"
          : "Notify when a turn ends, asks for approval or fails in a session you are not looking at";
  }

  button.addEventListener("click", async () => {
    if (!api) return;
    if (on) {
      on = false;
    } else {
      const answer = api.permission === "granted" ? "granted" : await api.requestPermission();
      on = answer === "granted";
    }
    store(env, on);
    draw();
  });

  function notify(title, body, tag, onClick) {
    if (!on || !api || api.permission !== "granted") return;
    try {
      const n = new api(title, { body, tag });
      n.onclick = () => {
        env.focus?.();
        onClick?.();
        n.close?.();
      };
    } catch {
      // some browsers only notify from a service worker: nothing more to do here
    }
  }

  draw();
  return { el: button, notify };
}
