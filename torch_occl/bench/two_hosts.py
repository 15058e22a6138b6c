"""Collectives between two "hosts": Linux network namespaces joined by a veth pair, so the ranks of
one host share memory and reach the other host's only over the veth, optionally rate-limited like
a real network (tc's token bucket on both ends). Needs root and iproute2.

    python -m torch_occl.bench.two_hosts --per-host 2 --sizes 1M,4M,16M,64M --rate 10gbit

Each launch times occl and gloo in the same processes, alternating rounds (medians, the slowest
rank's time per call), and checks occl's results. occl runs once with its two-level algorithms
and once flat (OCCL_HIERARCHICAL=0), in alternating launches. A size is the all_reduce's and the
broadcast's tensor, the all-gather's input, the reduce-scatter's output. With --rate the floor
column is the time the link takes for the bytes that must cross it one way: each host's sum for
all_reduce, the tensor for broadcast, each host's blocks for the other two.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
import uuid
from typing import NamedTuple

from .cases import parse_bytes

ADDRESSES = {"a": "10.231.7.1", "b": "10.231.7.2"}


class Host(NamedTuple):
    namespace: str  # `ip netns exec <namespace> ...` runs a command on the host
    interface: str  # its end of the veth pair (gloo needs it named: GLOO_SOCKET_IFNAME)


class NamespacesUnavailable(RuntimeError):
    """This machine cannot make network namespaces (not root, no iproute2, or refused)."""


def _ip(*args):
    return subprocess.run(["ip", *args], check=True, capture_output=True, text=True, timeout=20)


@contextlib.contextmanager
def network_namespaces(rate: str | None = None):
    """{"a": Host, "b": Host}, wired with a veth pair (ADDRESSES), each end shaped to `rate`
    (tc's notation: "10gbit") if given; removed afterwards."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        raise NamespacesUnavailable("needs root and iproute2 (`ip netns`) to make network namespaces")
    tag = uuid.uuid4().hex[:6]
    names = {host: f"occl-{host}-{tag}" for host in ADDRESSES}
    veth = {host: f"vo{host}{tag}" for host in ADDRESSES}
    try:
        try:
            for ns in names.values():
                _ip("netns", "add", ns)
                _ip("-n", ns, "link", "set", "lo", "up")
            _ip("link", "add", veth["a"], "type", "veth", "peer", "name", veth["b"])
            for host, ns in names.items():
                _ip("link", "set", veth[host], "netns", ns)
                _ip("-n", ns, "addr", "add", f"{ADDRESSES[host]}/24", "dev", veth[host])
                _ip("-n", ns, "link", "set", veth[host], "up")
                if rate:
                    subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev",
                                    veth[host], "root", "tbf", "rate", rate, "burst", "4mb",
                                    "latency", "50ms"],
                                   check=True, capture_output=True, text=True, timeout=20)
        except subprocess.CalledProcessError as e:
            raise NamespacesUnavailable(f"cannot make network namespaces here: {e.stderr.strip()}")
        yield {host: Host(names[host], veth[host]) for host in ADDRESSES}
    finally:
        for ns in names.values():
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)  # takes the veth along


