"""A prompt's images, files and mentions on the wire without a process (DESIGN.md §19):
ACP's content blocks by the agent's ``promptCapabilities`` (v1 and v2), Codex's
``turn/start`` input items; a part the agent cannot take refused before anything is
written, the core's turn left as it was."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from protocols.acp import AcpClient
from protocols.jsonrpc import Dialect, IncomingRequest
from protocols.prompt_parts import (
    FilePart,
    ImagePart,
    MentionPart,
    PartRefused,
    PromptPart,
    acp_prompt_caps,
)
from protocols.turnstate import TurnState

from . import codex_states as cx
from .helpers import ConnectionPair, parse_lines

PNG = ImagePart(name="shot.png", mime="image/png", data=b"\x89PNG\r\n\x1a\n\x00\x01")
NOTE = FilePart(name="notes.txt", mime="text/plain", data="héllo".encode())
PDF = FilePart(name="spec.pdf", mime="application/pdf", data=b"%PDF-1.4")
SRC = MentionPart(path="/work/src/a.py", name="src/a.py", mime="text/x-python",
                  text="print(1)\n")
BIN = MentionPart(path="/work/logo.bin", name="logo.bin", mime="application/octet-stream")
B64 = base64.b64encode(PNG.data).decode()


def in_session(version: int, caps: dict[str, Any]) -> ConnectionPair[AcpClient]:
    p = ConnectionPair(AcpClient(acp_version=2 if version == 2 else 1), Dialect.JSONRPC2)
    [init] = p.to_agent(p.client.initialize()[1])
    assert isinstance(init, IncomingRequest)
    answer: dict[str, Any] = ({"protocolVersion": 2, "info": {"name": "a"},
                               "capabilities": caps} if version == 2 else
                              {"protocolVersion": 1, "agentCapabilities": caps})
    p.to_client(p.agent.send_response(init.id, answer))
    [new] = p.to_agent(p.client.new_session("/work")[1])
    assert isinstance(new, IncomingRequest)
    p.to_client(p.agent.send_response(new.id, {"sessionId": "s1"}))
    return p


BOTH = {"image": True, "embeddedContext": True}


@pytest.mark.parametrize(("version", "caps"), [
    (1, {"promptCapabilities": BOTH}),
    (2, {"promptCapabilities": BOTH}),
    (2, {"session": {"prompt": BOTH}}),
])
def test_acp_blocks_with_image_and_embedded_context(version: int,
                                                     caps: dict[str, Any]) -> None:
    p = in_session(version, caps)
    [line] = parse_lines(p.client.prompt("look", (PNG, NOTE, PDF, SRC, BIN))[1])
    assert line["method"] == "session/prompt"
    assert line["params"]["prompt"] == [
        {"type": "text", "text": "look"},
        {"type": "image", "mimeType": "image/png", "data": B64},
        {"type": "resource", "resource": {"uri": "attachment:notes.txt",
                                          "mimeType": "text/plain", "text": "héllo"}},
        {"type": "resource", "resource": {"uri": "attachment:spec.pdf",
                                          "mimeType": "application/pdf",
                                          "blob": base64.b64encode(PDF.data).decode()}},
        {"type": "resource", "resource": {"uri": "file:///work/src/a.py",
                                          "text": "print(1)\n", "mimeType": "text/x-python"}},
        # Not text: a link even where the agent takes embedded resources.
        {"type": "resource_link", "uri": "file:///work/logo.bin", "name": "logo.bin"},
    ]


def test_acp_mention_is_a_link_without_embedded_context() -> None:
    p = in_session(1, {"promptCapabilities": {"image": True}})
    [line] = parse_lines(p.client.prompt("see", (SRC,))[1])
    assert line["params"]["prompt"][1] == {"type": "resource_link",
                                           "uri": "file:///work/src/a.py", "name": "src/a.py"}


@pytest.mark.parametrize(("caps", "parts", "says"), [
    ({}, (PNG,), "does not take images"),
    ({"promptCapabilities": {"embeddedContext": True}}, (SRC, PNG), "does not take images"),
    ({"promptCapabilities": {"image": "yes"}}, (PNG,), "does not take images"),
    ({"promptCapabilities": {"image": True}}, (NOTE,), "does not take attached files"),
])
def test_acp_refuses_before_anything_is_sent(caps: dict[str, Any], parts: tuple[PromptPart, ...],
                                             says: str) -> None:
    p = in_session(1, caps)
    with pytest.raises(PartRefused, match=says):
        p.client.prompt("x", parts)
    # No turn began: a text prompt still goes, as the next request.
    assert p.client.turn.state is TurnState.IDLE
    [line] = parse_lines(p.client.prompt("x")[1])
    assert line["params"]["prompt"] == [{"type": "text", "text": "x"}]


def test_prompt_caps_by_shape() -> None:
    assert acp_prompt_caps({"promptCapabilities": {"image": True}}) == {"image": True}
    assert acp_prompt_caps({"session": {"prompt": {"image": True}}}) == {"image": True}
    assert acp_prompt_caps({"session": {}}) == {}
    assert acp_prompt_caps({"promptCapabilities": [1]}) == {}


def test_codex_turn_start_items() -> None:
    p = cx.in_thread()
    [line] = parse_lines(p.client.turn_start("look", (PNG, SRC))[1])
    assert line["method"] == "turn/start"
    assert line["params"]["input"] == [
        {"type": "text", "text": "look\n\n@/work/src/a.py"},
        {"type": "image", "url": f"data:image/png;base64,{B64}"},
    ]


def test_codex_refuses_other_files_before_anything_is_sent() -> None:
    p = cx.in_thread()
    with pytest.raises(PartRefused, match="Codex takes images"):
        p.client.turn_start("x", (NOTE,))
    assert p.client.turn.state is TurnState.IDLE
    [line] = parse_lines(p.client.turn_start("x")[1])
    assert line["params"]["input"] == [{"type": "text", "text": "x"}]
