"""How fast this machine copies out of another process (process_vm_readv, what occl's single-copy
algorithms use for ordinary tensors) beside memcpy within one process: the limit of a single-copy
broadcast, whose bench floor column is memcpy.

    python scripts/cross_memory_rate.py [MiB ...]     (default: 8 32)

Medians of five rounds of ten copies each, alternating, on CPU 0; the other process only holds
its buffer.
"""

from __future__ import annotations

import ctypes
import os
import statistics
import sys
import time


class _IoVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


def measure(nbytes: int) -> dict[str, float]:
    """Seconds per copy of `nbytes`, median, for each way of copying."""
    libc = ctypes.CDLL(None, use_errno=True)
    read_end, write_end = os.pipe()
    holder = os.fork()
    if holder == 0:  # holds a touched buffer until killed, for at most a minute
        buffer = ctypes.create_string_buffer(b"\x01" * nbytes, nbytes)
        os.write(write_end, ctypes.addressof(buffer).to_bytes(8, "little"))
        time.sleep(60)
        os._exit(0)
    try:
        remote_address = int.from_bytes(os.read(read_end, 8), "little")
        os.sched_setaffinity(0, {0})
        target = ctypes.create_string_buffer(b"\x02" * nbytes, nbytes)
        local_source = ctypes.create_string_buffer(b"\x03" * nbytes, nbytes)

        def cross_memory():
            local = _IoVec(ctypes.addressof(target), nbytes)
            remote = _IoVec(remote_address, nbytes)
            copied = libc.process_vm_readv(holder, ctypes.byref(local), 1, ctypes.byref(remote),
                                           1, 0)
            if copied != nbytes:
                raise OSError(ctypes.get_errno(), f"process_vm_readv copied {copied} bytes")

        def memcpy():
            ctypes.memmove(target, local_source, nbytes)

        rounds: dict[str, list[float]] = {"memcpy": [], "process_vm_readv": []}
        for _ in range(5):
            for name, copy in (("memcpy", memcpy), ("process_vm_readv", cross_memory)):
                start = time.perf_counter()
                for _ in range(10):
                    copy()
                rounds[name].append((time.perf_counter() - start) / 10)
        return {name: statistics.median(times) for name, times in rounds.items()}
    finally:
        os.kill(holder, 9)
        os.waitpid(holder, 0)


def main(argv: list[str]) -> None:
    for mib in [int(a) for a in argv] or [8, 32]:
        seconds = measure(mib << 20)
        rates = {name: (mib << 20) / s / 1e9 for name, s in seconds.items()}
        print(f"{mib} MiB: memcpy {rates['memcpy']:.2f} GB/s, process_vm_readv "
              f"{rates['process_vm_readv']:.2f} GB/s "
              f"({rates['process_vm_readv'] / rates['memcpy']:.2f} of memcpy)")


if __name__ == "__main__":
    main(sys.argv[1:])
