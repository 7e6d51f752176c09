// Entry point. The page the server sent is a shell without data (web/app.py): choose the token
// (credential.js), fetch the boot state the address names with it (one request), mount that page.

import { h } from "./dom.js";
import { chooseToken, confirmSwitch, forgetToken, setPageToken } from "./credential.js";
import { mountTaskListPage } from "./task-list-page.js";
import { mountTaskPage } from "./task-page.js";

const root = document.getElementById("app");

/** The boot request for this address: the task list's, or a task's (with its ?session=). */
export function bootUrl(location) {
  const match = /^\/tasks\/([^/]+)$/.exec(location.pathname);
  if (!match) return "/api/v1/boot";
  const query = new URLSearchParams({ task: decodeURIComponent(match[1]) });
  const session = new URLSearchParams(location.search).get("session");
  if (session) query.set("session", session);
  return `/api/v1/boot?${query}`;
}

function plainPage(status, title, ...body) {
  document.title = `${title} · Turnvisor`;
  root.replaceChildren(h("main", { class: "plain-page", dataset: { testid: "error-page", status: String(status) } }, h("h1", {}, title), ...body));
}

const code = (text) => h("code", {}, text);

function needsToken(title) {
  plainPage(
    401,
    title,
    h("p", {}, "This Turnvisor server needs its access token."),
    h("p", {}, "Open the address that ", code("turnvisor serve"), " printed when it started, or the ", code("login_url"), " in the file ", code("server.json"), " of its data directory: it ends in ", code("?token=…"), ". After that first visit this browser remembers the token (for this address only)."),
    h("p", {}, "Lost it? The token is in ", code("TURNVISOR_TOKEN"), ", or in the file ", code("token"), " of the server's data directory."),
  );
}

async function main() {
  const token = await chooseToken(globalThis, () => confirmSwitch(root));
  if (!token) return needsToken("Open Turnvisor with its link");
  let response;
  try {
    response = await fetch(bootUrl(location), { headers: { Authorization: `Bearer ${token}` }, cache: "no-store" });
  } catch {
    return plainPage(503, "Turnvisor is not answering", h("p", {}, "The server could not be reached. Reload to try again."));
  }
  if (response.status === 401) {
    forgetToken(token);
    return needsToken("That token is not valid");
  }
  if (response.status === 404) {
    return plainPage(404, "Page not found", h("p", {}, "There is no page here. The task may have been removed, or the address is mistyped."), h("p", {}, h("a", { href: "/" }, "Go to the task list")));
  }
  let boot = null;
  try {
    boot = response.ok ? await response.json() : null;
  } catch {
    boot = null;
  }
  if (!boot || typeof boot !== "object") {
    root.replaceChildren(h("p", { class: "page-error", role: "alert" }, "This page came without its data. Reload to try again."));
    return;
  }
  setPageToken(token);
  if (boot.page === "task") mountTaskPage(root, boot);
  else mountTaskListPage(root, boot);
}

main();
