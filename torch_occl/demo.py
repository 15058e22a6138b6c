"""Two processes train a small model with DistributedDataParallel over occl.

    python -m torch_occl.demo [--world-size 2] [--steps 20]

Each rank trains on its own shard of a synthetic regression problem; DDP averages gradients with
occl's allreduce. At the end the ranks compare their parameters (with an occl all_gather) and
rank 0 prints what happened.
"""

from __future__ import annotations

import argparse
import datetime
import os
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def _train(rank: int, world_size: int, init_file: str, steps: int) -> None:
    import torch_occl

    torch.set_num_threads(1)
    dist.init_process_group(
        torch_occl.BACKEND_NAME,
        init_method=f"file://{init_file}",
        rank=rank,
        world_size=world_size,
        timeout=datetime.timedelta(seconds=60),
    )
    torch.manual_seed(0)  # the same initial model on every rank
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.05)

    generator = torch.Generator().manual_seed(1000 + rank)  # a different shard per rank
    inputs = torch.randn(64, 16, generator=generator)
    targets = inputs.sum(dim=1, keepdim=True)

    start = time.perf_counter()
    for step in range(steps):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(ddp(inputs), targets)
        loss.backward()
        optimizer.step()
        if rank == 0 and (step == 0 or step == steps - 1 or step % 5 == 4):
            print(f"step {step + 1:3d}  loss on rank 0's shard {loss.item():.4f}", flush=True)
    elapsed = time.perf_counter() - start

    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    gathered = [torch.empty_like(flat) for _ in range(world_size)]
    dist.all_gather(gathered, flat)
    if rank == 0:
        same = all(torch.equal(gathered[0], other) for other in gathered[1:])
        print(
            f"{world_size} ranks trained {steps} steps with backend "
            f"'{dist.get_backend()}' in {elapsed:.2f} s; parameters identical on every rank: {same}",
            flush=True,
        )
        if not same:
            raise SystemExit("parameters differ between ranks")
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        init_file = os.path.join(folder, "init")
        mp.start_processes(
            _train,
            args=(args.world_size, init_file, args.steps),
            nprocs=args.world_size,
            start_method="spawn",
        )


if __name__ == "__main__":
    main()
