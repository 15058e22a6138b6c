"""occl beside gloo, DeepSpeed, occl_mpi and torch's no-op backend, in the same processes.

    python -m torch_occl.bench [options]                  # starts --world-size ranks itself
    mpirun -n 2 -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=29500 python -m torch_occl.bench [options]

Under mpirun (the only way occl_mpi joins) mpirun's processes are the ranks, and they meet
through env://. Each row prints as it finishes: the peers' median µs per call, occl's busbw
(nccl-tests' factors: allreduce 2(n-1)/n; allgather, reduce-scatter and alltoall (n-1)/n;
broadcast and send/recv 1), occl's #wrong, own(us) = occl - fake (occl's share of the call),
each peer's time over occl's, and floor(us): a plain copy, timed in rounds of its own between
the peers' (so it finds the caches as cold as they do), in which every rank at once copies its
share of the bytes the op writes into the ranks' outputs; bound is gloo's time over it. The head
gives one core's warm memcpy of --max-bytes (1 MiB at least, best of 5). --rate-of bfloat16
times occl on the same bytes of bfloat16 too, as one more peer, and gives its rate: occl's --dtype
time over its bfloat16 time (how near a type comes to float32's speed, measured in the same
moments rather than in launches apart).

--ops new_group times forming a group of every rank (destroyed after the round; with
OCCL_AUTH_KEY set, occl's form with the key's handshake); new_subgroups its two halves with
new_group; split_group splitting it in those halves (occl's on the group's links; gloo's row forms
them with new_group, as gloo's split halves time out on their first collective in torch 2.13).
List split_group first: torch clones the group's store for every split, and a FileStore's clone
reads every key written so far. --bind pins each rank, with every thread it starts, to one CPU,
as MPI launchers and torchrun's NUMA binding do (see docs/PERFORMANCE.md).

python -m torch_occl.bench.guard compares runs with a committed baseline (docs/PERFORMANCE.md).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

import torch.multiprocessing as mp

from . import report, worker
from .cases import (CALLS, DTYPES, FORMATION_OPS, OPS, REDOPS, parse_bytes, parse_sizes,
                    sizes)
from .peers import PEERS, UNDER_MPIRUN


def parser() -> argparse.ArgumentParser:
    parse = argparse.ArgumentParser(
        prog="python -m torch_occl.bench", description=__doc__.split("\n")[0],
        epilog=__doc__.split("\n", 4)[4], formatter_class=argparse.RawDescriptionHelpFormatter)
    option = parse.add_argument

    def with_default(text: str) -> str:
        return text + " (default: %(default)s)"

    option("--world-size", type=int, default=2,
           help=with_default("ranks the bench starts; under mpirun, mpirun's -n decides"))
    option("--ops", default=",".join(OPS),
           help=with_default(f"comma-separated, from {', '.join(OPS + FORMATION_OPS)}"))
    option("--peers", default=",".join(PEERS),
           help=with_default("comma-separated; occl is always one; a peer that cannot run here "
                             "is skipped with the reason"))
    option("--min-bytes", type=parse_bytes, default="8",
           help=with_default("smallest size per rank's tensor; K, M and G suffixes"))
    option("--max-bytes", type=parse_bytes, default="64M", help=with_default("largest size"))
    option("--factor", type=int, default=4, help=with_default("each size is the last times this"))
    option("--sizes", type=parse_sizes, default=None,
           help=with_default("comma-separated sizes (e.g. 8,4K,64K,1M); instead of --min-bytes, "
                             "--max-bytes and --factor"))
    option("--dtype", choices=sorted(DTYPES), default="float32", help=with_default("element type"))
    option("--rate-of", metavar="DTYPES", default=None,
           help=with_default("comma-separated element types: occl also times each on the same "
                             "bytes, in rounds alternating with the peers', and each row gives "
                             "its rate: occl's --dtype time over its time in that type"))
    option("--redop", choices=sorted(REDOPS), default="sum",
           help=with_default("reduce op of all_reduce and reduce_scatter_tensor"))
    option("--call", choices=CALLS, default="sync",
           help=with_default("how ops are called: the blocking call; async_op=True, then wait(); "
                             "or torch.ops._c10d_functional's op, then wait_tensor"))
    option("--iters", type=int, default=20,
           help=with_default("back-to-back calls per round (fewer above 1 MiB, at least 5)"))
    option("--rounds", type=int, default=5, help=with_default("rounds per peer, alternating"))
    option("--transport", choices=("auto", "tcp", "shm"), default=None,
           help=with_default("sets OCCL_TRANSPORT for the run; unset: occl's own choice"))
    option("--hosts", type=int, default=1,
           help=with_default("pretend the ranks run on this many hosts, consecutive ranks on each "
                             "(OCCL_HOST_ID): they share no memory and talk TCP between hosts"))
    option("--bind", action="store_true",
           help=with_default("pin rank r to CPU r modulo the CPUs available (every peer)"))
    option("--shared-tensors", action="store_true",
           help=with_default("allocate occl's buffers with torch_occl.shared_empty"))
    option("--fresh-inputs", action="store_true",
           help=with_default("give every call a new input tensor, allocated and filled within "
                             "the call's time (as an MoE layer's tokens are), on every peer; "
                             "the floor then allocates and fills its source too"))
    option("--json", metavar="FILE", default=None,
           help=with_default("also write the report, with every round's times, here"))
    option("--plot", metavar="FILE.png", default=None,
           help=with_default("also plot time per call and bus bandwidth against size, on log "
                             "axes (needs matplotlib, checked before the run)"))
    return parse


def _arguments(argv) -> argparse.Namespace:
    parse = parser()
    args = parse.parse_args(argv)
    args.ops = [op.strip() for op in args.ops.split(",") if op.strip()]
    unknown = [op for op in args.ops if op not in OPS + FORMATION_OPS]
    if unknown:
        parse.error(f"--ops: unknown {unknown}; choose from {OPS + FORMATION_OPS}")
    args.peers = [name.strip() for name in args.peers.split(",") if name.strip()]
    unknown = [name for name in args.peers if name not in PEERS]
    if unknown:
        parse.error(f"--peers: unknown {unknown}; choose from {PEERS}")
    args.rate_of = [name.strip() for name in (args.rate_of or "").split(",") if name.strip()]
    unknown = [name for name in args.rate_of if name not in DTYPES]
    if unknown:
        parse.error(f"--rate-of: unknown {unknown}; choose from {sorted(DTYPES)}")
    if args.hosts < 1 or args.world_size % args.hosts:
        parse.error(f"--hosts {args.hosts} must divide --world-size {args.world_size}")
    if args.fresh_inputs and args.shared_tensors:
        parse.error("--fresh-inputs allocates with torch.empty on every peer: it cannot be "
                    "combined with --shared-tensors")
    args.sizes = args.sizes or sizes(args.min_bytes, args.max_bytes, args.factor)
    if "occl" not in args.peers:
        args.peers.insert(0, "occl")
    if args.plot:
        try:
            report.check_plotting()
        except ImportError as error:
            parse.error(f"--plot needs matplotlib, which does not import here ({error}); "
                        "pip install matplotlib")
    return args


def _run_spawned(args) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        results = os.path.join(folder, "results.json")
        mp.start_processes(worker.spawned,
                           args=(args.world_size, f"file://{folder}/init", args, results),
                           nprocs=args.world_size, start_method="spawn")
        with open(results) as f:
            return json.load(f)


def _run_under_mpirun(args) -> dict | None:
    if not {"MASTER_ADDR", "MASTER_PORT"} <= os.environ.keys():
        raise SystemExit("under mpirun the ranks meet through env://: pass "
                         "-x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=<a free port>")
    return worker.run(int(os.environ["OMPI_COMM_WORLD_RANK"]),
                      int(os.environ["OMPI_COMM_WORLD_SIZE"]), "env://", args)


def main(argv=None) -> dict | None:
    args = _arguments(argv)
    if args.transport:
        os.environ["OCCL_TRANSPORT"] = args.transport
    started = time.monotonic()
    result = _run_under_mpirun(args) if UNDER_MPIRUN else _run_spawned(args)
    if result is None:  # an mpirun rank other than 0
        return None
    print(f"# {len(result['rows'])} rows in {time.monotonic() - started:.0f} s", flush=True)
    if args.json:
        with open(args.json, "w") as out:
            json.dump(result, out, indent=1)
    if args.plot:
        report.plot(result, args.plot)
    if any(row["wrong"].get("occl") for row in result["rows"]):
        raise SystemExit("occl got results wrong")
    return result


if __name__ == "__main__":
    main()
