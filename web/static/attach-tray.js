// The composer's attachments (DESIGN.md §19): the attach button (a file picker), a pasted image
// and files dropped on the composer each upload at once and show as a chip above the input
// (name, size, a thumbnail for an image, a remove ×). A refused upload keeps its chip with the
// server's line until it is removed, so nothing goes without the person knowing.

import { attachmentDataUrl, attachmentsBlock, fileDataUrl, formatSize, isImage, messageParts } from "./attachments.js";
import { h } from "./dom.js";

const SVG = "http://www.w3.org/2000/svg";

function clipIcon() {
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("viewBox", "0 0 24 24");
  svg.setAttribute("aria-hidden", "true");
  svg.setAttribute("class", "attach-icon");
  const path = document.createElementNS(SVG, "path");
  path.setAttribute("d", "M21 11.5l-8.6 8.6a5 5 0 0 1-7.1-7.1l8.6-8.6a3.3 3.3 0 0 1 4.7 4.7l-8.6 8.6a1.7 1.7 0 0 1-2.4-2.4l7.9-7.9");
  svg.append(path);
  return svg;
}

let chipIds = 0;

/** "PDF", "TXT": what a file's tile says in place of a thumbnail. */
function fileKind(chip) {
  const ext = /\.([A-Za-z0-9]{1,4})$/.exec(chip.name ?? "")?.[1];
  return (ext ?? String(chip.mime ?? "").split("/")[1]?.slice(0, 4) ?? "file").toUpperCase();
}

/** A chip: {key, name, size, mime, state: "uploading"|"ready"|"failed", id?, error?, thumb?}. */
export function renderChip(chip, { onRemove } = {}) {
  const image = isImage(chip.mime);
  const thumb = image ? h("img", { class: "attachment-thumb", alt: "", dataset: { testid: "attachment-thumb" } }) : h("span", { class: "attachment-thumb attachment-thumb--file", "aria-hidden": "true" }, fileKind(chip));
  if (image && chip.thumb) {
    Promise.resolve(chip.thumb).then((url) => {
      if (url) thumb.src = url;
    });
  }
  const size = chip.size == null ? "" : formatSize(chip.size);
  const el = h(
    "li",
    { class: `attachment-chip attachment-chip--${chip.state ?? "ready"}`, dataset: { testid: "attachment-chip", state: chip.state ?? "ready", name: chip.name }, title: chip.error ? `${chip.name}: ${chip.error}` : chip.name },
    thumb,
    h("span", { class: "attachment-name" }, chip.name),
    size ? h("span", { class: "attachment-size" }, size) : null,
    chip.state === "uploading" ? h("span", { class: "attachment-status" }, "uploading…") : null,
    chip.state === "failed" ? h("span", { class: "attachment-status attachment-status--failed", dataset: { testid: "attachment-error" } }, chip.error) : null,
  );
  if (onRemove) {
    const remove = h("button", { type: "button", class: "attachment-remove", dataset: { testid: "attachment-remove" }, "aria-label": `Remove ${chip.name}`, title: "Remove" }, "×");
    remove.addEventListener("click", () => onRemove(chip));
    el.append(remove);
  }
  return el;
}

/** A user message's files as chips (an image's thumbnail fetched with the token) and its mentions as `@path` tags; null when it has none. */
export function renderMessageParts(message) {
  const { attachments, mentions } = messageParts(message);
  if (!attachments.length && !mentions.length) return null;
  return h(
    "div",
    { class: "message-parts", dataset: { testid: "message-parts" } },
    attachments.length
      ? h("ul", { class: "attachment-tray attachment-tray--sent" }, ...attachments.map((a) => renderChip({ key: a.attachment_id, id: a.attachment_id, name: a.name, size: a.size, mime: a.mime, state: "sent", thumb: isImage(a.mime) ? attachmentDataUrl(a.attachment_id) : null })))
      : null,
    mentions.length ? h("ul", { class: "mention-tags" }, ...mentions.map((m) => h("li", { class: "mention-tag", dataset: { testid: "mention-tag", path: m }, title: m }, `@${m}`))) : null,
  );
}

