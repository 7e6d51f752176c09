"""The agent sandbox: Debian's bubblewrap (``bwrap``) around an agent command.

Pure argv building (``sandbox_argv``) plus one cached probe (``bwrap_works``).
What the sandbox does, in order of the mounts (bwrap applies them in order):

- the whole file system read-only (``--ro-bind / /``);
- writable again: the agent's cwd, /tmp, /var/tmp, /dev/shm, ``$HOME`` and the
  agents' config/cache homes named in its environment (``CODEX_HOME``,
  ``CLAUDE_CONFIG_DIR``, ``XDG_*``, ``TMPDIR`` …), plus the profile's extras;
- the real /dev, and a /proc of its own (a new pid namespace: the agent sees
  and can signal only its own processes, not the backend);
- each hidden directory (the data dir: token, database, turnvisor.toml) under
  an empty tmpfs; writable paths *inside* a hidden directory (the default
  cwd ``DATA_DIR/work``) are bound back on top of it, nothing else is;
- every capability dropped (a root backend would otherwise hand the agent the
  power to unmount the tmpfs).  No ``--new-session``: it would move the agent
  out of the process group the backend signals; the caller starts the outer
  leader in a new session instead (``start_agent_process``), so no agent has a
  controlling terminal to type into with TIOCSTI.

Process-group teardown keeps working.  The group leader (what the caller
spawns) is a small ``sh`` that ignores SIGTERM and runs bwrap as its child;
the agent and its children stay in the leader's group.  bwrap and the pid
namespace's init inherit SIGTERM ignored, so a SIGTERM to the group reaches
the agent (SIGTERM's default action restored for it by ``env
--default-signal``) without killing bwrap first.  When the agent exits, bwrap
reports its status and exits, and ``--die-with-parent`` kills the namespace's
init, and with it the kernel kills whatever is left in the namespace (daemons
that left the group included).  A SIGKILL of the group does the same at once.
Why the shell: ``--die-with-parent`` is PR_SET_PDEATHSIG, which fires when the
*thread* that spawned bwrap exits, and Trio spawns from worker threads that
retire (bwrap spawned directly was SIGKILLed after a few idle seconds).

The network is shared (agents must reach their model provider), and so is,
for reading, everything outside the hidden directories.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from typing import Final, Literal

__all__ = [
    "HOME_VARIABLES",
    "SandboxError",
    "SandboxMode",
    "bwrap_path",
    "bwrap_works",
    "resolve_mode",
    "sandbox_argv",
    "writable_paths",
]

SandboxMode = Literal["bwrap", "none"]
MODES: Final = ("bwrap", "none")

#: Environment variables that name directories an agent writes its own state to.
HOME_VARIABLES: Final = (
    "HOME", "CODEX_HOME", "CLAUDE_CONFIG_DIR", "GEMINI_CLI_HOME", "AUGMENT_HOME",
    "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME",
    "XDG_RUNTIME_DIR", "TMPDIR", "npm_config_cache",
)
#: Scratch places every agent may write.
SCRATCH: Final = ("/tmp", "/var/tmp", "/dev/shm")
#: The group leader's script: SIGTERM ignored, bwrap run as a child, its status passed on.
LEADER_SCRIPT: Final = 'trap "" TERM; "$@"; status=$?; exit "$status"'
#: How long the probe may take (a loaded machine starts a process slowly).
PROBE_TIMEOUT_S: Final = 15.0


class SandboxError(OSError):
    """A sandbox that cannot be built as asked (it would expose what it hides)."""


def bwrap_path() -> str | None:
    return shutil.which("bwrap")


def _env_path() -> str:
    return shutil.which("env") or "/usr/bin/env"


def _real(path: str) -> str:
    return os.path.realpath(os.path.expanduser(path))


def _inside(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")


def writable_paths(env: Mapping[str, str], cwd: str, extra: Iterable[str] = ()) -> list[str]:
    """The agent's cwd, the scratch dirs, the homes its environment names, and
    ``extra``: absolute paths, real (symlinks resolved), without duplicates."""
    out: list[str] = []
    for p in [cwd, *SCRATCH, *(env.get(v, "") for v in HOME_VARIABLES), *extra]:
        if p and os.path.isabs(os.path.expanduser(p)):
            real = _real(p)
            if real not in out and real != "/":
                out.append(real)
    return out


def sandbox_argv(command: Sequence[str], *, cwd: str, hide: Iterable[str],
                 writable: Iterable[str], bwrap: str = "/usr/bin/bwrap",
                 env_cmd: str = "/usr/bin/env") -> list[str]:
    """The argv that runs ``command`` in the sandbox (see the module docstring).

    ``hide``: directories covered by an empty tmpfs.  ``writable``: paths bound
    read-write (missing ones skipped); those inside a hidden directory are
    bound back over its tmpfs.  Raises ``SandboxError`` if ``cwd`` or a
    writable path is a hidden directory itself (it would bring it all back).
    """
    if not command:
        raise SandboxError("empty agent command")
    hidden = [_real(h) for h in hide]
    rw = [_real(w) for w in writable]
    real_cwd = _real(cwd)
    if real_cwd not in rw:
        rw.insert(0, real_cwd)
    for w in rw:
        for h in hidden:
            if w == h:
                raise SandboxError(f"{w} is a directory the sandbox hides (the data dir); "
                                   "give the agent a working directory of its own")
    outside = [w for w in rw if not any(_inside(w, h) for h in hidden)]
    inside = [w for w in rw if w not in outside]
    # The leader: a shell that ignores SIGTERM (bwrap inherits that) and waits
    # for bwrap from its one thread, so bwrap's --die-with-parent fires only
    # when the leader is gone.  Not ``exec``: the shell must stay the parent.
    argv = ["/bin/sh", "-c", LEADER_SCRIPT, "sh", bwrap,
            "--ro-bind", "/", "/"]
    for w in outside:
        argv += ["--bind-try", w, w]
    argv += ["--dev-bind", "/dev", "/dev", "--proc", "/proc"]
    # Writable binds above may have covered a hidden directory (a data dir
    # under $HOME or /tmp): the tmpfs comes after them, the binds back after it.
    for h in hidden:
        if os.path.isdir(h):
            argv += ["--tmpfs", h]
    for w in inside:
        argv += ["--bind-try", w, w]
    argv += ["--chdir", real_cwd, "--unshare-pid", "--die-with-parent",
             "--cap-drop", "ALL", "--", env_cmd, "--default-signal=TERM", *command]
    return argv


@functools.cache
def bwrap_works() -> bool:
    """Whether a sandbox of ``sandbox_argv``'s shape runs here (once per process).

    bwrap may be missing, or present but unable to create namespaces (a
    container without user namespaces, a kernel that forbids them)."""
    bwrap = bwrap_path()
    if bwrap is None:
        return False
    with tempfile.TemporaryDirectory(prefix="turnvisor-bwrap-probe-") as tmp:
        secret = os.path.join(tmp, "hidden")
        os.mkdir(secret)
        with open(os.path.join(secret, "token"), "w") as f:
            f.write("x")
        work = os.path.join(secret, "work")
        os.mkdir(work)
        argv = sandbox_argv(["sh", "-c", f"test ! -e {secret}/token && test -d {work}"],
                            cwd=work, hide=[secret], writable=[], bwrap=bwrap,
                            env_cmd=_env_path())
        try:
            done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL, timeout=PROBE_TIMEOUT_S,
                                  check=False)
        except (OSError, subprocess.TimeoutExpired):
            return False
    return done.returncode == 0


def resolve_mode(requested: str | None) -> SandboxMode:
    """A profile's ``sandbox``: None (not set) is ``bwrap`` when it works here,
    else ``none``.  An explicit ``bwrap`` stays ``bwrap`` (launching fails
    clearly if it cannot run)."""
    if requested == "none":
        return "none"
    if requested == "bwrap":
        return "bwrap"
    return "bwrap" if bwrap_works() else "none"


def wrap(command: Sequence[str], mode: SandboxMode, *, cwd: str, env: Mapping[str, str],
         hide: Iterable[str], extra_writable: Iterable[str] = ()) -> list[str]:
    """``command`` as it is spawned under ``mode``: itself, or inside bwrap."""
    if mode == "none":
        return list(command)
    bwrap = bwrap_path()
    if bwrap is None:
        raise SandboxError("sandbox = \"bwrap\" but bwrap is not installed "
                           "(apt-get install bubblewrap)")
    return sandbox_argv(command, cwd=cwd, hide=hide,
                        writable=writable_paths(env, cwd, extra_writable),
                        bwrap=bwrap, env_cmd=_env_path())
