// A tiny element builder, so views read as markup without a framework or a build step.

/**
 * h("button", {class: "x", dataset: {testid: "y"}, onclick: fn}, "text", child, ...)
 * Attributes: `class`, `dataset`, `on*` (listeners), booleans (`disabled`, `hidden`) set as
 * properties, everything else via setAttribute. `null`/`false` children are skipped.
 */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs ?? {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") el.className = value;
    else if (key === "dataset") Object.assign(el.dataset, value);
    else if (key.startsWith("on") && typeof value === "function") el.addEventListener(key.slice(2), value);
    else if (value === true) el.setAttribute(key, "");
    else el.setAttribute(key, String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** Replaces all children of `el`. */
export function setChildren(el, ...children) {
  el.replaceChildren();
  append(el, children);
}

/** Sets or removes an attribute so that `false`/`null` mean "absent". */
export function setAttr(el, name, value) {
  if (value === null || value === undefined || value === false) el.removeAttribute(name);
  else el.setAttribute(name, value === true ? "" : String(value));
}

/** "12:04" for today, else a short date; the full date goes in the title (fullTime). */
export function formatTime(iso) {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return "";
  const now = new Date();
  // Always with its day (issue 29): "Today 12:04", "Dec 3, 12:04", another year's with it.
  const time = d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
  if (d.toDateString() === now.toDateString()) return `Today ${time}`;
  const day = d.toLocaleDateString([], d.getFullYear() === now.getFullYear()
    ? { month: "short", day: "numeric" } : { year: "numeric", month: "short", day: "numeric" });
  return `${day}, ${time}`;
}

/** The full date and time in the reader's locale and time zone (for hover titles). */
export function fullTime(iso) {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return "";
  return d.toLocaleString([], { dateStyle: "full", timeStyle: "medium" });
}

/** A <time> element: short text, full local date and time on hover. */
export function timeElement(iso, className) {
  if (!iso) return null;
  const el = document.createElement("time");
  el.className = className;
  el.dateTime = iso;
  el.title = fullTime(iso);
  el.textContent = formatTime(iso);
  return el;
}
