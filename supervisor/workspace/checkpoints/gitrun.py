"""Git run on directories an agent can write, without running anything the agent planted.

Every directory Turnvisor points git at may hold a hostile ``.git/config``, hooks or
attributes (DESIGN.md §12): ``core.fsmonitor``, ``core.hooksPath``, filter drivers
(``clean``/``smudge``/``process``), ``diff.external``, textconv, merge drivers, pagers,
editors, signing programs.  Two runners:

- ``run_git``: for the shadow repositories (``supervisor.workspace.checkpoints.shadow``), whose
  ``GIT_DIR`` is ours, under the data dir.  Git reads no config but ours (no system or
  global file, HOME an empty private directory) plus the fixed ``-c`` overrides below, so
  a driver named by the work tree's ``.gitattributes`` is never defined, and the shadow
  repository's own ``info/attributes`` unsets the attributes that would convert bytes.
- ``safe_git``: for the user's repository (``git worktree add/remove`` ...), whose config
  git must read.  The same environment and overrides, and in addition every driver the
  repository's effective config defines (``filter.X.*``, ``diff.X.*``, ``merge.X.*``) is
  overridden to nothing by name (through ``GIT_CONFIG_KEY_n``: a name may hold ``=``).
  That is defence in depth: config the listing cannot see (an ``includeIf "onbranch:"``
  that applies once HEAD is the new branch, a ``gitdir:`` one that matches a linked
  worktree only, a driver added between the listing and the command) still names
  programs.  So a runner built with a ``GitFence`` (``protocols.git_fence``) runs every
  command in a bubblewrap sandbox of its own: no network, no data dir, nothing writable
  but the directories the caller names (the repository's git dir, a new worktree).

The environment is built from scratch, not filtered: no ``GIT_*`` variable of ours leaks
in (``GIT_DIR``, ``GIT_CONFIG_PARAMETERS``, ``GIT_EXTERNAL_DIFF``, ``GIT_SSH_COMMAND`` ...).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import trio

from protocols.git_fence import FENCE_HOME, GitFence
from protocols.sandbox import Launch
from protocols.tools import ToolsError
from protocols.tools import current as current_tools

__all__ = [
    "GIT_OVERRIDES",
    "GitError",
    "GitRunner",
    "config_environment",
    "driver_overrides",
    "git_environment",
    "safe_git",
]

#: ``-c`` overrides on every git command.  Command-line config wins over every file.
GIT_OVERRIDES: Final[tuple[str, ...]] = (
    "core.fsmonitor=false",
    "core.hooksPath=/dev/null",
    "core.attributesFile=/dev/null",
    "core.excludesFile=/dev/null",
    "core.pager=cat",
    "core.editor=:",
    "sequence.editor=:",
    "core.askPass=",
    "core.sshCommand=false",
    "core.gitProxy=",
    "core.alternateRefsCommand=",
    "core.autocrlf=false",
    "core.safecrlf=false",
    "core.symlinks=true",
    "core.quotePath=false",
    "credential.helper=",
    "diff.external=",
    "diff.noprefix=false",
    "diff.mnemonicPrefix=false",
    "diff.relative=false",
    "gpg.program=false",
    "gpg.ssh.program=false",
    "gpg.x509.program=false",
    "commit.gpgSign=false",
    "tag.gpgSign=false",
    "protocol.allow=never",
    "submodule.recurse=false",
    "advice.addEmbeddedRepo=false",
    "advice.detachedHead=false",
    "gc.auto=0",
    "maintenance.auto=false",
    "init.templateDir=",
    # A bare repository planted in the project is never found by discovery.
    "safe.bareRepository=explicit",
)

#: Config sections whose subsections name programs: every ``<section>.<name>.<key>``
#: found in a user repository's config is overridden to nothing.
_DRIVER_KEYS: Final = {
    "filter": (("clean", ""), ("smudge", ""), ("process", ""), ("required", "false")),
    "diff": (("command", ""), ("textconv", ""), ("cachetextconv", "false")),
    "merge": (("driver", ""),),
}

#: One git command at most (a snapshot has its own, shorter overall bound).
DEFAULT_TIMEOUT_S: Final = 30.0
#: Bound of the output kept for an error message.
_ERROR_CHARS: Final = 2000
#: A git process asked to stop (SIGTERM: git removes its lock files) gets this long.
_TERM_GRACE_S: Final = 2.0


class GitError(RuntimeError):
    """A git command failed, timed out or could not start; the message says which and why."""

    def __init__(self, message: str, *, returncode: int | None = None,
                 stderr: str = "") -> None:
        super().__init__(message)
        self.returncode = returncode
        self.stderr = stderr


def git_environment(home: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The whole environment of a git process: no system or global config, HOME an
    empty private directory, no terminal prompt, no pager, fixed identity and locale."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "LC_ALL": "C",
        "TZ": "UTC",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_CONFIG_SYSTEM": "/dev/null",
        "GIT_ATTR_NOSYSTEM": "1",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_PAGER": "cat",
        "PAGER": "cat",
        "GIT_EDITOR": ":",
        "GIT_ASKPASS": "",
        "SSH_ASKPASS": "",
        "GIT_NO_REPLACE_OBJECTS": "1",
        "GIT_AUTHOR_NAME": "Turnvisor",
        "GIT_AUTHOR_EMAIL": "turnvisor@localhost",
        "GIT_COMMITTER_NAME": "Turnvisor",
        "GIT_COMMITTER_EMAIL": "turnvisor@localhost",
    }
    if extra:
        env.update(extra)
    return env


async def _stop(proc: trio.Process, signal_it: Callable[[int], None]) -> None:
    """SIGTERM first (git removes its index.lock on it), SIGKILL if it does not go."""
    try:
        signal_it(signal.SIGTERM)
    except OSError:
        return
    with trio.move_on_after(_TERM_GRACE_S):
        await proc.wait()
        return
    try:
        signal_it(signal.SIGKILL)
    except OSError:
        pass


async def _deliver_cancel_group(proc: trio.Process) -> None:
    # The fenced git leads a process group of its own (the leader, bwrap, git in
    # its pid namespace): SIGTERM reaches git, SIGKILL all of them.
    await _stop(proc, lambda sig: os.killpg(proc.pid, sig))


async def _deliver_cancel(proc: trio.Process) -> None:
    await _stop(proc, proc.send_signal)


@dataclass(frozen=True, slots=True)
class GitRunner:
    """Runs git with ``git_environment`` and ``GIT_OVERRIDES``, each command bounded.

    ``home`` is an empty directory of ours (created on first use).  ``git``: the
    program; None is the one resolved at start from a directory no agent can
    write (``protocols.tools``), never a ``PATH`` lookup at each use.  ``fence``:
    run every command in that bubblewrap fence (git on a repository an agent can
    write); None runs git as the backend (the shadow repositories, whose
    ``GIT_DIR`` and config are ours, or where bwrap cannot run)."""

    home: Path
    git: str | None = None
    fence: GitFence | None = None

    async def run(self, args: Sequence[str], *, cwd: Path, stdin: bytes = b"",
                  timeout_s: float = DEFAULT_TIMEOUT_S, extra_env: Mapping[str, str] | None = None,
                  overrides: Sequence[str] = (), check: bool = True,
                  visible: Sequence[Path] = (), writable: Sequence[Path] = ()) -> bytes:
        """stdout of ``git -c ... <args>`` run in ``cwd``; ``GitError`` on a non-zero
        status (unless ``check`` is false), a timeout, a missing git or a fence that
        cannot be built.  In a fence, ``visible`` are bound read-only and ``writable``
        read-write (real paths); nothing else of the file system is writable."""
        self.home.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            git = self.git or current_tools().git
        except ToolsError as exc:
            raise GitError(f"cannot run git: {exc}") from exc
        command = [git, "--no-pager"]
        for override in (*GIT_OVERRIDES, *overrides):
            command += ["-c", override]
        command += list(args)
        env = git_environment(self.home, extra_env) | {"PATH": _trusted_path(git)}
        launch: Launch | None = None
        if self.fence is not None:
            # Git's home is the fence's private /tmp: nothing of ours is bound in.
            env |= {"HOME": FENCE_HOME, "XDG_CONFIG_HOME": f"{FENCE_HOME}/.config"}
            try:
                launch = self.fence.launch(command, cwd=str(cwd),
                                           visible=[str(p) for p in visible],
                                           writable=[str(p) for p in writable])
            except (OSError, ToolsError) as exc:
                raise GitError(f"refusing to run git {_subcommand(args)}: {exc}") from exc
        try:
            with trio.fail_after(timeout_s):
                if launch is None:
                    done = await trio.run_process(
                        command, cwd=str(cwd), stdin=stdin, capture_stdout=True,
                        capture_stderr=True, check=False, env=env,
                        deliver_cancel=_deliver_cancel)
                else:
                    with launch:
                        done = await trio.run_process(
                            launch.argv, cwd="/", stdin=stdin, capture_stdout=True,
                            capture_stderr=True, check=False, env=env,
                            pass_fds=launch.pass_fds, start_new_session=True,
                            deliver_cancel=_deliver_cancel_group)
        except trio.TooSlowError:
            raise GitError(f"git {_subcommand(args)} took longer than {timeout_s:g} s"
                           ) from None
        except OSError as exc:
            raise GitError(f"cannot run git: {exc}") from exc
        if check and done.returncode != 0:
            err = done.stderr.decode("utf-8", "replace").strip()[-_ERROR_CHARS:]
            raise GitError(f"git {_subcommand(args)} failed (status {done.returncode}): {err}",
                           returncode=done.returncode, stderr=err)
        return done.stdout


def _trusted_path(git: str) -> str:
    """``PATH`` for git's own children: git's directory and the system's, never
    the backend's ``PATH`` (whose first entries may be agent-writable)."""
    return os.pathsep.join(dict.fromkeys([os.path.dirname(git), "/usr/bin", "/bin"]))


