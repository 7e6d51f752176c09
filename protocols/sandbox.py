"""The agent sandbox: Debian's bubblewrap (``bwrap``) around an agent command.

Pure argv building (``sandbox_argv``), the launch that hands bwrap its
options and seccomp filter through file descriptors (``wrap``), the data
dir's identity check (``HiddenDir``), and one cached probe (``bwrap_works``).
What the sandbox does, in order of the mounts (bwrap applies them in order):

- the whole file system read-only (``--ro-bind / /``);
- a /dev of its own (``--dev``: null, zero, full, random, urandom, tty, a
  private devpts and /dev/shm; no disks, no GPUs, no /dev/kvm) and a /proc of
  its own (a new pid namespace: the agent sees and can signal only its own
  processes), with /proc/sys, /proc/sysrq-trigger, /proc/irq and /proc/bus
  read-only (no kernel knob is writable, even for a root backend's agent);
- a private /tmp and /var/tmp (empty tmpfs: nothing of the host's, nothing of
  another session's);
- writable again: the agent's cwd, ``$HOME`` and the agents' config/cache
  homes named in its environment (``CODEX_HOME``, ``CLAUDE_CONFIG_DIR``,
  ``XDG_*``, ``TMPDIR`` …), plus the profile's extras; those under /tmp are
  bound back over the private /tmp;
- Turnvisor's install read-only again *after* those binds (a writable
  ``$HOME`` above a checkout or a virtualenv does not make it writable): the
  directory holding the ``protocols``/``supervisor``/``web`` packages (the
  checkout, or site-packages), ``sys.prefix``, ``sys.base_prefix``,
  site-packages and the user site.  A cwd or writable path inside them (and
  not inside a hidden directory) is refused (``SandboxError``);
- each hidden directory (the data dir: token, database, turnvisor.toml) under
  an empty tmpfs; writable paths *inside* a hidden directory (a session's
  default cwd ``DATA_DIR/work/<workspace>/<session>``) are bound back on top of
  it, nothing else is;
- new user, IPC and UTS namespaces (a root backend's agent runs as uid/gid
  65534 there; another backend's keeps its uid), every capability dropped,
  and a seccomp filter of the dangerous calls (protocols/seccomp.py; nested
  user namespaces stay allowed: agents such as Codex sandbox their own
  commands with bwrap).  No ``--new-session``: it would move the agent
  out of the process group the backend signals; the caller starts the outer
  leader in a new session instead (``start_agent_process``), and the filter
  refuses TIOCSTI anyway.

The hidden directories are hidden by identity, not only by path: the caller
records each one's (device, inode) when it starts (``HiddenDir.record``) and
every launch checks it (``HiddenDir.check``).  An agent that renames a
directory above the data dir and leaves a decoy at the old path gets the next
launch refused, loudly, instead of a sandbox that hides the decoy (the check
runs just before bwrap mounts: a second agent running at that moment could
race the window between the two).  bwrap's
options reach it through a memfd (``--args FD``), so no process's command line
(``/proc/1/cmdline`` inside is ``bwrap --args N -- env …``) names what is
hidden.  The mount table (``/proc/self/mountinfo``) still shows the tmpfs's
mount point: where the data dir is is not a secret, what is in it is.

Process-group teardown keeps working.  The group leader (what the caller
spawns) is protocols/leader.py, run by path in isolated mode; it ignores
SIGTERM and runs bwrap as its child with SIGTERM ignored too, so a SIGTERM
to the group reaches the agent (its default action restored by ``env
--default-signal``) without killing bwrap first.  When the agent exits, bwrap
reports its status and exits, and ``--die-with-parent`` kills the
namespace's init, and with it the kernel kills whatever is left in the
namespace (daemons that left the group included).  A SIGKILL of the group
does the same at once, and so does the backend's death: the leader watches a
lifeline pipe whose write end only the backend holds (``Launch.lifeline``)
and SIGKILLs the group at its EOF.  Why a leader at all:
``--die-with-parent`` is PR_SET_PDEATHSIG, which fires when the *thread* that
spawned bwrap exits, and Trio spawns from worker threads that retire.  The
leader passes the descriptors on to bwrap, which reads and closes them before
the agent starts; with an isolated network it also attaches the network
helper (protocols/netns.py) before the agent starts.

The network is the agent's own (``network = "isolated"``, the default for
local agents: outbound only, plus the profile's ``host_ports``) or the
host's (``"host"``).  Everything outside the hidden directories, /tmp and
/run is shared for reading.
"""

