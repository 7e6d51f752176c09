"""Project roots added at run time (DESIGN.md §15 ``project.root.add``), kept in
``DATA_DIR/project-roots.json`` and read at start next to the configuration's
roots.  The same checks as the config file's: an existing directory, resolved
with symlinks followed, that neither holds the data dir nor lies in it
(``supervisor.data_dir_fence``).  A saved root that no longer passes them is
left out at start (with a warning), never a reason not to start."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Final

from .data_dir_fence import DataDirFence

__all__ = ["FILE", "RootRefused", "check_root", "read_added", "save_added"]

log = logging.getLogger(__name__)

FILE: Final = "project-roots.json"


class RootRefused(ValueError):
    """Not usable as a project root; the message says why, in one line."""


def check_root(data_dir: Path, raw: str) -> Path:
    """``raw`` as a real directory clear of the data dir, or ``RootRefused``."""
    if "\0" in raw:
        raise RootRefused("path must not contain NUL")
    path = Path(raw).expanduser()
    if not path.is_absolute():
        raise RootRefused(f"{raw!r} is not an absolute path")
    try:
        real = path.resolve(strict=True)
    except (OSError, RuntimeError):
        raise RootRefused(f"{raw!r} does not exist") from None
    if not real.is_dir():
        raise RootRefused(f"{raw!r} is not a directory")
    fence = DataDirFence.of(data_dir)
    overlap = fence.meets(real)
    if overlap is not None:
        raise RootRefused(f"{real} {fence.describe(overlap)}: agents working there would "
                          "reach Turnvisor's own files")
    return real


def read_added(data_dir: Path) -> tuple[Path, ...]:
    """The roots saved by ``project.root.add`` that still pass ``check_root``."""
    try:
        data = json.loads((data_dir / FILE).read_text())
    except FileNotFoundError:
        return ()
    except (OSError, ValueError) as exc:
        log.warning("%s cannot be read (%s): no root added at run time is used", FILE, exc)
        return ()
    roots: list[Path] = []
    for raw in data.get("roots", []) if isinstance(data, dict) else []:
        try:
            roots.append(check_root(data_dir, str(raw)))
        except RootRefused as exc:
            log.warning("a project root added earlier is left out: %s", exc)
    return tuple(roots)


def save_added(data_dir: Path, roots: tuple[Path, ...]) -> None:
    """Written to a temporary name and renamed: a crash leaves the old list or the new."""
    path = data_dir / FILE
    tmp = path.with_name(f".{FILE}.tmp")
    tmp.write_text(json.dumps({"roots": [str(r) for r in roots]}, indent=1) + "\n")
    os.replace(tmp, path)
