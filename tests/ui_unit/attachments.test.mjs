// Unit tests of the composer's attachments and `@` mentions (DESIGN.md §19): the `@` under the
// caret, what picking a file leaves in the text, which recorded mentions still go with the
// message, what blocks a send, sizes, a user message's parts, and the upload's refusal line.

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { attachmentsBlock, formatSize, insertMention, isImage, mentionQuery, mentionsIn, messageParts, uploadAttachment } from "../../web/static/attachments.js";

describe("mentionQuery", () => {
  it("finds the @ being typed at the caret", () => {
    assert.deepEqual(mentionQuery("@", 1), { start: 0, query: "" });
    assert.deepEqual(mentionQuery("look at @src/a", 14), { start: 8, query: "src/a" });
    assert.deepEqual(mentionQuery("look at @src/a please", 12), { start: 8, query: "src" });
  });
  it("is no mention inside a word, or once a space is typed after it", () => {
    assert.equal(mentionQuery("me@example.com", 14), null);
    assert.equal(mentionQuery("@src/a.py ", 10), null);
    assert.equal(mentionQuery("no at sign", 10), null);
  });
});

describe("insertMention", () => {
  it("replaces the typed @query by @path and a space", () => {
    assert.deepEqual(insertMention("see @sr", 4, 7, "src/a.py"), { text: "see @src/a.py ", caret: 14 });
    // Picked in the middle of a word: the rest of that word goes, the text after it stays.
    assert.deepEqual(insertMention("see @sr_x and more", 4, 7, "src/a.py"), { text: "see @src/a.py and more", caret: 13 });
  });
});

describe("mentionsIn", () => {
  it("keeps the recorded mentions still named in the text, once each", () => {
    const recorded = ["src/a.py", "README.md", "docs/x.md"];
    assert.deepEqual(mentionsIn("fix @src/a.py, see @README.md.", recorded), ["src/a.py", "README.md"]);
    assert.deepEqual(mentionsIn("fix @src/a.pyc", recorded), []);
    assert.deepEqual(mentionsIn("", recorded), []);
  });
});

describe("attachmentsBlock", () => {
  it("waits for uploads and for a refused file to be removed", () => {
    assert.equal(attachmentsBlock([]), null);
    assert.equal(attachmentsBlock([{ state: "ready", name: "a.png" }]), null);
    assert.match(attachmentsBlock([{ state: "uploading", name: "a.png" }]), /finish uploading/);
    assert.equal(attachmentsBlock([{ state: "ready" }, { state: "failed", name: "x.zip" }]), "Remove x.zip, which could not be attached, to send.");
  });
});

describe("sizes and kinds", () => {
  it("says sizes briefly", () => {
    assert.equal(formatSize(812), "812 B");
    assert.equal(formatSize(4300), "4.2 KB");
    assert.equal(formatSize(200 * 1024), "200 KB");
    assert.equal(formatSize(3 * 1024 * 1024), "3.0 MB");
    assert.equal(formatSize(undefined), "");
  });
  it("knows the images an agent takes", () => {
    assert.equal(isImage("image/png"), true);
    assert.equal(isImage("image/svg+xml"), false);
    assert.equal(isImage("application/pdf"), false);
  });
});

describe("messageParts", () => {
  it("reads a user message's metadata, ignoring what is malformed", () => {
    const att = { attachment_id: "a1", name: "shot.png", mime: "image/png", size: 10 };
    assert.deepEqual(messageParts({ metadata: { attachments: [att, null, { name: "x" }], mentions: ["src/a.py", 5] } }), { attachments: [att], mentions: ["src/a.py"] });
    assert.deepEqual(messageParts({}), { attachments: [], mentions: [] });
  });
});

describe("uploadAttachment", () => {
  const file = { name: "a b.zip", type: "application/zip", size: 4 };
  it("posts the file raw with its type and name, and answers the DTO", async () => {
    let seen = null;
    const dto = { attachment_id: "a1", name: "a b.zip", mime: "application/zip", size: 4 };
    const got = await uploadAttachment(file, async (url, init) => {
      seen = { url, init };
      return { ok: true, status: 201, json: async () => dto };
    });
    assert.deepEqual(got, dto);
    assert.equal(seen.url, "/api/v1/attachments?name=a+b.zip");
    assert.equal(seen.init.method, "POST");
    assert.equal(seen.init.headers["Content-Type"], "application/zip");
    assert.equal(seen.init.body, file);
  });
  it("rejects with the server's one line", async () => {
    const line = "attachment type 'application/zip' is not accepted";
    await assert.rejects(uploadAttachment(file, async () => ({ ok: false, status: 422, json: async () => ({ error: { code: "VALIDATION_ERROR", message: line } }) })), { message: line });
    await assert.rejects(uploadAttachment(file, async () => { throw new TypeError("net"); }), { message: "the server could not be reached" });
  });
});