from __future__ import annotations

import functools
import logging
import os
import site
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Final, Literal

from .fence_paths import OpenedPath, PathRefused, open_by_identity
from .netns import NetworkFds, NetworkMode, NetworkPlan, helper_argv
from .seccomp import host_arch, seccomp_filter
from .tools import current as current_tools

__all__ = [
    "HOME_VARIABLES",
    "HiddenDir",
    "HomeBind",
    "Launch",
    "SandboxError",
    "SandboxMode",
    "bwrap_path",
    "bwrap_works",
    "host_filter",
    "install_dirs",
    "memfd_with",
    "resolve_mode",
    "sandbox_argv",
    "wrap",
    "writable_paths",
    "writable_requests",
]

log = logging.getLogger(__name__)

SandboxMode = Literal["bwrap", "none"]
MODES: Final = ("bwrap", "none")

#: Environment variables that name directories an agent writes its own state to.
HOME_VARIABLES: Final = (
    "HOME", "CODEX_HOME", "CLAUDE_CONFIG_DIR", "GEMINI_CLI_HOME", "AUGMENT_HOME",
    "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME",
    "XDG_RUNTIME_DIR", "TMPDIR", "npm_config_cache",
)
#: Private scratch places: an empty tmpfs each, the agent's own.
PRIVATE_SCRATCH: Final = ("/tmp", "/var/tmp")
#: /proc entries bound read-only over bwrap's /proc (the kernel's knobs).
PROC_READONLY: Final = ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus")
#: The uid and gid a root backend's agent runs as in its user namespace (nobody).
UNPRIVILEGED_ID: Final = 65534
#: The group leader (run by path, isolated: protocols/leader.py).
LEADER: Final = str(Path(__file__).with_name("leader.py"))
#: How long the probe may take (a loaded machine starts a process slowly).
PROBE_TIMEOUT_S: Final = 15.0


class SandboxError(OSError):
    """A sandbox that cannot be built as asked (it would expose what it hides)."""


def bwrap_path() -> str | None:
    """bwrap as resolved once at start, from a directory no agent can write."""
    return current_tools().get("bwrap")


def _env_path() -> str:
    return current_tools().env


def _real(path: str) -> str:
    return os.path.realpath(os.path.expanduser(path))


