"""An agent's commands against the kernel and Turnvisor's install, from inside
the real sandbox as ``wrap`` builds it for every launch (issue 27, items 2
and 4): the kernel's knobs, /dev, its uid, the namespaces, the seccomp
filter, the install's files, and what bwrap was told."""

from __future__ import annotations

import errno
import os
import socket
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

import pytest

from protocols.sandbox import HiddenDir, SandboxError, bwrap_works, install_dirs, wrap
from protocols.seccomp import host_arch, syscall_number

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(not bwrap_works(), reason="bwrap cannot run here")


def run(command: list[str], cwd: Path, *, hide: Iterable[HiddenDir | str] = (),
        writable: Iterable[str] = (), sandboxed: bool = True) -> subprocess.CompletedProcess[str]:
    """``command`` as an agent's tool runs it: in the sandbox (or, to compare, not)."""
    env = {**os.environ, "HOME": str(cwd)}
    with wrap(command, "bwrap" if sandboxed else "none", cwd=str(cwd), env=env, hide=hide,
              extra_writable=writable) as launch:
        return subprocess.run(launch.argv, pass_fds=launch.pass_fds, cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=60, check=False)


def sh(script: str, cwd: Path, **kw: object) -> subprocess.CompletedProcess[str]:
    return run(["sh", "-c", script], cwd, **kw)  # type: ignore[arg-type]


def py(script: str, cwd: Path, **kw: object) -> subprocess.CompletedProcess[str]:
    return run([sys.executable, "-c", script], cwd, **kw)  # type: ignore[arg-type]


def test_the_kernel_knobs_are_read_only(tmp_path: Path) -> None:
    before = Path("/proc/sys/kernel/domainname").read_text()
    knobs = [("/proc/sys/kernel/domainname", "hacked"),
             ("/proc/sys/kernel/core_pattern", "|/tmp/pwn"), ("/proc/sys/vm/drop_caches", "3")]
    if Path("/proc/sysrq-trigger").exists():  # some kernels (containers) have none
        knobs.append(("/proc/sysrq-trigger", "h"))
    for knob, value in knobs:
        done = sh(f"echo '{value}' > {knob}", tmp_path)
        assert done.returncode != 0, knob
        assert "Read-only file system" in done.stderr or "Permission denied" in done.stderr, \
            (knob, done.stderr)
    assert Path("/proc/sys/kernel/domainname").read_text() == before
    assert "|/tmp/pwn" not in Path("/proc/sys/kernel/core_pattern").read_text()


