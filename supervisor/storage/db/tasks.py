"""Workspaces and tasks (a task's sessions go with it)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable

from ...models import Task
from .sessions import SessionRows
from .values import new_id, now

__all__ = ["TaskRows"]

# A task with its live status: how many sessions, how many running a turn; and
# when it was last active (made, or given a session): the list's order, which a
# rename or an archive leaves alone (its updated_at moves, its place does not).
_TASK_SELECT = (
    "SELECT t.*, "
    "MAX(t.created_at, COALESCE((SELECT MAX(s.created_at) FROM task_sessions s "
    "WHERE s.task_id = t.id), '')) AS active_at, "
    "(SELECT COUNT(*) FROM task_sessions s WHERE s.task_id = t.id) AS session_count, "
    "(SELECT COUNT(*) FROM task_sessions s WHERE s.task_id = t.id AND s.state = 'RUNNING') "
    "AS running_count, "
    # DESIGN.md §15: what of it needs the person (failed starts; unseen attention).
    "(SELECT COUNT(*) FROM task_sessions s WHERE s.task_id = t.id AND s.state = 'FAILED') "
    "AS failed_count, "
    "(SELECT json_group_array(json_object('session_id', a.id, 'attention', a.attention, "
    "'agent', a.agent, 'title', a.title)) FROM (SELECT * FROM task_sessions s "
    "WHERE s.task_id = t.id AND s.attention IS NOT NULL ORDER BY s.created_at) a) "
    "AS attention FROM tasks t"
)



def _task(row: sqlite3.Row) -> Task:
    return Task(id=row["id"], workspace_id=row["workspace_id"], title=row["title"],
                created_at=row["created_at"], updated_at=row["updated_at"],
                archived=bool(row["archived"]), session_count=row["session_count"],
                running_count=row["running_count"], project_dir=row["project_dir"],
                project_identity=_identity(row["project_identity"]),
                active_at=row["active_at"], failed_count=row["failed_count"],
                attention=tuple(json.loads(row["attention"] or "[]")))


def _identity(text: str | None) -> tuple[int, int] | None:
    if not text:
        return None
    dev, _, ino = text.partition(":")
    return int(dev), int(ino)



class TaskRows(SessionRows):
    def ensure_workspace(self, name: str) -> str:
        row = self.conn.execute("SELECT id FROM workspaces WHERE name = ?", (name,)).fetchone()
        if row:
            return str(row["id"])
        wid = new_id()
        with self._tx():
            self.conn.execute("INSERT INTO workspaces VALUES (?, ?, ?)", (wid, name, now()))
        return wid

    def create_task(self, workspace_id: str, title: str, project_dir: str | None = None,
                    project_identity: tuple[int, int] | None = None) -> Task:
        ts = now()
        task = Task(id=new_id(), workspace_id=workspace_id, title=title,
                    created_at=ts, updated_at=ts, project_dir=project_dir,
                    project_identity=project_identity, active_at=ts)
        identity = (None if project_identity is None
                    else f"{project_identity[0]}:{project_identity[1]}")
        with self._tx():
            self.conn.execute(
                "INSERT INTO tasks (id, workspace_id, title, created_at, updated_at, "
                "project_dir, project_identity) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (task.id, workspace_id, title, ts, ts, project_dir, identity))
        return task

    def get_task(self, task_id: str) -> Task | None:
        row = self.conn.execute(f"{_TASK_SELECT} WHERE t.id = ?", (task_id,)).fetchone()
        return _task(row) if row else None

    def list_tasks(self, workspace_ids: Iterable[str]) -> list[Task]:
        ids = list(workspace_ids)
        marks = ",".join("?" * len(ids))
        rows = self.conn.execute(
            f"{_TASK_SELECT} WHERE t.workspace_id IN ({marks}) "
            "ORDER BY active_at DESC, t.rowid DESC", ids).fetchall()
        return [_task(r) for r in rows]

    def update_task(self, task_id: str, *, title: str | None = None,
                    archived: bool | None = None) -> Task | None:
        """Rename and/or (un)archive; None if there is no such task."""
        with self._tx():
            changed = self.conn.execute(
                "UPDATE tasks SET title = COALESCE(?, title), "
                "archived = COALESCE(?, archived), updated_at = ? WHERE id = ?",
                (title, None if archived is None else int(archived), now(), task_id),
            ).rowcount
        return self.get_task(task_id) if changed else None

    def delete_task(self, task_id: str) -> bool:
        """The task, its sessions and everything they hold (False: no such task)."""
        with self._tx():
            for (session_id,) in self.conn.execute(
                    "SELECT id FROM task_sessions WHERE task_id = ?", (task_id,)).fetchall():
                self._delete_session_rows(session_id)
            return self.conn.execute("DELETE FROM tasks WHERE id = ?",
                                     (task_id,)).rowcount > 0