def _inside(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")


@dataclass(frozen=True, slots=True)
class HiddenDir:
    """A directory the sandbox hides, and the (device, inode) it had when
    recorded: None (nothing there then) hides by path only."""

    path: str
    identity: tuple[int, int] | None = None

    @classmethod
    def record(cls, path: str | os.PathLike[str]) -> HiddenDir:
        """``path`` (made real) and what it names now."""
        real = _real(os.fspath(path))
        try:
            st = os.stat(real)
        except OSError:
            return cls(real)
        return cls(real, (st.st_dev, st.st_ino))

    def check(self) -> None:
        """Raise ``SandboxError`` (and log it at ERROR) if the path no longer
        names the recorded directory: a directory above it was renamed or
        replaced, and hiding the path would hide a decoy."""
        if self.identity is None:
            return
        now = HiddenDir.record(self.path)
        if now.path == self.path and now.identity == self.identity:
            return
        found = "nothing" if now.identity is None else \
            f"another directory (device {now.identity[0]}, inode {now.identity[1]})"
        message = (f"refusing to start an agent: {self.path}, the directory the sandbox must "
                   f"hide (the data dir), is not the one recorded at start (device "
                   f"{self.identity[0]}, inode {self.identity[1]}): that path now names "
                   f"{found}{' via ' + now.path if now.path != self.path else ''}.  A "
                   "directory above it was renamed or replaced (an agent can do that): the "
                   "real data dir is elsewhere and would not be hidden.  Stop Turnvisor, "
                   "put the data dir back, and check who moved it")
        log.error("%s", message)
        raise SandboxError(message)


def install_dirs() -> list[str]:
    """Turnvisor's own code and the Python it runs on, bound read-only: the
    directory holding the packages (a checkout, or site-packages),
    ``sys.prefix`` and ``sys.base_prefix`` (a virtualenv's Python, perhaps
    under ``$HOME``), the site-packages and the user site.  Real paths; ``/``
    and missing ones left out."""
    packages = Path(__file__).resolve().parents[1]
    candidates = [str(packages), sys.prefix, sys.exec_prefix, sys.base_prefix,
                  sys.base_exec_prefix, *site.getsitepackages()]
    if site.ENABLE_USER_SITE:
        candidates.append(site.getusersitepackages())
    out: list[str] = []
    for c in candidates:
        real = _real(c)
        if real != "/" and os.path.isdir(real) and real not in out:
            out.append(real)
    return out


def writable_paths(env: Mapping[str, str], cwd: str, extra: Iterable[str] = ()) -> list[str]:
    """The agent's cwd, the homes its environment names, and ``extra``:
    absolute paths, real (symlinks resolved), without duplicates.  /tmp and
    /var/tmp themselves are not among them: the sandbox gives the agent its own."""
    out: list[str] = []
    for p in [cwd, *(env.get(v, "") for v in HOME_VARIABLES), *extra]:
        if p and os.path.isabs(os.path.expanduser(p)):
            real = _real(p)
            if real not in out and real != "/" and real not in PRIVATE_SCRATCH:
                out.append(real)
    return out


def writable_requests(env: Mapping[str, str], cwd: str,
                      extra: Iterable[str] = ()) -> list[tuple[str, bool]]:
    """What ``wrap`` opens by identity, as given (no symlink resolved here):
    the homes ``env`` names (made when missing: the agent's own) and ``extra``
    (skipped when missing), each ``(path, create)``; the cwd is opened apart."""
    out: list[tuple[str, bool]] = []
    seen = {os.path.normpath(cwd)}
    for p, create in [*((env.get(v, ""), True) for v in HOME_VARIABLES),
                      *((os.path.expanduser(e), False) for e in extra)]:
        if not p or not os.path.isabs(p):
            continue
        norm = os.path.normpath(p)
        if norm in seen or norm == "/" or norm in PRIVATE_SCRATCH:
            continue
        seen.add(norm)
        out.append((norm, create))
    return out


@dataclass(frozen=True, slots=True)
class HomeBind:
    """A part of the person's real home an agent needs (``source``), bound at
    ``relative`` under its private home, read-only unless ``writable``."""

    source: str
    relative: str
    writable: bool = False


@dataclass(frozen=True, slots=True)
class HomeBound:
    source: OpenedPath
    dest: str
    writable: bool


def _depth(path: str) -> int:
    return path.rstrip("/").count("/")


def _bind_target(w: str | OpenedPath) -> str:
    """Where a writable path is bound: a path opened by identity is bound where
    it was found (no second lookup of its name); a plain one, made real."""
    return w.real if isinstance(w, OpenedPath) else _real(w)


def sandbox_argv(command: Sequence[str], *, cwd: str | OpenedPath, hide: Iterable[str],
                 writable: Iterable[str | OpenedPath], readonly: Iterable[str] = (),
                 uid: int = 1000, bwrap: str = "/usr/bin/bwrap",
                 env_cmd: str = "/usr/bin/env",
                 home_binds: Iterable[HomeBound] = ()) -> list[str]:
    """The argv that runs ``command`` in the sandbox (see the module docstring),
    bwrap's options inline (``Launch`` moves them into a descriptor).

    ``hide``: directories covered by an empty tmpfs.  ``writable``: paths bound
    read-write (missing ones skipped); those inside a hidden directory are
    bound back over its tmpfs.  ``readonly``: the install, bound read-only
    after the writable binds.  ``uid``: the backend's (0: the agent runs as
    ``UNPRIVILEGED_ID``).  Raises ``SandboxError`` if ``cwd`` or a writable
    path is a hidden directory itself (it would bring it all back) or lies in
    the install (outside a hidden directory).
    """
    if not command:
        raise SandboxError("empty agent command")
    hidden = [_real(h) for h in hide]
    opened: dict[str, OpenedPath] = {}
    rw: list[str] = []
    for w in [cwd, *writable]:
        target = _bind_target(w)
        if isinstance(w, OpenedPath):
            opened.setdefault(target, w)
        if target not in rw:
            rw.append(target)
    real_cwd = _bind_target(cwd)
    ro = [_real(r) for r in readonly]
    for w in rw:
        if any(w == h for h in hidden):
            raise SandboxError(f"{w} is a directory the sandbox hides (the data dir); "
                               "give the agent a working directory of its own")
        above = [h for h in hidden if _inside(h, w)]
        if above:
            # Write access above the data dir is the power to rename it away and
            # leave a decoy where the sandbox's cover (a path) would land.
            raise SandboxError(f"{w} holds {above[0]}, a directory the sandbox hides (the "
                               "data dir); an agent that can write there could move it. Give "
                               "the agent writable paths beside the data dir, not above it")
        if any(_inside(w, r) for r in ro) and not any(_inside(w, h) for h in hidden):
            raise SandboxError(f"{w} is inside Turnvisor's own install, which the sandbox "
                               "keeps read-only; give the agent a working directory (and "
                               "writable paths) outside it")
    outside = sorted((w for w in rw if not any(_inside(w, h) for h in hidden)), key=_depth)
    inside = sorted((w for w in rw if w not in outside), key=_depth)
    # The leader: a shell that ignores SIGTERM (bwrap inherits that) and waits
    # for bwrap from its one thread, so bwrap's --die-with-parent fires only
    # when the leader is gone.  Not ``exec``: the shell must stay the parent.
    argv = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    for knob in PROC_READONLY:
        argv += ["--ro-bind-try", knob, knob]
    for scratch in PRIVATE_SCRATCH:
        argv += ["--tmpfs", scratch]
    # /run (the session's runtime dir, D-Bus, Docker's socket ...) hidden; a
    # resolv.conf that lives there is bound back (it names the resolver).
    argv += ["--tmpfs", "/run"]
    resolv = _real("/etc/resolv.conf")
    if _inside(resolv, "/run"):
        argv += ["--ro-bind-try", resolv, resolv]
    # Parents before children: a parent's bind would cover a child's.
    for w in outside:
        argv += _bind(w, opened)
    # The install after the writable binds that may contain it; a part of it
    # inside a hidden directory stays hidden.
    for r in ro:
        if not any(_inside(r, h) for h in hidden):
            argv += ["--ro-bind-try", r, r]
    # Writable binds above may have covered a hidden directory (a data dir
    # under $HOME or /tmp): the tmpfs comes after them, the binds back after it.
    for h in hidden:
        if os.path.isdir(h):
            argv += ["--tmpfs", h]
    for w in inside:
        argv += _bind(w, opened)
    # What the agent needs of the person's real home, over its private one.
    for bound in home_binds:
        flag = "--bind-fd" if bound.writable else "--ro-bind-fd"
        argv += [flag, str(bound.source.fd), bound.dest]
    argv += ["--chdir", real_cwd, "--unshare-user"]
    if uid == 0:
        argv += ["--uid", str(UNPRIVILEGED_ID), "--gid", str(UNPRIVILEGED_ID)]
    argv += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--die-with-parent",
             "--cap-drop", "ALL", "--", env_cmd, "--default-signal=TERM", *command]
    return argv


