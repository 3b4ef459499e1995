"""A small seccomp filter for the sandbox: no AF_UNIX sockets, no io_uring, native syscalls only.

Why: a read-only bind does not stop ``connect()`` to a Unix socket of the host (the kernel asks
for write permission on the socket, not a writable mount), so ``/run/docker.sock``, a database's
socket or the D-Bus system bus would be reachable from a sandbox with the network off. Refusing
``socket(AF_UNIX, ...)`` closes that; ``socketpair`` (which reaches nothing outside) still works.
io_uring is refused because its requests bypass seccomp. Syscalls of another ABI (32-bit x86's
``int 0x80``, x32) would bypass the checks too, so they kill the process.

The program is classic BPF, as bwrap's ``--seccomp FD`` reads it (what ``seccomp_export_bpf``
writes): 8-byte instructions, native byte order.
"""

from __future__ import annotations

import platform
import struct

__all__ = ["unix_socket_filter"]

_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_RET_K = 0x06
_RET_ALLOW = 0x7FFF0000
_RET_KILL_PROCESS = 0x80000000
_RET_EPERM = 0x00050000 | 1
_AF_UNIX = 1
_X32_BIT = 0x40000000

#: machine -> (AUDIT_ARCH value, __NR_socket, __NR_io_uring_setup)
_ARCHES = {
    "x86_64": (0xC000003E, 41, 425),
    "aarch64": (0xC00000B7, 198, 425),
}


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def unix_socket_filter(machine: str | None = None) -> bytes | None:
    """The filter for this machine's architecture; None where ra has no syscall table for it."""
    arch = _ARCHES.get(machine or platform.machine())
    if arch is None:
        return None
    audit_arch, nr_socket, nr_io_uring_setup = arch
    program = [
        _insn(_LD_W_ABS, 4),  # seccomp_data.arch
        _insn(_JEQ_K, audit_arch, jt=1, jf=0),
        _insn(_RET_K, _RET_KILL_PROCESS),
        _insn(_LD_W_ABS, 0),  # seccomp_data.nr
        _insn(_JGE_K, _X32_BIT, jt=0, jf=1),
        _insn(_RET_K, _RET_KILL_PROCESS),
        _insn(_JEQ_K, nr_io_uring_setup, jt=0, jf=1),
        _insn(_RET_K, _RET_EPERM),
        _insn(_JEQ_K, nr_socket, jt=0, jf=3),
        _insn(_LD_W_ABS, 16),  # the low 32 bits of args[0] (the domain), little-endian layout
        _insn(_JEQ_K, _AF_UNIX, jt=0, jf=1),
        _insn(_RET_K, _RET_EPERM),
        _insn(_RET_K, _RET_ALLOW),
    ]
    return b"".join(program)
