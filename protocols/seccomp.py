"""The sandbox's seccomp filter: a classic-BPF program, built here (sans-IO),
that bwrap loads with ``--seccomp FD`` (protocols/sandbox.py).

An agent has no use for the calls below; each is a way into the kernel (load
a module or a new kernel, trace the kernel, reach a keyring, open any file
by handle, join a namespace, set the clock).  They fail with ``EPERM``;
everything else is allowed.  The numbers are those of the kernel's tables for
x86_64 (``arch/x86/entry/syscalls/syscall_64.tbl``) and aarch64 (the generic
``include/uapi/asm-generic/unistd.h``).

The program first checks the architecture the call was made in: a call of
another ABI (32-bit i386 on x86_64, numbered differently) is refused, as is
every x32 call (x86_64 numbers with bit 30 set), so no second numbering
slips past the list.

Checked by argument (the low 32 bits: the kernel reads these as ``int``):

- ``ioctl`` ``TIOCSTI`` (push input into a terminal) and ``TIOCLINUX``.
- ``personality``: only querying it and the plain Linux personalities; no
  ``ADDR_NO_RANDOMIZE`` or ``READ_IMPLIES_EXEC``.

Allowed on purpose:

- new user namespaces and the mount calls (``mount``, ``umount2``,
  ``pivot_root``, the new mount API): agents sandbox their own commands with
  them (Codex runs each command in its own bwrap), and no filter inherited
  by that bwrap could let it work otherwise.  Inside a namespace of its own
  the agent acts only on its own namespaces: the mounts it inherited are
  locked together (the tmpfs over the data dir cannot be lifted off, nor its
  parent bound without it) and nothing reaches the host's mount table.
- ``ptrace`` and ``process_vm_*``: debuggers and ``strace`` are ordinary
  tools, and in the sandbox's pid namespace they reach only the agent's own
  processes.
"""

from __future__ import annotations

import platform
import struct
from dataclasses import dataclass
from typing import Final, Literal

__all__ = ["ARCHES", "BLOCKED", "Arch", "host_arch", "seccomp_filter", "syscall_number"]

Arch = Literal["x86_64", "aarch64"]
ARCHES: Final[tuple[Arch, ...]] = ("x86_64", "aarch64")

#: The kernel's audit architecture of each (``AUDIT_ARCH_*`` in linux/audit.h).
AUDIT_ARCH: Final[dict[Arch, int]] = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}

#: Refused outright: name → (x86_64 number, aarch64 number or None if it has none).
BLOCKED: Final[dict[str, tuple[int, int | None]]] = {
    "kexec_load": (246, 104), "kexec_file_load": (320, 294),
    "init_module": (175, 105), "finit_module": (313, 273), "delete_module": (176, 106),
    "create_module": (174, None), "get_kernel_syms": (177, None), "query_module": (178, None),
    "swapon": (167, 224), "swapoff": (168, 225), "reboot": (169, 142),
    "bpf": (321, 280), "perf_event_open": (298, 241), "userfaultfd": (323, 282),
    "keyctl": (250, 219), "add_key": (248, 217), "request_key": (249, 218),
    "open_by_handle_at": (304, 265), "setns": (308, 268),
    "acct": (163, 89), "quotactl": (179, 60), "quotactl_fd": (443, 443), "syslog": (103, 116),
    "lookup_dcookie": (212, 18), "nfsservctl": (180, 42), "uselib": (134, None),
    "iopl": (172, None), "ioperm": (173, None), "_sysctl": (156, None),
    "settimeofday": (164, 170), "clock_settime": (227, 112), "clock_adjtime": (305, 266),
    "adjtimex": (159, 171), "vhangup": (153, 58),
}
#: Checked by argument (see the module docstring).
SPECIAL: Final[dict[str, tuple[int, int]]] = {"ioctl": (16, 29), "personality": (135, 92)}

TIOCSTI: Final = 0x5412
TIOCLINUX: Final = 0x541C
#: personality(2) values allowed: PER_LINUX, PER_LINUX32, their UNAME26
#: variants, and 0xffffffff (which only asks for the current one).
PERSONALITIES: Final = (0x0, 0x8, 0x20000, 0x20008, 0xFFFFFFFF)
X32_BIT: Final = 0x40000000
EPERM: Final = 1