def _subcommand(args: Sequence[str]) -> str:
    """The subcommand's name in ``args`` (after the global options and their values)."""
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg in ("--git-dir", "--work-tree", "-C", "-c"):
            skip = True
        elif not arg.startswith("-"):
            return arg
    return "command"


def driver_overrides(config_names: bytes) -> list[tuple[str, str]]:
    """Overrides ``(key, value)`` for every driver a repository's config defines, from
    ``git config --list --name-only -z`` output."""
    out: list[tuple[str, str]] = []
    seen: set[tuple[str, str]] = set()
    for raw in config_names.split(b"\0"):
        name = raw.decode("utf-8", "surrogateescape")
        section, dot, rest = name.partition(".")
        section = section.lower()
        if not dot or section not in _DRIVER_KEYS:
            continue
        subsection, dot, _key = rest.rpartition(".")
        if not dot or not subsection or (section, subsection) in seen:
            continue
        seen.add((section, subsection))
        out += [(f"{section}.{subsection}.{key}", value) for key, value in _DRIVER_KEYS[section]]
    return out


def config_environment(pairs: Sequence[tuple[str, str]]) -> dict[str, str]:
    """``pairs`` as command-scope config through the environment
    (``GIT_CONFIG_COUNT``/``KEY_n``/``VALUE_n``): unlike ``-c name=value``, a key may
    hold ``=`` (a driver named ``x=y`` by an attribute ``filter=x=y``)."""
    env = {"GIT_CONFIG_COUNT": str(len(pairs))}
    for n, (key, value) in enumerate(pairs):
        env[f"GIT_CONFIG_KEY_{n}"] = key
        env[f"GIT_CONFIG_VALUE_{n}"] = value
    return env


async def safe_git(runner: GitRunner, repo: Path, args: Sequence[str], *,
                   timeout_s: float = DEFAULT_TIMEOUT_S, stdin: bytes = b"",
                   writable: Sequence[Path] = ()) -> bytes:
    """``git <args>`` in the user's repository ``repo`` (its top level, a real
    path), with every program its config names neutralized.  Git does not look
    above ``repo`` for a repository; the command itself fails (``GitError``)
    where there is none.  With the runner's fence, ``repo`` is visible read-only
    and only ``writable`` (the repository's git dir for a command that writes
    it, a new worktree) can be written; the listing writes nothing."""
    ceiling = {"GIT_CEILING_DIRECTORIES": str(repo.parent)}
    try:
        names = await runner.run(["config", "--list", "--name-only", "-z"], cwd=repo,
                                 timeout_s=timeout_s, extra_env=ceiling, visible=[repo])
    except GitError as exc:
        raise GitError(f"cannot read the git config of {repo}: {exc}",
                       returncode=exc.returncode, stderr=exc.stderr) from exc
    return await runner.run(args, cwd=repo, stdin=stdin, timeout_s=timeout_s,
                            extra_env=ceiling | config_environment(driver_overrides(names)),
                            visible=[repo], writable=writable)

