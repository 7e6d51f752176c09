// A unified diff drawn by diff2html (web/static/vendor), for the `turn-changes` cards and the
// `changes-view`. diff2html escapes the file text it puts in its HTML; DOMPurify cleans that HTML
// once more before it goes in, so a file's content can never become markup. The library is
// loaded on the first diff opened, not with the page.

import { h } from "./dom.js";
import DOMPurify from "./vendor/purify.es.js";

let library = null;
function diff2html() {
  library ??= import("./vendor/diff2html.esm.js");
  return library;
}

/** An element showing `text` (a unified diff, one or more files) line by line. */
export async function renderDiff(text) {
  const { html } = await diff2html();
  // colorScheme "auto": dark with the page's own dark mode (prefers-color-scheme).
  const markup = html(String(text ?? ""), { drawFileList: false, outputFormat: "line-by-line", matching: "none", colorScheme: "auto" });
  const el = h("div", { class: "diff-view", dataset: { testid: "diff-view" } });
  el.innerHTML = DOMPurify.sanitize(markup);
  return el;
}
