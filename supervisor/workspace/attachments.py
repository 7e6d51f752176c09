"""Attachments (DESIGN.md §19): what a person uploads for an agent's prompt.

An upload is streamed to a private temporary file in ``DATA_DIR/attachments``
(0700) while its sha256 is computed and its size counted (never held whole in
memory), refused past ``[limits] max_attachment_bytes``, then renamed to its
hash (0600): the same content twice is one file.  Each upload is a row of its
workspace (``storage.db.attachments``); another workspace's id is not found.
"""

from __future__ import annotations

import dataclasses
import hashlib
import mimetypes
import os
import stat
from collections.abc import AsyncIterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Final

import trio

from protocols.prompt_parts import FilePart, ImagePart, MentionPart, PromptPart

from ..errors import InvalidRequest, NotFound
from ..models import Attachment
from ..storage.store import Store

__all__ = ["ALLOWED_IMAGES", "NO_REFS", "AttachmentStore", "PromptRefs", "TooLarge", "allowed_mime",
           "check_mention", "read_mention"]

#: The image types an agent is given as images (ACP ``image`` blocks, Codex image inputs).
ALLOWED_IMAGES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
_MAX_NAME = 255


class TooLarge(InvalidRequest):
    """The upload passed ``[limits] max_attachment_bytes`` (413)."""


def allowed_mime(content_type: str | None) -> str:
    """The media type of ``content_type`` (parameters dropped, lower case), or
    InvalidRequest in one line for a type no agent is given."""
    mime = (content_type or "").split(";", 1)[0].strip().lower()
    if mime in ALLOWED_IMAGES or mime == "application/pdf" or (
            mime.startswith("text/") and len(mime) > len("text/")):
        return mime
    raise InvalidRequest(f"attachment type {mime or '(none)'!r} is not accepted: images "
                         "(png, jpeg, gif, webp), text/* and application/pdf are")


def _name(name: str | None, mime: str) -> str:
    name = (name or "").strip().replace("/", "_").replace("\\", "_")
    if not name or any(ord(c) < 32 or ord(c) == 127 for c in name):
        return "attachment." + mime.split("/", 1)[1].split("+", 1)[0]
    return name[:_MAX_NAME]


def attachments_dir(data_dir: Path) -> Path:
    return data_dir / "attachments"


class AttachmentStore:
    def __init__(self, data_dir: Path, store: Store, max_bytes: int) -> None:
        self.dir = attachments_dir(data_dir)
        self.store = store
        self.max_bytes = max_bytes

    def path(self, att: Attachment) -> Path:
        return self.dir / att.sha256

    async def save(self, workspace_id: str, name: str | None, content_type: str | None,
                   chunks: AsyncIterable[bytes]) -> Attachment:
        """Stream ``chunks`` to disk; the row.  InvalidRequest for a type not
        accepted or an empty body, TooLarge past the cap (nothing kept)."""
        mime = allowed_mime(content_type)
        await trio.to_thread.run_sync(self._make_dir)
        fd, tmp = await trio.to_thread.run_sync(self._temp)
        digest = hashlib.sha256()
        size = 0
        done = False
        try:
            with os.fdopen(fd, "wb") as f:
                async for chunk in chunks:
                    size += len(chunk)
                    if size > self.max_bytes:
                        raise TooLarge(f"attachment larger than {self.max_bytes} bytes "
                                       "(the server's [limits] max_attachment_bytes)")
                    digest.update(chunk)
                    await trio.to_thread.run_sync(f.write, chunk)
            if size == 0:
                raise InvalidRequest("attachment is empty")
            sha = digest.hexdigest()
            # Same content, same name: an existing file is that content already.
            await trio.to_thread.run_sync(os.replace, tmp, self.dir / sha)
            done = True
        finally:
            if not done:
                await trio.to_thread.run_sync(_unlink, tmp)
        return await self.store.add_attachment(workspace_id, sha, _name(name, mime), mime, size)

    def _make_dir(self) -> None:
        self.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.dir, 0o700)

    def _temp(self) -> tuple[int, Path]:
        tmp = self.dir / f".upload-{os.urandom(8).hex()}"
        return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600), tmp

    async def resolve(self, workspace_id: str, ids: Sequence[str]) -> list[Attachment]:
        """The workspace's attachments ``ids`` names, in order; NotFound naming
        the first that is not one of its (another workspace's is not found)."""
        found = await self.store.attachments(workspace_id, ids)
        known = {a.id for a in found}
        for attachment_id in ids:
            if attachment_id not in known:
                raise NotFound(f"attachment {attachment_id} not found")
        return found

    async def read(self, att: Attachment) -> bytes:
        return await trio.to_thread.run_sync(self.path(att).read_bytes)