def test_dev_is_minimal_and_works(tmp_path: Path) -> None:
    done = py("import os, stat\n"
              "for n in sorted(os.listdir('/dev')):\n"
              "    st = os.lstat('/dev/' + n)\n"
              "    print(n, 'block' if stat.S_ISBLK(st.st_mode) else 'other')\n"
              "open('/dev/null', 'w').write('x')\n"
              "open('/dev/shm/agent-scratch', 'w').write('x')\n"
              "print('ok', len(open('/dev/urandom', 'rb').read(16)))", tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[-1] == "ok 16"
    names = {line.split()[0] for line in lines[:-1]}
    assert not any(line.endswith(" block") for line in lines[:-1]), lines
    assert {"null", "zero", "urandom", "tty", "pts", "shm"} <= names
    # Nothing of the host's hardware: no disks, no memory, no kvm, no GPU.
    assert not names & {"sda", "vda", "nvme0", "nvme0n1", "mem", "kmem", "port", "kvm", "dri",
                        "loop0", "loop-control", "mapper", "fuse"}, names
    assert not Path("/dev/shm/agent-scratch").exists()


def test_a_root_backends_agent_is_not_root(tmp_path: Path) -> None:
    done = sh("id -u; id -g; grep ^CapEff /proc/self/status; grep ^CapBnd /proc/self/status",
              tmp_path)
    assert done.returncode == 0, done.stderr
    uid, gid, eff, bnd = done.stdout.split("\n")[:4]
    expected = "65534" if os.getuid() == 0 else str(os.getuid())
    assert uid == expected and (gid == "65534" if os.getuid() == 0 else True)
    assert eff.split()[1] == "0000000000000000" and bnd.split()[1] == "0000000000000000"
    # Its home still works as its own: it writes there, and the files are the backend's.
    assert sh("echo state > .agent-state && cat .agent-state", tmp_path).stdout == "state\n"
    assert (tmp_path / ".agent-state").stat().st_uid == os.getuid()


def test_its_namespaces_are_its_own(tmp_path: Path) -> None:
    kinds = ["ipc", "uts", "user", "pid", "mnt"]
    done = sh("; ".join(f"readlink /proc/self/ns/{k}" for k in kinds) +
              "; hostname agent-was-here; echo h=$?; hostname", tmp_path)
    inside = done.stdout.splitlines()
    assert len(inside) == len(kinds) + 2, (done.stdout, done.stderr)
    for kind, ns in zip(kinds, inside, strict=False):
        assert ns != os.readlink(f"/proc/self/ns/{kind}"), kind
    host = socket.gethostname()
    assert host != "agent-was-here"
    assert inside[-1] != "agent-was-here"  # refused, and in its own UTS namespace anyway


SYSCALLS = r"""
import ctypes, errno, json, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
numbers = json.loads(sys.argv[1])
def call(name, *args):
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(numbers[name]), *(ctypes.c_long(a) for a in args))
    return "ok" if r >= 0 else errno.errorcode.get(ctypes.get_errno(), "?")
out = {}
# keyctl(KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, create): fine for anyone, unfiltered.
out["keyctl"] = call("keyctl", 0, -3, 1)
out["add_key"] = call("add_key", 0, 0, 0, 0, 0)
out["bpf"] = call("bpf", 0, 0, 0)
out["perf_event_open"] = call("perf_event_open", 0, 0, -1, -1, 0)
out["userfaultfd"] = call("userfaultfd", 0)
out["kexec_load"] = call("kexec_load", 0, 0, 0, 0)
out["init_module"] = call("init_module", 0, 0, 0)
out["setns"] = call("setns", -1, 0)
out["open_by_handle_at"] = call("open_by_handle_at", -1, 0, 0)
out["personality_aslr_off"] = call("personality", 0x0040000)
out["personality_query"] = call("personality", 0xFFFFFFFF)
master, slave = os.openpty()
c = ctypes.c_char(b"x")
ctypes.set_errno(0)
r = libc.ioctl(slave, 0x5412, ctypes.byref(c))
out["tiocsti"] = "ok" if r == 0 else errno.errorcode.get(ctypes.get_errno(), "?")
out["getpid"] = call("getpid")
print(json.dumps(out))
"""


def test_the_seccomp_filter_refuses_the_dangerous_calls(tmp_path: Path) -> None:
    arch = host_arch()
    if arch is None:
        pytest.skip(f"no seccomp filter for {os.uname().machine}")
    import json

    names = ["keyctl", "add_key", "bpf", "perf_event_open", "userfaultfd", "kexec_load",
             "init_module", "setns", "open_by_handle_at", "personality"]
    numbers = {n: syscall_number(n, arch) for n in names}
    numbers["getpid"] = {"x86_64": 39, "aarch64": 172}[arch]
    cmd = [sys.executable, "-c", SYSCALLS, json.dumps(numbers)]
    done = run(cmd, tmp_path)
    assert done.returncode == 0, done.stderr
    inside = json.loads(done.stdout)
    outside = json.loads(run(cmd, tmp_path, sandboxed=False).stdout)
    for name, result in inside.items():
        if name in ("getpid", "personality_query"):
            assert result == "ok", inside
        else:
            assert result == errno.errorcode[errno.EPERM], (name, inside)
    # The filter, not merely a missing privilege, refuses these (they work outside).
    for name in ["keyctl", "personality_aslr_off"]:
        assert outside[name] == "ok", outside


def test_the_install_is_read_only_even_under_a_writable_parent(tmp_path: Path) -> None:
    site_packages = next(p for p in install_dirs() if p.endswith("site-packages"))
    # A writable directory above the checkout: the install is bound read-only after it.
    above = [str(REPO.parent)] if REPO.parent != Path("/") else []
    targets = [REPO / "web" / "static" / "planted.html", REPO / "supervisor" / "planted.py",
               Path(site_packages) / "planted.pth", Path(sys.prefix) / "planted"]
    try:
        done = sh("; ".join(f"echo pwn > {t} || echo refused" for t in targets), tmp_path,
                  writable=above)
        planted = [t for t in targets if t.exists()]
    finally:
        for t in targets:
            t.unlink(missing_ok=True)
    assert done.stdout.split() == ["refused"] * len(targets), (done.stdout, done.stderr)
    assert "Read-only file system" in done.stderr
    assert not planted
    # A cwd in the install is refused before anything starts.
    with pytest.raises(SandboxError, match="install"):
        run(["true"], REPO / "web")


def test_no_process_in_the_sandbox_can_read_what_bwrap_was_told(tmp_path: Path) -> None:
    data = tmp_path / "data"
    work = data / "work" / "ws" / "s1"
    work.mkdir(parents=True)
    (data / "token").write_text("the-token-0123456789abcdef\n")
    done = py("import os\n"
              "for pid in [p for p in os.listdir('/proc') if p.isdigit()]:\n"
              "    print(open(f'/proc/{pid}/cmdline', 'rb').read().replace(b'\\0', b' '))\n"
              "    try:\n"
              "        fds = os.listdir(f'/proc/{pid}/fd')\n"
              "    except OSError as e:\n"
              "        print('fds', pid, e.strerror); continue\n"
              "    for fd in fds:\n"
              "        try:\n"
              "            print('fd', pid, os.readlink(f'/proc/{pid}/fd/{fd}'))\n"
              "        except OSError as e:\n"
              "            print('fd', pid, e.strerror)\n", work,
              hide=[HiddenDir.record(data)])
    assert done.returncode == 0, done.stderr
    assert "bwrap" in done.stdout
    assert str(data) + " " not in done.stdout and "--tmpfs" not in done.stdout, done.stdout
    # bwrap read its options and filter and closed them: no memfd is left to reread.
    assert "memfd:" not in done.stdout, done.stdout


def test_a_nested_namespace_cannot_lift_the_data_dirs_cover(tmp_path: Path) -> None:
    """User namespaces and mounts stay allowed (agents sandbox their own
    commands with bwrap): an agent that makes itself root of a namespace of its
    own still cannot unmount the tmpfs over the data dir, nor bind its parent
    without it, nor mount the disk."""
    data = tmp_path / "home" / "data"
    work = tmp_path / "home" / "work"
    work.mkdir(parents=True)
    data.mkdir()
    (data / "token").write_text("the-token-0123456789abcdef\n")
    escape = (f"umount {data}; umount -l {data}; cat {data}/token; "
              f"mkdir -p {work}/mnt && mount --bind {tmp_path / 'home'} {work}/mnt && "
              f"cat {work}/mnt/data/token; mount -t ext4 /dev/vda {work}/mnt; echo tried")
    done = sh(f"unshare -Urm sh -c '{escape}'; "
              "bwrap --ro-bind / / --proc /proc --dev /dev true && echo nested-bwrap-ok",
              work, hide=[HiddenDir.record(data)])
    assert "tried" in done.stdout, (done.stdout, done.stderr)
    assert "the-token" not in done.stdout + done.stderr, (done.stdout, done.stderr)
    assert "nested-bwrap-ok" in done.stdout, done.stderr


def test_a_nested_namespace_cannot_make_the_kernel_knobs_writable(tmp_path: Path) -> None:
    """Root of a namespace of its own (a root backend's agent is the host's uid
    0 underneath): remounting /proc/sys read-write, unmounting it, or mounting
    a fresh /proc with a writable sys/ is refused.  It writes the current
    value back, so a failure of this test changes nothing on the host."""
    current = Path("/proc/sys/kernel/core_pattern").read_text().strip()
    write = f"printf %s '{current}' >"
    escape = (f"mount -o remount,rw,bind /proc/sys; umount -l /proc/sys; "
              f"{write} /proc/sys/kernel/core_pattern && echo WROTE; "
              f"mkdir -p {tmp_path}/p && mount -t proc proc {tmp_path}/p && "
              f"{write} {tmp_path}/p/sys/kernel/core_pattern && echo WROTE; "
              f"mount --rbind /proc {tmp_path}/p && mount -o remount,rw,bind {tmp_path}/p/sys; "
              f"{write} {tmp_path}/p/sys/kernel/core_pattern && echo WROTE; echo tried")
    done = sh(f'unshare -Urm sh -c "{escape}"', tmp_path)
    assert "tried" in done.stdout, (done.stdout, done.stderr)
    assert "WROTE" not in done.stdout, (done.stdout, done.stderr)


def test_a_writable_path_above_the_data_dir_is_refused(tmp_path: Path) -> None:
    """Write access above the data dir is the power to rename it away and leave
    a decoy where the sandbox's cover would land: no launch gets it."""
    data = tmp_path / "home" / "data"
    work = tmp_path / "work"
    data.mkdir(parents=True)
    work.mkdir()
    with pytest.raises(SandboxError, match="could move it"):
        sh("true", work, hide=[HiddenDir.record(data)], writable=[str(tmp_path / "home")])
    with pytest.raises(SandboxError, match="could move it"):
        sh("true", tmp_path, hide=[HiddenDir.record(data)])
