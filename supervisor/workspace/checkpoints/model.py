"""The checkpoint engine's values, and the parser of git's tree-diff output (pure, no I/O)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Final, Literal

__all__ = [
    "GITLINK_MODE",
    "Action",
    "Checkpoint",
    "CheckpointError",
    "FileChange",
    "PlannedChange",
    "RawEntry",
    "RestoreResult",
    "SkippedFile",
    "changes_from",
    "parse_batch",
    "parse_message",
    "parse_tree_diff",
    "render_message",
]

#: ``ignored``: a file the turn created whose content is in no checkpoint, because the
#: project's ignore rules (the agent's to write) hide it; a revert removes it.
ChangeStatus = Literal["added", "modified", "deleted", "renamed", "ignored"]
#: What a restore does to a file (``PlannedChange``).
Action = Literal["restored", "deleted", "re-created"]
SkipReason = Literal["too_large", "unreadable", "repository", "unstorable"]
_SKIP_REASONS: Final[tuple[SkipReason, ...]] = ("too_large", "unreadable", "repository",
                                                "unstorable")
_STATUS: Final[dict[str, ChangeStatus]] = {
    "A": "added", "M": "modified", "D": "deleted", "R": "renamed", "T": "modified",
}
#: A nested repository (a submodule the shadow index took over from an earlier version):
#: its files are not in the checkpoint, so it is neither listed as a change nor restored.
GITLINK_MODE: Final = "160000"
#: First line of a checkpoint commit's body: the JSON of what it skipped.
_META_PREFIX: Final = "turnvisor-checkpoint: "
_OBJECT_ID: Final = re.compile(r"[0-9a-f]{40,64}")


class CheckpointError(RuntimeError):
    """A snapshot, diff or restore could not be done; the message is for the user."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SkippedFile:
    """A file left out of a snapshot, and why: ``too_large`` (over the size limit),
    ``unreadable`` (no read permission), ``repository`` (a nested git repository,
    ``size`` 0: its files are not snapshotted), or ``unstorable`` (a directory or file
    git cannot hold: a path near ``PATH_MAX``, a name such as ``.GIT``; ``size`` 0, taken
    whole: a revert removes it if it was not there)."""

    path: str
    size: int
    reason: SkipReason = "too_large"

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "size": self.size, "reason": self.reason}


@dataclass(frozen=True, slots=True, kw_only=True)
class Checkpoint:
    """One snapshot of a session's cwd: a commit of the shadow repository."""

    commit: str
    tree: str
    label: str
    skipped: tuple[SkippedFile, ...] = ()
    #: The tree of every file that existed (empty blobs: names only), ignore rules
    #: disregarded; None for a checkpoint written before it was recorded.
    present: str | None = None
    #: Whether the configuration part of the project's ``.git`` is in ``tree`` (under
    #: ``.git``; ``gitpart``): False for a checkpoint written before it was, whose
    #: trees say nothing of ``.git`` (a restore to it leaves ``.git`` alone).
    git_part: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class FileChange:
    """One file between two checkpoints.  ``old_path`` is set for a rename; ``binary``
    files count no lines."""

    path: str
    status: ChangeStatus
    additions: int = 0
    deletions: int = 0
    old_path: str | None = None
    binary: bool = False

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"path": self.path, "status": self.status,
                               "additions": self.additions, "deletions": self.deletions}
        if self.old_path is not None:
            out["old_path"] = self.old_path
        if self.binary:
            out["binary"] = True
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class RestoreResult:
    """What a restore did.  ``safety`` is the checkpoint taken first: restoring it undoes
    the restore.  ``kept``: paths left as they were because their current content could
    not be saved first (too large, ignored) or a directory in the way still holds such
    files, each with the reason."""

    target: Checkpoint
    safety: Checkpoint
    written: tuple[str, ...] = ()
    deleted: tuple[str, ...] = ()
    kept: tuple[tuple[str, str], ...] = field(default=())
    #: Paths removed whose content no checkpoint holds (ignored by the project's rules,
    #: or unstorable), each with the reason: restoring ``safety`` does not bring them back.
    removed_unsaved: tuple[tuple[str, str], ...] = ()
    #: Paths the restore would change that were edited since (not by the caller's
    #: own turns): kept (in ``kept``, reason ``edited_since``) unless the caller
    #: chose to overwrite them (the safety checkpoint then holds the edit).
    edited_since: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class PlannedChange:
    """One file a restore would change (``ShadowRepo.preview``): ``restored`` (its
    content goes back), ``deleted`` (it did not exist then), ``re-created`` (it exists
    no more); ``edited_since``: changed since by someone else (kept unless chosen)."""

    path: str
    action: Action
    edited_since: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "action": self.action, "edited_since": self.edited_since}


