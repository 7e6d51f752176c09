"""The mock agent's file edits: ``/write``, ``/append``, ``/rm`` and ``/edits N``.

Standard library only (the mock agent starts in tens of milliseconds).  Each edit is made
on disk and reported as real agents report theirs:

- ACP (as Claude's Write/Edit tools): a ``tool_call`` of kind ``edit`` (``delete`` for
  ``/rm``) whose ``content`` is ``[{type: "diff", path, oldText, newText}]`` (``oldText``
  null for a new file, ``newText`` empty for a deleted one) with ``locations``, sent
  before the write, then a ``tool_call_update`` ``completed``;
- Codex (as its ``apply_patch``): ``item/started`` of a ``fileChange`` item whose
  ``changes`` are ``[{path, kind: {type: add|update|delete}, diff}]`` (a unified diff),
  then ``item/completed`` with ``status: completed``.

Paths are relative to the session's cwd (absolute ones are used as they are).  ``TEXT``
is written followed by a newline, ``\\n`` in it standing for a newline.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

__all__ = ["EDITS_INTERVAL_S", "Edit", "acp_tool_call", "codex_item", "plan_edit"]

#: ``/edits N``: one write every this often.
EDITS_INTERVAL_S: Final = 0.1


@dataclass(frozen=True, slots=True)
class Edit:
    """One file edit: ``old`` None for a new file, ``new`` None for a deletion."""

    path: str
    old: str | None
    new: str | None

    @property
    def verb(self) -> str:
        return "Delete" if self.new is None else ("Create" if self.old is None else "Edit")

    @property
    def done(self) -> str:
        return {"Delete": "deleted", "Create": "created", "Edit": "edited"}[self.verb]

    def apply(self) -> None:
        if self.new is None:
            os.unlink(self.path)
            return
        Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "w", encoding="utf-8", newline="") as f:
            f.write(self.new)

    def unified(self, display: str) -> str:
        old = (self.old or "").splitlines(keepends=True)
        new = (self.new or "").splitlines(keepends=True)
        before = "/dev/null" if self.old is None else f"a/{display}"
        after = "/dev/null" if self.new is None else f"b/{display}"
        return "".join(difflib.unified_diff(old, new, before, after))


def plan_edit(command: str, cwd: str, rest: str) -> Edit | str:
    """The edit ``command`` (``/write``, ``/append``, ``/rm``) asks for, or why not."""
    path_arg, _, text = rest.strip().partition(" ")
    if not path_arg:
        return f"{command} needs a path"
    path = os.path.join(cwd, path_arg)
    try:
        with open(path, encoding="utf-8", newline="") as f:
            old: str | None = f.read()
    except FileNotFoundError:
        old = None
    except (OSError, UnicodeDecodeError) as exc:
        return f"{command}: cannot read {path_arg}: {exc}"
    body = text.replace("\\n", "\n") + "\n"
    match command:
        case "/write":
            return Edit(path, old, body)
        case "/append":
            return Edit(path, old, (old or "") + body)
        case "/rm":
            if old is None:
                return f"/rm: no such file {path_arg}"
            return Edit(path, old, None)
    return f"not an edit: {command}"


def acp_tool_call(tool_id: str, edit: Edit) -> dict[str, Any]:
    """The ACP ``tool_call`` update announcing ``edit``, its diff in the content."""
    return {
        "sessionUpdate": "tool_call", "toolCallId": tool_id,
        "title": f"{edit.verb} {edit.path}",
        "kind": "delete" if edit.new is None else "edit", "status": "in_progress",
        "rawInput": {"file_path": edit.path},
        "content": [{"type": "diff", "path": edit.path, "oldText": edit.old,
                     "newText": edit.new if edit.new is not None else ""}],
        "locations": [{"path": edit.path}],
    }


def codex_item(tool_id: str, edit: Edit, status: str) -> dict[str, Any]:
    """The Codex ``fileChange`` item of ``edit`` (``status`` inProgress or completed)."""
    kind = "delete" if edit.new is None else ("add" if edit.old is None else "update")
    return {
        "type": "fileChange", "id": tool_id, "status": status,
        "changes": [{"path": edit.path, "kind": {"type": kind},
                     "diff": edit.unified(os.path.basename(edit.path))}],
    }
