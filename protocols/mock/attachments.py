"""What a prompt carried beside its text, in every dialect, and ``/attachments``
that lists it (DESIGN.md §19).

ACP: the mock advertises ``promptCapabilities {image, embeddedContext}`` (v1 in
``agentCapabilities``, v2 beside its other capabilities), ``image`` unless the
program runs with ``--no-images``.  Each prompt's blocks other than text are
noted as ``TYPE MIME SIZE`` (an image: the bytes its base64 decodes to; an
embedded resource: its text's UTF-8 bytes or its blob's) or ``TYPE URI`` (a
resource link; an embedded resource names its uri too).  Codex: an ``image``
item's data URL as ``image MIME SIZE``, a ``localImage`` as its path, and
the ``@path`` lines of the text as ``mention PATH``.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterator
from typing import Any

from .base import Agent, Turn, Wait

__all__ = ["acp_prompt_capabilities", "attachments", "received"]


def acp_prompt_capabilities(agent: Agent) -> dict[str, bool]:
    return {"image": agent.images, "embeddedContext": True}


def _size(data: object) -> str:
    try:
        return str(len(base64.b64decode(str(data), validate=True)))
    except (binascii.Error, ValueError):
        return "?"


def _block(b: dict[str, Any]) -> str | None:
    kind = b.get("type")
    match kind:
        case "image" if "url" in b:  # Codex: a data URL
            head, _, data = str(b["url"]).partition(",")
            return f"image {head.removeprefix('data:').removesuffix(';base64')} {_size(data)}"
        case "image":
            return f"image {b.get('mimeType')} {_size(b.get('data'))}"
        case "localImage":
            return f"localImage {b.get('path')}"
        case "resource_link":
            return f"resource_link {b.get('uri')}"
        case "resource":
            r = b.get("resource")
            r = r if isinstance(r, dict) else {}
            size = (str(len(str(r["text"]).encode())) if "text" in r
                    else _size(r.get("blob")))
            return f"resource {r.get('mimeType')} {size} {r.get('uri')}"
        case "text" | None:
            return None
        case _:
            return str(kind)


def received(agent: Agent, blocks: object) -> None:
    """Note what a prompt (ACP ``prompt``, Codex ``input``) carried."""
    noted: list[str] = []
    for b in blocks if isinstance(blocks, list) else []:
        if not isinstance(b, dict):
            continue
        line = _block(b)
        if line is not None:
            noted.append(line)
        if b.get("type") == "text" and agent.wire.protocol == "codex":
            noted += [f"mention {w[1:]}" for w in str(b.get("text", "")).splitlines()
                      if w.startswith("@")]
    agent.prompt_parts = noted


def attachments(turn: Turn, text: str) -> Iterator[Wait]:
    parts = turn.agent.prompt_parts
    turn.chunk("attachments: " + ("; ".join(parts) if parts else "none"))
    turn.end("end_turn")
    yield from ()
