"""Turn checkpoints: a shadow git repository per session, changes, diffs and restore
(DESIGN.md §12; docs/checkpoints.md), and git that is safe on directories agents write."""

from __future__ import annotations

from .gitrun import GitError, GitRunner, safe_git
from .model import (
    Checkpoint,
    CheckpointError,
    FileChange,
    PlannedChange,
    RestoreResult,
    SkippedFile,
)
from .shadow import CheckpointSettings, ShadowRepo

__all__ = [
    "Checkpoint",
    "CheckpointError",
    "CheckpointSettings",
    "FileChange",
    "GitError",
    "GitRunner",
    "PlannedChange",
    "RestoreResult",
    "ShadowRepo",
    "SkippedFile",
    "safe_git",
]