def _rank(args) -> None:
    """One rank, started inside its host's namespace: prints `result <json>` on rank 0."""
    import torch
    import torch.distributed as dist

    import torch_occl

    torch.set_num_threads(1)
    dist.init_process_group(torch_occl.BACKEND_NAME, init_method=f"tcp://{args.master}",
                            rank=args.rank, world_size=args.world_size,
                            timeout=datetime.timedelta(seconds=300))
    gloo = dist.new_group(backend="gloo")
    groups = {"occl": dist.group.WORLD, "gloo": gloo}
    ws = args.world_size
    rows = []
    for nbytes in args.sizes:
        data = torch.full((nbytes // 4,), float(args.rank))
        whole = torch.full((ws * nbytes // 4,), float(args.rank))
        call = {"all_reduce": lambda group: dist.all_reduce(data, group=group),
                "all_gather_into_tensor":
                    lambda group: dist.all_gather_into_tensor(whole, data, group=group),
                "reduce_scatter_tensor":
                    lambda group: dist.reduce_scatter_tensor(data, whole, group=group),
                "broadcast": lambda group: dist.broadcast(data, args.root, group=group)}[args.op]
        call(groups["occl"])
        if args.op == "broadcast":
            correct = bool(torch.all(data == args.root))
        elif args.op == "all_gather_into_tensor":
            expected = torch.arange(ws, dtype=torch.float32).repeat_interleave(nbytes // 4)
            correct = torch.equal(whole, expected)
        else:
            correct = bool(torch.all(data == sum(range(ws))))
        for group in groups.values():
            call(group)  # warm
        iters = max(1, (16 << 20) // nbytes)
        times = {name: [] for name in groups}
        for _ in range(args.rounds):
            for name, group in groups.items():
                dist.barrier(group=gloo)
                start = time.perf_counter()
                for _ in range(iters):
                    call(group)
                slowest = torch.tensor([(time.perf_counter() - start) / iters])
                dist.all_reduce(slowest, op=dist.ReduceOp.MAX, group=gloo)
                times[name].append(slowest.item())
        rows.append({"bytes": nbytes, "correct": correct,
                     **{name: statistics.median(values) for name, values in times.items()}})
    if args.rank == 0:
        print("result", json.dumps(rows), flush=True)
    dist.destroy_process_group()


def _launch(args, hierarchical: bool) -> list[dict]:
    """One launch of every rank in its namespace; rank 0's rows."""
    world_size = 2 * args.per_host
    with network_namespaces(args.rate) as hosts:
        master = f"{ADDRESSES['a']}:{29500 + os.getpid() % 1000}"
        env = {**os.environ, "OMP_NUM_THREADS": "1", "OCCL_TRANSPORT": "auto",
               "OCCL_HIERARCHICAL": "1" if hierarchical else "0"}
        procs = []
        for rank in range(world_size):
            first = rank % 2 == 0 if args.interleaved else rank < args.per_host
            host = hosts["a" if first else "b"]
            command = ["ip", "netns", "exec", host.namespace, sys.executable, "-m",
                       "torch_occl.bench.two_hosts", "--rank", str(rank), "--master", master,
                       "--per-host", str(args.per_host), "--rounds", str(args.rounds),
                       "--op", args.op, "--root", str(args.root),
                       "--sizes", ",".join(str(size) for size in args.sizes)]
            procs.append(subprocess.Popen(command, stdout=subprocess.PIPE, text=True,
                                          env={**env, "GLOO_SOCKET_IFNAME": host.interface}))
        out, _ = procs[0].communicate(timeout=1800)
        for proc in procs[1:]:
            proc.wait(timeout=60)
        if any(proc.returncode for proc in procs):
            raise SystemExit(f"a rank failed: exit codes {[proc.returncode for proc in procs]}")
    line = next(line for line in out.splitlines() if line.startswith("result "))
    return json.loads(line[len("result "):])


def _rate_bytes_per_second(rate: str) -> float:
    units = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9}
    for unit, scale in units.items():
        if rate.lower().endswith(unit):
            return float(rate[:-len(unit)]) * scale / 8
    raise SystemExit(f"--rate {rate}: give it as tc does, e.g. 10gbit")


def main(argv=None) -> None:
    parse = argparse.ArgumentParser(prog="python -m torch_occl.bench.two_hosts",
                                    description=__doc__.split("\n\n")[0])
    parse.add_argument("--per-host", type=int, default=2, help="ranks on each of the two hosts")
    parse.add_argument("--op", default="all_reduce",
                       choices=("all_reduce", "all_gather_into_tensor", "reduce_scatter_tensor",
                                "broadcast"))
    parse.add_argument("--root", type=int, default=0, help="the broadcast's root")
    parse.add_argument("--interleaved", action="store_true",
                       help="even ranks on one host, odd on the other (default: in two blocks)")
    parse.add_argument("--sizes", default="1M,4M,16M,64M", help="sizes in bytes per rank")
    parse.add_argument("--rate", default=None, help="shape the veth to this rate (tc: 10gbit)")
    parse.add_argument("--rounds", type=int, default=5, help="alternating rounds per launch")
    parse.add_argument("--launches", type=int, default=1, help="launches of each occl setting")
    parse.add_argument("--rank", type=int, default=None, help=argparse.SUPPRESS)
    parse.add_argument("--master", default=None, help=argparse.SUPPRESS)
    args = parse.parse_args(argv)
    args.sizes = [parse_bytes(size) for size in args.sizes.split(",")]
    args.world_size = 2 * args.per_host
    if args.rank is not None:
        return _rank(args)
    rate = _rate_bytes_per_second(args.rate) if args.rate else None
    print(f"# 2 hosts x {args.per_host} ranks (network namespaces"
          + (", interleaved" if args.interleaved else "") + "), link "
          f"{args.rate or 'unshaped'}; ms per {args.op}"
          + (f" from rank {args.root}" if args.op == "broadcast" else "")
          + f", median of {args.rounds} rounds")
    print("# size, occl two-level, occl flat, gloo, two-level/flat speedup, gloo/two-level"
          + (", floor (what must cross the link one way), two-level/floor" if rate else ""))
    for _ in range(args.launches):
        two_level = _launch(args, hierarchical=True)
        flat = _launch(args, hierarchical=False)
        for row, flat_row in zip(two_level, flat):
            if not (row["correct"] and flat_row["correct"]):
                raise SystemExit(f"wrong results at {row['bytes']} bytes")
            line = (f"{row['bytes']:>10} {row['occl'] * 1e3:9.2f} {flat_row['occl'] * 1e3:9.2f} "
                    f"{row['gloo'] * 1e3:9.2f} {flat_row['occl'] / row['occl']:6.2f}x "
                    f"{row['gloo'] / row['occl']:6.2f}x")
            if rate:
                crossing = row["bytes"] * (1 if args.op in ("all_reduce", "broadcast")
                                           else args.per_host)
                floor = crossing / rate
                line += f" {floor * 1e3:9.2f} {row['occl'] / floor:6.2f}"
            print(line, flush=True)


if __name__ == "__main__":
    main()