SECCOMP_RET_ALLOW: Final = 0x7FFF0000
SECCOMP_RET_ERRNO: Final = 0x00050000

# Classic BPF opcodes (linux/filter.h).
_LD_W_ABS: Final = 0x20
_JEQ_K: Final = 0x15
_JGE_K: Final = 0x35
_RET_K: Final = 0x06
# struct seccomp_data: int nr; u32 arch; u64 instruction_pointer; u64 args[6].
_NR: Final = 0
_ARCH: Final = 4
_ARG0: Final = 16
_ARG1: Final = 24


@dataclass(frozen=True, slots=True)
class _Insn:
    code: int
    k: int
    #: Labels jumped to when the test holds; otherwise the next instruction.
    true: str | None = None
    label: str | None = None


def syscall_number(name: str, arch: Arch) -> int | None:
    """A listed call's number on ``arch`` (None if that arch has no such call)."""
    numbers = BLOCKED.get(name) or SPECIAL[name]
    return numbers[ARCHES.index(arch)]


def host_arch(machine: str | None = None) -> Arch | None:
    """This machine's arch as the filter names it, None if it has no filter."""
    m = (machine if machine is not None else platform.machine()).lower()
    if m in ("x86_64", "amd64"):
        return "x86_64"
    if m in ("aarch64", "arm64"):
        return "aarch64"
    return None


def _program(arch: Arch) -> list[_Insn]:
    def nr(name: str) -> int:
        number = syscall_number(name, arch)
        assert number is not None
        return number

    def ret(value: int, label: str | None = None) -> _Insn:
        return _Insn(_RET_K, value, label=label)

    out = [_Insn(_LD_W_ABS, _ARCH), _Insn(_JEQ_K, AUDIT_ARCH[arch], "native"),
           ret(SECCOMP_RET_ERRNO | EPERM),
           _Insn(_LD_W_ABS, _NR, label="native")]
    if arch == "x86_64":
        out.append(_Insn(_JGE_K, X32_BIT, "deny"))
    numbers = {nums[ARCHES.index(arch)] for nums in BLOCKED.values()}
    out += [_Insn(_JEQ_K, n, "deny") for n in sorted(n for n in numbers if n is not None)]
    out += [_Insn(_JEQ_K, nr("ioctl"), "ioctl"),
            _Insn(_JEQ_K, nr("personality"), "personality"),
            ret(SECCOMP_RET_ALLOW),
            _Insn(_LD_W_ABS, _ARG1, label="ioctl"), _Insn(_JEQ_K, TIOCSTI, "deny"),
            _Insn(_JEQ_K, TIOCLINUX, "deny"), ret(SECCOMP_RET_ALLOW),
            _Insn(_LD_W_ABS, _ARG0, label="personality"),
            *(_Insn(_JEQ_K, p, "allow") for p in PERSONALITIES),
            ret(SECCOMP_RET_ERRNO | EPERM, "deny"),
            ret(SECCOMP_RET_ALLOW, "allow")]
    return out


def _assemble(program: list[_Insn]) -> bytes:
    where = {insn.label: i for i, insn in enumerate(program) if insn.label}
    out = bytearray()
    for i, insn in enumerate(program):
        jt = 0
        if insn.true is not None:
            jt = where[insn.true] - i - 1
            # Classic BPF jumps only forward, at most 255 instructions.
            if not 0 <= jt <= 255:
                raise ValueError(f"jump to {insn.true} out of range at {i}")
        # struct sock_filter: u16 code, u8 jt, u8 jf, u32 k, in the host's byte order.
        out += struct.pack("=HBBI", insn.code, jt, 0, insn.k)
    return bytes(out)


def seccomp_filter(arch: Arch) -> bytes:
    """The filter for ``arch``, as ``bwrap --seccomp`` reads it: the program's
    ``struct sock_filter`` array."""
    return _assemble(_program(arch))
