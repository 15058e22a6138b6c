"""One rank of a run: form the peers, then for every op and size time their rounds alternately,
check their results, and (rank 0) print each row as it finishes."""

from __future__ import annotations

import datetime
import glob
import json
import os
import statistics
import sys
import warnings

import torch
import torch.distributed as dist

from . import peers as peer_setup
from . import report
from .cases import (DTYPES, REDUCING_OPS, SIZELESS_OPS, Case, Floor, bus_factor, floor_bytes,
                    iterations, memcpy_seconds, rate_peer, refuses_call, time_round)


def _say(line: str) -> None:
    print(line, flush=True)


def _slowest_rank(times: list[float], gloo) -> list[float]:
    """Each round's time on the slowest rank (a round of copies lasts until the last is done)."""
    slowest = torch.tensor(times, dtype=torch.float64)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX, group=gloo)
    return slowest.tolist()


def _row(op, nbytes, args, peers, rank, world_size, gloo, noted: set) -> dict:
    """Times one op at one size on every peer that does it; rank 0 gets the row."""
    dtype = DTYPES[args.dtype]
    element = torch.empty((), dtype=dtype).element_size()
    count = 0 if op in SIZELESS_OPS else max(nbytes // element, 1)
    redop = args.redop if op in REDUCING_OPS else "none"
    refused = {peer.name: peer.refuses_row(op, args.dtype, args.call) for peer in peers}
    cases = {}
    by_name = {peer.name: peer for peer in peers}
    for peer in peers:
        if refused[peer.name] is None:
            cases[peer.name] = Case(op, count, dtype, args.redop, rank, world_size, peer.empty,
                                    peer.all_reduce, args.call, args.fresh_inputs)
    # occl again on the same bytes of each --rate-of type, as if another peer: its rounds
    # alternate with the others', so its rate beside --dtype's is measured in the same moments.
    occl = by_name["occl"]
    for other in args.rate_of:
        if op in SIZELESS_OPS or "occl" not in cases or occl.refuses_row(op, other, args.call):
            continue
        other_count = max(nbytes // torch.empty((), dtype=DTYPES[other]).element_size(), 1)
        name = rate_peer(other)
        cases[name] = Case(op, other_count, DTYPES[other], args.redop, rank, world_size,
                           occl.empty, occl.all_reduce, args.call, args.fresh_inputs)
        by_name[name] = occl
    wrong_here = {}
    for name, case in cases.items():  # warm up, and check every peer once
        case.run(by_name[name].group)
        wrong_here[name] = case.wrong() if by_name[name].checked else None
        case.reset()
    # No floor where the op writes nothing (a barrier, a broadcast to itself). Its rounds start
    # together through the gloo group.
    floor = None
    if floor_bytes(op, nbytes, 0, world_size) > 0:
        any_case = next(iter(cases.values()), None)
        fresh_bytes = any_case.input_bytes() if args.fresh_inputs and any_case else 0
        floor = Floor(floor_bytes(op, nbytes, rank, world_size), fresh_bytes)
    iters = iterations(args.iters, nbytes)
    rounds = {name: [] for name in cases}
    floor_rounds = []
    for _ in range(args.rounds):
        for name, case in cases.items():
            peer = by_name[name]
            rounds[name].append(time_round(case, peer.group, iters, peer.start_group))
        if floor:
            floor_rounds.append(time_round(floor, gloo, iters))
    totals = torch.tensor([wrong_here[name] or 0 for name in cases], dtype=torch.int64)
    dist.all_reduce(totals, group=gloo)
    wrong = {name: (int(total) if wrong_here[name] is not None else None)
             for name, total in zip(cases, totals.tolist())}
    if floor:
        floor_rounds = _slowest_rank(floor_rounds, gloo)
    us = {name: statistics.median(times) * 1e6 for name, times in rounds.items()}
    floor_us = statistics.median(floor_rounds) * 1e6 if floor_rounds else None
    occl_algbw = nbytes / us["occl"] / 1e3 if us.get("occl") else 0.0
    row = {
        "op": op, "bytes": nbytes, "count": count, "dtype": args.dtype, "redop": redop,
        "iters": iters,
        "us": us,
        "rounds_us": {name: [t * 1e6 for t in times] for name, times in rounds.items()},
        "wrong": wrong,
        "refused": {name: why for name, why in refused.items() if why},
        "occl_algbw": occl_algbw,
        "occl_busbw": occl_algbw * bus_factor(op, world_size),
        "floor_us": floor_us,
        "floor_rounds_us": [t * 1e6 for t in floor_rounds],
        "bound": us["gloo"] / floor_us if floor_us and "gloo" in us else None,
        "rates": {other: us["occl"] / us[rate_peer(other)]
                  for other in args.rate_of if rate_peer(other) in us},
    }
    if rank == 0:
        for line in report.notes(row, noted):
            _say(line)
        _say(report.row_line(row, [peer.name for peer in peers], args.rate_of))
    return row


def run(rank: int, world_size: int, init_method: str, args) -> dict | None:
    """The run on this rank; rank 0 returns the report."""
    if args.bind:  # before any thread starts, so that all of them inherit it
        allowed = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {allowed[rank % len(allowed)]})
    if args.hosts > 1:
        os.environ["OCCL_HOST_ID"] = f"bench-host-{rank * args.hosts // world_size}"
    warnings.filterwarnings("ignore")  # torch's deprecation notices would bury the progress
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=init_method, rank=rank, world_size=world_size,
                            timeout=datetime.timedelta(seconds=300))
    gloo = dist.new_group(backend="gloo")
    memcpy = None
    if rank == 0:  # one core's warm copy, before the ranks start
        largest = max(args.sizes + [1 << 20])
        memcpy = largest / memcpy_seconds(largest) / 1e9
    peers, skipped = peer_setup.form(args.peers, rank, world_size, gloo, args.shared_tensors,
                                     say=_say)
    cpus = [None] * world_size
    dist.all_gather_object(cpus, sorted(os.sched_getaffinity(0)), group=gloo)
    names = [peer.name for peer in peers]
    head = {"world_size": world_size, "memcpy_gbps": memcpy,
            "transport": os.environ.get("OCCL_TRANSPORT", "auto"), "hosts": args.hosts,
            "shared_tensors": args.shared_tensors, "fresh_inputs": args.fresh_inputs,
            "cpus_per_rank": cpus, "dtype": args.dtype, "rate_of": args.rate_of,
            "peers": names, "skipped": skipped, "rounds": args.rounds, "call": args.call,
            "launcher": "mpirun" if peer_setup.UNDER_MPIRUN else "spawn"}
    if rank == 0:
        for line in report.head_lines(head):
            _say(line)
    rows, noted = [], set()
    for op in args.ops:
        if op in ("send_recv", "ping_pong") and world_size < 2:
            continue
        uncallable = refuses_call(op, args.call)
        if uncallable:
            if rank == 0:
                _say(f"# not timed: {uncallable}")
            continue
        for nbytes in [0] if op in SIZELESS_OPS else args.sizes:
            rows.append(_row(op, nbytes, args, peers, rank, world_size, gloo, noted))
    dist.barrier(group=gloo)
    if rank == 0 and set(names) & set(peer_setup.DEEPSPEED_PEERS):  # its kernel leaves files
        for leftover in glob.glob(peer_setup.deepspeed_files()):
            os.unlink(leftover)
    dist.destroy_process_group()
    sys.stdout.flush()
    return dict(head, rows=rows) if rank == 0 else None


def spawned(rank: int, world_size: int, init_method: str, args, results_file: str) -> None:
    """A rank started by the bench itself; rank 0 leaves the report in `results_file`."""
    result = run(rank, world_size, init_method, args)
    if result is not None:
        with open(results_file, "w") as out:
            json.dump(result, out)
