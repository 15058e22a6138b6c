"""The backends the bench times beside occl, each only where it really does the op.

Every peer is found, never installed: one that cannot run here is skipped with the reason, the
same on every rank (they agree on it before any of them forms a group)."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib.util
import io
import os
from typing import Callable, Optional

import torch
import torch.distributed as dist

from .cases import FORMATION_OPS, dist_all_reduce

PEERS = ("occl", "gloo", "deepspeed", "deepspeed_op", "occl_mpi", "fake")
# DeepSpeed through its Python wrapper, and its kernel called directly (torch.ops, no c10d: the
# whole op the latency targets compare occl's own share with). Both start DeepSpeed once.
DEEPSPEED_PEERS = ("deepspeed", "deepspeed_op")
UNDER_MPIRUN = "OMPI_COMM_WORLD_SIZE" in os.environ
MPIRUN_COMMAND = ("mpirun -n 2 -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=29500 "
                  "python -m torch_occl.bench")
# DeepSpeed's shared-memory kernel: the dtypes it reduces, and the vector level each needs
# (deepspeed/comm/torch.py: below it, inference_all_reduce quietly calls the default group).
DEEPSPEED_KERNEL_LEVEL = {"float32": 1, "bfloat16": 2, "float16": 2}
DEEPSPEED_KERNEL_NEEDS = {1: "avx2", 2: "avx512bw"}


class Unavailable(Exception):
    """Why a peer cannot run here."""


@dataclasses.dataclass
class Peer:
    name: str
    group: Optional[dist.ProcessGroup]  # what its calls go to (None: the default group)
    start_group: Optional[dist.ProcessGroup]  # what its rounds start together through
    refuses: Callable[[str, str], Optional[str]] = lambda op, dtype: None  # why not, per op
    checked: bool = True  # a no-op backend is timed, never checked
    empty: Callable = torch.empty
    all_reduce: Callable = dist_all_reduce
    blocking_only: bool = False  # its call has no asynchronous or functional form

    def refuses_row(self, op: str, dtype: str, call: str) -> Optional[str]:
        """Why this peer does not time `op` called as `call`, or None."""
        if call != "sync" and self.blocking_only:
            return f"--call {call}: {self.name}'s op is a blocking call only"
        return self.refuses(op, dtype)


def _refuses_formation(name: str) -> Callable[[str, str], Optional[str]]:
    def refuses(op: str, dtype: str) -> Optional[str]:
        return f"{op}: the bench forms groups of occl and gloo only" if op in FORMATION_OPS else None
    return refuses


def deepspeed_refuses(op: str, dtype: str, kernel_level: int) -> Optional[str]:
    """Where DeepSpeed's inference_all_reduce would not do the op with its own kernel."""
    if op != "all_reduce":
        return f"{op}: DeepSpeed's shared-memory op is an all_reduce only"
    if dtype not in DEEPSPEED_KERNEL_LEVEL:
        return f"{dtype}: DeepSpeed's op returns it unreduced (float32, bfloat16, float16 only)"
    needed = DEEPSPEED_KERNEL_LEVEL[dtype]
    if kernel_level < needed:
        return (f"{dtype}: DeepSpeed's kernel needs {DEEPSPEED_KERNEL_NEEDS[needed]}, which this "
                "CPU lacks; it would fall back to the default (gloo) group")
    return None


def _form_occl(rank, world_size, gloo, shared_tensors) -> Peer:
    import torch_occl

    group = dist.new_group(backend=torch_occl.BACKEND_NAME)
    # With --shared-tensors occl's buffers come from shared_empty; everyone else's are ordinary.
    empty = (functools.partial(torch_occl.shared_empty, group=group) if shared_tensors
             else torch.empty)
    return Peer("occl", group, group, empty=empty)


def _form_gloo(rank, world_size, gloo, shared_tensors) -> Peer:
    return Peer("gloo", gloo, gloo)


def _fake_available(world_size) -> None:
    if importlib.util.find_spec("torch.testing._internal.distributed.fake_pg") is None:
        raise Unavailable("this torch has no torch.testing._internal.distributed.fake_pg")


def _form_fake(rank, world_size, gloo, shared_tensors) -> Peer:
    import torch.testing._internal.distributed.fake_pg  # noqa: F401  registers "fake"

    return Peer("fake", dist.new_group(backend="fake"), gloo, _refuses_formation("fake"),
                checked=False)


def _deepspeed_available(world_size) -> None:
    if importlib.util.find_spec("deepspeed") is None:
        raise Unavailable("not installed (pip install deepspeed)")