@dataclass(frozen=True, slots=True, kw_only=True)
class RawEntry:
    """One ``--raw`` record: modes and blob ids on both sides."""

    status: str
    src_mode: str
    dst_mode: str
    src_blob: str
    dst_blob: str
    path: str
    old_path: str | None = None


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


def parse_tree_diff(out: bytes) -> tuple[list[RawEntry], list[tuple[int, int, bool]]]:
    """``git diff-tree -r -z [--raw] [--numstat]`` output: the raw records, then the
    numstat counts in the same order ``(additions, deletions, binary)``."""
    tokens = out.split(b"\0")
    if tokens and tokens[-1] == b"":
        tokens.pop()
    raw: list[RawEntry] = []
    counts: list[tuple[int, int, bool]] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token.startswith(b":"):
            src_mode, dst_mode, src_blob, dst_blob, status = _decode(token[1:]).split(" ")
            if status[:1] in ("R", "C"):
                old, new = _decode(tokens[i + 1]), _decode(tokens[i + 2])
                raw.append(RawEntry(status=status[0], src_mode=src_mode, dst_mode=dst_mode,
                                    src_blob=src_blob, dst_blob=dst_blob, path=new,
                                    old_path=old))
                i += 3
            else:
                raw.append(RawEntry(status=status[0], src_mode=src_mode, dst_mode=dst_mode,
                                    src_blob=src_blob, dst_blob=dst_blob,
                                    path=_decode(tokens[i + 1])))
                i += 2
            continue
        added, deleted, path = token.split(b"\t", 2)
        binary = added == b"-"
        counts.append((0 if binary else int(added), 0 if binary else int(deleted), binary))
        # A rename's numstat names its paths in the two tokens that follow.
        i += 3 if path == b"" else 1
    return raw, counts


def changes_from(raw: list[RawEntry], counts: list[tuple[int, int, bool]]) -> list[FileChange]:
    """The file list of a tree diff, nested repositories left out."""
    files: list[FileChange] = []
    for n, entry in enumerate(raw):
        if GITLINK_MODE in (entry.src_mode, entry.dst_mode):
            continue
        added, deleted, binary = counts[n] if n < len(counts) else (0, 0, False)
        files.append(FileChange(path=entry.path, status=_STATUS.get(entry.status, "modified"),
                                additions=added, deletions=deleted, old_path=entry.old_path,
                                binary=binary))
    return files


def render_message(label: str, skipped: tuple[SkippedFile, ...],
                   present: str | None = None, *, git_part: bool = False) -> bytes:
    data: dict[str, Any] = {"skipped": [s.to_json() for s in skipped]}
    if present is not None:
        data["present"] = present
    if git_part:
        data["git_part"] = True
    meta = json.dumps(data, separators=(",", ":"))
    # The label is one line: a newline in it would move the metadata.
    return f"{' '.join(label.split()) or 'checkpoint'}\n\n{_META_PREFIX}{meta}\n".encode()


def parse_message(message: str) -> tuple[str, tuple[SkippedFile, ...], str | None, bool]:
    """The label, skipped files, presence tree and whether the project's ``.git`` part
    is recorded, of a commit message written by ``render_message``."""
    label, _, rest = message.partition("\n")
    skipped: list[SkippedFile] = []
    present: str | None = None
    git_part = False
    for line in rest.splitlines():
        if line.startswith(_META_PREFIX):
            try:
                meta = json.loads(line[len(_META_PREFIX):])
                skipped = [SkippedFile(path=str(s["path"]), size=int(s["size"]),
                                       reason=next((r for r in _SKIP_REASONS
                                                    if r == s.get("reason")), "too_large"))
                           for s in meta.get("skipped", [])]
                tree = meta.get("present")
                present = tree if isinstance(tree, str) and _OBJECT_ID.fullmatch(tree) else None
                git_part = meta.get("git_part") is True
            except (ValueError, KeyError, TypeError, AttributeError):
                skipped = []
    return label, tuple(skipped), present, git_part


def parse_batch(out: bytes) -> dict[str, bytes]:
    """``git cat-file --batch`` output: each ``<id> <type> <size>\\n<bytes>\\n``."""
    objects: dict[str, bytes] = {}
    i = 0
    while i < len(out):
        end = out.index(b"\n", i)
        header = out[i:end].split(b" ")
        if len(header) != 3:
            raise CheckpointError(f"checkpoint object missing: {out[i:end]!r}")
        size = int(header[2])
        objects[header[0].decode()] = out[end + 1:end + 1 + size]
        i = end + 1 + size + 1
    return objects
