"""Cross-memory attach (process_vm_readv/writev) from a test's rank process: whether it works,
and a seccomp filter that forbids it to this process, as a container's policy may."""

from __future__ import annotations

import ctypes
import errno
import os
import platform

# (seccomp, process_vm_readv, process_vm_writev) system call numbers.
SYSCALLS = {"x86_64": (317, 310, 311), "aarch64": (277, 270, 271)}


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8),
                ("k", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(_SockFilter))]


def deny_cross_memory_attach():
    """Makes process_vm_readv/writev fail with EPERM in every thread of this process, as a
    seccomp policy does (a classic BPF filter on the system call number)."""
    seccomp, readv, writev = SYSCALLS[platform.machine()]
    load_nr, jump_if_equal, ret = 0x20, 0x15, 0x06
    program = [
        (load_nr, 0, 0, 0),               # seccomp_data.nr
        (jump_if_equal, 2, 0, readv),     # -> deny
        (jump_if_equal, 1, 0, writev),    # -> deny
        (ret, 0, 0, 0x7FFF0000),          # SECCOMP_RET_ALLOW
        (ret, 0, 0, 0x00050000 | errno.EPERM),  # SECCOMP_RET_ERRNO
    ]
    filters = (_SockFilter * len(program))(*[_SockFilter(*i) for i in program])
    fprog = _SockFprog(len(program), filters)
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.prctl(38, 1, 0, 0, 0) == 0, os.strerror(ctypes.get_errno())  # NO_NEW_PRIVS
    set_filter, tsync = 1, 1  # SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC
    assert libc.syscall(seccomp, set_filter, tsync, ctypes.byref(fprog)) == 0, \
        os.strerror(ctypes.get_errno())


def can_read(pid: int) -> bool:
    """Whether process_vm_readv of a byte of `pid` (its argv on the stack) works from here."""
    libc = ctypes.CDLL(None, use_errno=True)
    with open(f"/proc/{pid}/stat") as stat:
        arg_start = int(stat.read().rsplit(")", 1)[1].split()[45])
    byte = ctypes.create_string_buffer(1)
    local = (ctypes.c_void_p * 2)(ctypes.cast(byte, ctypes.c_void_p), 1)
    remote = (ctypes.c_void_p * 2)(arg_start, 1)
    return libc.process_vm_readv(pid, local, 1, remote, 1, 0) == 1
