// The phone's one header line (issue 41 item 8): at 640 px and below, the session strip, the
// agent row ("New session") and "Works in" fold behind one button at the end of the session's
// heading line (`header-menu-button`, aria-expanded), so the conversation starts near the top in
// every state. Open, the strip and the agent row drop down over the conversation under that line
// and "Works in" shows in it. Picking a session or starting one closes it; so does Esc, or the
// button again. On a wider window the button is hidden and nothing folds (app.css).

import { h } from "./dom.js";

/** {button, close()}: `page` gets `is-menu-open`; `sidebar` is the panel that drops down. */
export function createPhoneMenu({ page, sidebar, header }) {
  const button = h(
    "button",
    { type: "button", class: "btn btn-secondary header-menu-button", "aria-expanded": "false", "aria-label": "Sessions and details", title: "Sessions, new session, where it works", dataset: { testid: "header-menu-button" } },
    h("span", { "aria-hidden": "true" }, "☰"),
  );
  // The panel drops from the bottom of the header, which may grow while it is open (a reason).
  const place = () => page.style.setProperty("--menu-top", `${Math.round(header.getBoundingClientRect().bottom)}px`);
  if (typeof ResizeObserver === "function") new ResizeObserver(place).observe(header);
  function set(open) {
    if (open) place();
    page.classList.toggle("is-menu-open", open);
    button.setAttribute("aria-expanded", open ? "true" : "false");
    // The focus was in what folds away: it goes back to the button, not to the page's body.
    if (!open && sidebar.contains(document.activeElement)) button.focus();
  }
  button.addEventListener("click", () => set(!page.classList.contains("is-menu-open")));
  // Closed in the click's own dispatch (the item's handler has run: it is below the sidebar), not
  // later: a close that lands after the next tap would fold away what that tap aims at.
  sidebar.addEventListener("click", (event) => {
    if (event.target.closest?.(".session-item, [data-testid='new-session-button']")) set(false);
  });
  sidebar.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && page.classList.contains("is-menu-open")) {
      event.preventDefault(); // closes the menu, does not cancel the turn
      set(false);
      button.focus();
    }
  });
  return { button, close: () => set(false) };
}
