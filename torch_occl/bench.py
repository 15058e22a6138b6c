"""occl and gloo side by side, in the same processes, nccl-tests style.

    python -m torch_occl.bench [--world-size 2] [--ops all_reduce,broadcast] [--min-bytes 8]
                               [--max-bytes 64M] [--factor 4] [--dtype float32] [--iters 20]
                               [--rounds 5] [--transport tcp] [--bind] [--shared-tensors]
                               [--json FILE] [--plot FILE.png]

Every rank joins a gloo group and an occl group over the same ranks. For each op and size the
benchmark alternates rounds of `--iters` back-to-back calls on each backend (fewer above 1 MiB,
but at least 5) and reports the median round, so both see the same machine noise. Results are
checked (#wrong counts elements that differ from the value computed in Python). busbw uses
nccl-tests' factors: allreduce 2(n-1)/n; allgather, reduce-scatter and alltoall (n-1)/n;
broadcast and send/recv 1. `--ops new_group` times forming a group of every rank (destroyed after
the round; with OCCL_AUTH_KEY set, occl's groups form with the key's handshake); `new_subgroups`
forming its two halves with new_group; `split_group` splitting it in those halves
(ProcessGroup.split_group: occl's form on the group's links; gloo's row forms them with
new_group, as gloo's split halves time out on their first collective in torch 2.13). List
split_group first: torch clones the group's store for every split, and a FileStore's clone (the
bench's) reads every key written so far, new_group's included.

floor(us) is a plain copy timed in rounds of its own between the backends' (so it finds the
caches as cold as they do): every rank at once copies, with `copy_`, its share of the bytes the
op writes into the ranks' outputs (`_floor_bytes`); a round lasts until the last rank is done.
A copy-bound collective cannot run much faster; an in-place reduction, which writes where it has
just read, can beat it a little. bound is gloo's time over the floor: the speed-up of a backend
that ran at the floor. The header's single-core memcpy is one core's warm copy of `--max-bytes`
(1 MiB at least; best of 5, measured at the end).

`--bind` pins each rank, with every thread it starts, to one CPU (rank modulo the CPUs it may
use), as MPI launchers and torchrun's NUMA binding do: both backends then run under the same
binding, and a rank's threads never wait for another CPU to wake up (see docs/PERFORMANCE.md).
"""

from __future__ import annotations

import argparse
import datetime
import functools
import json
import os
import statistics
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

OPS = (
    "all_reduce",
    "all_gather_into_tensor",
    "reduce_scatter_tensor",
    "broadcast",
    "all_to_all_single",
    "barrier",
    "send_recv",
)
# Timed only when asked for (--ops new_group,new_subgroups,split_group): forming groups.
FORMATION_OPS = ("new_group", "new_subgroups", "split_group")
SIZELESS_OPS = ("barrier",) + FORMATION_OPS
MIN_ITERS_PER_ROUND = 5
DTYPES = {"float32": torch.float32, "float64": torch.float64, "bfloat16": torch.bfloat16,
          "float16": torch.float16, "int32": torch.int32, "int64": torch.int64}


