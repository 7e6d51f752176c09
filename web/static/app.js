// Entry point: read the boot state the server embedded in the page and mount the page it names.
// Everything the first paint needs is in that boot state, so nothing here waits for the network.

import { h, readBootState } from "./dom.js";
import { mountTaskListPage } from "./task-list-page.js";
import { mountTaskPage } from "./task-page.js";

const root = document.getElementById("app");
const boot = readBootState();

if (!boot || typeof boot !== "object") {
  root.replaceChildren(h("p", { class: "page-error", role: "alert" }, "This page came without its data. Reload to try again."));
} else if (boot.page === "task") {
  mountTaskPage(root, boot);
} else {
  mountTaskListPage(root, boot);
}
