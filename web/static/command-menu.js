// The `/` menu of the composer (DESIGN.md §19): typing `/` at the start of the input lists the
// session's slash commands (name and description), filtered as the name is typed; Up/Down move,
// Enter or Tab pick (Enter sends when a whole command name is typed already), Esc closes (and
// does not cancel the turn); a click picks too. Picking
// leaves "/name " in the input, and the command's input hint shows after it, greyed like a
// placeholder, until something more is typed. The command goes as the prompt's text: the agent
// reads it there (ACP).

import { h, setAttr } from "./dom.js";
import { commandHint, commandName, filterCommands, pickedText, typedWhole } from "./offers.js";

const NONE = Object.freeze([]);
let menus = 0; // ids for aria-controls / aria-activedescendant, unique per mounted menu

/** input: the composer's textarea (the menu and the hint are placed against its form). */
export function createCommandMenu({ input }) {
  const id = `command-menu-${(menus += 1)}`;
  const list = h("ul", { class: "command-menu", id, role: "listbox", "aria-label": "Commands", dataset: { testid: "command-menu" }, hidden: true });
  // The input hint, drawn over the input right after the typed text (a textarea's placeholder
  // shows only while it is empty).
  const typed = h("span", { class: "command-ghost-typed" });
  const said = h("span", { class: "command-ghost-hint" });
  const ghost = h("div", { class: "command-ghost", "aria-hidden": "true", dataset: { testid: "command-hint" }, hidden: true }, typed, said);
  setAttr(input, "aria-autocomplete", "list");
  setAttr(input, "aria-controls", id);

  let commands = NONE;
  let shown = []; // the commands listed now
  let active = 0;
  let dismissed = null; // the text Esc closed the menu at: it stays closed until that changes

  function pick(command) {
    input.value = pickedText(command);
    input.setSelectionRange(input.value.length, input.value.length);
    input.dispatchEvent(new Event("input", { bubbles: true })); // the composer refits and refreshes
    input.focus();
  }

  function draw() {
    const text = input.value;
    const found = dismissed === text ? null : filterCommands(commands, text);
    shown = found ?? [];
    if (active >= shown.length) active = 0;
    list.replaceChildren(
      ...shown.map((c, i) => {
        const item = h(
          "li",
          { id: `${id}-${i}`, role: "option", class: "command-item", "aria-selected": String(i === active), dataset: { testid: "command-item", command: commandName(c) } },
          h("span", { class: "command-name" }, `/${commandName(c)}`),
          c.description ? h("span", { class: "command-desc" }, c.description) : null,
        );
        // Keeps the focus in the input (a click would take it away first).
        item.addEventListener("pointerdown", (event) => event.preventDefault());
        item.addEventListener("click", () => pick(c));
        return item;
      }),
    );
    const open = shown.length > 0 && input.isConnected && document.activeElement === input;
    list.hidden = !open;
    setAttr(input, "aria-activedescendant", open ? `${id}-${active}` : null);
    if (open) list.children[active]?.scrollIntoView?.({ block: "nearest" });
    drawGhost(text);
  }

  function drawGhost(text) {
    const hint = commandHint(commands, text);
    ghost.hidden = !hint;
    if (!hint) return;
    typed.textContent = text;
    said.textContent = hint;
    // Laid over the input's text box: same place, padding and font.
    const style = getComputedStyle(input);
    Object.assign(ghost.style, {
      left: `${input.offsetLeft + input.clientLeft}px`,
      top: `${input.offsetTop + input.clientTop}px`,
      width: `${input.clientWidth}px`,
      padding: style.padding,
      font: style.font,
      lineHeight: style.lineHeight,
    });
  }

  return {
    list,
    ghost,
    /** The session's commands (its row's `commands`). */
    update(next) {
      const given = Array.isArray(next) ? next : NONE;
      if (given === commands) return;
      commands = given;
      draw();
    },
    /** The input's text changed, or it took or lost the focus. */
    refresh() {
      if (dismissed !== null && dismissed !== input.value) dismissed = null;
      draw();
    },
    /** A keydown in the input: true when the menu took it (the composer then ignores it). */
    keydown(event) {
      if (list.hidden || event.isComposing) return false;
      if (event.key === "ArrowDown" || event.key === "ArrowUp") {
        active = (active + (event.key === "ArrowDown" ? 1 : shown.length - 1)) % shown.length;
      } else if (event.key === "Enter" && !event.shiftKey && !event.altKey && typedWhole(commands, input.value)) {
        return false; // a whole command typed: Enter sends it as it is (the composer's)
      } else if ((event.key === "Enter" && !event.shiftKey && !event.altKey) || (event.key === "Tab" && !event.shiftKey)) {
        pick(shown[active]);
      } else if (event.key === "Escape") {
        dismissed = input.value;
      } else {
        return false;
      }
      event.preventDefault();
      event.stopPropagation();
      draw();
      return true;
    },
  };
}
