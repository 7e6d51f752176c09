"""What a person uploaded (DESIGN.md §19): one row per upload, the file itself
in the data dir under its sha256 (``supervisor.workspace.attachments``); the
uploads nothing refers to, swept (``supervisor.workspace.attachment_sweep``)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

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

    def sweep_attachments(self, cutoff: str, limit: int) -> list[str]:
        """Delete up to ``limit`` uploads made before ``cutoff`` that no message's
        metadata and no queued entry names; the sha256s no upload has any more
        (their files may go).  One transaction: a message stored meanwhile waits."""
        with self._tx():
            named: set[str] = set()
            for (ref,) in self.conn.execute(
                    "SELECT json_extract(j.value, '$.attachment_id') FROM messages m, "
                    "json_each(m.metadata, '$.attachments') j "
                    "WHERE json_type(m.metadata, '$.attachments') = 'array'"):
                named.add(str(ref))
            for (ref,) in self.conn.execute(
                    "SELECT json_extract(j.value, '$.id') FROM queue_entries q, "
                    "json_each(q.parts, '$.attachments') j WHERE q.parts IS NOT NULL"):
                named.add(str(ref))
            stale = [(r["id"], r["sha256"]) for r in self.conn.execute(
                "SELECT id, sha256 FROM attachments WHERE created_at < ? ORDER BY created_at",
                (cutoff,)) if r["id"] not in named][:limit]
            self.conn.executemany("DELETE FROM attachments WHERE id = ?",
                                  [(i,) for i, _ in stale])
            return self._without_rows(sha for _, sha in stale)

    def hashes_without_uploads(self, hashes: Iterable[str]) -> list[str]:
        """Those of ``hashes`` no upload (of any workspace) has."""
        with self._tx():
            return self._without_rows(hashes)

    def _without_rows(self, hashes: Iterable[str]) -> list[str]:
        return [sha for sha in dict.fromkeys(hashes) if self.conn.execute(
            "SELECT 1 FROM attachments WHERE sha256 = ? LIMIT 1", (sha,)).fetchone() is None]