@functools.cache
def _start_deepspeed(rank, world_size) -> int:
    """Starts DeepSpeed's communication once per process; returns its kernel's vector level."""
    # Its kernel takes every rank for one host only when LOCAL_SIZE says so (else it segfaults);
    # MASTER_ADDR and MASTER_PORT name its /dev/shm files (the bench removes them after): when
    # the bench started the ranks, its own process id keeps two runs' files apart.
    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    os.environ["LOCAL_SIZE"] = str(world_size)
    os.environ["LOCAL_RANK"] = str(rank)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(os.getppid()))
    import deepspeed.comm

    with contextlib.redirect_stdout(io.StringIO()):  # its build's news, from every rank
        deepspeed.comm.init_distributed(dist_backend="gloo", verbose=False)
    backend = deepspeed.comm.comm.cdb
    return getattr(backend, "shm_vector_kernel_level", 0) if backend.shm_comm_op else 0


def _form_deepspeed(rank, world_size, gloo, shared_tensors) -> Peer:
    level = _start_deepspeed(rank, world_size)
    import deepspeed.comm

    reduce_ops = {"sum": deepspeed.comm.ReduceOp.SUM, "max": deepspeed.comm.ReduceOp.MAX,
                  "min": deepspeed.comm.ReduceOp.MIN, "product": deepspeed.comm.ReduceOp.PRODUCT}

    def all_reduce(tensor, redop, group, async_op):
        deepspeed.comm.inference_all_reduce(tensor, op=reduce_ops[redop])

    return Peer("deepspeed", None, gloo, lambda op, dtype: deepspeed_refuses(op, dtype, level),
                all_reduce=all_reduce, blocking_only=True)


def _form_deepspeed_op(rank, world_size, gloo, shared_tensors) -> Peer:
    level = _start_deepspeed(rank, world_size)
    kernel = torch.ops.deepspeed.inference_all_reduce_  # it sums, whatever the reduce op

    def all_reduce(tensor, redop, group, async_op):
        kernel(tensor)

    return Peer("deepspeed_op", None, gloo, lambda op, dtype: deepspeed_refuses(op, dtype, level),
                all_reduce=all_reduce, blocking_only=True)


def deepspeed_files() -> str:
    """The /dev/shm files DeepSpeed's kernel leaves for this run's MASTER_ADDR and MASTER_PORT."""
    return (f"/dev/shm/deepspeed_allreduce_buffer_{os.getuid()}_"
            f"{os.environ.get('MASTER_ADDR', '')}_{os.environ.get('MASTER_PORT', '')}_*")


def _occl_mpi_available(world_size) -> None:
    if not UNDER_MPIRUN:
        raise Unavailable(f"the bench was not started by mpirun ({MPIRUN_COMMAND})")
    if importlib.util.find_spec("occl_mpi") is None:
        raise Unavailable("not installed (pip install --no-build-isolation backends/occl_mpi)")


def _form_occl_mpi(rank, world_size, gloo, shared_tensors) -> Peer:
    import occl_mpi

    return Peer("occl_mpi", dist.new_group(backend=occl_mpi.BACKEND_NAME), None,
                _refuses_formation("occl_mpi"))


def _always(world_size) -> None:
    pass


# name: (raises Unavailable where it cannot run, forms it on every rank)
_SETUP = {
    "occl": (_always, _form_occl),
    "gloo": (_always, _form_gloo),
    "deepspeed": (_deepspeed_available, _form_deepspeed),
    "deepspeed_op": (_deepspeed_available, _form_deepspeed_op),
    "occl_mpi": (_occl_mpi_available, _form_occl_mpi),
    "fake": (_fake_available, _form_fake),
}


def form(names, rank: int, world_size: int, gloo, shared_tensors: bool, say=print):
    """The peers in `names` this run can time, formed on every rank, and {name: why not} for
    the others. `say` reports what takes long (rank 0's progress)."""
    peers, skipped = [], {}
    for name in names:
        check, build = _SETUP[name]
        reason = None
        try:
            check(world_size)
            started = _start_deepspeed.cache_info().currsize > 0
            if name in DEEPSPEED_PEERS and rank == 0 and not started:
                say("# deepspeed: loading its shared-memory op (its first build takes minutes)")
            peer = build(rank, world_size, gloo, shared_tensors)
        except Unavailable as why:
            reason = str(why)
        except Exception as error:  # a peer that fails to start is reported, not fatal
            first_line = str(error).strip().split("\n")[0]
            reason = f"failed to start: {type(error).__name__}: {first_line}"
        reasons = [None] * world_size
        dist.all_gather_object(reasons, reason, group=gloo)
        reason = next((why for why in reasons if why), None)
        if reason:
            skipped[name] = reason
        else:
            peers.append(peer)
    return peers, skipped
