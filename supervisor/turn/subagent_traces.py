"""A subagent's trace in its parent's transcript (DESIGN.md §13, issue 41).

Once a child session ends (finished, stopped, failed, or gone with its agent),
``Subagents.take_ended`` hands its trace over and it is written here as one
message of the parent session: role ``system``, kind ``subagent``, the child's
title as content, and in the metadata its task, state, ``outcome`` (``finished``,
``stopped_by_you``, ``stopped``, ``failed``, ``ran``), the tail of its streamed
``output`` and its ``tools``' titles.  Stored, it survives a reload and a
restart; the page draws it as a compact line that opens to the output.
"""

from __future__ import annotations

from ..storage.store import Store
from ..subagents import Subagents

__all__ = ["write_ended"]


async def write_ended(store: Store, subagents: Subagents, session_id: str) -> None:
    """Writes the trace of each child of ``session_id`` that ended unwritten."""
    for turn_id, content, metadata in subagents.take_ended(session_id):
        await store.add_message(session_id, turn_id, "system", "subagent", content, metadata)
