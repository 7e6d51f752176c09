"""A session's shadow repository: checkpoints of its cwd in a git repository of our own.

``GIT_DIR`` is under the data dir (where agents cannot write, so an agent cannot alter its
own undo) and ``GIT_WORK_TREE`` is the session's cwd.  The cwd's own ``.git`` (if any) is
never read or written: git skips every ``.git`` entry of a work tree, and the user's
index, stash, branches, HEAD and hooks belong to a repository this one does not know.
Git reads only our config (``supervisor.workspace.checkpoints.gitrun``), so what the work tree's
``.gitattributes`` names runs nothing, and our ``info/attributes`` turns off every
conversion, so a checkpoint holds the files' bytes as they are.

A snapshot is ``git add -A`` into the shadow index, a tree, and a commit whose parent is
the previous snapshot (one chain under ``refs/heads/checkpoints`` keeps them all).
The content of ignored files (the cwd's ``.gitignore`` files, and the rules of the
repository around the cwd: ``supervisor.workspace.checkpoints.ignores``) is left out, as are
files over ``max_file_mb``, unreadable files and nested repositories (listed in the
checkpoint).  Those rules are the agent's to write, so they decide what is *stored*,
never what *exists*: every snapshot also records the names of all files found by
``supervisor.workspace.checkpoints.walk`` (ignore rules disregarded) as a second tree, the
*presence tree* (empty blobs, shared between snapshots as git shares any tree, a
second parent of the commit so it stays reachable).  A file present after a turn and
absent before it, with no content in the checkpoint, is a change ``ignored``; a
restore removes it.  What git cannot hold at all (``walk``'s units: too deep, a name
git refuses) is listed as skipped ``unstorable`` and handled whole.

One lock per repository orders snapshots and restores; it is never held across agent I/O.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import os
import re
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

import trio

from . import files
from .gitpart import graft, in_git_part, read_git_part, worktree_pointer
from .gitrun import GitError, GitRunner
from .ignores import repository_excludes
from .model import (
    GITLINK_MODE,
    Action,
    Checkpoint,
    CheckpointError,
    FileChange,
    PlannedChange,
    RawEntry,
    RestoreResult,
    SkippedFile,
    changes_from,
    parse_batch,
    parse_message,
    parse_tree_diff,
    render_message,
)
from .staging import changed_files
from .walk import Presence, walk

__all__ = ["CheckpointSettings", "ShadowRepo"]

log = logging.getLogger(__name__)

REF: Final = "refs/heads/checkpoints"
EMPTY_TREE: Final = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
#: Highest precedence of all attribute sources: no filter, no end-of-line or encoding
#: conversion, no keyword expansion, diffs decided by content alone.
ATTRIBUTES: Final = (
    "* -text -filter -ident !eol !working-tree-encoding !diff !merge -export-subst\n"
)
#: The shadow repository's whole config (written once, at creation).
CONFIG: Final = """[core]
\trepositoryformatversion = 0
\tfilemode = true
\tbare = false
\tlogallrefupdates = false
\tsymlinks = true
\tignorecase = false
\tautocrlf = false
\tfsmonitor = false
\tuntrackedCache = true
\tpreloadIndex = true
\tlooseCompression = 1
[index]
\tthreads = true
\tversion = 4
[gc]
\tauto = 0
[color]
\tui = false
"""
_SAFE_NAME: Final = re.compile(r"[A-Za-z0-9_.-]{1,128}")
#: Blobs read per ``git cat-file --batch`` during a restore: bounds its memory.
_BLOBS_PER_BATCH: Final = 64
_JOURNAL: Final = "restore-journal.json"
#: More changed paths than this are staged by one ``add -A`` of the whole tree.
_PATHSPEC_MAX: Final = 2000
#: The blob of every entry of a presence tree (the empty blob).
EMPTY_BLOB: Final = "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"
#: The index the presence tree is built in (rebuilt at every snapshot).
_PRESENCE_INDEX: Final = "presence-index"
#: The shadow repository never checks files out on NTFS or HFS+ (``files`` writes them
#: back): names those checks refuse (``GIT~1``) must not fail a snapshot.
_SHADOW_OVERRIDES: Final = ("core.protectNTFS=false", "core.protectHFS=false")


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckpointSettings:
    #: Files larger than this are not snapshotted (listed as skipped).
    max_file_mb: float = 10.0
    #: Bound of a whole snapshot.
    snapshot_s: float = 20.0
    #: Bound of one git command of a diff or a listing.
    git_s: float = 30.0
    #: Bound of a restore's file writes (run shielded: a cancel does not cut it short).
    restore_s: float = 120.0
    #: A diff longer than this is cut (with a note).
    diff_max_bytes: int = 4 * 1024 * 1024


class ShadowRepo:
    """Checkpoints of ``work_tree`` in the shadow repository ``git_dir``.

    ``exclude`` names directories inside the work tree that are never snapshotted (the
    data dir, when the cwd contains it); ``git_dir`` is excluded if it is inside."""

    def __init__(self, git_dir: Path, work_tree: Path, *, runner: GitRunner,
                 settings: CheckpointSettings | None = None,
                 exclude: Sequence[Path] = ()) -> None:
        self.git_dir = git_dir
        self.work_tree = work_tree
        self.runner = runner
        self.settings = settings or CheckpointSettings()
        self._exclude = (git_dir, *exclude)
        self._lock = trio.Lock()
        self._head: str | None = None
        self._ready = False

    @classmethod
    def for_session(cls, data_dir: Path, session_id: str, cwd: Path, *,
                    settings: CheckpointSettings | None = None) -> ShadowRepo:
        """The shadow repository of one session: ``DATA_DIR/checkpoints/<id>.git``."""
        if not _SAFE_NAME.fullmatch(session_id) or session_id.startswith("."):
            raise CheckpointError(f"not a usable session id for a checkpoint: {session_id!r}")
        root = data_dir / "checkpoints"
        return cls(root / f"{session_id}.git", cwd, runner=GitRunner(root / ".git-home"),
                   settings=settings, exclude=(data_dir,))

    # -- git ------------------------------------------------------------------

    async def _git(self, *args: str, stdin: bytes = b"", timeout_s: float | None = None,
                   literal: bool = True, index: Path | None = None) -> bytes:
        flags = ["--git-dir", str(self.git_dir), "--work-tree", str(self.work_tree)]
        if literal:
            flags.append("--literal-pathspecs")
        return await self.runner.run(
            [*flags, *args], cwd=self.work_tree, stdin=stdin,
            timeout_s=timeout_s or self.settings.git_s, overrides=_SHADOW_OVERRIDES,
            extra_env={"GIT_INDEX_FILE": str(index)} if index is not None else None)

    async def _ensure_ready(self) -> None:
        """Create the repository if need be (the caller holds the lock)."""
        if not self.work_tree.is_dir():
            raise CheckpointError(f"the working directory {self.work_tree} does not exist")
        if not self._ready:
            if not (self.git_dir / "HEAD").exists():
                self.git_dir.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
                await self.runner.run(["init", "-q", "--bare", "--template=", str(self.git_dir)],
                                      cwd=self.git_dir.parent, timeout_s=self.settings.git_s)
            # Rewritten at every open: a crash right after the init must not leave git's
            # default config (or no attributes) in place.
            (self.git_dir / "config").write_text(CONFIG)
            (self.git_dir / "info").mkdir(exist_ok=True)
            (self.git_dir / "info" / "attributes").write_text(ATTRIBUTES)
            if (self.git_dir / "HEAD").read_text().strip() != f"ref: {REF}":
                await self.runner.run(
                    ["--git-dir", str(self.git_dir), "symbolic-ref", "HEAD", REF],
                    cwd=self.git_dir, timeout_s=self.settings.git_s)
            head = await self.runner.run(
                ["--git-dir", str(self.git_dir), "rev-parse", "--verify", "-q", REF],
                cwd=self.git_dir, timeout_s=self.settings.git_s, check=False)
            self._head = head.decode().strip() or None
            self._ready = True
        # No git process of ours runs on this repository now (the lock is held, and
        # every command is reaped): a lock file is a crash's leftover.
        (self.git_dir / "index.lock").unlink(missing_ok=True)

    def _write_excludes(self) -> None:
        lines = ["# written by Turnvisor at each snapshot"]
        root = self.work_tree.resolve()
        for directory in self._exclude:
            try:
                rel = directory.resolve().relative_to(root)
            except ValueError:
                continue
            if rel.parts:
                lines.append("/" + _escape_pattern(rel.as_posix()) + "/")
        user = repository_excludes(self.work_tree)
        if user:
            lines += ["# the rules of the repository around the cwd", user]
        text = "\n".join(lines) + "\n"
        path = self.git_dir / "info" / "exclude"
        if not path.exists() or path.read_text("utf-8", "surrogateescape") != text:
            path.write_text(text, "utf-8", "surrogateescape")

    # -- snapshots ------------------------------------------------------------

    async def snapshot(self, label: str) -> Checkpoint:
        """Snapshot the cwd now; ``CheckpointError`` if it cannot be taken within
        ``snapshot_s`` (or git fails), saying why."""
        async with self._lock:
            return await self._snapshot(label)

    async def _snapshot(self, label: str) -> Checkpoint:
        limit = self.settings.snapshot_s
        try:
            with trio.fail_after(limit):
                await self._ensure_ready()
                await trio.to_thread.run_sync(self._write_excludes)
                # What exists, ignore rules disregarded (bounded by what is left of
                # the snapshot's time: a partial walk is said in the log, never fatal).
                presence = await trio.to_thread.run_sync(
                    self._walk, time.monotonic() + max(1.0, trio.current_effective_deadline()
                                                       - trio.current_time() - 5.0))
                units = tuple(SkippedFile(path=u, size=0, reason="unstorable")
                              for u in presence.units)
                # One pass over the work tree (status: the untracked cache, the
                # preloaded index): what changed since the last snapshot ...
                status = await self._git("status", "--porcelain=v2", "-z", "-uall",
                                         "--no-renames", "--ignore-submodules=dirty")
                changed = await trio.to_thread.run_sync(
                    changed_files, self.work_tree, status,
                    int(self.settings.max_file_mb * 1024 * 1024), presence.units)
                skipped = tuple(sorted((*changed.skipped, *units), key=lambda s: s.path))
                if changed.removals:
                    await self._git("update-index", "-z", "--force-remove", "--stdin",
                                    stdin=_nul_list(changed.removals))
                # ... then only those paths are staged (all of them, the first time).
                if self._head is None or len(changed.paths) > _PATHSPEC_MAX:
                    specs = [b"."] + [_bytes(f":(top,exclude,literal){s.path}") for s in skipped]
                    await self._git("add", "-A", "--pathspec-from-file=-",
                                    "--pathspec-file-nul", stdin=_nul_list(specs),
                                    literal=False)
                elif changed.paths:
                    specs = [_bytes(f":(top,literal){p}") for p in changed.paths]
                    await self._git("add", "-A", "--pathspec-from-file=-",
                                    "--pathspec-file-nul", stdin=_nul_list(specs),
                                    literal=False)
                tree = (await self._git("write-tree")).decode().strip()
                present = await self._presence_tree(presence)
                # The project's own .git, its configuration part: under ".git" in
                # both trees (git itself never stages it).
                part = await trio.to_thread.run_sync(functools.partial(
                    read_git_part, str(self.work_tree),
                    max_file=int(self.settings.max_file_mb * 1024 * 1024),
                    deadline=time.monotonic() + max(1.0, trio.current_effective_deadline()
                                                    - trio.current_time() - 2.0)))
                tree, present = await graft(self._git_in, self.git_dir, tree, present, part)
                skipped = tuple(sorted((*skipped, *part.skipped), key=lambda s: s.path))
                marker = (await self._git("commit-tree", present,
                                          stdin=b"presence\n")).decode().strip()
                parent = ["-p", self._head] if self._head else []
                commit = (await self._git("commit-tree", tree, *parent, "-p", marker,
                                          stdin=render_message(label, skipped, present,
                                                               git_part=True))
                          ).decode().strip()
                await self._git("update-ref", REF, commit, self._head or "")
                self._head = commit
        except trio.TooSlowError:
            raise CheckpointError(
                f"the checkpoint of {self.work_tree} took longer than {limit:g} s") from None
        except CheckpointError:
            raise
        except (GitError, OSError) as exc:
            raise CheckpointError(f"cannot checkpoint {self.work_tree}: {exc}") from exc
        except (ValueError, LookupError, RuntimeError) as exc:
            # What a hostile tree might still provoke (a name no codec takes, a limit of
            # the interpreter): one snapshot fails with a reason; nothing is left broken.
            raise CheckpointError(f"cannot checkpoint {self.work_tree}: {exc!r}") from exc
        return Checkpoint(commit=commit, tree=tree, label=label, skipped=skipped,
                          present=present, git_part=True)

    async def _git_in(self, args: list[str], stdin: bytes) -> bytes:
        return await self._git(*args, stdin=stdin)

    def _walk(self, deadline: float) -> Presence:
        root = self.work_tree.resolve()
        skip: set[bytes] = set()
        for directory in self._exclude:
            try:
                rel = directory.resolve().relative_to(root)
            except (ValueError, OSError):
                continue
            if rel.parts:
                skip.add(os.fsencode(rel.as_posix()))
        found = walk(str(self.work_tree), skip=frozenset(skip), deadline=deadline)
        if found.partial:
            log.warning("the walk of %s stopped early: some files may be missing from its "
                        "checkpoint's list of what exists", self.work_tree)
        return found

    async def _presence_tree(self, presence: Presence) -> str:
        """The presence tree of ``presence.files`` (built in an index of its own)."""
        index = self.git_dir / _PRESENCE_INDEX
        index.unlink(missing_ok=True)
        if not (self.git_dir / "objects" / EMPTY_BLOB[:2] / EMPTY_BLOB[2:]).exists():
            await self._git("hash-object", "-w", "--stdin")
        if not presence.files:
            return EMPTY_TREE
        line = f"100644 {EMPTY_BLOB}\t".encode()
        await self._git("update-index", "-z", "--index-info", index=index,
                        stdin=b"".join(line + _bytes(f) + b"\0" for f in presence.files))
        return (await self._git("write-tree", index=index)).decode().strip()

    async def load(self, commit: str) -> Checkpoint:
        """The checkpoint ``commit`` of this repository, as ``snapshot`` returned it."""
        if not re.fullmatch(r"[0-9a-f]{40,64}", commit):
            raise CheckpointError(f"not a checkpoint id: {commit!r}")
        try:
            async with self._lock:
                await self._ensure_ready()
                body = await self._git("cat-file", "commit", commit)
        except GitError as exc:
            raise CheckpointError(f"no such checkpoint {commit}: {exc}") from exc
        header, _, message = body.decode("utf-8", "replace").partition("\n\n")
        tree = header.split("\n", 1)[0].removeprefix("tree ")
        label, skipped, present, git_part = parse_message(message)
        return Checkpoint(commit=commit, tree=tree, label=label, skipped=skipped,
                          present=present, git_part=git_part)

    # -- changes and diffs ------------------------------------------------------

    async def changes(self, old: Checkpoint, new: Checkpoint) -> list[FileChange]:
        """Each file that differs from ``old`` to ``new`` (renames detected)."""
        try:
            if not self._ready:
                async with self._lock:
                    await self._ensure_ready()
            out = await self._git("diff-tree", "-r", "-z", "-M", "--raw", "--numstat",
                                  "--no-ext-diff", "--no-textconv", old.commit, new.commit)
        except GitError as exc:
            raise CheckpointError(f"cannot list the changes: {exc}") from exc
        raw, counts = parse_tree_diff(out)
        found = changes_from(raw, counts)
        stored = {c.path for c in found} | {s.path for s in new.skipped}
        # In .git a file whose content is not saved (too large, unreadable) still
        # counts: made by the turn it is added, grown from a saved one it is modified.
        found += [FileChange(path=p, status="added" if in_git_part(p) else "ignored")
                  for p in await self._appeared(old, new) if p not in stored]
        if not (old.git_part and new.git_part):
            return [c for c in found if not in_git_part(c.path)]
        if any(c.status == "deleted" and in_git_part(c.path) for c in found):
            there = set(await self._names(new, ".git"))
            found = [dataclasses.replace(c, status="modified")
                     if c.status == "deleted" and c.path in there else c for c in found]
        return found

    async def _names(self, checkpoint: Checkpoint, under: str) -> list[str]:
        """The files under ``under`` that existed at ``checkpoint`` (its presence tree)."""
        if checkpoint.present is None:
            return []
        out = await self._git("ls-tree", "-r", "-z", "--name-only", checkpoint.present,
                              "--", under)
        return [p.decode("utf-8", "surrogateescape") for p in out.split(b"\0") if p]

    async def _appeared(self, old: Checkpoint, new: Checkpoint) -> list[str]:
        """Files present in ``new`` and not in ``old`` (by their presence trees); [] if
        either has none (a checkpoint written before they were recorded)."""
        if old.present is None or new.present is None:
            return []
        try:
            out = await self._git("diff-tree", "-r", "-z", "--raw", "--no-renames",
                                  "--diff-filter=A", old.present, new.present)
        except GitError as exc:
            raise CheckpointError(f"cannot list the files that appeared: {exc}") from exc
        return [e.path for e in parse_tree_diff(out)[0]]

    async def diff(self, old: Checkpoint, new: Checkpoint, path: str | None = None) -> str:
        """The unified diff from ``old`` to ``new`` (of one file if ``path``; a renamed
        file's diff shows the rename), cut at ``diff_max_bytes``."""
        paths: list[str] = []
        if path is not None:
            renamed = [c for c in await self.changes(old, new)
                       if c.path == path and c.old_path is not None]
            paths = [path] + [c.old_path for c in renamed if c.old_path is not None]
        try:
            out = await self._git("diff-tree", "-r", "-p", "-M", "--no-ext-diff",
                                  "--no-textconv", "--no-color", old.commit, new.commit,
                                  *(["--", *paths] if paths else []))
        except GitError as exc:
            raise CheckpointError(f"cannot diff: {exc}") from exc
        limit = self.settings.diff_max_bytes
        if len(out) > limit:
            cut = out.rfind(b"\n", 0, limit) + 1 or limit
            return out[:cut].decode("utf-8", "replace") + "… (diff cut: too long)\n"
        return out.decode("utf-8", "replace")

    # -- restore --------------------------------------------------------------

    def interrupted_restore(self) -> dict[str, Any] | None:
        """The journal of a restore that did not finish (a crash, a kill), or None:
        ``{"target", "safety", "label"}`` commit ids.  ``recover`` finishes it."""
        try:
            data = json.loads((self.git_dir / _JOURNAL).read_text())
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    async def recover(self) -> RestoreResult | None:
        """Finish an interrupted restore (to its target); None if there was none."""
        journal = self.interrupted_restore()
        if journal is None:
            return None
        target = await self.load(str(journal.get("target")))
        safety = await self.load(str(journal.get("safety")))
        keep = journal.get("keep")
        return await self.restore(target, first_safety=safety,
                                  edited=[str(p) for p in keep] if isinstance(keep, list) else ())

    async def _plan(self, target: Checkpoint, now: Checkpoint
                    ) -> tuple[list[RawEntry], list[tuple[str, str]]]:
        """What making the cwd (as checkpointed in ``now``) as at ``target`` touches: the
        tree-diff records, and the unsaved paths it removes (with their reasons)."""
        out = await self._git("diff-tree", "-r", "-z", "--raw", "--no-renames",
                              now.commit, target.commit)
        entries = [e for e in parse_tree_diff(out)[0]
                   if GITLINK_MODE not in (e.src_mode, e.dst_mode)
                   and (target.git_part or not in_git_part(e.path))
                   and (e.status in ("M", "T") or not worktree_pointer(e.path))]
        unsaved = [(p, why) for p, why in await self._unsaved(target, now)
                   if (target.git_part or not in_git_part(p)) and not worktree_pointer(p)]
        return entries, unsaved

    async def _edited(self, since: Checkpoint | None, now: Checkpoint,
                      edited: Collection[str]) -> set[str]:
        found = set(edited)
        if since is not None and since.commit != now.commit:
            for c in await self.changes(since, now):
                found.add(c.path)
                if c.old_path is not None:
                    found.add(c.old_path)
        return found

    async def preview(self, target: Checkpoint, *, since: Checkpoint | None = None,
                      edited: Collection[str] = ()) -> list[PlannedChange]:
        """What ``restore(target, since=since, edited=edited)`` would change now, each
        file with what happens to it and whether it was edited since (a snapshot of
        the cwd is taken to know; nothing is written)."""
        async with self._lock:
            now = await self._snapshot(f"preview of restoring to: {target.label}")
            try:
                entries, unsaved = await self._plan(target, now)
                found = await self._edited(since, now, edited)
            except GitError as exc:
                raise CheckpointError(f"cannot list what a restore changes: {exc}") from exc
        action: dict[str, Action] = {"A": "re-created", "D": "deleted"}
        planned = [PlannedChange(path=e.path, action=action.get(e.status, "restored"),
                                 edited_since=_touches(found, e.path)) for e in entries]
        planned += [PlannedChange(path=p, action="deleted", edited_since=_touches(found, p))
                    for p, _ in unsaved]
        return sorted(planned, key=lambda c: c.path)

    async def restore(self, target: Checkpoint, *, since: Checkpoint | None = None,
                      edited: Collection[str] = (),
                      overwrite: Collection[str] | Literal["all"] = (),
                      first_safety: Checkpoint | None = None) -> RestoreResult:
        """Put the cwd's files back to ``target``, byte for byte, after a safety
        checkpoint of their current state (restoring that undoes this restore).

        Every file the safety checkpoint holds is made as in ``target``: changed back,
        deleted if ``target`` has no such file, created if it lacks it.  A file edited
        since (named in ``edited``, or changed from ``since`` to the safety checkpoint:
        edits that are not the caller's) is left as it is and listed in ``kept`` with
        the reason ``edited_since``, unless ``overwrite`` names it (or is ``"all"``);
        ``edited_since`` lists each such file the restore would change, kept or not.
        Ignored and too-large files are never touched (they cannot be saved first);
        see ``RestoreResult.kept``."""
        async with self._lock:
            safety = await self._snapshot(f"before restoring to: {target.label}")
            try:
                found = await self._edited(since, safety, edited)
                entries, unsaved = await self._plan(target, safety)
                touched = [e.path for e in entries] + [p for p, _ in unsaved]
                edited_now = sorted(p for p in touched if _touches(found, p))
                chosen = set() if overwrite == "all" else set(overwrite)
                protect = [] if overwrite == "all" else [p for p in edited_now
                                                         if p not in chosen]
                # The journal names what is kept: a recovery keeps the same files.
                journal = {"target": target.commit, "safety": (first_safety or safety).commit,
                           "label": target.label, "keep": protect}
                entries = [e for e in entries if e.path not in protect]
                unsaved = [(p, why) for p, why in unsaved if p not in protect]
                _write_journal(self.git_dir, journal)
                result = None
                # Shielded (with its own deadline): a cancel must not leave the tree
                # half-restored; the journal covers a kill or the deadline.
                with trio.CancelScope(shield=True,
                                      deadline=trio.current_time() + self.settings.restore_s):
                    result = await self._apply(entries, unsaved)
                if result is None:
                    raise CheckpointError(
                        f"the restore did not finish in {self.settings.restore_s:g} s; "
                        "recover() finishes it")
                (self.git_dir / _JOURNAL).unlink(missing_ok=True)
            except CheckpointError:
                raise
            except (GitError, OSError, ValueError, LookupError, RuntimeError) as exc:
                # The journal stays if the writes had begun: recover() tries again.
                raise CheckpointError(f"cannot restore: {exc}") from exc
        written, deleted, kept, removed = result
        kept = [(p, "edited_since") for p in protect] + kept
        return RestoreResult(target=target, safety=first_safety or safety,
                             written=tuple(written), deleted=tuple(deleted), kept=tuple(kept),
                             edited_since=tuple(edited_now),
                             removed_unsaved=tuple(removed))

    async def _unsaved(self, target: Checkpoint, now: Checkpoint) -> list[tuple[str, str]]:
        """What exists now, was not there at ``target``, and whose content ``now`` does
        not hold: ignored files (by the presence trees) and unstorable units, each with
        its reason.  Too-large and unreadable files are left (``kept``), as before."""
        had = {s.path for s in target.skipped if s.reason == "unstorable"}
        out = [(s.path, "unstorable: git cannot hold it, so no checkpoint has its content")
               for s in now.skipped if s.reason == "unstorable" and s.path not in had]
        if target.present is None:
            return out
        left = {s.path for s in now.skipped}
        stored = await self._git("ls-tree", "-r", "-z", "--name-only", now.commit)
        stored_paths = {p.decode("utf-8", "surrogateescape") for p in stored.split(b"\0") if p}
        out += [(p, "in the project's .git and not saved (too large or unreadable)"
                 if in_git_part(p) else
                 "ignored by the project's rules, so no checkpoint has its content")
                for p in await self._appeared(target, now)
                if p not in stored_paths and p not in left]
        return out

    async def _apply(self, entries: list[RawEntry], unsaved: list[tuple[str, str]]
                     ) -> tuple[list[str], list[str], list[tuple[str, str]],
                                list[tuple[str, str]]]:
        deletes = [e.path for e in entries if e.status == "D"]
        deleted, kept = await trio.to_thread.run_sync(files.delete_files, self.work_tree,
                                                      deletes)
        reasons = dict(unsaved)
        gone, blocked = await trio.to_thread.run_sync(files.remove_trees, self.work_tree,
                                                      list(reasons))
        kept += blocked
        removed = [(p, reasons[p]) for p in gone]
        writes = [e for e in entries if e.status != "D"]
        written: list[str] = []
        for start in range(0, len(writes), _BLOBS_PER_BATCH):
            batch = writes[start:start + _BLOBS_PER_BATCH]
            blobs = parse_batch(await self._git(
                "cat-file", "--batch", stdin=b"".join(e.dst_blob.encode() + b"\n"
                                                      for e in batch)))
            # In .git, what the safety checkpoint could not save is overwritten all
            # the same: the person's configuration wins over what an agent made.
            todo = [files.FileWrite(e.path, e.dst_mode, blobs[e.dst_blob],
                                    must_be_absent=e.status == "A" and not in_git_part(e.path))
                    for e in batch]
            done, blocked = await trio.to_thread.run_sync(files.write_files, self.work_tree,
                                                          todo)
            written += done
            kept += blocked
        return written, deleted, kept, removed


def _touches(edited: set[str], path: str) -> bool:
    """``path`` (a file, or a unit removed whole) is, or holds, a path in ``edited``."""
    return path in edited or any(e.startswith(path + "/") for e in edited)


def _bytes(path: str) -> bytes:
    return path.encode("utf-8", "surrogateescape")


def _escape_pattern(path: str) -> str:
    return re.sub(r"([\\*?\[\]!# ])", r"\\\1", path)


def _nul_list(items: Sequence[bytes | str]) -> bytes:
    return b"".join((i if isinstance(i, bytes) else _bytes(i)) + b"\0" for i in items)


def _write_journal(git_dir: Path, journal: dict[str, Any]) -> None:
    tmp = git_dir / f"{_JOURNAL}.tmp"
    tmp.write_text(json.dumps(journal))
    os.replace(tmp, git_dir / _JOURNAL)
