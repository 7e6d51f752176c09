"""Agent process groups recorded as running (swept at startup by
``supervisor.turn.recovery``).  Rows only: who the group's leader is, read from
/proc, is the recorder's to say (``leader``)."""

from __future__ import annotations

from .connection import Connection
from .values import now

__all__ = ["GroupRows"]


class GroupRows(Connection):
    def record_agent_group(self, pgid: int, session_id: str, command: str,
                           tag: str | None = None, *, leader: str | None = None) -> None:
        """``leader``: the group leader's identity
        (``protocols.process.process_identity``), read by the recorder while
        the leader is its unreaped child; None: unknown (the sweep then never
        kills the group while a process has its id)."""
        with self._tx():
            self.conn.execute(
                "INSERT OR REPLACE INTO agent_groups "
                "(pgid, session_id, command, started_at, leader, tag) VALUES (?, ?, ?, ?, ?, ?)",
                (pgid, session_id, command, now(), leader, tag))

    def forget_agent_group(self, pgid: int) -> None:
        with self._tx():
            self.conn.execute("DELETE FROM agent_groups WHERE pgid = ?", (pgid,))

    def agent_groups(self) -> list[tuple[int, str, str, str | None]]:
        """(pgid, session id, command, tag) of every agent recorded as running."""
        rows = self.conn.execute(
            "SELECT pgid, session_id, command, tag FROM agent_groups").fetchall()
        return [(int(r[0]), str(r[1]), str(r[2]), r[3]) for r in rows]

    def agent_group_leaders(self) -> dict[int, str | None]:
        """pgid → its leader's recorded identity (None: recorded without one)."""
        rows = self.conn.execute("SELECT pgid, leader FROM agent_groups").fetchall()
        return {int(r[0]): r[1] for r in rows}