def _bind(target: str, opened: Mapping[str, OpenedPath]) -> list[str]:
    """bwrap's options binding ``target`` writable: by descriptor when it was
    opened by identity (the inode reached, whatever its name says now)."""
    if target in opened:
        return ["--bind-fd", str(opened[target].fd), target]
    return ["--bind-try", target, target]


def memfd_with(name: str, data: bytes) -> int:
    """A memfd holding ``data``, at offset 0 (bwrap reads options and filters from one)."""
    fd = os.memfd_create(name)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd


@dataclass(slots=True)
class Launch:
    """What to spawn: ``argv``, with ``pass_fds`` inherited by it (bwrap's
    options and seccomp filter, the descriptors it binds, the leader's pipes).
    Close it once the process is spawned (a ``with`` block does); the
    ``lifeline``'s write end is the caller's to keep while the agent lives
    (``take_lifeline``): its close is the end of the whole sandbox."""

    argv: list[str]
    pass_fds: tuple[int, ...] = ()
    lifeline: int | None = None
    _closed: bool = field(default=False, repr=False)

    @classmethod
    def sandboxed(cls, argv: Sequence[str], *, seccomp: bytes | None,
                  bound: Sequence[int] = (), network: NetworkPlan | None = None) -> Launch:
        """``argv`` from ``sandbox_argv`` (bwrap first) behind the group leader
        (protocols/leader.py), bwrap's options moved into a memfd (``--args
        FD``) and the filter into another (``--seccomp FD``); with ``network``,
        a namespace of its own that the leader connects before the agent starts."""
        split = list(argv).index("--")
        options = list(argv[1:split])
        fds: list[int] = []
        try:
            # Always: the leader learns the sandbox's pid (its lifeline kills it)
            # and lets the agent start, once its network is up if it has one.
            net = NetworkFds.open()
            fds += net.all()
            options += net.bwrap_options(unshare_net=network is not None)
            if seccomp is not None:
                fds.append(memfd_with("turnvisor-seccomp", seccomp))
                options += ["--seccomp", str(fds[-1])]
            fds.append(memfd_with("turnvisor-bwrap-args",
                              b"".join(os.fsencode(o) + b"\0" for o in options)))
            lifeline_r, lifeline_w = os.pipe()
        except BaseException:
            for fd in fds:
                os.close(fd)
            raise
        to_bwrap = [fd for fd in (*fds, *bound) if fd not in (net.info_r, net.block_w)]
        leader = [sys.executable, "-I", "-S", LEADER, "--lifeline", str(lifeline_r),
                  *(a for fd in to_bwrap for a in ("--keep-fd", str(fd)))]
        helper = None if network is None else helper_argv(network, uid=os.getuid())
        leader += net.leader_options(helper, () if network is None else network.host_ports)
        return cls([*leader, "--", argv[0], "--args", str(fds[-1]), *argv[split:]],
                   (*fds, *bound, lifeline_r), lifeline_w)

    def take_lifeline(self) -> int | None:
        """The lifeline's write end, now the caller's to close (None: unsandboxed)."""
        fd, self.lifeline = self.lifeline, None
        return fd

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            for fd in self.pass_fds:
                os.close(fd)
            if self.lifeline is not None:
                os.close(self.lifeline)
                self.lifeline = None

    def __enter__(self) -> Launch:
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def host_filter() -> bytes | None:
    """The seccomp filter for this machine's architecture (None: none for it)."""
    arch = host_arch()
    return seccomp_filter(arch) if arch is not None else None