def _parse_bytes(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper().rstrip("B")
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


def _bus_factor(op: str, n: int) -> float:
    if op == "all_reduce":
        return 2 * (n - 1) / n
    if op in ("all_gather_into_tensor", "reduce_scatter_tensor", "all_to_all_single"):
        return (n - 1) / n
    return 1.0


class _Case:
    """Buffers and a call for one op at one size; `wrong()` counts mismatches after a call."""

    def __init__(self, op: str, count: int, dtype: torch.dtype, rank: int, n: int,
                 empty=torch.empty):
        """`empty(count, dtype=...)` allocates the buffers the op reads and writes."""
        self.op, self.rank, self.n = op, rank, n
        fill = float(rank + 1)
        if op == "all_reduce":
            self.data = empty(count, dtype=dtype).fill_(fill)
            self.expected = torch.full((count,), float(n * (n + 1) // 2), dtype=dtype)
        elif op == "all_gather_into_tensor":
            self.data = empty(count, dtype=dtype).fill_(fill)
            self.out = empty(count * n, dtype=dtype)
            self.expected = torch.arange(1, n + 1, dtype=dtype).repeat_interleave(count)
        elif op == "reduce_scatter_tensor":
            self.data = empty(count * n, dtype=dtype).fill_(fill)
            self.out = empty(count, dtype=dtype)
            self.expected = torch.full((count,), float(n * (n + 1) // 2), dtype=dtype)
        elif op == "broadcast":
            self.data = empty(count, dtype=dtype).fill_(fill)
            self.expected = torch.full((count,), 1.0, dtype=dtype)
        elif op == "all_to_all_single":
            per = max(count // n, 1)
            self.data = empty(per * n, dtype=dtype).fill_(fill)
            self.out = empty(per * n, dtype=dtype)
            self.expected = torch.arange(1, n + 1, dtype=dtype).repeat_interleave(per)
        elif op == "send_recv":
            self.data = empty(count, dtype=dtype).fill_(fill)
            self.expected = torch.full((count,), 1.0, dtype=dtype)
        else:
            self.data = self.expected = None
        self.fill = fill
        self.formed = []  # the groups formation ops formed, destroyed after the round
        self.splits = 0  # names each split's halves apart

    def reset(self) -> None:
        if self.op in ("all_reduce", "broadcast", "send_recv"):
            self.data.fill_(self.fill)
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

    def run(self, group) -> None:
        op = self.op
        if op == "all_reduce":
            dist.all_reduce(self.data, group=group)
        elif op == "all_gather_into_tensor":
            dist.all_gather_into_tensor(self.out, self.data, group=group)
        elif op == "reduce_scatter_tensor":
            dist.reduce_scatter_tensor(self.out, self.data, group=group)
        elif op == "broadcast":
            dist.broadcast(self.data, src=0, group=group)
        elif op == "all_to_all_single":
            dist.all_to_all_single(self.out, self.data, group=group)
        elif op == "new_group":
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
        elif op == "send_recv":
            # Rank 0 sends to rank 1; both time the pair. Other ranks idle.
            if self.rank == 0:
                dist.send(self.data, dst=1, group=group)
            elif self.rank == 1:
                dist.recv(self.data, src=0, group=group)
        else:
            dist.barrier(group=group)

    def result(self):
        if self.op in ("all_reduce", "broadcast"):
            return self.data
        if self.op == "send_recv":
            return self.data if self.rank == 1 else None
        return getattr(self, "out", None)

    def wrong(self) -> int:
        result = self.result()
        if result is None or self.expected is None:
            return 0
        return int((result != self.expected).sum().item())


def _iterations(iters: int, nbytes: int) -> int:
    """Calls per round: `iters`, fewer above 1 MiB to keep a sweep short, but never one alone.

    A single call after the other backend's round times how fast an idle (virtual) CPU wakes
    up more than the op: on the 2-vCPU test VM a 4 MiB broadcast took 264 us back to back and
    558 us after 5 ms asleep. Back-to-back calls, as nccl-tests times them, measure the op.
    """
    scaled = int(iters * (1 << 20) / max(nbytes, 1 << 20))
    return max(min(iters, MIN_ITERS_PER_ROUND), scaled)


def _floor_bytes(op: str, nbytes: int, rank: int, n: int) -> int:
    """Bytes `rank` copies in the floor: the bytes the op writes into the ranks' outputs, shared
    evenly by the ranks that take part. Reductions also read n inputs; the floor leaves that out."""
    if op in SIZELESS_OPS:
        return 0
    if op == "all_gather_into_tensor":
        return nbytes * n
    if op == "broadcast":  # the root's tensor is not written
        return nbytes * (n - 1) // n
    if op == "send_recv":  # one message, between ranks 0 and 1, which could share its copy
        return nbytes // 2 if rank < 2 else 0
    return nbytes


class _Floor:
    """The floor's round: copy this rank's share of the bytes, at the same time as the others."""

    def __init__(self, nbytes: int):
        self.source = torch.ones(nbytes, dtype=torch.uint8)
        self.destination = torch.empty_like(self.source)

    def run(self, group) -> None:
        self.destination.copy_(self.source)

    def reset(self) -> None:
        pass


def _time_round(case, group, iters: int) -> float:
    """Mean seconds per call over `iters` calls, started together on every rank."""
    dist.barrier(group=group)
    start = time.perf_counter()
    for _ in range(iters):
        case.run(group)
    elapsed = time.perf_counter() - start
    case.reset()
    return elapsed / iters


def _memcpy_seconds(nbytes: int) -> float:
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


def _worker(rank: int, world_size: int, init_file: str, args, results_file: str) -> None:
    if args.bind:  # before any thread starts, so that all of them inherit it
        allowed = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {allowed[rank % len(allowed)]})
    import torch_occl

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank,
                            world_size=world_size, timeout=datetime.timedelta(seconds=120))
    groups = {"occl": dist.new_group(backend=torch_occl.BACKEND_NAME),
              "gloo": dist.new_group(backend="gloo")}
    # gloo's buffers are ordinary; occl's, with --shared-tensors, come from shared_empty.
    empty = {"occl": torch.empty, "gloo": torch.empty}
    if args.shared_tensors:
        empty["occl"] = functools.partial(torch_occl.shared_empty, group=groups["occl"])
    dtype = DTYPES[args.dtype]
    element = torch.empty((), dtype=dtype).element_size()
    sizes = []
    size = args.min_bytes
    while size <= args.max_bytes:
        sizes.append(size)
        size *= args.factor
    rows = []
    for op in args.ops:
        if op == "send_recv" and world_size < 2:
            continue
        for nbytes in ([0] if op in SIZELESS_OPS else sizes):
            count = max(nbytes // element, 1) if op not in SIZELESS_OPS else 0
            cases = {name: _Case(op, count, dtype, rank, world_size, empty[name])
                     for name in groups}
            # No floor where the op writes nothing (a barrier, a broadcast to itself). Its rounds
            # start together through the gloo group, as gloo's do.
            if _floor_bytes(op, nbytes, 0, world_size) > 0:
                cases["floor"] = _Floor(_floor_bytes(op, nbytes, rank, world_size))
            group_of = dict(groups, floor=groups["gloo"])
            iters = _iterations(args.iters, nbytes)
            wrong = 0
            for name, case in cases.items():  # warm up, and check occl once
                case.run(group_of[name])
                if name == "occl":
                    wrong = case.wrong()
                case.reset()
            times = {name: [] for name in cases}
            for _ in range(args.rounds):
                for name, case in cases.items():
                    times[name].append(_time_round(case, group_of[name], iters))
            wrong_total = torch.tensor([wrong])
            dist.all_reduce(wrong_total, group=groups["gloo"])
            if "floor" in times:  # a round of copies lasts until the slowest rank's is done
                slowest = torch.tensor(times["floor"], dtype=torch.float64)
                dist.all_reduce(slowest, op=dist.ReduceOp.MAX, group=groups["gloo"])
                times["floor"] = slowest.tolist()
            median = {name: statistics.median(t) for name, t in times.items()}
            algbw = {name: (nbytes / t / 1e9 if t > 0 else 0.0) for name, t in median.items()}
            factor = _bus_factor(op, world_size)
            rows.append({
                "op": op, "bytes": nbytes, "count": count, "dtype": args.dtype, "iters": iters,
                "redop": "sum" if op in ("all_reduce", "reduce_scatter_tensor") else "none",
                "occl_us": median["occl"] * 1e6, "gloo_us": median["gloo"] * 1e6,
                "occl_algbw": algbw["occl"], "occl_busbw": algbw["occl"] * factor,
                "gloo_busbw": algbw["gloo"] * factor,
                "wrong": int(wrong_total.item()),
                "speedup": median["gloo"] / median["occl"] if median["occl"] > 0 else 0.0,
                "floor_us": median["floor"] * 1e6 if "floor" in median else None,
                "bound": median["gloo"] / median["floor"] if median.get("floor") else None,
            })
    cpus = [None] * world_size
    dist.all_gather_object(cpus, sorted(os.sched_getaffinity(0)), group=groups["gloo"])
    if rank == 0:
        # What one core's warm copy costs, measured once the ranks are done.
        largest = args.max_bytes if args.max_bytes >= (1 << 20) else 1 << 20
        memcpy = largest / _memcpy_seconds(largest) / 1e9
        with open(results_file, "w") as out:
            json.dump({"world_size": world_size, "memcpy_gbps": memcpy,
                       "transport": os.environ.get("OCCL_TRANSPORT", "auto"),
                       "shared_tensors": args.shared_tensors,
                       "cpus_per_rank": cpus, "rows": rows}, out)
    dist.destroy_process_group()


def _print_table(report: dict) -> None:
    shared = ", occl's tensors from shared_empty" if report.get("shared_tensors") else ""
    print(f"# world size {report['world_size']}, occl transport {report['transport']}{shared}, "
          f"single-core memcpy {report['memcpy_gbps']:.2f} GB/s, "
          f"CPUs per rank {report['cpus_per_rank']}")
    header = (f"{'op':>24} {'size(B)':>10} {'count':>10} {'type':>8} {'redop':>5} "
              f"{'occl(us)':>10} {'algbw':>7} {'busbw':>7} {'#wrong':>6} "
              f"{'gloo(us)':>10} {'busbw':>7} {'speedup':>8} {'floor(us)':>10} {'bound':>7}")
    print(header)
    for r in report["rows"]:
        print(f"{r['op']:>24} {r['bytes']:>10} {r['count']:>10} {r['dtype']:>8} {r['redop']:>5} "
              f"{r['occl_us']:>10.1f} {r['occl_algbw']:>7.2f} {r['occl_busbw']:>7.2f} "
              f"{r['wrong']:>6} {r['gloo_us']:>10.1f} {r['gloo_busbw']:>7.2f} "
              f"{r['speedup']:>7.2f}x {_floor_columns(r)}")


def _floor_columns(row: dict) -> str:
    if row["bound"] is None:  # no floor, or one too short to time
        return f"{'-':>10} {'-':>7}"
    return f"{row['floor_us']:>10.1f} {row['bound']:>6.2f}x"


def _plot(report: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ops = sorted({r["op"] for r in report["rows"] if r["op"] not in SIZELESS_OPS})
    fig, axes = plt.subplots(len(ops), 1, figsize=(7, 3 * len(ops)), squeeze=False)
    for axis, op in zip(axes[:, 0], ops):
        rows = [r for r in report["rows"] if r["op"] == op]
        sizes = [r["bytes"] for r in rows]
        axis.plot(sizes, [r["occl_busbw"] for r in rows], marker="o", label="occl")
        axis.plot(sizes, [r["gloo_busbw"] for r in rows], marker="o", label="gloo")
        axis.set_xscale("log", base=2)
        axis.set_title(op)
        axis.set_xlabel("bytes")
        axis.set_ylabel("busbw (GB/s)")
        axis.legend()
    fig.tight_layout()
    fig.savefig(path)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--ops", default=",".join(OPS),
                        help=f"comma-separated, from {OPS} (the default) and {FORMATION_OPS}")
    parser.add_argument("--min-bytes", type=_parse_bytes, default=8)
    parser.add_argument("--max-bytes", type=_parse_bytes, default=64 << 20)
    parser.add_argument("--factor", type=int, default=4)
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="float32")
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--transport", choices=("auto", "tcp", "shm"),
                        help="sets OCCL_TRANSPORT for the run")
    parser.add_argument("--bind", action="store_true",
                        help="pin rank r to CPU r modulo the CPUs available (both backends)")
    parser.add_argument("--shared-tensors", action="store_true",
                        help="allocate occl's buffers with torch_occl.shared_empty")
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--plot", help="also plot busbw against size into this PNG (matplotlib)")
    args = parser.parse_args(argv)
    args.ops = [op.strip() for op in args.ops.split(",") if op.strip()]
    unknown = [op for op in args.ops if op not in OPS + FORMATION_OPS]
    if unknown:
        parser.error(f"unknown ops {unknown}; choose from {OPS + FORMATION_OPS}")
    if args.transport:
        os.environ["OCCL_TRANSPORT"] = args.transport
    with tempfile.TemporaryDirectory() as folder:
        results = os.path.join(folder, "results.json")
        mp.start_processes(_worker, args=(args.world_size, os.path.join(folder, "init"), args,
                                          results),
                           nprocs=args.world_size, start_method="spawn")
        with open(results) as f:
            report = json.load(f)
    _print_table(report)
    if args.json:
        with open(args.json, "w") as out:
            json.dump(report, out, indent=2)
    if args.plot:
        _plot(report, args.plot)
    if any(r["wrong"] for r in report["rows"]):
        raise SystemExit("some results were wrong")
    return report


if __name__ == "__main__":
    main()
