"""What a prompt carries beside its text (DESIGN.md §19): images, files, mentions.

Pure values and the wire shapes each dialect takes, built here so both cores
(protocols/acp.py, protocols/codex.py) stay what they were:

- ACP (``session/prompt``): the text block, then an ``image`` block per image
  (``{type: "image", mimeType, data: base64}``) when the agent's
  ``promptCapabilities.image``; a file attachment or a mentioned text file as
  an embedded ``resource`` (``{type: "resource", resource: {uri, text | blob,
  mimeType}}``) when ``promptCapabilities.embeddedContext``; a mention the agent
  cannot take embedded as a ``resource_link`` (``{type, uri, name}``), which
  every ACP agent takes (the schema's baseline).
- Codex (``turn/start``): the text item (each mention's path appended to the
  text), then an ``image`` item per image with a data URL (the app-server reads
  it from the request: the image need not be inside the agent's sandbox).
  Codex takes no other file: a file attachment is refused.

``PartRefused`` (a ValueError) names what the agent cannot take, before
anything is sent.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["FilePart", "ImagePart", "MentionPart", "PartRefused", "PromptPart",
           "acp_blocks", "acp_prompt_caps", "acp_refusal", "codex_input", "codex_refusal"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ImagePart:
    """An uploaded image: its bytes go to the agent."""

    name: str
    mime: str
    data: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class FilePart:
    """An uploaded file that is not an image (text/*, PDF)."""

    name: str
    mime: str
    data: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class MentionPart:
    """A file of the session's cwd the person named: ``path`` is absolute,
    ``text`` its content when it is text (embedded where the agent allows)."""

    path: str
    name: str
    mime: str
    text: str | None = None


PromptPart = ImagePart | FilePart | MentionPart


class PartRefused(ValueError):
    """The agent cannot take a part of the prompt (one line, nothing sent)."""


def _flag(caps: Mapping[str, Any], name: str) -> bool:
    return caps.get(name) is True


def acp_refusal(parts: Sequence[PromptPart], prompt_caps: Mapping[str, Any]) -> str | None:
    """Why an ACP agent with ``promptCapabilities`` ``prompt_caps`` cannot take
    ``parts``, or None."""
    if any(isinstance(p, ImagePart) for p in parts) and not _flag(prompt_caps, "image"):
        return "this agent does not take images (its promptCapabilities.image is not set)"
    if any(isinstance(p, FilePart) for p in parts) and not _flag(prompt_caps,
                                                                   "embeddedContext"):
        return ("this agent does not take attached files (its "
                "promptCapabilities.embeddedContext is not set)")
    return None


def acp_blocks(text: str, parts: Sequence[PromptPart],
               prompt_caps: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``session/prompt``'s ``prompt``: the text, then each part."""
    refusal = acp_refusal(parts, prompt_caps)
    if refusal is not None:
        raise PartRefused(refusal)
    embedded = _flag(prompt_caps, "embeddedContext")
    blocks: list[dict[str, Any]] = [{"type": "text", "text": text}]
    for part in parts:
        match part:
            case ImagePart():
                blocks.append({"type": "image", "mimeType": part.mime,
                               "data": base64.b64encode(part.data).decode("ascii")})
            case FilePart():
                resource: dict[str, Any] = {"uri": f"attachment:{part.name}",
                                            "mimeType": part.mime}
                if part.mime.startswith("text/"):
                    resource["text"] = part.data.decode("utf-8", errors="replace")
                else:
                    resource["blob"] = base64.b64encode(part.data).decode("ascii")
                blocks.append({"type": "resource", "resource": resource})
            case MentionPart():
                uri = "file://" + part.path
                if embedded and part.text is not None:
                    blocks.append({"type": "resource", "resource": {
                        "uri": uri, "text": part.text, "mimeType": part.mime}})
                else:
                    blocks.append({"type": "resource_link", "uri": uri, "name": part.name})
    return blocks


def codex_refusal(parts: Sequence[PromptPart]) -> str | None:
    if any(isinstance(p, FilePart) for p in parts):
        return "Codex takes images and mentioned files, not attached files of other kinds"
    return None


def codex_input(text: str, parts: Sequence[PromptPart]) -> list[dict[str, Any]]:
    """``turn/start``'s (and ``turn/steer``'s) ``input``."""
    refusal = codex_refusal(parts)
    if refusal is not None:
        raise PartRefused(refusal)
    mentions = [p.path for p in parts if isinstance(p, MentionPart)]
    if mentions:
        text = text + "\n\n" + "\n".join(f"@{path}" for path in mentions)
    items: list[dict[str, Any]] = [{"type": "text", "text": text}]
    for part in parts:
        if isinstance(part, ImagePart):
            data = base64.b64encode(part.data).decode("ascii")
            items.append({"type": "image", "url": f"data:{part.mime};base64,{data}"})
    return items


def acp_prompt_caps(agent_capabilities: Mapping[str, Any]) -> Mapping[str, Any]:
    """The agent's prompt capabilities: v1 ``agentCapabilities.promptCapabilities``;
    v2 ``capabilities.session.prompt`` (else the v1 key, where a v2 agent kept it)."""
    caps = agent_capabilities.get("promptCapabilities")
    session = agent_capabilities.get("session")
    if not isinstance(caps, dict) and isinstance(session, dict):
        caps = session.get("prompt")
    return caps if isinstance(caps, dict) else {}
