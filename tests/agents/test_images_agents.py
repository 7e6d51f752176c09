"""Images and files reaching the real agents (DESIGN.md §19, issue 43 item 9), end to end:
``POST /api/v1/attachments`` → ``message.add {attachments, mentions}`` over the WebSocket API →
``turnvisor serve`` → the real agent CLI → the fake provider.  Each is checked on the model
request the fake provider received:

The image (a 160 by 160 PNG of random pixels, ~77 KB) is larger than what goes inline in the
prompt's line: it is written to the agent's stdin as its base64 is encoded.

- claude (claude-agent-acp): the image is an ``image`` content block of the turn's user
  message (base64, the uploaded bytes); a mentioned file of the session's cwd is there too
  (claude-agent-acp offers ``embeddedContext``: the file's text, embedded);
- codex (app-server): the image is an ``input_image`` of the Responses request's user input,
  a data URL of the uploaded bytes;
- gemini: the image is an ``inlineData`` part of the request's user content (base64, the
  uploaded bytes).
"""

from __future__ import annotations

import base64
import json
import os
import struct
import zlib
from pathlib import Path
from typing import Any

import pytest
import trio

from protocols.prompt_parts import SPLICE_MIN_BYTES
from tests.fake_provider import FakeProvider
from tests.web.support import http

from .test_end_to_end import E2E, STEP_S, TEST_S, allow, e2e_session
from .test_options_agents import (
    _anthropic_main,
    _gemini_main,
    _installed,
    _responses_main,
    provider,
)

pytestmark = [pytest.mark.agents, pytest.mark.slow]

__all__ = ["provider"]


def _png(width: int, height: int) -> bytes:
    """A valid PNG of random pixels (agents decode or size an image before sending it on;
    random: it does not compress, so it is larger than a prompt's inline parts and is
    written to the agent's stdin as it is encoded, protocols/prompt_parts.py)."""
    raw = b"".join(b"\x00" + os.urandom(3 * width) for _ in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


PNG = _png(160, 160)
assert len(PNG) > SPLICE_MIN_BYTES
MENTIONED = "MENTIONED_MARKER = 'the file the person named'\n"


async def _upload(e: E2E, data: bytes, name: str, mime: str) -> str:
    async with http(e.srv) as h:
        r = await h.post("/api/v1/attachments", params={"name": name}, content=data,
                         headers={"Content-Type": mime})
        assert r.status_code == 201, r.text
        return str(r.json()["attachment_id"])


async def _turn_with(e: E2E, text: str, **extra: Any) -> list[tuple[str, Any]]:
    """``message.add`` of ``text`` with ``extra`` (attachments, mentions), run to its end; the
    provider's requests meanwhile (path, body)."""
    first = len(e.provider.requests)
    mark = e.mark()
    answer = await e.ws.call("message.add", {"session_id": e.sid, "content": text, **extra},
                             timeout=STEP_S)
    assert answer["delivery"] == "started", answer
    assert await e.turn_end(mark, answer["turn_id"]) == "end_turn"
    return [(path, body) for _, path, body in e.provider.requests[first:]]


def _user_blocks(body: dict[str, Any], text: str) -> list[dict[str, Any]]:
    """The content blocks of the request's user message that carries ``text``."""
    for message in reversed(body["messages"]):
        content = message["content"]
        if message["role"] == "user" and isinstance(content, list) and any(
                text in str(b.get("text", "")) for b in content):
            return list(content)
    raise AssertionError(f"{text!r} is in no user message: {json.dumps(body)[-2000:]}")


@_installed("claude")
async def test_claude_gets_an_image_block_and_the_mentioned_file(
    provider: FakeProvider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with trio.fail_after(TEST_S):
        async with e2e_session("claude", provider, tmp_path, monkeypatch, policy=allow) as e:
            image = await _upload(e, PNG, "shot.png", "image/png")
            (Path(e.cwd) / "notes.py").write_text(MENTIONED)
            prompt = "QUICK: look at the picture"
            requests = await _turn_with(e, prompt, attachments=[image], mentions=["notes.py"])
            mains = [b for p, b in requests if _anthropic_main(p, b)]
            assert mains, [p for p, _ in requests]
            blocks = _user_blocks(mains[0], prompt)
            images = [b for b in blocks if b.get("type") == "image"]
            assert len(images) == 1, blocks
            source = images[0]["source"]
            assert (source["type"], source["media_type"]) == ("base64", "image/png"), source
            assert base64.b64decode(source["data"]) == PNG
            # The mentioned file: claude-agent-acp turns the embedded resource into text
            # of the same message (the file's content, and its path).
            texts = "\n".join(str(b.get("text", "")) for b in blocks)
            assert "MENTIONED_MARKER" in texts, blocks
            assert "notes.py" in texts, blocks


@_installed("codex")
async def test_codex_gets_an_input_image(
    provider: FakeProvider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with trio.fail_after(TEST_S):
        async with e2e_session("codex", provider, tmp_path, monkeypatch, policy=allow) as e:
            image = await _upload(e, PNG, "shot.png", "image/png")
            prompt = "QUICK: look at the picture"
            requests = await _turn_with(e, prompt, attachments=[image])
            mains = [b for p, b in requests if _responses_main(p, b)]
            assert mains, [p for p, _ in requests]
            body = mains[0]
            user = [item for item in body["input"]
                    if item.get("role") == "user" and any(
                        prompt in str(c.get("text", "")) for c in item.get("content", []))]
            assert user, json.dumps(body["input"])[-2000:]
            content = [c for item in user for c in item["content"]]
            images = [c for c in content if c.get("type") == "input_image"]
            assert len(images) == 1, content
            url = str(images[0]["image_url"])
            assert url.startswith("data:image/png;base64,"), url[:60]
            assert base64.b64decode(url.split(",", 1)[1]) == PNG


@_installed("gemini")
async def test_gemini_gets_inline_data(
    provider: FakeProvider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with trio.fail_after(TEST_S):
        async with e2e_session("gemini", provider, tmp_path, monkeypatch, policy=allow) as e:
            image = await _upload(e, PNG, "shot.png", "image/png")
            prompt = "QUICK: look at the picture"
            requests = await _turn_with(e, prompt, attachments=[image])
            mains = [b for p, b in requests if _gemini_main(p, b)]
            assert mains, [p for p, _ in requests]
            parts = [part for content in mains[0]["contents"] if content.get("role") == "user"
                     for part in content.get("parts", [])]
            inline = [p["inlineData"] for p in parts if "inlineData" in p]
            assert len(inline) == 1, json.dumps(parts)[-2000:]
            assert inline[0]["mimeType"] == "image/png"
            assert base64.b64decode(inline[0]["data"]) == PNG
