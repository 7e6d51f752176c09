"""What a person uploaded (DESIGN.md §19): one row per upload, the file itself
in the data dir under its sha256 (``supervisor.workspace.attachments``)."""

from __future__ import annotations

from collections.abc import Sequence

from ...models import Attachment
from .connection import Connection
from .values import new_id, now

__all__ = ["AttachmentRows"]


class AttachmentRows(Connection):
    def add_attachment(self, workspace_id: str, sha256: str, name: str, mime: str,
                       size: int) -> Attachment:
        att = Attachment(id=new_id(), workspace_id=workspace_id, sha256=sha256, name=name,
                         mime=mime, size=size, created_at=now())
        with self._tx():
            self.conn.execute(
                "INSERT INTO attachments (id, workspace_id, sha256, name, mime, size, "
                "created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (att.id, workspace_id, sha256, name, mime, size, att.created_at))
        return att

    def attachments(self, workspace_id: str, ids: Sequence[str]) -> list[Attachment]:
        """The workspace's attachments among ``ids``, in their order (another
        workspace's, or none, are left out: the caller names what is missing)."""
        found: list[Attachment] = []
        for attachment_id in ids:
            r = self.conn.execute(
                "SELECT * FROM attachments WHERE id = ? AND workspace_id = ?",
                (attachment_id, workspace_id)).fetchone()
            if r is not None:
                found.append(Attachment(id=r["id"], workspace_id=r["workspace_id"],
                                        sha256=r["sha256"], name=r["name"], mime=r["mime"],
                                        size=int(r["size"]), created_at=r["created_at"]))
        return found
