"""occl_mpi beside occl and gloo, in the same processes, which mpirun starts:

    mpirun -n 2 -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=29500 python backends/occl_mpi/bench.py \\
        [--ops all_reduce,broadcast] [--min-bytes 8] [--max-bytes 16M] [--factor 16] [--iters 20]
        [--rounds 5]

torch_occl.bench's cases, rounds and checks, with a third backend: every rank joins a group of
each backend over the same ranks; for every op and size the backends' rounds alternate, and each
reports its median round's time per call. #wrong counts elements that differ from the value
computed in Python, for any backend.
"""

from __future__ import annotations

import argparse
import datetime
import statistics

import torch
import torch.distributed as dist

from torch_occl.bench import OPS, SIZELESS_OPS, _Case, _iterations, _parse_bytes, _time_round

BACKENDS = ("occl_mpi", "occl", "gloo")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ops", default=",".join(OPS))
    parser.add_argument("--min-bytes", type=_parse_bytes, default=8)
    parser.add_argument("--max-bytes", type=_parse_bytes, default=16 << 20)
    parser.add_argument("--factor", type=int, default=16)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    import occl_mpi  # noqa: F401  registers occl_mpi; torch's ranks are mpirun's
    import torch_occl  # noqa: F401  registers occl

    torch.set_num_threads(1)
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=120))
    rank, world_size = dist.get_rank(), dist.get_world_size()
    groups = {name: dist.new_group(backend=name) for name in BACKENDS}
    sizes = []
    while not sizes or sizes[-1] * args.factor <= args.max_bytes:
        sizes.append(sizes[-1] * args.factor if sizes else args.min_bytes)
    if rank == 0:
        print(f"# world size {world_size}, float32, median of {args.rounds} alternating rounds,"
              " µs per call")
        print(f"{'op':>24} {'size(B)':>10} " + " ".join(f"{name + '(us)':>12}" for name in BACKENDS)
              + f" {'occl_mpi/gloo':>14} {'occl/gloo':>10} {'#wrong':>6}")
    for op in args.ops.split(","):
        for nbytes in [0] if op in SIZELESS_OPS else sizes:
            count = 0 if op in SIZELESS_OPS else max(nbytes // 4, 1)
            cases = {name: _Case(op, count, torch.float32, rank, world_size) for name in BACKENDS}
            wrong = 0
            for name, case in cases.items():  # warm up, and check every backend once
                case.run(groups[name])
                wrong += case.wrong()
                case.reset()
            iters = _iterations(args.iters, nbytes)
            times = {name: [] for name in BACKENDS}
            for _ in range(args.rounds):
                for name, case in cases.items():
                    times[name].append(_time_round(case, groups[name], iters))
            wrong_total = torch.tensor([wrong])
            dist.all_reduce(wrong_total, group=groups["gloo"])
            median = {name: statistics.median(t) * 1e6 for name, t in times.items()}
            if rank == 0:
                print(f"{op:>24} {nbytes:>10} "
                      + " ".join(f"{median[name]:>12.1f}" for name in BACKENDS)
                      + f" {median['gloo'] / median['occl_mpi']:>13.2f}x"
                      f" {median['gloo'] / median['occl']:>9.2f}x {int(wrong_total):>6}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