def _bwrap_launch(command: Sequence[str], *, cwd: str, hide: Iterable[str],
                  writable: Iterable[tuple[str, bool]], bwrap: str,
                  untrusted: Iterable[str] = (),
                  home_binds: Iterable[HomeBind] = (), home: str | None = None,
                  network: NetworkPlan | None = None,
                  cwd_identity: tuple[int, int] | None = None) -> Launch:
    """Open every writable path by identity (protocols/fence_paths.py), then
    build the argv binding the descriptors.  ``writable``: (path, create)."""
    requests = list(writable)
    trees = [*PRIVATE_SCRATCH, *untrusted, *(p for p, _ in requests)]
    if home:
        trees.append(home)
    fds: list[int] = []
    try:
        opened_cwd = _open(cwd, trees, create=False, fds=fds)
        if opened_cwd is None:
            raise SandboxError(f"refusing to start an agent: its directory {cwd} is gone")
        if cwd_identity is not None and opened_cwd.identity != cwd_identity:
            message = (f"refusing to start an agent: {cwd} is not the project directory "
                       f"recorded when its task was made (device {cwd_identity[0]}, inode "
                       f"{cwd_identity[1]}; now {opened_cwd.identity[0]}, "
                       f"{opened_cwd.identity[1]}): it was moved or replaced. Put it back, "
                       "or make a new task for the directory there now")
            log.error("%s", message)
            raise SandboxError(message)
        opened = [o for p, create in requests
                  if (o := _open(p, trees, create=create, fds=fds)) is not None]
        bound = []
        for b in home_binds:
            if home is None:
                break
            source = _open(b.source, trees, create=False, fds=fds)
            if source is not None:
                bound.append(HomeBound(source, os.path.join(home, b.relative), b.writable))
        argv = sandbox_argv(command, cwd=opened_cwd, hide=hide, writable=opened,
                            readonly=install_dirs(), uid=os.getuid(), bwrap=bwrap,
                            env_cmd=_env_path(), home_binds=bound)
        return Launch.sandboxed(argv, seccomp=host_filter(), bound=fds, network=network)
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise


