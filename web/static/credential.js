// The page's credential (issue 27). No cookie carries it: a browser sends cookies to every port
// of the host, so a page an agent serves on another port would receive them. The token lives in
// this origin's localStorage (another port is another origin and cannot read it) and goes out
// only in what this script sets itself: `Authorization: Bearer` on fetches, and a WebSocket
// subprotocol in the handshake (a browser's WebSocket cannot set headers).
//
// `?token=` is read from the page's own address on load, that is on a top-level visit: an <img>
// or a fetch pointing at `/?token=…` runs no script, so it changes nothing. A different token than
// the stored one (another workspace) is taken only after the person says so.

import { h } from "./dom.js";

export const STORAGE_KEY = "turnvisor.token";
export const SUBPROTOCOL = "turnvisor";
export const BEARER_PREFIX = "turnvisor.bearer.";

let pageToken = null;

/** The token this page authenticates with, once chosen (pinned for the page's life). */
export function currentToken() {
  return pageToken;
}

export function setPageToken(token) {
  pageToken = token;
}

function storage(env) {
  try {
    return env.localStorage ?? null;
  } catch {
    return null; // storage disabled: the token lasts as long as the page
  }
}

export function storedToken(env = globalThis) {
  try {
    return storage(env)?.getItem(STORAGE_KEY) || null;
  } catch {
    return null;
  }
}

export function storeToken(token, env = globalThis) {
  try {
    storage(env)?.setItem(STORAGE_KEY, token);
  } catch {
    // quota or privacy mode: the page still works until it is closed
  }
}

export function forgetToken(token, env = globalThis) {
  try {
    if (storedToken(env) === token) storage(env)?.removeItem(STORAGE_KEY);
  } catch {
    // nothing stored to forget
  }
}

/** Takes `?token=` out of the address (and the history entry); returns it, or null. */
export function takeUrlToken(env = globalThis) {
  const url = new URL(env.location.href);
  const token = url.searchParams.get("token");
  if (token === null) return null;
  url.searchParams.delete("token");
  env.history.replaceState(env.history.state, "", url.pathname + url.search + url.hash);
  return token || null;
}

/**
 * The token to use: the address's if none is stored or it is the stored one; when it differs
 * from the stored one, `ask()` (a promise of true/false) decides; else the stored one.
 */
export async function chooseToken(env, ask) {
  const offered = takeUrlToken(env);
  const stored = storedToken(env);
  if (offered === null || offered === stored) return stored;
  if (stored !== null && !(await ask())) return stored;
  storeToken(offered, env);
  return offered;
}

/** The subprotocols a WebSocket offers: the plain one (the server selects it) and the token's. */
export function socketProtocols(token = pageToken) {
  if (!token) return [];
  const bytes = new TextEncoder().encode(token);
  let binary = "";
  for (const b of bytes) binary += String.fromCharCode(b);
  const encoded = btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  return [SUBPROTOCOL, BEARER_PREFIX + encoded];
}

/** Asks whether to switch to another workspace's token; resolves true (switch) or false. */
export function confirmSwitch(root) {
  return new Promise((resolve) => {
    const done = (answer) => {
      dialog.remove();
      resolve(answer);
    };
    const keep = h("button", { type: "button", class: "btn", dataset: { testid: "switch-workspace-keep" } }, "Stay here");
    const accept = h("button", { type: "button", class: "btn btn-primary", dataset: { testid: "switch-workspace-accept" } }, "Switch");
    keep.addEventListener("click", () => done(false));
    accept.addEventListener("click", () => done(true));
    const dialog = h(
      "main",
      { class: "plain-page", role: "alertdialog", "aria-labelledby": "switch-title", dataset: { testid: "switch-workspace-confirm" } },
      h("h1", { id: "switch-title" }, "Open another workspace?"),
      h("p", {}, "This link carries a different access token than the one this browser uses here, so it may open another workspace. Switch only if you opened this link yourself."),
      h("p", { class: "dialog-actions" }, keep, " ", accept),
    );
    root.replaceChildren(dialog);
    keep.focus();
  });
}
