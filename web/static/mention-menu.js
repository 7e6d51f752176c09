// The `@` menu of the composer (DESIGN.md §19): typing `@` (at the start or after a space) lists
// files of the session's cwd (`session.files`), filtered as the path is typed; Up/Down move,
// Enter or Tab pick, Esc closes (and does not cancel the turn); a click picks too. Picking puts
// `@path ` in the text and records the path as a mention: it goes with the message as
// `mentions` while `@path` is still in the text.

import { insertMention, mentionQuery, mentionsIn } from "./attachments.js";
import { h, setAttr } from "./dom.js";

let menus = 0;
const WAIT_MS = 120; // one request per pause in typing, not per key

/** listFiles(query) -> Promise<[path]> for the selected session (rejects when there is none). */
export function createMentionMenu({ input, listFiles }) {
  const id = `mention-menu-${(menus += 1)}`;
  const list = h("ul", { class: "command-menu mention-menu", id, role: "listbox", "aria-label": "Files", dataset: { testid: "mention-menu" }, hidden: true });
  let files = [];
  let shownFor = null; // the query `files` answer
  let active = 0;
  let dismissed = null; // the text Esc closed the menu at
  let recorded = [];
  let timer = null;
  let asked = 0; // the latest request: older answers are dropped

  function current() {
    if (document.activeElement !== input || dismissed === input.value) return null;
    return mentionQuery(input.value, input.selectionStart ?? input.value.length);
  }

  function pick(path) {
    const at = current() ?? mentionQuery(input.value, input.selectionStart ?? input.value.length);
    if (!at) return;
    const { text, caret } = insertMention(input.value, at.start, input.selectionStart ?? input.value.length, path);
    input.value = text;
    input.setSelectionRange(caret, caret);
    if (!recorded.includes(path)) recorded = [...recorded, path];
    files = [];
    input.dispatchEvent(new Event("input", { bubbles: true }));
    input.focus();
  }

  function draw() {
    const at = current();
    const open = Boolean(at) && at.query === shownFor && files.length > 0;
    if (active >= files.length) active = 0;
    list.replaceChildren(
      ...(open ? files : []).map((path, i) => {
        const cut = path.lastIndexOf("/") + 1;
        const item = h(
          "li",
          { id: `${id}-${i}`, role: "option", class: "command-item mention-item", "aria-selected": String(i === active), dataset: { testid: "mention-item", path } },
          h("span", { class: "command-name" }, path.slice(cut)),
          cut ? h("span", { class: "command-desc" }, path.slice(0, cut)) : null,
        );
        item.addEventListener("pointerdown", (event) => event.preventDefault()); // the focus stays
        item.addEventListener("click", () => pick(path));
        return item;
      }),
    );
    list.hidden = !open;
    if (open) {
      setAttr(input, "aria-controls", id);
      setAttr(input, "aria-activedescendant", `${id}-${active}`);
      list.children[active]?.scrollIntoView?.({ block: "nearest" });
    } else if (input.getAttribute("aria-controls") === id) {
      setAttr(input, "aria-activedescendant", null);
    }
  }

  function ask() {
    const at = current();
    clearTimeout(timer);
    if (!at) return draw();
    if (at.query === shownFor) draw();
    timer = setTimeout(async () => {
      const mine = (asked += 1);
      let got = [];
      try {
        got = await listFiles(at.query);
      } catch {
        got = []; // no session yet, or offline: no menu
      }
      if (mine !== asked) return;
      files = Array.isArray(got) ? got : [];
      shownFor = at.query;
      active = 0;
      draw();
    }, WAIT_MS);
  }

  return {
    list,
    /** The input's text or caret changed, or it took or lost the focus. */
    refresh() {
      if (dismissed !== null && dismissed !== input.value) dismissed = null;
      ask();
    },
    /** The mentions still named in the text. */
    mentions: () => mentionsIn(input.value, recorded),
    get recorded() {
      return recorded;
    },
    set recorded(next) {
      recorded = [...next];
    },
    clear() {
      recorded = [];
    },
    /** A keydown in the input: true when the menu took it. */
    keydown(event) {
      if (list.hidden || event.isComposing) return false;
      if (event.key === "ArrowDown" || event.key === "ArrowUp") {
        active = (active + (event.key === "ArrowDown" ? 1 : files.length - 1)) % files.length;
        draw();
      } else if ((event.key === "Enter" && !event.shiftKey && !event.altKey) || (event.key === "Tab" && !event.shiftKey)) {
        pick(files[active]);
      } else if (event.key === "Escape") {
        dismissed = input.value;
        draw();
      } else {
        return false;
      }
      event.preventDefault();
      event.stopPropagation();
      return true;
    },
  };
}
