"""What one row times: the op's buffers, its call, the value every rank expects, and the copy
floor beside it."""

from __future__ import annotations

import argparse
import datetime
import time

import torch
import torch.distributed as dist

OPS = (
    "all_reduce",
    "all_gather_into_tensor",
    "all_gather",  # the list form: one output tensor per rank
    "reduce_scatter_tensor",
    "reduce_scatter",  # the list form: one input tensor per rank
    "reduce",  # to rank 0
    "gather",  # to rank 0
    "scatter",  # from rank 0
    "broadcast",
    "all_to_all_single",
    "all_to_all",  # the list form: one tensor per peer each way
    "barrier",
    "send_recv",
    "ping_pong",  # a round trip between ranks 0 and 1: one way takes half its time
)
# Timed only when asked for (--ops new_group,new_subgroups,split_group): forming groups.
FORMATION_OPS = ("new_group", "new_subgroups", "split_group")
SIZELESS_OPS = ("barrier",) + FORMATION_OPS
REDUCING_OPS = ("all_reduce", "reduce_scatter_tensor", "reduce_scatter", "reduce")
# How a row calls its op: torch.distributed's blocking call; async_op=True and then wait(); or
# the functional op and wait_tensor, as DTensor, tensor parallelism and compiled code call it.
CALLS = ("sync", "async", "functional")
FUNCTIONAL_OPS = ("all_reduce", "all_gather_into_tensor", "reduce_scatter_tensor", "broadcast",
                  "all_to_all_single")
MIN_ITERS_PER_ROUND = 5
DTYPES = {"float32": torch.float32, "float64": torch.float64, "bfloat16": torch.bfloat16,
          "float16": torch.float16, "int32": torch.int32, "int64": torch.int64}
REDOPS = {"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN,
          "product": dist.ReduceOp.PRODUCT}


def parse_bytes(text: str) -> int:
    """A size as the options spell it: 8, 4K, 1.5M, 2G (bytes)."""
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    number = text.strip().upper().rstrip("B")
    try:
        if number and number[-1] in units:
            size = int(float(number[:-1]) * units[number[-1]])
        else:
            size = int(number)
    except ValueError:
        size = -1
    if size <= 0:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a size: a positive number of bytes, with K, M or G if you like")
    return size


def parse_sizes(text: str) -> list[int]:
    """A comma-separated list of sizes: 8,4K,64K,1M."""
    return [parse_bytes(size) for size in text.split(",")]


def sizes(min_bytes: int, max_bytes: int, factor: int) -> list[int]:
    found = []
    size = min_bytes
    while size <= max_bytes:
        found.append(size)
        size *= factor
    return found


def bus_factor(op: str, n: int) -> float:
    if op == "all_reduce":
        return 2 * (n - 1) / n
    if op in ("all_gather_into_tensor", "all_gather", "reduce_scatter_tensor", "reduce_scatter",
              "all_to_all_single", "all_to_all", "gather", "scatter"):
        return (n - 1) / n
    return 1.0


def reduced(redop: str, n: int) -> float:
    """What `redop` makes of the ranks' fills 1..n."""
    if redop == "sum":
        return n * (n + 1) / 2
    if redop == "max":
        return float(n)
    if redop == "min":
        return 1.0
    product = 1.0
    for value in range(1, n + 1):
        product *= value
    return product


def dist_all_reduce(tensor, redop: str, group, async_op: bool = False):
    return dist.all_reduce(tensor, op=REDOPS[redop], group=group, async_op=async_op)


def refuses_call(op: str, call: str):
    """Why `op` cannot be called as `call`, or None."""
    if call != "sync" and op in FORMATION_OPS:
        return f"{op}: forming a group is timed as a blocking call only (--call sync)"
    if call == "functional" and op not in FUNCTIONAL_OPS:
        return f"{op}: torch has no functional {op} (--call sync or async)"
    return None


def rate_peer(dtype: str) -> str:
    """The name occl's rounds in `dtype` are timed under, beside the peers (--rate-of)."""
    return f"occl[{dtype}]"


