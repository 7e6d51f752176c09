// Agent text as sanitized Markdown, fast enough to follow a stream.
//
// Parsing is marked's, sanitizing DOMPurify's, code colouring highlight.js's (web/static/vendor/,
// pinned there). Nothing here parses Markdown or filters HTML by itself.
//
// Streaming: an agent's message is re-published whole with every chunk, so re-rendering it all
// each time costs O(length) per chunk, O(length²) per answer. Instead the text is split into
// top-level blocks (marked's lexer); every block but the last is complete and is rendered once and
// kept, keyed by its source. Only the last, still open, block is re-rendered, at most once per
// animation frame. The next chunk is lexed from the end of the completed prefix, not from the start.

import DOMPurify from "./vendor/purify.es.js";
import { Marked } from "./vendor/marked.esm.js";

// highlight.js is the biggest file and colour is not needed for the first paint: it loads on
// the side, and code drawn before it arrived is coloured when it does.
let hljs = null;
if (typeof document !== "undefined") {
  import("./vendor/highlight.esm.js").then(
    (module) => {
      hljs = module.default;
      highlightIn(document);
    },
    () => {}, // code stays plain
  );
}

const marked = new Marked({ gfm: true, breaks: false, async: false });

// Links from an agent open in a new tab and carry no referrer; DOMPurify has already dropped
// javascript: and other unsafe URLs by the time this hook runs.
// (Guarded: outside a browser, e.g. under node's test runner, DOMPurify has no hooks to add.)
DOMPurify.addHook?.("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A" && node.hasAttribute("href")) {
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer nofollow");
  }
});

const SANITIZE = {
  USE_PROFILES: { html: true },
  FORBID_TAGS: ["style", "form", "input", "button", "textarea", "select"],
  FORBID_ATTR: ["style"],
};

/** Markdown source -> sanitized HTML string (one-shot; for short texts and tests). */
export function markdownToSafeHtml(source) {
  return DOMPurify.sanitize(marked.parse(String(source ?? "")), SANITIZE);
}

function highlightIn(root) {
  if (!hljs) return;
  for (const code of root.querySelectorAll(".markdown pre code:not(.hljs), .md-block pre code:not(.hljs)")) {
    const lang = /\blanguage-([\w#+-]+)/.exec(code.className)?.[1];
    // Only a named, known language: auto-detection tries every grammar and is slow on long code.
    if (lang && hljs.getLanguage(lang)) {
      try {
        code.innerHTML = hljs.highlight(code.textContent ?? "", { language: lang, ignoreIllegals: true }).value;
        code.classList.add("hljs");
      } catch {
        // an odd snippet stays plain text
      }
    }
  }
}

/** Copies `text`: the clipboard API, else (a page served over plain http) a selection's copy. */
async function copyText(text, pre) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    const range = document.createRange();
    range.selectNodeContents(pre);
    const selection = getSelection();
    selection?.removeAllRanges();
    selection?.addRange(range);
    return document.execCommand?.("copy") ?? false;
  }
}

/** Each code block gets a Copy button (a real button: Tab reaches it, Enter copies). */
function addCopyButtons(root) {
  for (const pre of root.querySelectorAll("pre")) {
    const button = document.createElement("button");
    button.type = "button";
    button.className = "btn btn-small code-copy";
    button.dataset.testid = "copy-code-button";
    button.textContent = "Copy";
    button.setAttribute("aria-label", "Copy the code");
    button.addEventListener("click", async () => {
      const done = await copyText(pre.textContent ?? "", pre);
      button.textContent = done ? "Copied" : "Select and copy";
      setTimeout(() => {
        button.textContent = "Copy";
      }, 2000);
    });
    const wrap = document.createElement("div");
    wrap.className = "code-block";
    pre.replaceWith(wrap);
    wrap.append(button, pre);
  }
}

function renderBlock(source) {
  const el = document.createElement("div");
  el.className = "md-block";
  el.innerHTML = markdownToSafeHtml(source);
  addCopyButtons(el);
  highlightIn(el);
  return el;
}

/**
 * Splits source into [complete block sources..., open block source] with marked's lexer.
 * The open block is the last token plus any trailing text the lexer folded into it.
 */
export function splitBlocks(source) {
  const tokens = marked.lexer(source);
  const raws = tokens.map((t) => t.raw ?? "");
  // Reference-style link definitions produce no token raw; if the pieces do not add up to the
  // source, do not risk a wrong split: treat everything as one open block.
  if (raws.join("") !== source) return { complete: [], open: source };
  // Blank-line tokens ("space") belong to the block before them.
  const blocks = [];
  for (let i = 0; i < tokens.length; i += 1) {
    if (tokens[i].type === "space" && blocks.length) blocks[blocks.length - 1] += raws[i];
    else blocks.push(raws[i]);
  }
  const open = blocks.pop() ?? "";
  return { complete: blocks, open };
}

/**
 * A live Markdown view: {el, set(text), flush()}. set() may be called per chunk; the DOM follows
 * within a frame (at once for the first text, so a page paints its history without waiting).
 */
export function createMarkdownView(env = globalThis) {
  const el = document.createElement("div");
  el.className = "markdown";
  let prefix = ""; // source of the completed blocks rendered so far
  let openSource = null;
  let openEl = null;
  let wanted = "";
  let frame = null;

  function reset() {
    el.replaceChildren();
    prefix = "";
    openSource = null;
    openEl = null;
  }

  function flush() {
    if (frame !== null) {
      env.cancelAnimationFrame?.(frame);
      frame = null;
    }
    const text = wanted;
    if (!text.startsWith(prefix)) reset(); // not an append (edited or replaced): start over
    const { complete, open } = splitBlocks(text.slice(prefix.length));
    if (complete.length) {
      if (openEl) openEl.remove();
      openEl = null;
      openSource = null;
      for (const block of complete) {
        el.append(renderBlock(block));
        prefix += block;
      }
    }
    if (open !== openSource) {
      const next = open ? renderBlock(open) : null;
      if (openEl && next) openEl.replaceWith(next);
      else if (openEl) openEl.remove();
      else if (next) el.append(next);
      openEl = next;
      openSource = open;
    }
  }

  function set(text) {
    wanted = String(text ?? "");
    if (!el.firstChild || typeof env.requestAnimationFrame !== "function") {
      flush();
      return;
    }
    if (frame === null) frame = env.requestAnimationFrame(() => {
      frame = null;
      flush();
    });
  }

  return { el, set, flush };
}
