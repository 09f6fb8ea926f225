"""The seccomp filter of the Bash sandbox: no Unix sockets, no io_uring (pure: builds a BPF program).

With the network off, a command in its own network namespace can still reach a local service
through a Unix socket file (the Docker daemon, the session bus, an SSH agent). The filter makes
`socket(AF_UNIX, …)` fail with EACCES, and `io_uring_setup` (whose requests can open sockets
behind the filter's back) with EPERM; `socketpair` stays allowed (it reaches nobody). Built for
x86-64 and arm64 (with their 32-bit modes); None elsewhere. See docs/security.md.
"""

from __future__ import annotations

import struct
from typing import Final

_LOAD: Final = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JUMP_EQUAL: Final = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JUMP_SET: Final = 0x45  # BPF_JMP | BPF_JSET | BPF_K
_RETURN: Final = 0x06  # BPF_RET | BPF_K
_ALLOW: Final = 0x7FFF0000  # SECCOMP_RET_ALLOW
_ERRNO: Final = 0x00050000  # SECCOMP_RET_ERRNO | errno
_EPERM, _EACCES, _ENOSYS = 1, 13, 38
_AF_UNIX: Final = 1
_X32_BIT: Final = 0x40000000
_IO_URING_SETUP: Final = 425  # the same number on every architecture here
_NR, _ARCH, _ARG0 = 0, 4, 16  # offsets in struct seccomp_data (little-endian: arg 0's low word)


class _Arch:
    """One audit architecture: its number, `socket`'s and `socketcall`'s (0: none)."""

    def __init__(self, name: str, audit: int, socket: int, socketcall: int = 0) -> None:
        self.name, self.audit, self.socket, self.socketcall = name, audit, socket, socketcall


_ARCHES: Final = {
    "x86_64": (_Arch("x86_64", 0xC000003E, 41), _Arch("i386", 0x40000003, 359, socketcall=102)),
    "aarch64": (_Arch("aarch64", 0xC00000B7, 198), _Arch("arm", 0x40000028, 281, socketcall=102)),
}
_ARCHES["amd64"] = _ARCHES["x86_64"]
_ARCHES["arm64"] = _ARCHES["aarch64"]


class _Program:
    """A classic BPF program with named jump targets, resolved when it is encoded."""

    def __init__(self) -> None:
        self.code: list[tuple[int, str | None, str | None, int]] = []
        self.labels: dict[str, int] = {}

    def label(self, name: str) -> None:
        self.labels[name] = len(self.code)

    def load(self, offset: int) -> None:
        self.code.append((_LOAD, None, None, offset))

    def jump(self, op: int, value: int, then: str | None, otherwise: str | None = None) -> None:
        self.code.append((op, then, otherwise, value))

    def ret(self, value: int) -> None:
        self.code.append((_RETURN, None, None, value))

    def encode(self) -> bytes:
        out = bytearray()
        for index, (op, then, otherwise, value) in enumerate(self.code):
            offsets = [0 if target is None else self.labels[target] - index - 1 for target in (then, otherwise)]
            out += struct.pack("=HBBI", op, offsets[0], offsets[1], value)
        return bytes(out)


def unix_socket_filter(machine: str) -> bytes | None:
    """The filter for `machine` (`platform.machine()`), as bubblewrap's `--seccomp` reads it; None if unknown."""
    arches = _ARCHES.get(machine.lower())
    if arches is None:
        return None
    native, compat = arches
    program = _Program()
    program.load(_ARCH)
    program.jump(_JUMP_EQUAL, native.audit, native.name)
    program.jump(_JUMP_EQUAL, compat.audit, compat.name, "allow")
    for arch in arches:
        program.label(arch.name)
        program.load(_NR)
        if arch is native and machine.lower() in ("x86_64", "amd64"):
            program.jump(_JUMP_SET, _X32_BIT, "enosys")  # the x32 ABI: none of its calls
        if arch.socketcall:
            program.jump(_JUMP_EQUAL, arch.socketcall, "eperm")  # every socket call behind one number
        program.jump(_JUMP_EQUAL, _IO_URING_SETUP, "eperm")
        program.jump(_JUMP_EQUAL, arch.socket, "socket", "allow")
    program.label("socket")
    program.load(_ARG0)
    program.jump(_JUMP_EQUAL, _AF_UNIX, "eacces", "allow")
    program.label("allow")
    program.ret(_ALLOW)
    program.label("eperm")
    program.ret(_ERRNO | _EPERM)
    program.label("eacces")
    program.ret(_ERRNO | _EACCES)
    program.label("enosys")
    program.ret(_ERRNO | _ENOSYS)
    return program.encode()
