"""Checkpoints around every turn, its changes, diffs and revert (DESIGN.md §12).

    TurnCheckpoints.run       the checkpoints nursery
    ├── _snap (each)          a snapshot, bounded by ``snapshot_s``
    └── _after (each)         a turn's after-snapshot and its changes notification

The engine is ``supervisor.workspace.checkpoints`` (one ``ShadowRepo`` per session, kept for
the session's life); the lifecycle calls two hooks:

- ``before_prompt`` before a turn's prompt is written: the snapshot runs in this
  nursery and the turn waits for it at most ``before_turn_s`` (5 s); past that, or
  if it fails, the transcript says so and the turn runs without one.  A cancel
  meanwhile ends only the wait (the lifecycle's pre-prompt scope).  It returns the
  prompt.  When the files were restored since the agent's last turn the agent
  is told (DESIGN.md §12): where it can drop turns from its own history (Codex
  ``thread/revert``) the reverted turns go from it, else a note goes in front
  of the prompt; the transcript says which.
- ``turn_ended`` from the turn's close, synchronously and after it: the
  after-snapshot is a task of this nursery, so it never delays a cancel or its
  settle.

The repository lock is the engine's and is never held across agent I/O: the
agent is not waited on anywhere here.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any, Final, Literal

import trio

from protocols.adapters import AgentAdapter, RevertUnsupported

from ..config import Config
from ..errors import Conflict, NotFound
from ..notify import Notifier
from ..storage.db import new_id
from ..storage.store import Store
from . import checkpoint_rows as rows
from .checkpoints import (
    Checkpoint,
    CheckpointError,
    CheckpointSettings,
    RestoreResult,
    ShadowRepo,
)
from .checkpoints.history import changed_between, changes_something, own_changes

__all__ = ["REVERTED_STATUS", "REVERT_NOTE", "REWOUND_STATUS", "TurnCheckpoints"]

log = logging.getLogger(__name__)

REVERTED_STATUS: Final = "Files restored to before this turn"
#: ... when what was reverted is a revert (its undo).
UNDONE_STATUS: Final = "Files restored to before the revert (the revert is undone)"
CHECKPOINT_FAILED_STATUS: Final = "No checkpoint before this turn"
#: ... and after it: its changes cannot be listed, nor can a later revert go past it.
AFTER_FAILED_STATUS: Final = "No checkpoint after this turn"
#: The transcript's word when the agent's own history lost the reverted turns.
REWOUND_STATUS: Final = "The agent's conversation was rewound to before the reverted turn"
#: ... and when the agent was told in words instead.
TOLD_STATUS: Final = "The agent is told with this prompt that the files were restored"
#: What the agent is told with its next prompt after a revert.
REVERT_NOTE: Final = (
    "[Turnvisor: the user restored the files of this directory to their state before "
    "one of your earlier turns; the edits of that turn and of every later one are gone. "
    "Read the files again before relying on what you remember of them.]\n\n")
#: The file in a shadow repository naming the work tree it snapshots (read after a
#: restart, when no agent runs: a revert, a diff, the recovery of a killed restore).
_CWD_FILE: Final = "turnvisor-work-tree"


@dataclass(eq=False)
class _Session:
    repo: ShadowRepo
    #: The after-snapshot under way (a revert waits for it).
    after_done: trio.Event = field(default_factory=trio.Event)
    #: A revert under way (a turn's before-snapshot waits for it).
    reverting: trio.Event | None = None
    #: The agent is to be told of a revert with its next prompt.
    note: bool = False
    #: The turn whose start the files went back to, not yet dropped from the
    #: agent's own history (a rewind is tried before the next prompt).
    rewind_to: str | None = None


class TurnCheckpoints:
    def __init__(self, config: Config, store: Store, notify: Notifier,
                 turn_running: Callable[[str], bool]) -> None:
        self.config = config
        self.store = store
        self.notify = notify
        self.turn_running = turn_running
        self.settings = CheckpointSettings()
        self.before_s = config.projects.before_turn_s
        self._sessions: dict[str, _Session] = {}
        self._nursery: trio.Nursery | None = None
        #: Restores a kill interrupted, finished (or not) at the last start.
        self.recovered: list[dict[str, Any]] = []

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        try:
            async with trio.open_nursery() as nursery:
                # Before any turn can start: a half-done restore is finished first.
                await self._recover_interrupted()
                self._nursery = nursery
                task_status.started()
                await trio.sleep_forever()
        finally:
            # When the root nursery is cancelled this one may close before the
            # lifecycle's turns finish unwinding: their ``turn_ended`` then finds
            # no nursery (and skips the after-snapshot) instead of raising
            # "Nursery is closed to new arrivals" into the lifecycle's cleanup.
            self._nursery = None

    # -- repositories ---------------------------------------------------------

    @property
    def root(self) -> Path:
        return self.config.data_dir / "checkpoints"

    def _session(self, session_id: str, cwd: Path | None = None) -> _Session:
        known = self._sessions.get(session_id)
        if known is not None and (cwd is None or known.repo.work_tree == cwd):
            return known
        if cwd is None:
            try:
                cwd = Path((self.root / f"{session_id}.git" / _CWD_FILE).read_text())
            except (OSError, ValueError):
                raise NotFound(f"session {session_id} has no checkpoints") from None
        repo = ShadowRepo.for_session(self.config.data_dir, session_id, cwd,
                                      settings=self.settings)
        state = _Session(repo)
        state.after_done.set()
        self._sessions[session_id] = state
        return state

    def _remember_cwd(self, repo: ShadowRepo) -> None:
        with contextlib.suppress(OSError):
            (repo.git_dir / _CWD_FILE).write_text(str(repo.work_tree))

    async def forget(self, session_id: str) -> None:
        """The session was deleted: its shadow repository goes too."""
        self._sessions.pop(session_id, None)
        path = self.root / f"{session_id}.git"
        await trio.to_thread.run_sync(lambda: shutil.rmtree(path, ignore_errors=True))

    async def _snap(self, repo: ShadowRepo, label: str, out: list[Checkpoint | str],
                    done: trio.Event) -> None:
        try:
            out.append(await repo.snapshot(label))
            self._remember_cwd(repo)
        except CheckpointError as exc:
            out.append(str(exc))
        except Exception as exc:  # one session's failure must not end the nursery
            log.exception("checkpoint of %s failed", repo.work_tree)
            out.append(f"the checkpoint failed: {exc}")
        finally:
            done.set()

    # -- the lifecycle's hooks ------------------------------------------------

    async def before_prompt(self, session_id: str, turn_id: str, cwd: Path, text: str,
                            agent: AgentAdapter | None = None) -> str:
        """Snapshot ``cwd`` before the turn's prompt (waited for ``before_turn_s``
        at most) and record it; after a revert, rewind ``agent``'s history or
        tell it in words.  Returns the prompt to write."""
        assert self._nursery is not None, "TurnCheckpoints.run is not running"
        state = self._session(session_id, cwd)
        if state.reverting is not None:
            with trio.move_on_after(self.settings.restore_s + self.settings.snapshot_s):
                await state.reverting.wait()
        out: list[Checkpoint | str] = []
        done = trio.Event()
        self._nursery.start_soon(self._snap, state.repo, f"before turn {turn_id}", out, done)
        with trio.move_on_after(self.before_s):
            await done.wait()
        why = ("it took longer than " f"{self.before_s:g} s" if not out
               else out[0] if isinstance(out[0], str) else None)
        if why is None:
            assert isinstance(out[0], Checkpoint)
            await self.store.call(rows.add_entry, self.store.db, turn_id, session_id, "turn",
                                  out[0].commit)
        else:
            log.warning("session %s: no checkpoint before turn %s (%s)", session_id, turn_id,
                        why)
            await self.store.add_message(
                session_id, turn_id, "system", "status",
                f"{CHECKPOINT_FAILED_STATUS}: {why}; the turn runs, but it cannot be reverted",
                {"checkpoint_failed": True, "variant": "warning"})
        if state.rewind_to is not None and agent is not None:
            await self._rewind(state, session_id, turn_id, agent)
        if state.note and not text.lstrip().startswith("/"):
            # (A slash command is the agent's CLI's, not prose: a note in front
            # would break it; the note waits for the next prose prompt.)
            state.note = False
            await self.store.add_message(session_id, turn_id, "system", "status", TOLD_STATUS,
                                         {"revert_told": "note", "variant": "info"})
            return REVERT_NOTE + text
        return text

    async def _rewind(self, state: _Session, session_id: str, turn_id: str,
                      agent: AgentAdapter) -> None:
        """Drop the reverted turns from the agent's own history (bounded by the
        adapter's request timeout).  Tried once: where it fails, the note stays."""
        target, state.rewind_to = state.rewind_to, None
        assert target is not None
        entry = await self.store.call(rows.entry, self.store.db, session_id, target)
        if entry is None or entry.agent_turn_id is None:
            return
        try:
            await agent.revert_thread(entry.agent_turn_id)
        except RevertUnsupported:
            return
        except Exception as exc:  # the agent refused, timed out or went away: tell it
            log.warning("session %s: the agent's history was not rewound (%s); it is told "
                        "in words", session_id, exc)
            return
        state.note = False
        log.info("session %s: the agent's history rewound to before turn %s", session_id,
                 target)
        await self.store.add_message(session_id, turn_id, "system", "status", REWOUND_STATUS,
                                     {"revert_told": "rewound", "rewound_to": target,
                                      "variant": "info"})

    def turn_ended(self, session_id: str, turn_id: str,
                   agent_turn_id: str | None = None) -> None:
        """The turn closed (however it ended): its after-snapshot, in this
        nursery.  ``agent_turn_id``: the agent's own id of it (Codex), kept for
        a rewind of the agent's history after a revert."""
        state = self._sessions.get(session_id)
        if state is None or self._nursery is None:
            return
        state.after_done = trio.Event()
        self._nursery.start_soon(self._after, state, session_id, turn_id, agent_turn_id)

    async def _after(self, state: _Session, session_id: str, turn_id: str,
                     agent_turn_id: str | None) -> None:
        try:
            entry = await self.store.call(rows.entry, self.store.db, session_id, turn_id)
            if entry is None or entry.before_commit is None:
                return  # no checkpoint before it: nothing to compare with
            if agent_turn_id is not None:
                await self.store.call(rows.set_agent_turn, self.store.db, turn_id,
                                      agent_turn_id)
            out: list[Checkpoint | str] = []
            await self._snap(state.repo, f"after turn {turn_id}", out, trio.Event())
            after = out[0] if out else "no result"
            if isinstance(after, str):
                await self._after_failed(session_id, turn_id, after)
                return
            await self.store.call(rows.set_after, self.store.db, turn_id, after.commit)
            before = await state.repo.load(entry.before_commit)
            files = await state.repo.changes(before, after)
            if files:
                self.notify.bus.publish(session_id, "session.turn.changes", {
                    "session_id": session_id, "turn_id": turn_id,
                    "files": [f.to_json() for f in files],
                    "skipped": [s.to_json() for s in after.skipped]})
        except Exception as exc:
            log.exception("session %s: the checkpoint after turn %s failed", session_id,
                          turn_id)
            with contextlib.suppress(Exception):
                await self._after_failed(session_id, turn_id, str(exc) or type(exc).__name__)
        finally:
            state.after_done.set()

    async def _after_failed(self, session_id: str, turn_id: str, why: str) -> None:
        """The session's transcript says the after-snapshot failed (and why): its
        changes are not listed.  Later turns and reverts go on as usual."""
        log.warning("session %s: no checkpoint after turn %s (%s)", session_id, turn_id, why)
        await self.store.add_message(
            session_id, turn_id, "system", "status",
            f"{AFTER_FAILED_STATUS}: {why}; its changes are not listed",
            {"checkpoint_failed": True, "variant": "warning"})

    # -- changes and diffs ----------------------------------------------------

    async def _settled(self, session_id: str) -> _Session:
        state = self._session(session_id)
        with trio.move_on_after(self.settings.snapshot_s + self.settings.git_s):
            await state.after_done.wait()
        return state

    async def _pair(self, session_id: str,
                    entry_id: str) -> tuple[_Session, Checkpoint, Checkpoint]:
        state = await self._settled(session_id)
        entry = await self.store.call(rows.entry, self.store.db, session_id, entry_id)
        if entry is None or entry.before_commit is None:
            raise NotFound(f"turn {entry_id} has no checkpoint")
        if entry.after_commit is None:
            raise Conflict(f"turn {entry_id} has not ended (or its end has no checkpoint)")
        return (state, await state.repo.load(entry.before_commit),
                await state.repo.load(entry.after_commit))

    async def turn_diff(self, session_id: str, turn_id: str,
                        path: str | None = None) -> dict[str, Any]:
        state, before, after = await self._pair(session_id, turn_id)
        try:
            diff = await state.repo.diff(before, after, path)
            files = await state.repo.changes(before, after)
        except CheckpointError as exc:
            raise Conflict(str(exc)) from None
        return {"session_id": session_id, "turn_id": turn_id, "diff": diff,
                "files": [f.to_json() for f in files if path is None or f.path == path]}

    async def session_diff(self, session_id: str) -> dict[str, Any]:
        """What this session's own turns (and reverts) changed: the sum of each one's
        before→after, each file marked ``outside`` if something else (a hand edit,
        another session in the same directory) changed it between them."""
        state = await self._settled(session_id)
        entries = await self.store.call(rows.entries, self.store.db, session_id)
        spans = [(e.before_commit, e.after_commit) for e in entries
                 if e.before_commit and e.after_commit]
        try:
            outside = await changed_between(state.repo, _gaps(entries))
            own = await own_changes(state.repo, spans, outside)
        except CheckpointError as exc:
            raise Conflict(str(exc)) from None
        return {"session_id": session_id, "diff": own.diff, "files": own.files}

    # -- revert ---------------------------------------------------------------

    async def _target(self, session_id: str, turn_id: str
                      ) -> tuple[_Session, list[rows.Entry], rows.Entry]:
        state = await self._settled(session_id)
        entries = await self.store.call(rows.entries, self.store.db, session_id)
        target = next((e for e in entries if e.id == turn_id), None)
        if target is None or target.before_commit is None:
            raise NotFound(f"turn {turn_id} has no checkpoint to revert to")
        return state, entries, target

    async def _edited_since(self, state: _Session, entries: list[rows.Entry],
                            target: rows.Entry) -> tuple[set[str], Checkpoint | None]:
        """What changed after ``target``'s start that is not this session's own
        (the gaps between its later entries), and the newest entry's end: what
        changed from there to now is not its own either (none while a turn runs)."""
        after = [e for e in entries if e.seq >= target.seq]
        edited = await changed_between(state.repo, _gaps(after))
        last = after[-1].after_commit
        return edited, (await state.repo.load(last) if last else None)

    async def preview(self, session_id: str, turn_id: str) -> dict[str, Any]:
        """``turn.revert.preview``: the files a revert to ``turn_id``'s start would
        change now, each with what happens and whether it was edited since; the
        later turns it undoes too.  Nothing is written (a snapshot is taken)."""
        state, entries, target_entry = await self._target(session_id, turn_id)
        try:
            edited, since = await self._edited_since(state, entries, target_entry)
            target = await state.repo.load(target_entry.before_commit or "")
            files = await state.repo.preview(target, since=since, edited=edited)
            # (The later turns that changed files: the dialog names what goes.)
            later = [e.id for e in entries if e.seq > target_entry.seq and e.kind == "turn"
                     and e.before_commit and await changes_something(
                         state.repo, e.before_commit, e.after_commit)]
        except CheckpointError as exc:
            raise Conflict(f"cannot tell what the revert changes: {exc}") from None
        return {"session_id": session_id, "turn_id": turn_id,
                "files": [f.to_json() for f in files], "later_turns": later}

    async def revert(self, session_id: str, turn_id: str,
                     overwrite: Collection[str] | Literal["all"] = ()) -> dict[str, Any]:
        """Restore the session's files to ``turn_id``'s start (a revert's id: to
        before that revert), after a safety checkpoint; ``Conflict`` while a turn runs.
        A file changed since by something other than this session's turns is kept
        (``kept``, reason ``edited_since``) unless ``overwrite`` names it."""
        if self.turn_running(session_id):
            raise Conflict("a turn is running: cancel it first (agent.cancel with revert: true "
                           "does both)")
        state, entries, target_entry = await self._target(session_id, turn_id)
        if state.reverting is not None:
            raise Conflict("a revert of this session is already under way")
        state.reverting = trio.Event()
        try:
            edited, since = await self._edited_since(state, entries, target_entry)
            target = await state.repo.load(target_entry.before_commit or "")
            result = await state.repo.restore(target, since=since, edited=edited,
                                              overwrite=overwrite)
            # What the files are now (the kept ones differ from the target): the
            # start of the next gap, so an undo of this revert sees later edits.
            after = (await state.repo.snapshot(f"after restoring to: {target.label}")
                     if result.kept else target)
            revert_id = new_id()
            # Its own entry: reverting it restores the safety checkpoint (undoes this).
            await self.store.call(rows.add_entry, self.store.db, revert_id, session_id,
                                  "revert", result.safety.commit, after.commit)
        except CheckpointError as exc:
            raise Conflict(f"the revert failed: {exc}") from None
        except Exception as exc:
            # Whatever the agent left in the tree, the answer says why, never
            # INTERNAL_ERROR (the engine turns what it expects into CheckpointError).
            log.exception("session %s: the revert to before %s failed", session_id, turn_id)
            raise Conflict(f"the revert failed: {exc or type(exc).__name__}") from None
        finally:
            state.reverting.set()
            state.reverting = None
        state.note = True
        if target_entry.kind == "turn":
            current = next((e for e in entries if e.id == state.rewind_to), None)
            if current is None or target_entry.seq < current.seq:
                state.rewind_to = target_entry.id
        else:
            # Undoing a revert: the files are back; the agent's history is left
            # as it is (a rewind already made cannot be undone), and it is told.
            state.rewind_to = None
        later = [e.id for e in entries if e.seq > target_entry.seq and e.kind == "turn"]
        answer = _answer(session_id, turn_id, revert_id, result, later)
        await self.store.add_message(session_id, None, "system", "status",
                                     UNDONE_STATUS if target_entry.kind == "revert"
                                     else REVERTED_STATUS,
                                     {"reverted": True, "variant": "info", "turn_id": turn_id,
                                      "revert_id": revert_id, "later_turns": later,
                                      # (named in the transcript: the page says which)
                                      "kept_edits": [p for p, why in result.kept
                                                     if why == "edited_since"][:20],
                                      **({"undo_of": turn_id} if target_entry.kind == "revert"
                                         else {})})
        return answer

    # -- a restore a kill interrupted -----------------------------------------

    async def _recover_interrupted(self) -> None:
        try:
            journals = sorted(self.root.glob("*.git/restore-journal.json"))
        except OSError:
            return
        for journal in journals:
            session_id = journal.parent.name.removesuffix(".git")
            try:
                state = self._session(session_id)
            except (NotFound, CheckpointError):
                continue
            record: dict[str, Any] = {"session_id": session_id}
            try:
                with trio.fail_after(self.settings.restore_s + self.settings.snapshot_s):
                    result = await state.repo.recover()
                record |= {"finished": True,
                           "written": list(result.written) if result else [],
                           "deleted": list(result.deleted) if result else []}
                message = ("A revert interrupted by a restart was finished: the files are as "
                           "before the reverted turn")
                meta: dict[str, Any] = {"reverted": True, "recovered": True,
                                        "variant": "warning"}
            except (CheckpointError, trio.TooSlowError) as exc:
                record |= {"finished": False, "error": str(exc) or "took too long"}
                message = (f"A revert interrupted by a restart could not be finished "
                           f"({record['error']}); it is tried again at the next start")
                meta = {"reverted": False, "recovered": False, "variant": "error"}
            log.warning("session %s: %s", session_id, message)
            self.recovered.append(record)
            with contextlib.suppress(Exception):
                if await self.store.get_session(session_id) is not None:
                    await self.store.add_message(session_id, None, "system", "status",
                                                 message, meta)


def _gaps(entries: list[rows.Entry]) -> list[tuple[str, str]]:
    """From each entry's end to the next one's start: what changed there is not
    the session's own."""
    return [(a.after_commit, b.before_commit) for a, b in pairwise(entries)
            if a.after_commit and b.before_commit]


def _answer(session_id: str, turn_id: str, revert_id: str, result: RestoreResult,
            later: list[str]) -> dict[str, Any]:
    return {"success": True, "session_id": session_id, "turn_id": turn_id,
            "revert_id": revert_id, "later_turns": later,
            "written": list(result.written), "deleted": list(result.deleted),
            "kept": [{"path": p, "reason": r} for p, r in result.kept],
            "removed_unsaved": [{"path": p, "reason": r} for p, r in result.removed_unsaved],
            "edited_since": list(result.edited_since)}
