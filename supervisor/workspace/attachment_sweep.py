"""Uploads nobody sent are not kept forever (DESIGN.md §19): an upload that no
message and no queued entry names is deleted a day after it was made, its file
with it once no other upload has the same content.

``AttachmentSweeper.run`` sweeps when the server starts and then every hour, in
the root nursery (supervisor/root.py); each sweep is bounded (``SWEEP_S``, at
most ``BATCH`` uploads; the rest waits for the next).  What goes, in
``DATA_DIR/attachments``:

- the rows (``storage.db.attachments.sweep_attachments``: one transaction that
  reads what messages and queued entries name, then deletes the others made
  before the cutoff);
- each file whose content no upload has any more, and a file no upload ever got
  (a server that died between the file and its row), when older than the cutoff;
- upload leftovers (``.upload-*``: a body cut off by a crash) older than it.

An upload of the same content may land between the check and the unlink: the
file is first renamed aside, then unlinked only if it is still the old one (an
upload replaces it with a new file, whose mtime is fresh: then it is put back;
same content, same bytes, whichever copy wins).
"""

from __future__ import annotations

import logging
import os
import re
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

import trio

from ..storage.db import StoreError
from ..storage.store import Store
from .attachments import attachments_dir

__all__ = ["BATCH", "EVERY_S", "KEEP_S", "SWEEP_S", "AttachmentSweeper", "sweep_once"]

log = logging.getLogger(__name__)

#: An upload no message names is kept this long.
KEEP_S: Final = 24 * 3600.0
#: Swept at start, then this often.
EVERY_S: Final = 3600.0
#: One sweep's bound; uploads per sweep.
SWEEP_S: Final = 60.0
BATCH: Final = 1000
_HASH = re.compile(r"[0-9a-f]{64}")
_LEFTOVER = (".upload-", ".sweep-")


def _iso(ts: float) -> str:
    """``ts`` as the store writes times (storage.db.values.now)."""
    return (datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"))


async def sweep_once(data_dir: Path, store: Store, *, keep_s: float = KEEP_S,
                     batch: int = BATCH) -> int:
    """One sweep; how many files were removed."""
    cutoff = time.time() - keep_s
    gone = await store.call(store.db.sweep_attachments, _iso(cutoff), batch)
    folder = attachments_dir(data_dir)
    removed = await trio.to_thread.run_sync(_remove, folder, gone, cutoff)
    orphans = await trio.to_thread.run_sync(_old_files, folder, cutoff, batch)
    if orphans:
        unowned = await store.call(store.db.hashes_without_uploads, orphans)
        removed += await trio.to_thread.run_sync(_remove, folder, unowned, cutoff)
    return removed


def _remove(folder: Path, hashes: list[str], cutoff: float) -> int:
    removed = 0
    for sha in hashes:
        path, aside = folder / sha, folder / f".sweep-{sha}"
        try:
            os.rename(path, aside)
        except FileNotFoundError:
            continue
        if os.lstat(aside).st_mtime > cutoff:
            os.replace(aside, path)  # an upload of this content, just now: it stays
            continue
        os.unlink(aside)
        removed += 1
    return removed


def _old_files(folder: Path, cutoff: float, most: int) -> list[str]:
    """Content files older than ``cutoff`` (to check for an upload), at most
    ``most``; leftovers of a cut-off upload or sweep older than it are unlinked."""
    found: list[str] = []
    try:
        entries = os.scandir(folder)
    except FileNotFoundError:
        return found
    with entries:
        for entry in entries:
            try:
                if not entry.is_file(follow_symlinks=False) or \
                        entry.stat(follow_symlinks=False).st_mtime > cutoff:
                    continue
                if entry.name.startswith(_LEFTOVER):
                    os.unlink(entry.path)
                elif _HASH.fullmatch(entry.name) and len(found) < most:
                    found.append(entry.name)
            except FileNotFoundError:
                continue
    return found


class AttachmentSweeper:
    def __init__(self, data_dir: Path, store: Store, *, keep_s: float = KEEP_S,
                 every_s: float = EVERY_S) -> None:
        self.data_dir = data_dir
        self.store = store
        self.keep_s = keep_s
        self.every_s = every_s

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
                  ) -> None:
        """Started once; the first sweep runs after ``started`` (the server does
        not wait for it)."""
        task_status.started()
        while True:
            with trio.move_on_after(SWEEP_S) as bounded:
                try:
                    removed = await sweep_once(self.data_dir, self.store, keep_s=self.keep_s)
                except (OSError, StoreError) as exc:  # the next sweep tries again
                    log.warning("attachments: the sweep stopped: %s", exc)
                else:
                    if removed:
                        log.info("attachments: %d unsent upload file(s) removed", removed)
            if bounded.cancelled_caught:
                log.warning("attachments: a sweep took over %gs; the rest waits", SWEEP_S)
            await trio.sleep(self.every_s)