def _open(path: str, trees: Sequence[str], *, create: bool,
          fds: list[int]) -> OpenedPath | None:
    """``path`` opened by identity (None: missing and not to be made)."""
    try:
        opened = open_by_identity(path, untrusted=trees, create=create)
    except FileNotFoundError:
        return None
    except PathRefused as exc:
        raise SandboxError(f"refusing to start an agent: {exc}") from None
    fds.append(opened.fd)
    return opened


@functools.cache
def bwrap_works() -> bool:
    """Whether a sandbox of ``wrap``'s shape runs here (once per process).

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
        try:
            with _bwrap_launch(["sh", "-c", f"test ! -e {secret}/token && test -d {work}"],
                               cwd=work, hide=[secret], writable=[], bwrap=bwrap,
                               untrusted=[tmp]) as launch:
                done = subprocess.run(launch.argv, stdin=subprocess.DEVNULL,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                      timeout=PROBE_TIMEOUT_S, check=False,
                                      pass_fds=launch.pass_fds)
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
         hide: Iterable[HiddenDir | str], extra_writable: Iterable[str] = (),
         untrusted: Iterable[str] = (), home_binds: Iterable[HomeBind] = (),
         network: NetworkMode = "host", host_ports: Iterable[int] = (),
         cwd_identity: tuple[int, int] | None = None) -> Launch:
    """``command`` as it is spawned under ``mode``: itself, or inside bwrap.
    Each ``HiddenDir`` is checked first, whatever the mode (``HiddenDir.check``:
    a data dir moved away is a launch refused).  Every writable path (the cwd,
    the homes ``env`` names, ``extra_writable``) is opened by identity and bound
    by descriptor; a symlink in ``untrusted`` (trees agents write) refuses the
    launch.  ``home_binds``: parts of the person's real home bound over the
    private ``HOME`` of ``env``.  ``network``: ``isolated`` is a namespace of
    its own with outbound access and ``host_ports`` of the host's loopback
    (protocols/netns.py); ``host`` shares the backend's.  ``cwd_identity``:
    the (device, inode) the cwd must be (a project's, recorded when its task was
    made): another directory at that path refuses the launch."""
    paths = []
    for h in hide:
        if isinstance(h, HiddenDir):
            h.check()
            paths.append(h.path)
        else:
            paths.append(h)
    if mode == "none":
        return Launch(list(command))
    bwrap = bwrap_path()
    if bwrap is None:
        raise SandboxError("sandbox = \"bwrap\" but bwrap is not installed "
                           "(apt-get install bubblewrap)")
    plan = None
    if network == "isolated":
        helper = current_tools().get("pasta")
        if helper is None:
            raise SandboxError("network = \"isolated\" needs passt's pasta (apt-get install "
                               "passt), or network = \"host\" in the profile")
        plan = NetworkPlan(helper, tuple(host_ports))
    return _bwrap_launch(command, cwd=cwd, hide=paths,
                         writable=writable_requests(env, cwd, extra_writable), bwrap=bwrap,
                         untrusted=untrusted, home_binds=home_binds, home=env.get("HOME"),
                         network=plan, cwd_identity=cwd_identity)