class Case:
    """Buffers and a call for one op at one size; `wrong()` counts mismatches after a call.

    `empty(count, dtype=...)` allocates the buffers the op reads and writes; `all_reduce(tensor,
    redop, group, async_op)` is the peer's all_reduce (torch.distributed's, or a library's own
    call); `call` is one of CALLS; `fresh`: every call's input is a new tensor (torch.empty,
    filled), allocated within the call's time."""

    def __init__(self, op: str, count: int, dtype: torch.dtype, redop: str, rank: int, n: int,
                 empty=torch.empty, all_reduce=dist_all_reduce, call: str = "sync",
                 fresh: bool = False):
        self.op, self.redop, self.rank, self.n, self.call = op, redop, rank, n, call
        self.fresh = fresh
        self.all_reduce = all_reduce
        fill = float(rank + 1)
        if op == "all_reduce":
            self.data = empty(count, dtype=dtype).fill_(fill)
            self.expected = torch.full((count,), reduced(redop, n), dtype=dtype)
        elif op == "all_gather_into_tensor":
            self.data = empty(count, dtype=dtype).fill_(fill)
            self.out = empty(count * n, dtype=dtype)
            self.expected = torch.arange(1, n + 1, dtype=dtype).repeat_interleave(count)
        elif op == "all_gather":
            self.data = empty(count, dtype=dtype).fill_(fill)
            self.out = [empty(count, dtype=dtype) for _ in range(n)]
            self.expected = torch.arange(1, n + 1, dtype=dtype).repeat_interleave(count)
        elif op == "gather":  # only rank 0 has outputs
            self.data = empty(count, dtype=dtype).fill_(fill)
            self.out = [empty(count, dtype=dtype) for _ in range(n)] if rank == 0 else None
            self.expected = torch.arange(1, n + 1, dtype=dtype).repeat_interleave(count)
        elif op == "scatter":  # only rank 0 has inputs: block j holds j + 1
            self.data = ([empty(count, dtype=dtype).fill_(j + 1) for j in range(n)]
                         if rank == 0 else None)
            self.out = empty(count, dtype=dtype)
            self.expected = torch.full((count,), fill, dtype=dtype)
        elif op == "reduce_scatter_tensor":
            self.data = empty(count * n, dtype=dtype).fill_(fill)
            self.out = empty(count, dtype=dtype)
            self.expected = torch.full((count,), reduced(redop, n), dtype=dtype)
        elif op == "reduce_scatter":
            self.data = [empty(count, dtype=dtype).fill_(fill) for _ in range(n)]
            self.out = empty(count, dtype=dtype)
            self.expected = torch.full((count,), reduced(redop, n), dtype=dtype)
        elif op == "reduce":
            self.data = empty(count, dtype=dtype).fill_(fill)
            self.expected = torch.full((count,), reduced(redop, n), dtype=dtype)
        elif op == "broadcast":
            self.data = empty(count, dtype=dtype).fill_(fill)
            self.expected = torch.full((count,), 1.0, dtype=dtype)
        elif op == "all_to_all_single":
            per = max(count // n, 1)
            self.data = empty(per * n, dtype=dtype).fill_(fill)
            self.out = empty(per * n, dtype=dtype)
            self.expected = torch.arange(1, n + 1, dtype=dtype).repeat_interleave(per)
        elif op == "all_to_all":
            per = max(count // n, 1)
            self.data = [empty(per, dtype=dtype).fill_(fill) for _ in range(n)]
            self.out = [empty(per, dtype=dtype) for _ in range(n)]
            self.expected = torch.arange(1, n + 1, dtype=dtype).repeat_interleave(per)
        elif op == "send_recv":
            self.data = empty(count, dtype=dtype).fill_(fill)
            self.expected = torch.full((count,), 1.0, dtype=dtype)
        elif op == "ping_pong":
            # Rank 0's message goes to rank 1 and back, into rank 0's `out`.
            self.data = empty(count, dtype=dtype).fill_(fill)
            self.out = empty(count, dtype=dtype).fill_(0)
            self.expected = torch.full((count,), 1.0, dtype=dtype)
        else:
            self.data = self.expected = None
        self.fill = fill
        self.formed = []  # the groups formation ops formed, destroyed after the round
        self.splits = 0  # names each split's halves apart

    def reset(self) -> None:
        if self.op in ("all_reduce", "reduce", "broadcast", "send_recv", "ping_pong"):
            self.data.fill_(self.fill)
        if self.op == "ping_pong":
            self.out.fill_(0)
        if self.formed:
            # Only once every rank has formed them all: gloo's links break if a peer's group
            # goes while it still connects.
            dist.barrier()
            for group in self.formed:
                if group in dist.distributed_c10d._world.pg_map:
                    dist.destroy_process_group(group)
                else:  # torch does not register a ProcessGroup.split_group's groups
                    group.shutdown()
            self.formed.clear()

    def input_bytes(self) -> int:
        inputs = self.data if isinstance(self.data, list) else [self.data]
        return sum(t.numel() * t.element_size() for t in inputs if t is not None)

    def run(self, group) -> None:
        if self.fresh and isinstance(self.data, list):
            self.data = [torch.empty_like(t).fill_(self.fill) for t in self.data]
        elif self.fresh and self.data is not None:
            self.data = torch.empty_like(self.data).fill_(self.fill)
        if self.op == "ping_pong":
            self._ping_pong(group, async_op=self.call == "async")
        elif self.call == "functional":
            self._run_functional(group)
        elif self.call == "async":
            work = self._issue(group, async_op=True)
            if work is not None:  # a rank outside send_recv's pair
                work.wait()
        else:
            self._issue(group, async_op=False)

    def _run_functional(self, group) -> None:
        ops, name, op = torch.ops._c10d_functional, group.group_name, self.op
        if op == "all_reduce":
            self.data = ops.wait_tensor(ops.all_reduce(self.data, self.redop, name))
        elif op == "all_gather_into_tensor":
            self.out = ops.wait_tensor(ops.all_gather_into_tensor(self.data, self.n, name))
        elif op == "reduce_scatter_tensor":
            self.out = ops.wait_tensor(
                ops.reduce_scatter_tensor(self.data, self.redop, self.n, name))
        elif op == "broadcast":
            self.data = ops.wait_tensor(ops.broadcast(self.data, 0, name))
        else:
            splits = [self.data.numel() // self.n] * self.n
            self.out = ops.wait_tensor(ops.all_to_all_single(self.data, splits, splits, name))

    def _ping_pong(self, group, async_op: bool) -> None:
        """One round trip between ranks 0 and 1 (two one-way messages); other ranks idle."""
        send, recv = (dist.isend, dist.irecv) if async_op else (dist.send, dist.recv)

        def done(work):
            if async_op:
                work.wait()

        if self.rank == 0:
            done(send(self.data, dst=1, group=group))
            done(recv(self.out, src=1, group=group))
        elif self.rank == 1:
            done(recv(self.data, src=0, group=group))
            done(send(self.data, dst=0, group=group))

    def _issue(self, group, async_op: bool):
        """The op through torch.distributed; its Work when `async_op`."""
        op = self.op
        if op == "all_reduce":
            return self.all_reduce(self.data, self.redop, group, async_op)
        if op == "all_gather_into_tensor":
            return dist.all_gather_into_tensor(self.out, self.data, group=group, async_op=async_op)
        if op == "all_gather":
            return dist.all_gather(self.out, self.data, group=group, async_op=async_op)
        if op == "gather":
            return dist.gather(self.data, self.out, dst=0, group=group, async_op=async_op)
        if op == "scatter":
            return dist.scatter(self.out, self.data, src=0, group=group, async_op=async_op)
        if op == "reduce_scatter_tensor":
            return dist.reduce_scatter_tensor(self.out, self.data, op=REDOPS[self.redop],
                                              group=group, async_op=async_op)
        if op == "reduce_scatter":
            return dist.reduce_scatter(self.out, self.data, op=REDOPS[self.redop], group=group,
                                       async_op=async_op)
        if op == "reduce":
            return dist.reduce(self.data, dst=0, op=REDOPS[self.redop], group=group,
                               async_op=async_op)
        if op == "broadcast":
            return dist.broadcast(self.data, src=0, group=group, async_op=async_op)
        if op == "all_to_all_single":
            return dist.all_to_all_single(self.out, self.data, group=group, async_op=async_op)
        if op == "all_to_all":
            return dist.all_to_all(self.out, self.data, group=group, async_op=async_op)
        if op == "send_recv":
            # Rank 0 sends to rank 1; both time the pair. Other ranks idle.
            if self.rank == 0:
                return (dist.isend if async_op else dist.send)(self.data, dst=1, group=group)
            if self.rank == 1:
                return (dist.irecv if async_op else dist.recv)(self.data, src=0, group=group)
            return None
        if op == "barrier":
            return dist.barrier(group=group, async_op=async_op)
        if op == "new_group":
            self.formed.append(dist.new_group(backend=dist.get_backend(group)))
        elif op in ("split_group", "new_subgroups"):
            first = (self.n + 1) // 2  # the second half's lowest rank
            halves = [list(range(first)), list(range(first, self.n))]
            mine = int(self.rank >= first)
            backend = dist.get_backend(group)
            # gloo's ProcessGroup.split_group halves time out on their first collective (torch
            # 2.13): its split_group row forms the halves with new_group, as its users do.
            if op == "split_group" and backend != "gloo":
                self.splits += 1
                self.formed.append(group.split_group(
                    halves[mine], timeout=datetime.timedelta(seconds=120),
                    group_name=f"bench-{backend}-{self.splits}-{mine}"))
            else:
                for members in halves:
                    formed = dist.new_group(members, backend=backend)
                    if self.rank in members:
                        self.formed.append(formed)
        return None

    def result(self):
        if self.op in ("all_reduce", "broadcast"):
            return self.data
        if self.op == "reduce":  # other ranks' tensors hold whatever the backend left there
            return self.data if self.rank == 0 else None
        if self.op == "send_recv":
            return self.data if self.rank == 1 else None
        if self.op == "ping_pong":
            return {0: self.out, 1: self.data}.get(self.rank)
        if self.op in ("all_to_all", "all_gather", "gather"):
            return torch.cat(self.out) if self.out is not None else None
        return getattr(self, "out", None)

    def wrong(self) -> int:
        result = self.result()
        if result is None or self.expected is None:
            return 0
        return int((result != self.expected).sum().item())


def iterations(iters: int, nbytes: int) -> int:
    """Calls per round: `iters`, fewer above 1 MiB to keep a sweep short, but never one alone.

    A single call after the other backend's round times how fast an idle (virtual) CPU wakes
    up more than the op: on the 2-vCPU test VM a 4 MiB broadcast took 264 us back to back and
    558 us after 5 ms asleep. Back-to-back calls, as nccl-tests times them, measure the op.
    """
    scaled = int(iters * (1 << 20) / max(nbytes, 1 << 20))
    return max(min(iters, MIN_ITERS_PER_ROUND), scaled)


def floor_bytes(op: str, nbytes: int, rank: int, n: int) -> int:
    """Bytes `rank` copies in the floor: the bytes the op writes into the ranks' outputs, shared
    evenly by the ranks that take part. Reductions also read n inputs; the floor leaves that out."""
    if op in SIZELESS_OPS:
        return 0
    if op in ("all_gather_into_tensor", "all_gather"):
        return nbytes * n
    if op == "broadcast":  # the root's tensor is not written
        return nbytes * (n - 1) // n
    if op == "reduce":  # only the root's tensor is written
        return nbytes // n
    if op == "send_recv":  # one message, between ranks 0 and 1, which could share its copy
        return nbytes // 2 if rank < 2 else 0
    if op == "ping_pong":  # two messages, one after the other
        return 2 * nbytes if rank < 2 else 0
    return nbytes


class Floor:
    """The floor's round: copy this rank's share of the bytes, at the same time as the others;
    first allocate and fill `fresh_bytes`, as a call with a new input tensor does."""

    def __init__(self, nbytes: int, fresh_bytes: int = 0):
        self.source = torch.ones(nbytes, dtype=torch.uint8)
        self.destination = torch.empty_like(self.source)
        self.fresh_bytes = fresh_bytes

    def run(self, group) -> None:
        if self.fresh_bytes:
            torch.empty(self.fresh_bytes, dtype=torch.uint8).fill_(1)
        self.destination.copy_(self.source)

    def reset(self) -> None:
        pass


def time_round(case, group, iters: int, start_group=None) -> float:
    """Mean seconds per call over `iters` calls, started together on every rank (through
    `start_group`, `group` unless said: a no-op backend's barrier does not wait)."""
    dist.barrier(group=start_group or group)
    start = time.perf_counter()
    for _ in range(iters):
        case.run(group)
    elapsed = time.perf_counter() - start
    case.reset()
    return elapsed / iters


def memcpy_seconds(nbytes: int) -> float:
    """One core's warm copy of `nbytes` into another buffer (torch's copy_), best of 5."""
    src = torch.ones(max(nbytes // 4, 1))
    dst = torch.empty_like(src)
    dst.copy_(src)
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        dst.copy_(src)
        best = min(best, time.perf_counter() - start)
    return best