/**
 * upload(file) -> Promise<{attachment_id, name, mime, size}> (rejects with the server's line).
 * onChange() after every change (the composer refreshes its Send button). `form` takes drops.
 */
export function createAttachTray({ upload, onChange, form, input, compact }) {
  const picker = h("input", { type: "file", multiple: true, hidden: true, dataset: { testid: "attach-input" }, tabindex: "-1" });
  const button = h(
    "button",
    { type: "button", class: "btn btn-secondary btn-attach", dataset: { testid: "attach-button" }, "aria-label": "Attach files", title: "Attach files (or paste an image, or drop files here)" },
    clipIcon(),
    compact ? null : h("span", { class: "attach-label" }, "Attach"),
  );
  button.addEventListener("click", () => {
    if (!button.disabled) picker.click();
  });
  picker.addEventListener("change", () => {
    add([...picker.files]);
    picker.value = ""; // the same file may be picked again
  });
  const list = h("ul", { class: "attachment-tray", dataset: { testid: "attachment-tray" }, "aria-label": "Attached files", hidden: true });
  let chips = [];

  function draw() {
    list.replaceChildren(...chips.map((c) => renderChip(c, { onRemove: remove })));
    list.hidden = chips.length === 0;
    onChange?.();
  }

  function remove(chip) {
    chips = chips.filter((c) => c.key !== chip.key);
    draw();
    input.focus();
  }

  function add(files) {
    for (const file of files) {
      const chip = { key: (chipIds += 1), name: file.name || "pasted image", size: file.size, mime: file.type, state: "uploading", thumb: isImage(file.type) ? fileDataUrl(file) : null };
      chips = [...chips, chip];
      upload(file).then(
        (dto) => settle(chip.key, { state: "ready", id: dto.attachment_id, name: dto.name, size: dto.size, mime: dto.mime }),
        (err) => settle(chip.key, { state: "failed", error: err?.message ?? String(err) }),
      );
    }
    draw();
  }

  function settle(key, change) {
    if (!chips.some((c) => c.key === key)) return; // removed while it uploaded
    chips = chips.map((c) => (c.key === key ? { ...c, ...change } : c));
    draw();
  }

  input.addEventListener("paste", (event) => {
    const files = [...(event.clipboardData?.files ?? [])];
    if (files.length === 0 || button.disabled) return;
    // A paste of text with a picture of it (some editors) stays text.
    if (!event.clipboardData.types.includes("text/plain")) event.preventDefault();
    if (event.defaultPrevented) add(files);
  });
  const hasFiles = (event) => [...(event.dataTransfer?.types ?? [])].includes("Files");
  form.addEventListener("dragover", (event) => {
    if (!hasFiles(event) || button.disabled) return;
    event.preventDefault();
    form.classList.add("is-dropping");
  });
  form.addEventListener("dragleave", (event) => {
    if (!form.contains(event.relatedTarget)) form.classList.remove("is-dropping");
  });
  form.addEventListener("drop", (event) => {
    form.classList.remove("is-dropping");
    if (!hasFiles(event) || button.disabled) return;
    event.preventDefault();
    add([...event.dataTransfer.files]);
  });

  return {
    button,
    picker,
    list,
    /** Why a send must wait, or null. */
    blocked: () => attachmentsBlock(chips),
    ids: () => chips.filter((c) => c.state === "ready").map((c) => c.id),
    count: () => chips.length,
    clear() {
      chips = [];
      draw();
    },
    /** The chips, to carry into the other layout's composer. */
    get chips() {
      return chips;
    },
    set chips(next) {
      chips = [...next];
      draw();
    },
    setEnabled(on) {
      button.disabled = !on;
    },
  };
}
