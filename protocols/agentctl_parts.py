"""A prompt's parts and a session's MCP servers as agentctl's HTTP API carries them
(DESIGN.md §19, §20): JSON both ways, sans-IO.

The backend (supervisor/executors/agentctl_adapter.py) writes them with ``parts_json`` /
``mcp_json``; agentctl (web/agentctl/app.py) reads them with ``parts_from_json`` /
``mcp_from_json``, which check every field and raise ``ValueError`` with one line naming
the bad one (agentctl answers it as a 422).  Shapes:

- a part: ``{type: "image" | "file", name, mime, data: base64}`` or ``{type: "mention",
  path (absolute, the agent machine's), name, mime, text?}``;
- an MCP server: ``{name, kind: "stdio", command, args: [..], env: {..}}`` or ``{name, kind:
  "http" | "sse", url, headers: {..}}``.

What agentctl does with them is what the local executor does: the parts go to its agent's
prompt (protocols/prompt_parts.py builds the dialect's shape, and refuses what the agent
does not take), the servers to its session/new.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from typing import Any, Final, get_args

from .mcp import McpKind, McpServer
from .prompt_parts import FilePart, ImagePart, MentionPart, PromptPart

__all__ = ["MAX_PARTS", "MAX_PROMPT_BYTES", "MAX_SERVERS", "mcp_from_json", "mcp_json",
           "parts_from_json", "parts_json", "prompt_bytes"]

MAX_PARTS: Final = 64
#: agentctl's cap on a prompt's body: its parts' base64 and the text.
MAX_PROMPT_BYTES: Final = 64 * 1024 * 1024
MAX_SERVERS: Final = 64
_TEXT_MAX: Final = 1024


def prompt_bytes(text: str, parts: Sequence[PromptPart]) -> int:
    """About the size of a prompt's body: its parts' base64 and the texts (the
    backend checks it against ``MAX_PROMPT_BYTES`` before anything is sent)."""
    size = len(text.encode())
    for part in parts:
        if isinstance(part, ImagePart | FilePart):
            size += 4 * ((len(part.data) + 2) // 3)
        elif part.text is not None:
            size += len(part.text.encode())
    return size + 1024 * len(parts)


def parts_json(parts: Sequence[PromptPart]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for part in parts:
        match part:
            case ImagePart() | FilePart():
                out.append({"type": "image" if isinstance(part, ImagePart) else "file",
                            "name": part.name, "mime": part.mime,
                            "data": base64.b64encode(part.data).decode("ascii")})
            case MentionPart():
                item: dict[str, Any] = {"type": "mention", "path": part.path,
                                        "name": part.name, "mime": part.mime}
                if part.text is not None:
                    item["text"] = part.text
                out.append(item)
    return out


def _short(item: dict[str, Any], key: str, where: str) -> str:
    value = item.get(key)
    if not isinstance(value, str) or not value or len(value) > _TEXT_MAX:
        raise ValueError(f"{where}.{key} must be a non-empty string of at most "
                         f"{_TEXT_MAX} characters")
    return value


def _strings(value: Any, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise ValueError(f"{where} must be an object of strings")
    return dict(value)


def _list(value: Any, what: str, most: int) -> list[dict[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise ValueError(f"{what} must be a list of objects")
    if len(value) > most:
        raise ValueError(f"{what}: at most {most}")
    return value


def parts_from_json(value: Any) -> tuple[PromptPart, ...]:
    """The parts of a ``POST /api/v1/prompt`` body (None: none)."""
    parts: list[PromptPart] = []
    for i, item in enumerate(_list(value, "parts", MAX_PARTS)):
        where = f"parts[{i}]"
        kind = item.get("type")
        name, mime = _short(item, "name", where), _short(item, "mime", where)
        if kind in ("image", "file"):
            data = item.get("data")
            try:
                raw = base64.b64decode(data if isinstance(data, str) else "", validate=True)
            except (binascii.Error, ValueError):
                raw = b""
            if not isinstance(data, str) or (data and not raw):
                raise ValueError(f"{where}.data must be base64")
            if kind == "image" and not mime.startswith("image/"):
                raise ValueError(f"{where}: an image's mime must be image/*, not {mime!r}")
            parts.append(ImagePart(name=name, mime=mime, data=raw) if kind == "image"
                         else FilePart(name=name, mime=mime, data=raw))
        elif kind == "mention":
            path = _short(item, "path", where)
            if not path.startswith("/"):
                raise ValueError(f"{where}.path must be absolute")
            text = item.get("text")
            if text is not None and not isinstance(text, str):
                raise ValueError(f"{where}.text must be a string")
            parts.append(MentionPart(path=path, name=name, mime=mime, text=text))
        else:
            raise ValueError(f"{where}.type must be image, file or mention, not {kind!r}")
    return tuple(parts)


def mcp_json(servers: Sequence[McpServer]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for s in servers:
        if s.kind == "stdio":
            out.append({"name": s.name, "kind": s.kind, "command": s.command,
                        "args": list(s.args), "env": dict(s.env)})
        else:
            out.append({"name": s.name, "kind": s.kind, "url": s.url,
                        "headers": dict(s.headers)})
    return out


def mcp_from_json(value: Any) -> tuple[McpServer, ...]:
    """The MCP servers of a ``POST /api/v1/session`` body (None: none)."""
    servers: list[McpServer] = []
    for i, item in enumerate(_list(value, "mcp_servers", MAX_SERVERS)):
        where = f"mcp_servers[{i}]"
        name = _short(item, "name", where)
        kind = item.get("kind")
        if kind not in get_args(McpKind):
            raise ValueError(f"{where}.kind must be stdio, http or sse, not {kind!r}")
        if kind == "stdio":
            command = _short(item, "command", where)
            if not command.startswith("/"):
                raise ValueError(f"{where}.command must be an absolute path")
            args = item.get("args") or []
            if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
                raise ValueError(f"{where}.args must be a list of strings")
            servers.append(McpServer(name=name, kind="stdio", command=command,
                                     args=tuple(args),
                                     env=_strings(item.get("env"), f"{where}.env")))
        else:
            url = _short(item, "url", where)
            if not url.startswith(("http://", "https://")):
                raise ValueError(f"{where}.url must be an http(s) URL")
            servers.append(McpServer(name=name, kind="http" if kind == "http" else "sse",
                                     url=url,
                                     headers=_strings(item.get("headers"),
                                                      f"{where}.headers")))
    if len({s.name for s in servers}) != len(servers):
        raise ValueError("mcp_servers: each name once")
    return tuple(servers)