def _unlink(path: Path) -> None:
    path.unlink(missing_ok=True)


_NOFOLLOW_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def check_mention(rel: str) -> str:
    """A mention as given: a relative path with no ``..`` (InvalidRequest otherwise)."""
    path = PurePosixPath(rel)
    if (not rel or "\0" in rel or path.is_absolute() or ".." in path.parts
            or str(path) in ("", ".")):
        raise InvalidRequest(f"mention {rel!r} is not a path inside the session's directory")
    return str(path)


def read_mention(cwd: str, rel: str, max_bytes: int) -> MentionPart:
    """The file ``rel`` names in ``cwd``, opened one component at a time without
    following a link (an agent may have planted one to lead out of it): a
    regular file inside ``cwd``, its text when it is UTF-8 within ``max_bytes``.
    Blocking; InvalidRequest in one line otherwise."""
    rel = check_mention(rel)
    parts = PurePosixPath(rel).parts
    refused = InvalidRequest(f"mention {rel!r} is not a file inside the session's directory")
    fds: list[int] = []
    try:
        fds.append(os.open(cwd, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC))
        for name in parts[:-1]:
            fds.append(os.open(name, _NOFOLLOW_DIR, dir_fd=fds[-1]))
        fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                     dir_fd=fds[-1])
        fds.append(fd)
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise refused
        data = os.read(fd, max_bytes + 1) if st.st_size <= max_bytes else None
    except OSError:
        raise refused from None
    finally:
        for f in fds:
            os.close(f)
    text: str | None = None
    if data is not None and len(data) <= max_bytes:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            text = None
    guessed = mimetypes.guess_type(rel)[0]
    mime = guessed or ("text/plain" if text is not None else "application/octet-stream")
    return MentionPart(path=os.path.join(cwd, rel), name=rel, mime=mime, text=text)


@dataclass(frozen=True, slots=True, kw_only=True)
class PromptRefs:
    """What a message carries beside its text, as kept (the user message's
    metadata, a queue entry's ``parts``) until its prompt is written."""

    attachments: tuple[Attachment, ...] = ()
    #: Paths relative to the session's cwd, as the person named them.
    mentions: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.attachments or self.mentions)

    def metadata(self) -> dict[str, Any]:
        """The message DTO's ``metadata.attachments`` / ``metadata.mentions``."""
        meta: dict[str, Any] = {}
        if self.attachments:
            meta["attachments"] = [a.to_dto() for a in self.attachments]
        if self.mentions:
            meta["mentions"] = list(self.mentions)
        return meta

    def stored(self) -> dict[str, Any]:
        return {"attachments": [dataclasses.asdict(a) for a in self.attachments],
                "mentions": list(self.mentions)}

    @classmethod
    def from_stored(cls, raw: Mapping[str, Any] | None) -> PromptRefs:
        if not raw:
            return cls()
        return cls(attachments=tuple(Attachment(**a) for a in raw.get("attachments", ())),
                   mentions=tuple(str(m) for m in raw.get("mentions", ())))

    async def load(self, data_dir: Path, cwd: str, max_bytes: int) -> tuple[PromptPart, ...]:
        """The parts for the agent: each attachment's bytes, each mention read
        from ``cwd`` (InvalidRequest for one that is not a file there)."""
        return await trio.to_thread.run_sync(self._load, attachments_dir(data_dir), cwd,
                                             max_bytes)

    def _load(self, folder: Path, cwd: str, max_bytes: int) -> tuple[PromptPart, ...]:
        parts: list[PromptPart] = []
        for a in self.attachments:
            try:
                data = (folder / a.sha256).read_bytes()
            except OSError:
                raise InvalidRequest(f"attachment {a.id} ({a.name}) is no longer stored") \
                    from None
            kind = ImagePart if a.mime in ALLOWED_IMAGES else FilePart
            parts.append(kind(name=a.name, mime=a.mime, data=data))
        parts += [read_mention(cwd, m, max_bytes) for m in self.mentions]
        return tuple(parts)


#: A message with nothing beside its text.
NO_REFS: Final = PromptRefs()
