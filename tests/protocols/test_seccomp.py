"""The seccomp filter as a program: run here by a small classic-BPF
interpreter (the kernel's semantics for the instructions it uses) on each
call the sandbox could see, for both architectures."""

from __future__ import annotations

import struct

import pytest

from protocols.seccomp import (
    ARCHES,
    AUDIT_ARCH,
    BLOCKED,
    Arch,
    host_arch,
    seccomp_filter,
    syscall_number,
)

ALLOW = 0x7FFF0000
EPERM = 0x00050000 | 1
#: Ordinary calls every agent makes: (x86_64, aarch64).
ORDINARY = {"read": (0, 63), "write": (1, 64), "openat": (257, 56), "execve": (59, 221),
            "ptrace": (101, 117), "getpid": (39, 172), "socket": (41, 198)}
#: What an agent's own bwrap needs: (x86_64, aarch64).
NESTED_SANDBOX = {"clone": (56, 220), "clone3": (435, 435), "unshare": (272, 97),
                  "mount": (165, 40), "umount2": (166, 39), "pivot_root": (155, 41)}


def run(program: bytes, nr: int, arch: int, args: tuple[int, ...] = ()) -> int:
    """The filter's verdict on one call (``struct seccomp_data``)."""
    full = (*args, *([0] * (6 - len(args))))
    data = struct.pack("=iIQ6Q", nr, arch, 0, *(a & 0xFFFFFFFFFFFFFFFF for a in full))
    insns = [struct.unpack_from("=HBBI", program, i) for i in range(0, len(program), 8)]
    assert 0 < len(insns) <= 4096
    acc, pc = 0, 0
    while True:
        code, jt, jf, k = insns[pc]
        if code == 0x20:  # ld [k]
            (acc,) = struct.unpack_from("=I", data, k)
            pc += 1
        elif code in (0x15, 0x35):  # jeq, jge
            hit = acc == k if code == 0x15 else acc >= k
            pc += 1 + (jt if hit else jf)
        elif code == 0x06:  # ret k
            return k
        else:
            raise AssertionError(f"unexpected opcode {code:#x}")


@pytest.mark.parametrize("arch", ARCHES)
def test_the_dangerous_calls_get_eperm_and_the_rest_pass(arch: Arch) -> None:
    prog = seccomp_filter(arch)
    audit = AUDIT_ARCH[arch]
    i = ARCHES.index(arch)
    for name in BLOCKED:
        nr = syscall_number(name, arch)
        if nr is not None:
            assert run(prog, nr, audit) == EPERM, name
    for name, numbers in ORDINARY.items():
        assert run(prog, numbers[i], audit) == ALLOW, name


@pytest.mark.parametrize("arch", ARCHES)
def test_calls_checked_by_argument(arch: Arch) -> None:
    prog = seccomp_filter(arch)
    audit = AUDIT_ARCH[arch]

    def verdict(name: str, *args: int) -> int:
        nr = syscall_number(name, arch)
        assert nr is not None
        return run(prog, nr, audit, args)

    # Agents' own sandboxes (Codex's bwrap) need these: allowed.
    for name, numbers in NESTED_SANDBOX.items():
        assert run(prog, numbers[ARCHES.index(arch)], audit, (0x10000000,)) == ALLOW, name
    assert verdict("ioctl", 0, 0x5401) == ALLOW  # TCGETS
    assert verdict("ioctl", 0, 0x5412) == EPERM  # TIOCSTI
    assert verdict("ioctl", 0, 0x541C) == EPERM  # TIOCLINUX
    # The kernel reads the request as an int: high bits do not hide TIOCSTI.
    assert verdict("ioctl", 0, 0x1_0000_5412) == EPERM
    assert verdict("personality", 0xFFFFFFFF) == ALLOW
    assert verdict("personality", 0) == ALLOW
    assert verdict("personality", 0x0040000) == EPERM  # ADDR_NO_RANDOMIZE
    assert verdict("personality", 0x0400000) == EPERM  # READ_IMPLIES_EXEC


def test_another_abi_is_refused() -> None:
    x86 = seccomp_filter("x86_64")
    # i386 (int 0x80) numbers differ (1 is exit there, 21 mount): all refused.
    assert run(x86, 21, 0x40000003) == EPERM
    assert run(x86, 0, 0x40000003) == EPERM
    # x32: x86_64's arch, bit 30 set on the number.
    assert run(x86, 0x40000000 | 165, AUDIT_ARCH["x86_64"]) == EPERM
    assert run(x86, 0x40000000 | 0, AUDIT_ARCH["x86_64"]) == EPERM
    # One arch's filter refuses the other's calls.
    assert run(seccomp_filter("aarch64"), 0, AUDIT_ARCH["x86_64"]) == EPERM


def test_host_arch() -> None:
    assert host_arch("x86_64") == host_arch("AMD64") == "x86_64"
    assert host_arch("aarch64") == host_arch("arm64") == "aarch64"
    assert host_arch("riscv64") is None
    assert host_arch() in (*ARCHES, None)
