"""Attachments (DESIGN.md §19): what a person uploads for an agent's prompt.

An upload is streamed to a private temporary file in ``DATA_DIR/attachments``
(0700) while its sha256 is computed and its size counted (never held whole in
memory), refused past ``[limits] max_attachment_bytes``, then renamed to its
hash (0600): the same content twice is one file.  Each upload is a row of its
workspace (``storage.db.attachments``); another workspace's id is not found.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import AsyncIterable, Sequence
from pathlib import Path

import trio

from ..errors import InvalidRequest, NotFound
from ..models import Attachment
from ..storage.store import Store

__all__ = ["ALLOWED_IMAGES", "AttachmentStore", "TooLarge", "allowed_mime"]

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


class AttachmentStore:
    def __init__(self, data_dir: Path, store: Store, max_bytes: int) -> None:
        self.dir = data_dir / "attachments"
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
