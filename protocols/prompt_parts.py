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

A large image or binary file is not base64-encoded into the prompt's JSON line at
once (its bytes, their base64, the JSON text and its UTF-8 would each be a copy of
it: 7 times an image's size at peak, measured by bench/attachments.py). ``streamed``
has the core build the line around a stand-in (random bytes of its own, whose
base64 is a token found once in the line), and the result, a ``Spliced``, yields
the line's pieces with each token replaced by the real base64, encoded a chunk at
a time as the transport writes it (protocols/transport.py ``send``).
"""

from __future__ import annotations

import base64
import secrets
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

__all__ = ["FilePart", "ImagePart", "Line", "MentionPart", "PartRefused", "PromptPart",
           "Spliced", "acp_blocks", "acp_prompt_caps", "acp_refusal", "codex_input",
           "codex_refusal", "streamed"]


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


#: A part's bytes up to this size go into the line as they are (one write, whole).
SPLICE_MIN_BYTES = 64 * 1024
#: Raw bytes base64-encoded per piece (a multiple of 3: no padding inside the line).
SPLICE_CHUNK = 48 * 1024
_STAND_IN_BYTES = 24


@dataclass(frozen=True, slots=True)
class _Blob:
    token: bytes  # the base64 of the stand-in, as it appears in the line
    data: bytes


@dataclass(frozen=True, slots=True)
class Spliced:
    """A JSON line whose blobs' base64 is written as it is encoded: iterate for its
    pieces, in order (each at most ``SPLICE_CHUNK * 4 / 3`` bytes of base64)."""

    line: bytes
    blobs: tuple[_Blob, ...]

    def __iter__(self) -> Iterator[bytes]:
        at = 0
        for blob in sorted(self.blobs, key=lambda b: self.line.index(b.token)):
            start = self.line.index(blob.token)
            yield self.line[at:start]
            view = memoryview(blob.data)
            for i in range(0, len(view), SPLICE_CHUNK):
                yield base64.b64encode(view[i:i + SPLICE_CHUNK])
            at = start + len(blob.token)
        yield self.line[at:]

    def __len__(self) -> int:
        """The bytes written: the line's, with each token's base64 for its data."""
        return len(self.line) + sum(4 * ((len(b.data) + 2) // 3) - len(b.token)
                                    for b in self.blobs)


#: What a core's prompt is to the transport: its bytes, or a line with blobs spliced in.
Line = bytes | Spliced


def _deferred(part: PromptPart) -> bool:
    if isinstance(part, ImagePart):
        return len(part.data) > SPLICE_MIN_BYTES
    # A text file is embedded as text (escaped in the JSON), not base64.
    return (isinstance(part, FilePart) and not part.mime.startswith("text/")
            and len(part.data) > SPLICE_MIN_BYTES)


def streamed(build: Callable[[tuple[PromptPart, ...]], bytes],
             parts: Sequence[PromptPart]) -> Line:
    """``build(parts)`` (a core's prompt bytes), with each large image or binary file
    standing in by a few random bytes; the line with the real bytes to splice in."""
    stand_ins: list[PromptPart] = []
    blobs: list[_Blob] = []
    for part in parts:
        if isinstance(part, ImagePart | FilePart) and _deferred(part):
            stand_in = secrets.token_bytes(_STAND_IN_BYTES)
            stand_ins.append(replace(part, data=stand_in))
            blobs.append(_Blob(token=base64.b64encode(stand_in), data=part.data))
        else:
            stand_ins.append(part)
    line = build(tuple(stand_ins))
    if not blobs:
        return line
    for blob in blobs:
        # 32 random base64 characters: found once, or the line is not what was built.
        if line.count(blob.token) != 1:
            raise RuntimeError("a prompt part's stand-in is not once in its line")
    return Spliced(line=line, blobs=tuple(blobs))
