// DESIGN.md §19: the `login-card` of a session whose agent asked for a login before it opens a
// session (its DTO's `auth`). One button per method the agent offers: a key method takes the key
// in a password field (sent once as `agent.login`'s `key`, cleared right after, never shown
// again: Turnvisor keeps no copy), a terminal method shows the exact command to run first, and
// the agent's own method (a browser it opens) is a button. Why the last try failed is said inline.

import { h } from "./dom.js";

/** How long a login may take: the agent is started again, and may wait on the person. */
export const LOGIN_TIMEOUT_MS = 120000;

/** The card's view of a session row: null (no card) or {sessionId, methods, error}. */
export function loginView(row) {
  const auth = row?.auth;
  if (!auth || auth.required !== true) return null;
  const methods = Array.isArray(auth.methods) ? auth.methods.filter((m) => m && typeof m.id === "string") : [];
  return { sessionId: row.id, methods, error: typeof auth.error === "string" && auth.error ? auth.error : null };
}

/** The composer's view while the agent waits for a login: Send is off, the note says why. */
export function loginComposerView(view, row) {
  if (!loginView(row)) return view;
  return { ...view, sendDisabled: true, error: null, note: "Send is off until the agent is logged in (above)." };
}

/** The line under a method's name: what happens with it. */
export function methodHint(method) {
  if (method.kind === "key") {
    const where = method.var_name ? ` as ${method.var_name}` : "";
    return `Your key goes to the agent${where} when it starts; Turnvisor keeps no copy.`;
  }
  if (method.kind === "terminal") {
    return method.command ? "Run this in a terminal on the agent's machine, then press the button:" : "Log in from a terminal as the agent says, then press the button.";
  }
  return "The agent logs in on its own (it may open a browser); the button asks it to.";
}

/** The `agent.login` payload for a method; a key method without a key: {error}. */
export function loginPayload(sessionId, method, key) {
  const payload = { session_id: sessionId, method_id: method.id };
  if (method.kind !== "key") return { payload };
  if (!key) return { error: `Enter the key for ${method.name} first.` };
  return { payload: { ...payload, key } };
}

/** {el, update(row, offline)}; request(action, payload, options) -> Promise (the WS request). */
export function createLoginCard({ request }) {
  const methodsEl = h("div", { class: "login-card-methods" });
  const errorEl = h("p", { class: "login-card-error", role: "alert", dataset: { testid: "login-error" }, hidden: true });
  const el = h(
    "section",
    { class: "login-card", "aria-label": "Log the agent in", hidden: true, dataset: { testid: "login-card" } },
    h("h3", { class: "login-card-title" }, "This agent needs you to log in"),
    methodsEl,
    errorEl,
  );
  let view = null;
  let drawn = null;
  let busy = false;
  let offline = false;
  let localError = null;
  const buttons = [];

  function showError() {
    const text = localError ?? view?.error ?? null;
    errorEl.hidden = !text;
    errorEl.textContent = text ?? "";
  }

  function setBusy(value) {
    busy = value;
    for (const b of buttons) b.disabled = busy || offline;
    el.setAttribute("aria-busy", busy ? "true" : "false");
  }

  async function logIn(method, input) {
    if (busy || !view) return;
    const built = loginPayload(view.sessionId, method, input ? input.value : null);
    if (built.error) {
      localError = built.error;
      showError();
      input?.focus();
      return;
    }
    setBusy(true);
    localError = null;
    showError();
    try {
      await request("agent.login", built.payload, { timeoutMs: LOGIN_TIMEOUT_MS });
    } catch (err) {
      localError = err?.message || "Not logged in.";
    } finally {
      if (input) input.value = ""; // the key leaves the page with the request, nowhere else
      setBusy(false);
      showError();
    }
  }

  function methodBlock(method) {
    const button = h("button", { type: "submit", class: "btn btn-primary", dataset: { testid: "login-method", methodId: method.id } }, `Log in: ${method.name}`);
    buttons.push(button);
    const parts = [h("p", { class: "login-card-hint" }, methodHint(method))];
    let input = null;
    if (method.kind === "key") {
      input = h("input", { type: "password", class: "login-card-key", autocomplete: "off", spellcheck: "false", "aria-label": `Key for ${method.name}`, placeholder: method.var_name ?? "key", dataset: { testid: "login-key", methodId: method.id } });
      parts.push(input);
      if (method.link) parts.push(h("a", { href: method.link, target: "_blank", rel: "noopener noreferrer", class: "login-card-link" }, "Get a key"));
    } else if (method.kind === "terminal" && method.command) {
      parts.push(h("code", { class: "login-card-command", dataset: { testid: "login-command" } }, method.command));
    }
    const form = h("form", { class: "login-card-method", dataset: { methodId: method.id } }, h("strong", {}, method.name), method.description ? h("span", { class: "muted" }, ` ${method.description}`) : null, ...parts, button);
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      logIn(method, input);
    });
    return form;
  }

  function update(row, isOffline = false) {
    view = loginView(row);
    offline = Boolean(isOffline);
    el.hidden = !view;
    if (!view) {
      drawn = null;
      localError = null;
      return;
    }
    // Redrawn only when the methods change: a key being typed is not wiped by a state update.
    const signature = JSON.stringify([view.sessionId, view.methods]);
    if (signature !== drawn) {
      if (drawn !== null && JSON.parse(drawn)[0] !== view.sessionId) localError = null;
      drawn = signature;
      buttons.length = 0;
      methodsEl.replaceChildren(...view.methods.map(methodBlock));
    }
    setBusy(busy);
    showError();
  }

  return { el, update };
}
